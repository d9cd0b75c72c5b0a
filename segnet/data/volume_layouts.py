"""Layouts of volumes beyond the Decathlon's and plain folders of same-named files, found
from the files' names as the 2D layouts are (:mod:`segnet.data.folder_roles`):

* an image and a label folder named in other words (BTCV's ``img/`` and ``label/``);
* labels named from their images, with text added (``case_001_seg.nii.gz`` for
  ``case_001.nii.gz``; ACDC's ``_gt``) or their own text at the start (LiTS's
  ``volume-0.nii`` and ``segmentation-0.nii``, BTCV's ``img0001`` and ``label0001``),
  in a label folder or beside the images;
* a folder per case holding its image and its label, the label's name saying so
  (KiTS19's ``case_00000/imaging.nii.gz`` with ``segmentation.nii.gz``), or its image in a
  file per channel named by its modality (BraTS's ``_flair``, ``_t1`` ... beside ``_seg``:
  :mod:`segnet.data.volume_channels`);
* volumes with their labels beside them in a folder per patient (ACDC's
  ``patient001/patient001_frame01.nii.gz`` beside ``patient001_frame01_gt.nii.gz``), each
  patient a group that drawn splits keep whole.

Each returns :class:`Found` cases for :mod:`segnet.data.nifti` to make its cases of; none
reads a voxel."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from segnet.data import volume_files
from segnet.data.errors import DataError
from segnet.data.folder_roles import role_of
from segnet.data.image_pairs import visible_folders
from segnet.data.volume_channels import name_of as case_name
from segnet.data.volume_channels import named_channels, word_after

log = logging.getLogger(__name__)


class Found(NamedTuple):
    """A case a layout finds: its image (the first channel's file, where each channel has
    a file of its own), label and group (a patient, kept whole in one split); for a case
    of channel files, ``channels`` its further files and ``words`` every channel's word;
    for a case of one mask per class, ``label`` their folder and ``classes`` each class's
    name and mask (:mod:`segnet.data.volume_class_masks`)."""

    name: str
    image: Path
    label: Path
    group: str | None = None
    channels: tuple[Path, ...] = ()
    words: tuple[str, ...] = ()
    classes: tuple[tuple[str, Path], ...] = ()


def nifti_files(folder: Path) -> list[Path]:
    """The volume files (NIfTI, TIFF stacks, NumPy arrays) directly in ``folder``, by name;
    hidden files are not volumes (a macOS copy leaves ``._case.nii.gz`` beside each case)."""
    return sorted(
        p for p in folder.iterdir()
        if volume_files.suffix_of(p) and not p.name.startswith(".") and p.is_file()
    )  # fmt: skip


def says_label(name: str) -> bool:
    """Whether a file's name (or the text added to it) says it holds a label:
    ``segmentation``, ``seg``, ``gt``, ``label``, ``mask``, ``manual`` ..."""
    return role_of(name) == "labels"


class LabelRule(NamedTuple):
    """How a label is named from its image: ``head`` (the image's own text at the start,
    if any) replaced by ``before``, ``tail`` (its own text at the end, if any) replaced by
    ``after``, or ``after`` added at the end."""

    head: str
    before: str
    after: str
    tail: str = ""

    def label_of(self, image: str) -> str | None:
        middle = len(image) - len(self.head) - len(self.tail)
        if middle <= 0 or not (image.startswith(self.head) and image.endswith(self.tail)):
            return None
        return self.before + image[len(self.head) : len(image) - len(self.tail)] + self.after

    def said(self) -> str:
        if self.head:
            return f"{self.head!r} replaced by {self.before!r}"
        if self.tail:
            return f"{self.tail!r} replaced by {self.after!r}"
        return " and ".join(repr(t) for t in (self.before, self.after) if t) + " added"


def label_rule(images: Sequence[str], labels: Sequence[str]) -> LabelRule | None:
    """The one rule, its new text saying label, that names a label for every image given
    (or all but those left unlabelled, at least half) and makes every label one image's:
    text added (``case_01`` and ``case_01_seg``, ACDC's ``_gt``), or the image's own text
    at the start replaced (LiTS's ``volume-0`` and ``segmentation-0``, BTCV's ``img0001``
    and ``label0001``) or at the end (``case_01_ct`` and ``case_01_seg``); None where none
    does, or more than one."""
    wanted, names = set(labels), set(images)
    candidates = set()
    for image in images[:8]:
        for label in labels:
            if label == image:
                continue
            if label.startswith(image):
                candidates.add(LabelRule("", "", label[len(image) :]))
            elif label.endswith(image):
                candidates.add(LabelRule("", label[: -len(image)], ""))
            else:  # the longest end they share, each with its own text before it
                shared = len(os.path.commonprefix([image[::-1], label[::-1]]))
                if shared and shared < len(image):
                    candidates.add(LabelRule(image[:-shared], label[:-shared], ""))
                candidates.update(tail_rules(image, label))
    fits: dict[LabelRule, int] = {}
    for rule in sorted(candidates):
        new = (rule.before + " " + rule.after).strip(" _-.")
        if not new or not says_label(new):
            continue
        named = {rule.label_of(n) for n in names} & wanted
        # most images and most labels (a stray label, an unlabelled image: said by the
        # callers, who leave them out)
        if 2 * len(named) >= len(names) and 2 * len(named) >= len(wanted):
            fits[rule] = len(named)
    best = sorted(fits, key=fits.__getitem__, reverse=True)
    if not best or (len(best) > 1 and fits[best[0]] == fits[best[1]]):
        return None  # none, or two alike: nothing guessed
    return best[0]


def tail_rules(image: str, label: str) -> set[LabelRule]:
    """The rules naming ``label`` from ``image`` by the text after their shared start
    (``case_1_ct`` and ``case_1_seg``: ``ct`` replaced by ``seg``), that start taken
    whole and cut back to its last separator (``case_1_scan`` and ``case_1_seg`` share
    ``case_1_s``, and the words are ``scan`` and ``seg``)."""
    start = os.path.commonprefix([image, label])
    starts = {start, start[: max(start.rfind(c) for c in "_-.") + 1]}
    return {
        LabelRule("", "", label[len(s) :], image[len(s) :])
        for s in starts
        if s and len(s) < len(image) and len(s) < len(label) and only_says_label(label[len(s) :])
    }


def only_says_label(text: str) -> bool:
    """Whether every word of ``text`` says label (``seg``, ``label_1``): the text that
    replaces an image's own words is new only where it names nothing else, as ACDC's
    ``patient001_ES`` beside ``patient001_ED_gt`` is not the ES frame's label."""
    words = [w for w in re.split(r"[_\-. ]+", text) if w and not w.isdigit()]
    return bool(words) and all(says_label(w) for w in words)


def label_folder_rule(images: list[Path], labels: list[Path], folder: Path) -> dict[str, Path]:
    """Each image's label in a label folder where the labels are named from their images
    by one rule (:func:`label_rule`), said; empty where no one rule fits."""
    image_names = [case_name(p) for p in images]
    by_name = {case_name(p): p for p in labels}
    rule = label_rule(image_names, list(by_name))
    if rule is None:
        return {}
    log.info("the labels in %s are named as their images with %s: paired so", folder, rule.said())
    return {n: by_name[rule.label_of(n)] for n in image_names if rule.label_of(n) in by_name}


def named_folders(root: Path) -> tuple[Path, Path] | None:
    """The image and the label folder of ``root`` where their names say so, each the one
    folder of volumes of its kind (BTCV's ``img/`` and ``label/``; ``CT/`` beside
    ``Segmentations/`` has no word of images and is not guessed), said; None otherwise."""
    by_role: dict[str | None, list[Path]] = {}
    for d in visible_folders(root):
        if nifti_files(d):
            by_role.setdefault(role_of(d.name), []).append(d)
    images, labels = by_role.get("images", []), by_role.get("labels", [])
    if len(images) != 1 or len(labels) != 1:
        return None
    log.info(
        "%s: read as data.image_dir=%s data.label_dir=%s, by what their names say",
        root, images[0].name, labels[0].name,
    )  # fmt: skip
    return images[0], labels[0]


def case_folders(root: Path) -> list[Found]:
    """A folder per case holding its image and one label, the label's name saying so and
    the image's not (KiTS19's ``case_00000/imaging.nii.gz`` and ``segmentation.nii.gz``),
    the case named by its folder; or its image in a file per channel, each named by its
    channel's word (BraTS's ``_flair``, ``_t1``, ``_t1ce``, ``_t2`` beside ``_seg``), the
    same words in every case, taken in their alphabetical order. Folders holding images
    alone are left out, counted in a warning (KiTS19's test cases). Empty unless most
    folders of volumes are such cases and at least two are; an odd one among them is
    refused, named."""
    found, unlabelled, misfits = [], [], []
    for folder in visible_folders(root):
        files = nifti_files(folder)
        if not files:
            continue
        labels = [f for f in files if says_label(case_name(f))]
        images = named_channels([f for f in files if f not in labels], folder.name)
        if not images or len(labels) > 1 or not label_of_channels(images, labels, folder.name):
            misfits.append(folder)
        elif labels:
            words = tuple(sorted(images)) if len(images) > 1 else ()
            first, *further = (images[w] for w in words or ("",))
            found.append(Found(folder.name, first, labels[0], None, tuple(further), words))
        else:
            unlabelled.append(folder.name)
    if len(found) < 2 or len(misfits) * 2 >= len(found):
        return []
    if misfits or len({f.words for f in found}) > 1:  # most folders are cases: the odd one named
        raise DataError(odd_case_folder(root, found, misfits))
    log.info(
        "%s holds a folder per case, each an image%s and a label its name says so (%s with "
        "%s): the case named by its folder", root,
        f" in a file per channel ({', '.join(found[0].words)})" if found[0].words else "",
        found[0].image.name, found[0].label.name,
    )  # fmt: skip
    say_unlabelled(unlabelled, root)
    return found


def label_of_channels(images: dict[str, Path], labels: list[Path], case: str) -> bool:
    """Whether a case folder's label is its case's where its image is a file per channel:
    named as its case with its own word (BraTS's ``_seg``), not as one of the images with
    text added (ACDC's ``patient001_ED_gt`` beside ``_ED`` and ``_ES`` is one frame's
    label, not the label of two channels)."""
    if len(images) == 1 or not labels:
        return True
    word = word_after(case_name(labels[0]), case)
    return word is not None and not any(word_after(word, w) is not None for w in images)


def odd_case_folder(root: Path, found: list[Found], misfits: list[Path]) -> str:
    """Why a folder among a folder per case is refused: its files fit no case, or its
    channels are others than most cases'."""
    first = found[0]
    layout = (
        f"{root} holds a folder per case of an image and a label its name says so "
        f"({first.image.name} with {first.label.name})"
    )
    if misfits:
        held = ", ".join(f.name for f in nifti_files(misfits[0]))
        return (
            f"{layout}, but {misfits[0]} holds {held}: give it one image (or a file per "
            f"channel) and at most one label, or move it out ({len(misfits)} such folder(s))."
        )
    usual = max({f.words for f in found}, key=[f.words for f in found].count)
    odd = next(f for f in found if f.words != usual)
    return (
        f"{layout}, each with the channel files {', '.join(usual) or 'one image'}, but case "
        f"{odd.name} has {', '.join(odd.words) or 'one image'} ({odd.image.parent}): give "
        "every case the same channels, named alike, or move it out."
    )


def beside_their_images(root: Path) -> list[Found]:
    """Volumes with their labels beside them, named as their images with text added
    (:func:`label_rule`), in ``root`` or in a folder per patient (ACDC's
    ``patient001/patient001_frame01.nii.gz`` beside ``patient001_frame01_gt.nii.gz``,
    each folder a group); a volume without a label (ACDC's ``_4d`` cine) left out,
    counted in a warning. Empty where no one rule pairs them."""
    here = nifti_files(root)
    folders = visible_folders(root)
    places = [(root, None)] if here else [(d, d.name) for d in folders]
    files = {place: nifti_files(place) for place, _ in places}
    names = [case_name(f) for fs in files.values() for f in fs]
    labels = [n for n in names if says_label(n)]
    rule = label_rule([n for n in names if n not in set(labels)], labels)
    if rule is None:
        return []
    found, unlabelled = [], []
    for place, group in places:
        by_name = {case_name(f): f for f in files[place]}
        for name, path in by_name.items():
            if name in labels:
                continue
            label = by_name.get(rule.label_of(name) or "")
            if label is None:
                unlabelled.append(name)
            else:
                found.append(Found(name, path, label, group))
    if not found:
        return []
    strays = sorted(set(labels) - {case_name(f.label) for f in found})
    if strays:
        log.warning(
            "%d label(s) in %s are no image's by that rule and are left out: %s", len(strays),
            root, ", ".join(strays[:5]) + (" ..." if len(strays) > 5 else ""),
        )  # fmt: skip
    log.info(
        "%s holds volumes with their labels beside them%s, named with %s: paired so",
        root, " in a folder per patient (each a group, kept whole in one split)" if not here
        else "", rule.said(),
    )  # fmt: skip
    say_unlabelled(unlabelled, root)
    return found


def say_unlabelled(names: list[str], root: Path) -> None:
    if names:
        log.warning(
            "%d volume(s) in %s have no label and are left out: %s", len(names), root,
            ", ".join(names[:5]) + (" ..." if len(names) > 5 else ""),
        )  # fmt: skip
