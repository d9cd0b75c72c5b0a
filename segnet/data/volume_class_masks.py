"""Volumes whose label is one mask per class, as TotalSegmentator and AbdomenAtlas keep
them: a folder per case holding its image and a ``segmentations/`` folder of one
black-and-white volume per structure (``s0000/ct.nii.gz`` beside
``s0000/segmentations/liver.nii.gz``, ``spleen.nii.gz`` ...); as radiotherapy structure
sets come out of DICOM converters, the masks beside the image (dcmrtstruct2nii's
``image.nii.gz`` beside ``mask_Heart.nii.gz``) or the image in a folder of its own
(platipy's ``IMAGES/`` beside ``STRUCTURES/``); or in a folder per class beside a folder of
images (``labels/liver/case_01.nii.gz``). A mask's class is its name less the case's name
at its start and, beside the image, the word every mask shares to say it is one (``mask_``).

The masks of a case are read into one label map, class k for the k-th mask (background
0), so such a folder trains, is scored and predicted as any label map is. The classes
are the mask files' names (in name order), or those ``data.class_names`` gives (a subset,
in the order the outputs should have: the other masks' voxels are background, said).
Masks that overlap (a body holding the organs) are read as bits instead (mask k adds
``2**k``), each mask a region and the combinations the cases hold the label map's classes
(:mod:`segnet.data.class_masks`, the 2D masks' reading; chosen by
:class:`~segnet.data.nifti_datamodule.NiftiDataModule`).

Example:
    >>> combine_masks([np.array([0, 1, 0, 0]), np.array([0, 0, 1, 1])], ["a.nii", "b.nii"], "s1")
    array([0, 1, 2, 2], dtype=int16)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from segnet.data import class_masks
from segnet.data.errors import DataError
from segnet.data.folder_roles import MASK_WORDS, role_of, says_mask
from segnet.data.image_pairs import visible_folders
from segnet.data.volume_channels import name_of
from segnet.data.volume_layouts import Found, nifti_files, say_unlabelled, says_label

log = logging.getLogger(__name__)

BACKGROUND = "background"
# masks read as bits (int16) where they overlap: each combination of them is a class
MAX_OVERLAPPING = 15
SEPARATORS = "_-. "


class ClassMaskVolumeError(DataError):
    """Volumes given one mask per class that cannot be read as one label map."""


class CaseFolder(NamedTuple):
    """What a case folder of a mask per class holds: its image, its folder of masks and
    their files, and the label file beside them if there is one."""

    image: Path
    masks: Path
    mask_files: list[Path]
    label: Path | None


def mask_folder(files: list[Path], folders: dict[Path, list[Path]]) -> CaseFolder | None:
    """Of a case folder's volume ``files`` and subfolders (each with its volumes): its image, where its masks lie
    and their files, and the label file beside them if there is one (AbdomenAtlas's
    ``combined_labels.nii.gz``: not read, as the masks name their classes and it does
    not); None where the folder holds none of these, or another count of images or labels:

    * one folder whose name says it holds labels, of volumes (``segmentations/``);
    * no such folder, and two or more volumes beside the image whose names share a first
      or last word that says mask (``mask_Heart.nii.gz``: dcmrtstruct2nii's), not a
      label of the image beside a mask of something else (``T1w_seg``, ``brain_mask``);
    * the image alone in a folder whose name says images (``IMAGES/``, platipy's)."""
    images = [f for f in files if not says_mask(name_of(f))]
    labels = [f for f in files if says_mask(name_of(f))]
    held = [(d, masks) for d, masks in folders.items() if masks and says_label(d.name)]
    if not images:  # the image in a folder of its own, beside the masks'
        images = [v for d, held_here in folders.items() if role_of(d.name) == "images"
                  for v in held_here]  # fmt: skip
    if len(images) != 1:
        return None
    if len(held) == 1 and len(labels) <= 1:
        return CaseFolder(images[0], held[0][0], held[0][1], next(iter(labels), None))
    beside = not held and len(labels) >= 2 and images[0].parent == labels[0].parent
    if beside and shared_mask_word([name_of(f) for f in labels]) is not None:
        return CaseFolder(images[0], labels[0].parent, labels, None)
    return None


def lone_image(files: list[Path], folders: dict[Path, list[Path]]) -> bool:
    """Whether a case folder holds one volume, in it or a folder of its own, and it is no
    label: a case without labels (platipy's ``IMAGES/`` without ``STRUCTURES/``)."""
    volumes = [*files, *(v for held in folders.values() for v in held)]
    return len(volumes) == 1 and not says_mask(name_of(volumes[0]))


# a name's first word and what follows it, its last and what precedes it
FIRST_WORD, LAST_WORD = r"^[^_\-. ]+[_\-. ]+", r"[_\-. ]+[^_\-. ]+$"


def shared_mask_word(names: Sequence[str]) -> str | None:
    """Of a first or a last word, the one every name has and says mask, the same
    (``mask_Heart``, ``mask_Lung``; ``Heart_seg``): its pattern; None where none is."""
    for word in (FIRST_WORD, LAST_WORD):
        found = [re.search(word, n) for n in names]
        said = {m.group().strip(SEPARATORS).lower() for m in found if m}
        if all(found) and len(said) == 1 and said <= MASK_WORDS:
            return word
    return None


def class_names_of(masks: Sequence[Path], case: str, beside: bool) -> list[str]:
    """The classes of a case's masks: their names, each less the case's name at its start
    (platipy's ``Patient_01_Heart`` in ``Patient_01/``), and where the masks lie
    ``beside`` the image, less the word every one shares to say it is a mask
    (``mask_Heart``); a name this would leave empty is kept whole."""
    names = [name_of(p) for p in masks]
    names = [
        n[len(case) :].lstrip(SEPARATORS)
        if n.lower().startswith(case.lower()) and n[len(case) :].lstrip(SEPARATORS)
        and n[len(case)] in SEPARATORS else n
        for n in names
    ]  # fmt: skip
    word = shared_mask_word(names) if beside else None
    return [re.sub(word, "", n) for n in names] if word else names


def class_mask_cases(root: Path) -> list[Found]:
    """A folder per case of an image and one mask per class (TotalSegmentator's
    ``s0000/ct.nii.gz`` with ``s0000/segmentations/<structure>.nii.gz``, and the others
    :func:`mask_folder` reads), the case named by its folder and each class by its mask's
    name (:func:`class_names_of`). Folders of an image alone are left out, said. Empty
    unless most folders of volumes are such cases and at least two are. Whether every case
    holds the classes trained is checked once they are chosen (:func:`masks_of_classes`)."""
    found, unlabelled, misfits, unread = [], [], [], []
    for folder in visible_folders(root):
        # each subfolder listed once: a case folder is read by three rules below
        files = nifti_files(folder)
        folders = {d: nifti_files(d) for d in visible_folders(folder)}
        held = mask_folder(files, folders)
        if held is not None:
            beside = held.masks == folder
            names = class_names_of(held.mask_files, folder.name, beside)
            classes = tuple(zip(names, held.mask_files, strict=True))
            check_unique_classes(classes)
            found.append(Found(folder.name, held.image, held.masks, classes=classes))
            unread += [held.label] if held.label is not None else []
        elif lone_image(files, folders):
            unlabelled.append(folder.name)
        elif files or any(folders.values()):
            misfits.append(folder)
    if len(found) < 2 or len(misfits) * 2 >= len(found):
        return []
    if misfits:  # most folders are such cases: the odd one named, never left out unsaid
        held = ", ".join(
            str(p.relative_to(misfits[0])) for p in sorted(misfits[0].rglob("*")) if p.is_file()
        )
        raise ClassMaskVolumeError(
            f"{root} holds a folder per case of an image and one mask per class "
            f"({held_text(found[0])}), but {misfits[0]} holds "
            f"{held[:300]}: give it an image and its masks as the others, or move it out "
            f"({len(misfits)} such folder(s))."
        )
    first = found[0]
    names = [c for c, _ in first.classes]
    log.info(
        "%s holds a folder per case, each an image and one mask per class (%s: %d "
        "classes, %s): read as one label map per case, class k for the k-th mask", root,
        held_text(first), len(names), shortened(names),
    )  # fmt: skip
    if unread:
        log.info(
            "%d case(s) also hold a label file beside their masks (%s): not read, the masks "
            "naming their classes", len(unread), unread[0],
        )  # fmt: skip
    say_unlabelled(unlabelled, root)
    return found


def class_folder_cases(images: Sequence[Path], labels: Path) -> list[Found]:
    """Cases of an image folder whose label folder holds a folder of masks per class
    (``labels/liver/case_01.nii.gz``, ``labels/spleen/case_01.nii.gz`` for
    ``images/case_01.nii.gz``), each class named by its folder; empty where the label
    folder holds volumes itself, or no folder of them. An image without its mask in every
    class's folder is refused, named."""
    folders = {d: nifti_files(d) for d in visible_folders(labels)}
    folders = {d: masks for d, masks in folders.items() if masks}
    if nifti_files(labels) or not folders:
        return []
    by_class = {d.name: {name_of(p): p for p in masks} for d, masks in folders.items()}
    found = []
    for image in images:
        case = name_of(image)
        lacking = [c for c, masks in by_class.items() if case not in masks]
        if lacking:
            raise ClassMaskVolumeError(
                f"{labels} holds a folder of masks per class ({shortened(list(by_class))}), "
                f"and {', '.join(lacking[:3])}/ has no mask named {case} for {image}: give "
                "every image a mask in every class's folder (an empty one where it has none "
                "of the class), named as the image."
            )
        classes = tuple((c, masks[case]) for c, masks in by_class.items())
        found.append(Found(case, image, labels, classes=classes))
    log.info(
        "%s holds a folder of masks per class (%d classes, %s): each image's read as one "
        "label map, class k for the k-th folder", labels, len(by_class), shortened(list(by_class)),
    )  # fmt: skip
    return found


def held_text(case: Found) -> str:
    """Where a case's masks lie, for the log: ``ct.nii.gz with segmentations/``, or
    ``image.nii.gz beside mask_Body.nii.gz ...``."""
    first = case.classes[0][1]
    if first.parent == case.image.parent:
        return f"{case.image.name} beside {first.name} ..."
    return f"{case.image.relative_to(case.label.parent)} with {case.label.name}/"


def masks_of_classes(
    case: str, classes: Sequence[tuple[str, Path]], names: Sequence[str], every: bool
) -> tuple[tuple[str, Path], ...]:
    """A case's masks of the classes ``names`` (background not among them), in that order:
    of the same name, else of that name in other case (one case's ``heart`` is another's
    ``Heart``). A case lacking one is refused, named; so is a case with masks besides them
    where ``every`` (no ``data.class_names``: every case must hold the same classes)."""
    by_name = dict(classes)
    by_lower = {n.lower(): path for n, path in reversed(classes)}
    held = [(n, by_name.get(n) or by_lower.get(n.lower())) for n in names]
    missing = [n for n, path in held if path is None]
    chosen = {path for _, path in held}
    extra = [n for n, path in classes if path not in chosen] if every else []
    if missing or extra:
        where = classes[0][1].parent if classes else case
        raise ClassMaskVolumeError(
            f"case {case} ({where}) "
            + (f"lacks a mask of {', '.join(missing[:5])}" if missing else "")
            + (" and " if missing and extra else "")
            + (f"has masks of {', '.join(extra[:5])} besides" if extra else "")
            + (
                f", against the first case's {len(names)} classes ({shortened(names)}): give "
                "every case a mask of every class (an empty one where the case has none of "
                "it), or name the classes every case has in data.class_names (the other "
                "masks' voxels are then background)."
                if every
                else f", of the classes trained ({shortened(names)}: data.class_names, or "
                "a checkpoint's): give it one (an empty mask where the case has none of it)."
            )
        )
    return tuple(held)


def check_unique_classes(classes: Sequence[tuple[str, Path]]) -> None:
    """One mask per class name: ``liver.nii`` beside ``liver.nii.gz`` is refused, named."""
    seen: dict[str, Path] = {}
    for name, path in classes:
        if name in seen:
            raise ClassMaskVolumeError(
                f"{seen[name]} and {path} are both masks of {name!r}: keep one of them."
            )
        seen[name] = path


def shortened(names: Sequence[str], most: int = 6) -> str:
    return ", ".join(names[:most]) + (f" ... ({len(names)} in all)" if len(names) > most else "")


def selected_classes(found: Sequence[str], where: Path, given: Sequence[str] | None) -> list[str]:
    """The classes of cases given one mask per class (``found``, the first case's, in
    ``where``), background first: the masks' names, or those ``given``
    (``data.class_names``, with or without ``background`` first: a checkpoint's classes
    come back with it), in that order; a subset leaves the other masks' voxels background,
    said."""
    found = list(found)
    if BACKGROUND in found:
        raise ClassMaskVolumeError(
            f"{where} holds a mask named {BACKGROUND!r}: class 0 is the voxels of no mask; "
            "rename it, or leave it out of the folder."
        )
    names = [mask_named(n, found) for n in given or found]
    names = names[1:] if names[:1] == [BACKGROUND] else names
    unknown = [n for n in names if n not in found]
    if unknown or len(set(names)) < len(names) or not names:
        raise ClassMaskVolumeError(
            f"data.class_names={list(given or [])} (given, or a checkpoint's classes): the "
            f"labels of these cases are a mask per class ({where}: {shortened(found)}); "
            + (f"{', '.join(unknown[:5])} is none of them; " if unknown else "")
            + "name each class once, those masks (a subset of them is trained on, the other "
            "masks' voxels read as background), or leave data.class_names null."
        )
    if len(names) < len(found):
        log.info(
            "data.class_names: %d of the %d masks per case are read (%s); the voxels of the "
            "others are background", len(names), len(found), shortened(names),
        )  # fmt: skip
    return [BACKGROUND, *names]


def mask_named(name: str, found: Sequence[str]) -> str:
    """The mask ``name`` names: of that name, else the one of that name in other case
    (a dataset.json's ``Anterior`` is the mask ``anterior.nii.gz``); else ``name``."""
    if name in found or name == BACKGROUND:
        return name
    alike = [f for f in found if f.lower() == name.lower()]
    return alike[0] if len(alike) == 1 else name


def nonzero_voxels(voxels: np.ndarray, block: int = 4096) -> np.ndarray:
    """The indices of ``voxels`` (1D) that are not 0, as ``np.flatnonzero`` gives them,
    found block by block: a structure fills a few blocks of a CT's thousands, and a
    block's ``any`` is many times faster than a voxel's index.

    >>> nonzero_voxels(np.array([0, 3, 0, 0, -1, 0, 0]), block=2).tolist()
    [1, 4]
    """
    head = voxels.size // block * block
    blocks = voxels[:head].reshape(-1, block)
    rows = np.flatnonzero(blocks.any(axis=1))
    at_row, at = np.nonzero(blocks[rows])
    return np.concatenate([rows[at_row] * block + at, head + np.flatnonzero(voxels[head:])])


def combine_masks(
    masks: Iterable[np.ndarray], paths: Sequence[Path | str], case: str, overlap: bool = False
) -> np.ndarray:
    """One label map (int16: a CT's takes a quarter of int64's memory) of a case's masks
    (read one at a time where ``masks`` is a generator), class k + 1 where the k-th mask
    is not 0; where ``overlap``, their bits instead (the k-th mask adds ``2**k``: at most
    :data:`MAX_OVERLAPPING` masks), the classes a voxel is in. A mask of more than one value
    besides 0 (a label map, not a class's mask) is refused, naming the file, and so is a
    voxel in two masks unless ``overlap``."""
    label = flat = None
    order = "C"
    for k, (mask, path) in enumerate(zip(masks, paths, strict=True)):
        if label is None:
            # the label laid out as the masks are (NIfTI's arrays are Fortran-ordered), so
            # that each mask is read through as it lies, never copied
            order = "F" if mask.flags.f_contiguous and not mask.flags.c_contiguous else "C"
            dtype = np.int16 if len(paths) < 2**15 else np.int32
            label = np.zeros(mask.shape, dtype, order=order)
            flat = label.ravel(order=order)
        if mask.shape != label.shape:
            raise ClassMaskVolumeError(
                f"mask {path} (case {case}) is {mask.shape} and mask {paths[0]} "
                f"{label.shape}: a case's masks lie on one grid, its image's."
            )
        # by the voxels a structure holds (a few thousand of millions), not by whole masks:
        # a CT's hundred masks combine in a second, not ten
        voxels = mask.ravel(order=order)
        inside = nonzero_voxels(voxels)
        values = np.unique(voxels[inside])
        if len(values) > 1:
            raise ClassMaskVolumeError(
                f"mask {path} (case {case}) holds {len(values)} values besides 0 "
                f"({', '.join(f'{v:g}' for v in values[:6])}): a class's mask is 0 outside "
                "the class and one value inside. A label map of several classes is a case's "
                "label file of its own (label.nii.gz beside the image), not a class's mask."
            )
        if overlap:
            flat[inside] |= 1 << k
            continue
        taken = flat[inside]
        if taken.any():
            other = paths[int(taken[taken != 0][0]) - 1]
            raise ClassMaskVolumeError(
                f"masks {other} and {path} (case {case}) overlap on "
                f"{int(np.count_nonzero(taken))} voxel(s): masks given one per class are read "
                "into one label map, one class per voxel, unless they overlap from the "
                f"start, read as regions (at most {MAX_OVERLAPPING} masks): name at most "
                f"{MAX_OVERLAPPING} classes in data.class_names to train them as regions, or "
                "leave one of the two out."
            )
        flat[inside] = k + 1
    return label


def combination_indices(
    bits: np.ndarray, codes: Sequence[int], names: Sequence[str], case: str
) -> np.ndarray:
    """A case's masks read as bits (:func:`combine_masks` with ``overlap``) as the classes
    of a label map of their combinations ``codes`` (class i where the bits are
    ``codes[i]``: :mod:`segnet.data.class_masks`); a combination none is refused, named."""
    table = np.full(2 ** len(names), -1, np.int16)
    table[list(codes)] = np.arange(len(codes))
    label = table[bits]
    if (label < 0).any():
        code = int(bits[label < 0].flat[0])
        combo = class_masks.combination_names([code], names)[0]
        known = ", ".join(class_masks.combination_names(codes, names))
        raise ClassMaskVolumeError(
            f"the masks of case {case} hold {combo} on {int((bits == code).sum())} voxel(s), "
            f"a combination of masks that is none of the label map's classes ({known}: those "
            "the training cases hold, which a checkpoint keeps). Score cases whose masks "
            "overlap as the training cases' do; to train, check that mask."
        )
    return label


def overlapping_combinations(
    counts: dict[int, int], masks: Sequence[str], where: Path | str
) -> list[int] | None:
    """Of the voxel count of each combination of ``masks`` (bits) over every case of
    ``where``: the combinations, background first, where two masks hold a voxel; None
    where none do. Each overlap is logged with its share of its smaller mask, and one of a
    few voxels in a hundred warned (outlines drawn apart that touch). A mask no case holds,
    or named with '+' (which joins a combination's names), is refused, named: each mask is
    then a region to train."""
    codes = sorted({0, *counts})
    shared = [c for c in codes if c.bit_count() > 1]
    if not shared:
        return None
    totals = [sum(n for c, n in counts.items() if c >> k & 1) for k in range(len(masks))]
    empty = [m for m, total in zip(masks, totals, strict=True) if total == 0]
    joined = [m for m in masks if "+" in m]
    if empty or joined:
        raise ClassMaskVolumeError(
            f"the masks of {where} overlap, so each is a region of its own and the label "
            "map's classes their combinations (named by joining the masks' names with '+'), "
            "but "
            + (f"{', '.join(empty[:5])} hold(s) no voxel in any case" if empty else "")
            + (" and " if empty and joined else "")
            + (f"the mask(s) {', '.join(joined[:5])} have '+' in their names" if joined else "")
            + ": leave these out of the classes trained (data.class_names names the others)"
            + (", or rename them" if joined else "")
            + "."
        )
    share = {c: counts[c] / min(totals[k] for k in range(len(masks)) if c >> k & 1) for c in shared}
    said = [f"{n} {counts[c]} voxels ({100 * share[c]:.2g}% of the smaller mask)"
            for c, n in zip(shared, class_masks.combination_names(shared, masks), strict=True)]  # fmt: skip
    log.info("where the masks overlap, over every case: %s", "; ".join(said))
    slight = [text for c, text in zip(shared, said, strict=True) if share[c] < 0.01]
    if slight:
        log.warning(
            "masks that touch rather than hold one another: %s. Each such overlap is a class "
            "of the label map, scored on few voxels, and a checkpoint scoring cases whose "
            "masks overlap otherwise refuses them; where these masks should not overlap, "
            "clean them, or train one of them alone with data.class_names.",
            "; ".join(slight),
        )
    return codes
