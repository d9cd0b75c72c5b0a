"""NIfTI volumes: finding image/label pairs, reading them safely, writing predictions.

These layouts are understood:

* Medical Segmentation Decathlon: ``dataset.json`` (``labels``, ``modality``, ``training``
  pairs) with ``imagesTr/`` and ``labelsTr/``;
* plain folders of images and labels paired by file name (``imagesTr/ labelsTr/``,
  ``images/ labels/`` or named in the config);
* a CSV file with ``image,label`` columns (relative paths are taken from the CSV's folder);
* a case's image in a file per channel (modality): nnU-Net's ``<case>_0000``,
  ``<case>_0001`` ..., or files named by their modality in a folder per case (BraTS):
  :mod:`segnet.data.volume_channels`;
* where ``data.root`` has none of those, layouts its files' names tell
  (:mod:`segnet.data.volume_layouts`: labels named with text added, a folder per case).

Volumes are reoriented to RAS so every case has the same axis order; the original affine,
header and orientation are kept so predictions are written back in the source's space.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import nibabel as nib
import numpy as np
import torch
import torch.nn.functional as F

from segnet.data import dataset_json, volume_channels, volume_class_masks, volume_files
from segnet.data.case_table import read_case_table, resolve
from segnet.data.errors import DataError
from segnet.data.image_pairs import IMAGE_SUFFIXES, visible_folders
from segnet.data.volume_layouts import (
    beside_their_images,
    case_folders,
    case_name,
    label_folder_rule,
    named_folders,
    nifti_files,
    say_unlabelled,
)
from segnet.files import staged

log = logging.getLogger(__name__)

# every volume file format's (NIfTI, TIFF stacks, NumPy arrays: segnet.data.volume_files)
VOLUME_SUFFIXES = volume_files.suffixes()
# the 2D image files a volume folder is refused for holding (the 2D recipes read them)
IMAGE_SUFFIXES_2D = tuple(s for s in IMAGE_SUFFIXES if s not in VOLUME_SUFFIXES)


class NiftiDataError(DataError):
    """A volume or the dataset index cannot be used as it is."""


@dataclass
class Case:
    name: str
    image: Path
    label: Path | None
    # the voxel size (z, y, x) of stack and array files that carry none: data.stack_spacing
    spacing: Sequence[float] | None = None
    split: str | None = None  # a CSV's split column; None: drawn by fraction and seed
    group: str | None = None  # a CSV's group column (a patient): drawn splits keep it whole
    # a case of a file per channel: ``image`` is the first channel's, ``channels`` the
    # further ones', and ``channel_words`` every channel's word after the case's name
    # (nnU-Net's 0000, 0001; BraTS's flair, t1 ...: segnet.data.volume_channels)
    channels: tuple[Path, ...] = ()
    channel_words: tuple[str, ...] = ()
    # a label of one mask per class (segnet.data.volume_class_masks): ``label`` is their
    # folder, and these each class's name and mask, in the order of the classes
    class_masks: tuple[tuple[str, Path], ...] = ()
    # where those masks overlap: the bits (mask k adds 2**k) of each class of the label
    # map, their combinations (segnet.data.class_masks); empty where each mask is a class
    combinations: tuple[int, ...] = ()
    fold: int | None = None  # a datalist's fold (MONAI's "fold"): data.fold picks one as val

    @property
    def image_files(self) -> tuple[Path, ...]:
        """Every file of the image: the image, and its further channels."""
        return (self.image, *self.channels)

    @property
    def label_files(self) -> tuple[Path, ...]:
        """Every file of the label: the label, or each class's mask."""
        if self.class_masks:
            return tuple(path for _, path in self.class_masks)
        return (self.label,) if self.label is not None else ()


@dataclass
class Volume:
    """A case in RAS orientation: image (C, X, Y, Z) float32, label (X, Y, Z) class
    indices in the smallest integer type that holds them (``compact_labels``)."""

    name: str
    image: np.ndarray
    label: np.ndarray | None
    affine: np.ndarray  # of the source image, as on disk
    header: nib.Nifti1Header = field(repr=False)
    source_shape: tuple[int, ...] = ()
    spacing: tuple[float, ...] = ()  # of the source grid, in RAS axis order (mm)
    # the label on the image's grid when the image was resampled (training patches are
    # cut from it); None while the image keeps the label's grid. ``label`` stays on the
    # source grid: scores are taken there, as published results are
    grid_label: np.ndarray | None = field(default=None, repr=False)

    @property
    def training_label(self) -> np.ndarray | None:
        """The label voxel for voxel with ``image``."""
        return self.label if self.grid_label is None else self.grid_label


def find_cases(
    root: Path,
    csv_path: str | Path | None = None,
    image_dir: str | None = None,
    label_dir: str | None = None,
) -> list[Case]:
    """All labelled cases under ``root``, by whichever layout it has."""
    root = Path(root)
    if csv_path:
        return _cases_from_csv(Path(csv_path))
    if not root.is_dir():
        raise FileNotFoundError(
            f"no dataset at {root.resolve()}: point data.root at a folder in the Decathlon "
            "layout (dataset.json, imagesTr/, labelsTr/) or with images/ and labels/ folders."
        )
    # nnU-Net v2's dataset.json lists no cases: its imagesTr/labelsTr folders do
    index = dataset_json.read_index(root, NiftiDataError) or {}
    if "training" in index and not (image_dir or label_dir):
        cases = listed_cases(root, index)
    else:
        cases = _folder_cases(root, image_dir, label_dir)
    if not cases:
        raise NiftiDataError(f"no NIfTI cases found under {root}.{flat_images_hint(root)}")
    check_unique_names(cases)
    check_same_channels(cases)
    for case in cases:
        for path in (*case.image_files, *case.label_files):
            if not path.is_file():
                raise NiftiDataError(f"{path} (case {case.name}) does not exist.")
    return cases


def check_same_channels(cases: list[Case]) -> None:
    """Every case of a file per channel has the same channels, named alike, and no case of
    one file stands among them: found now, from the names, not when a case is read
    (a test case's after training)."""
    kinds: dict[tuple[str, ...], Case] = {}
    for case in cases:
        kinds.setdefault(case.channel_words if case.channels else (), case)
    if len(kinds) > 1:
        (one, first), (other, second) = sorted(kinds.items())[:2]
        raise NiftiDataError(
            f"case {first.name} ({first.image}) has {files_said(one)} and case {second.name} "
            f"({second.image}) {files_said(other)}: give every case the same channels, each "
            "in a file of its own named alike, or each case one image file."
        )


def in_channel_order(cases: list[Case], words: Sequence[str]) -> list[Case]:
    """``cases`` with their channel files in the order of ``words`` (``data.channels``:
    given, or the ones a checkpoint was trained on); refused, naming a case, where its
    channel files are others. Cases of one file keep their file's own channel order."""
    ordered = []
    for case in cases:
        if not case.channels:
            ordered.append(case)
            continue
        by_word = dict(zip(case.channel_words, case.image_files, strict=True))
        if sorted(by_word) != sorted(words):
            raise NiftiDataError(
                f"data.channels={list(words)} (given, or the checkpoint's channel files), "
                f"and case {case.name} ({case.image}) has the channel files "
                f"{', '.join(case.channel_words)}: a network takes its channels in the order "
                "it was trained on; give cases of those channels."
            )
        first, *further = (by_word[w] for w in words)
        ordered.append(
            replace(case, image=first, channels=tuple(further), channel_words=tuple(words))
        )
    singles = [c for c in ordered if not c.channels]
    if singles and len(words) > 1:
        log.warning(
            "data.channels=%s names a file per channel, and %d case(s) here are one file "
            "each (%s): their channels are taken in the file's own order", list(words),
            len(singles), singles[0].image,
        )  # fmt: skip
    return ordered


def in_class_order(cases: list[Case], given: Sequence[str] | None) -> tuple[list[str], list[Case]]:
    """The classes of cases given one mask per class, background first
    (:func:`segnet.data.volume_class_masks.selected_classes`), and the cases with their
    masks of those classes alone, in that order."""
    names = volume_class_masks.selected_classes(
        [c for c, _ in cases[0].class_masks], cases[0].label, given
    )
    ordered = [
        replace(case, class_masks=volume_class_masks.masks_of_classes(
            case.name, case.class_masks, names[1:], every=not given
        ))
        for case in cases
    ]  # fmt: skip
    return names, ordered


def files_said(words: tuple[str, ...]) -> str:
    return f"{len(words)} channel files ({', '.join(words)})" if words else "one image file"


def listed_cases(root: Path, index: dict) -> list[Case]:
    """The cases a dataset.json lists under ``training`` (and, in a MONAI datalist,
    ``validation``: then the val split, and ``training`` the train split), each an
    ``image`` (a file, or a list of a file per channel) and a ``label``; an entry without
    them is refused, named. A datalist's ``fold`` keys are kept on the cases for
    :func:`listed_splits`."""
    where = root / "dataset.json"
    training, validation = index.get("training") or [], index.get("validation") or []
    if not training:
        raise NiftiDataError(f"{where} lists no 'training' cases.")
    for part, entries in (("training", training), ("validation", validation)):
        for k, entry in enumerate(entries):
            if not listed_entry(entry):
                raise NiftiDataError(
                    f"{where}: {part} case {k} is {str(entry)[:120]}; each case is "
                    '{"image": <file, or a list of a file per channel>, "label": <file>}, '
                    "the paths relative to the dataset.json."
                )
    if any("fold" in e for e in training):
        log.info(
            "%s gives each case a fold: data.fold=k makes fold k the val split and the "
            "others train (without data.fold, splits are drawn by data.seed)", where,
        )  # fmt: skip
    split = {"training": "train" if validation else None, "validation": "val"}
    return [
        replace(listed_case(root, e["image"], e["label"]), split=split[part], fold=fold_of(e))
        for part, entries in (("training", training), ("validation", validation))
        for e in entries
    ]


def fold_of(entry: dict) -> int | None:
    fold = entry.get("fold")
    return fold if isinstance(fold, int) and not isinstance(fold, bool) else None


def listed_splits(cases: list[Case], fold: int | None) -> list[str | None]:
    """Each case's split as its list gives it (a CSV's ``split`` column, a datalist's
    ``validation`` cases); with ``data.fold`` and a datalist that gives every case a fold
    and none a val split, fold k is the val split and the other folds train (the run then
    tests on val, no case being listed for test)."""
    given = [c.split for c in cases]
    folds = [c.fold for c in cases]
    if fold is None or None in folds or "val" in given:
        return given
    if fold not in folds:
        raise NiftiDataError(
            f"data.fold={fold}: the datalist gives its cases the folds "
            f"{sorted(set(folds))}; choose one of them."
        )
    log.info(
        "data.fold=%d: the datalist's fold %d is the val split (%d cases), its other folds "
        "train; none is listed for test, so the run tests on val", fold, fold, folds.count(fold),
    )  # fmt: skip
    return ["val" if f == fold else "train" for f in folds]


def listed_entry(entry: object) -> bool:
    """Whether a dataset.json's case is an image (a file, or a list of distinct files)
    and a label file."""
    if not isinstance(entry, dict) or not isinstance(entry.get("label"), str) or not entry["label"]:
        return False
    image = entry.get("image")
    if isinstance(image, list):
        return (
            bool(image) and all(isinstance(f, str) for f in image) and len(set(image)) == len(image)
        )
    return isinstance(image, str) and bool(image)


def listed_case(root: Path, image: str | list[str], label: str) -> Case:
    """A case as a dataset.json lists it. nnU-Net v1 lists a case of a file per channel by
    its case's name (``imagesTr/BRATS_001.nii.gz`` for ``BRATS_001_0000.nii.gz`` ...); a
    MONAI datalist by its channel files, in order (``"image": [".../c1_t1.nii.gz",
    ".../c1_t2.nii.gz"]``)."""
    if isinstance(image, list) and len(image) == 1:
        image = image[0]  # one file: a case as any
    if isinstance(image, list):
        files = [root / str(f) for f in image]
        name, words = volume_channels.listed_channels(files)
        return Case(name, files[0], root / label, channels=tuple(files[1:]), channel_words=words)
    path = root / image
    first = volume_channels.renamed(path, f"{case_name(path)}_0000")
    if path.exists() or not first.is_file():
        return Case(case_name(path), path, root / label)
    files = volume_channels.numbered_channels(first)
    words = tuple(f"{n:04d}" for n in range(len(files)))
    return Case(case_name(path), first, root / label, channels=files[1:], channel_words=words)


def _folder_cases(root: Path, image_dir: str | None, label_dir: str | None) -> list[Case]:
    """The cases of an image and a label folder, each label named as its image (or with
    text added, :func:`label_folder_rule`); where ``root`` has no such folders and none is
    named, a folder per case or labels beside their images
    (:mod:`segnet.data.volume_layouts`)."""
    named = None
    if not (image_dir or label_dir) and not _has_folders(root):
        named = named_folders(root)
        found = (
            []
            if named
            else (
                volume_class_masks.class_mask_cases(root)
                or case_folders(root)
                or beside_their_images(root)
            )
        )
        if found:
            return [
                Case(f.name, f.image, f.label, group=f.group, channels=f.channels,
                     channel_words=f.words if f.channels else (), class_masks=f.classes)
                for f in found
            ]  # fmt: skip
    images, labels = named or _folders(root, image_dir, label_dir)
    image_files = nifti_files(images)
    label_files = nifti_files(labels)
    by_class = volume_class_masks.class_folder_cases(image_files, labels)
    if by_class:
        return [Case(f.name, f.image, f.label, class_masks=f.classes) for f in by_class]
    # a rule only where no label is named as its image: two ways in one folder are refused
    same_name = {case_name(p) for p in label_files} & {case_name(p) for p in image_files}
    renamed = label_folder_rule(image_files, label_files, labels) if not same_name else {}
    has_label = lambda n: any((labels / f"{n}{s}").exists() for s in VOLUME_SUFFIXES)  # noqa: E731
    numbered = volume_channels.numbered_cases(image_files, has_label, images)
    further = {p for _, files in numbered.values() for p in files[1:]}
    cases = []
    for image in image_files:
        if image in further:
            continue  # read with its case's channel 0000 file
        name, files = numbered.get(image, (case_name(image), (image,)))
        match = [labels / f"{name}{s}" for s in VOLUME_SUFFIXES if (labels / f"{name}{s}").exists()]
        match = match or ([renamed[name]] if name in renamed else [])
        if not match and renamed:
            continue  # an image the rule names no label for: counted below
        if not match:
            others = {case_name(p) for p in image_files} - {name}
            raise NiftiDataError(missing_label(image, labels, name, others))
        words = tuple(f"{n:04d}" for n in range(len(files))) if image in numbered else ()
        cases.append(Case(name, image, match[0], channels=files[1:], channel_words=words))
    if renamed and len(cases) < len(image_files) - len(further):
        kept = {c.image for c in cases} | further
        say_unlabelled([case_name(p) for p in image_files if p not in kept], images)
    unmatched = sorted({p.name for p in label_files} - {c.label.name for c in cases})
    if unmatched:  # left out: said, as it may be a case whose image is misnamed
        log.warning(
            "%d label file(s) in %s have no image of their name and are left out: %s",
            len(unmatched), labels, ", ".join(unmatched[:5]) + (" ..." if len(unmatched) > 5 else ""),
        )  # fmt: skip
    return cases


# the image and label folders read where none is named, the Decathlon's first
FOLDER_PAIRS = (("imagesTr", "labelsTr"), ("images", "labels"))


def _has_folders(root: Path) -> bool:
    return any((root / i).is_dir() and (root / j).is_dir() for i, j in FOLDER_PAIRS)


def flat_images_hint(root: Path) -> str:
    """Where a folder with no volumes holds 2D images (an nnU-Net dataset of PNGs, say),
    the recipe that trains on them; else nothing."""
    ending = dataset_json.file_ending(root, NiftiDataError)
    images = [d for d in (root / "imagesTr", root / "images") if d.is_dir()]
    two_d = {p.suffix.lower() for d in images for p in d.iterdir()} & set(IMAGE_SUFFIXES_2D)
    if two_d & {".dcm", ".dicom"}:
        return (
            " It holds DICOM files: a series of slices is not read as a volume here; "
            "convert each series to NIfTI (dcm2niix -z y -o <out> <series folder>), or "
            "train single-frame images (X-rays) with a 2D recipe (experiment=images_quick)."
        )
    if (ending and ending in IMAGE_SUFFIXES_2D) or two_d:
        return (
            f" It holds 2D images ({ending or ', '.join(sorted(two_d))}): train on them with "
            "a 2D recipe (experiment=images_quick data.root=...)."
        )
    return ""


def missing_label(image: Path, labels: Path, name: str, others: set[str]) -> str:
    """Why ``image`` has no label, with what to do: its label folder holds its label named
    otherwise (``<case>_seg.nii.gz``; not another image's, ``others``), or none."""
    expected = labels / f"{name}.nii.gz"
    alike = sorted(
        p.name
        for p in nifti_files(labels)
        if re.match(rf"{re.escape(name)}[_.-]", p.name) and case_name(p) not in others
    )[:3]
    hint = (
        f" {labels} holds {', '.join(alike)}: name each label as its image ({expected.name})"
        if alike
        else f" Each label is named as its image ({expected.name})"
    )
    return (
        f"image {image} has no label: expected {expected}.{hint}, or list the image and "
        "label of each case in a CSV file (data.csv=, columns image,label)."
    )


def _named_folder(
    root: Path, kind: str, setting: tuple[str, str | None], other: tuple[str, str | None]
) -> Path:
    """The image or label folder (``kind``) where the other's setting or its own names
    one: its own setting's, else the Decathlon's; refused, naming the setting, where
    ``root`` has no such folder."""
    key, given = setting
    default = {"image": "imagesTr", "label": "labelsTr"}[kind]
    folder = root / (given or default)
    if folder.is_dir():
        return folder
    said = f"data.{key}={given}: {root} has" if given else (
        f"data.{other[0]}={other[1]} reads the {kind}s from {default}/ unless data.{key} "
        f"names their folder, and {root} has"
    )  # fmt: skip
    held = ", ".join(d.name for d in visible_folders(root)[:6]) if root.is_dir() else ""
    raise NiftiDataError(
        f"{said} no {kind} folder {folder.name}/{f' (it holds {held})' if held else ''}; "
        "name one it has, or leave data.image_dir and data.label_dir out to read its layout."
    )


def _folders(root: Path, image_dir: str | None, label_dir: str | None) -> tuple[Path, Path]:
    if image_dir or label_dir:
        return (
            _named_folder(root, "image", ("image_dir", image_dir), ("label_dir", label_dir)),
            _named_folder(root, "label", ("label_dir", label_dir), ("image_dir", image_dir)),
        )
    for images, labels in FOLDER_PAIRS:
        if (root / images).is_dir() and (root / labels).is_dir():
            return root / images, root / labels
    raise NiftiDataError(
        f"{root} has neither dataset.json nor imagesTr/+labelsTr/ or images/+labels/ folders, "
        "nor image and label folders its names say (img/, label/), nor a folder per case of "
        "an image and a label its name says so (imaging.nii.gz with segmentation.nii.gz) or "
        "a folder of a mask per class (ct.nii.gz with segmentations/), nor "
        "labels named from their images by one rule (case_01_seg for case_01, "
        "segmentation-0 for volume-0); "
        "set data.image_dir and data.label_dir, or data.csv (in evaluate.py with a leading "
        "+: +data.image_dir=...). Images without labels: python -m segnet.predict segments "
        "them."
    )


def _cases_from_csv(path: Path) -> list[Case]:
    """A case per row: ``image`` (a file, 3D or 4D) or a file per channel in columns
    ``image_<word>`` (``image_t1,image_t2``: the channels in the columns' order), and
    ``label``; ``split`` and ``group`` where given."""
    rows = read_case_table(path, required=(), error=NiftiDataError)
    columns = image_columns(path, rows)
    for r in rows:
        empty = [c for c in columns if not r.get(c)]
        if empty or not r["label"]:
            # every case is split into train, val or test, and each of those needs a label
            raise NiftiDataError(
                f"{path} line {r['line']} ({r[columns[0]] or r['label']}) has no "
                f"{empty[0] if empty else 'label'}: every case is trained, validated or tested "
                "on, from its image and label. Leave unlabelled volumes out; python -m "
                "segnet.predict segments them."
            )
    if any(r.get("roi") for r in rows):
        log.warning(
            "%s: its roi column is not read for volumes: every voxel is trained and scored.",
            path,
        )
    words = tuple(c[len("image_") :] for c in columns) if len(columns) > 1 else ()
    cases = []
    for r in rows:
        files = [resolve(path, r[c]) for c in columns]
        name = volume_channels.listed_channels(files)[0] if words else case_name(files[0])
        if words and not cases:
            say_unnamed_channels(path, files, words)
        cases.append(
            Case(name, files[0], resolve(path, r["label"]), split=r.get("split") or None,
                 group=r.get("group") or None, channels=tuple(files[1:]), channel_words=words)
        )  # fmt: skip
    check_unique_names(cases)
    return cases


def say_unnamed_channels(path: Path, files: list[Path], words: tuple[str, ...]) -> None:
    """Warn where a CSV's channel files (its first row's) are not named as their columns say
    (``<case>_t1`` under ``image_t1``): the run reads them by column, but
    ``segnet.predict`` finds a new case's channels by name, and a file under the wrong
    column would be read as another channel without a word."""
    off = [f for f, w in zip(files, words, strict=True) if not volume_channels.case_of(f, [w])]
    if off:
        log.warning(
            "%s: the channel file %s is not named <case>_%s as its column image_%s says; "
            "training reads each file by its column, but segnet.predict finds a new "
            "case's channels by their names (<case>_%s beside <case>_%s ...): name the "
            "files so, or check each sits in its channel's column", path, off[0],
            words[files.index(off[0])], words[files.index(off[0])], words[0], words[1],
        )  # fmt: skip


def image_columns(path: Path, rows: list[dict]) -> list[str]:
    """A CSV's image columns: ``image``, or two or more ``image_<word>`` (a file per
    channel); refused, naming the file and its columns, with both or neither, or with no
    ``label`` column."""
    columns = [c for c in (rows[0] if rows else {}) if c != "line"]
    channels = [c for c in columns if c.startswith("image_") and len(c) > len("image_")]
    if "image" in columns and "label" in columns:
        if channels:  # an image_id, an image_source: notes beside the image, as before
            log.info("%s: its columns %s are not read (the image is column 'image')", path,
                     ", ".join(channels))  # fmt: skip
        return ["image"]
    if len(channels) < 2 or "label" not in columns:
        found = ", ".join(repr(c) for c in columns) if rows else "no rows"
        raise NiftiDataError(
            f"data.csv={path} needs a header with 'image' and 'label' columns (it has "
            f"{found}); for a file per channel, two or more columns 'image_<channel>' "
            "(image_t1,image_t2: the channels in that order) in place of 'image'."
        )
    return channels


def check_unique_names(cases: list[Case]) -> None:
    """A case is named by its image's file name in per_case.csv and in the prediction files,
    so two images of one name in different folders would overwrite each other there."""
    seen: dict[str, Path] = {}
    for case in cases:
        if case.name in seen:
            raise NiftiDataError(
                f"{seen[case.name]} and {case.image} are both case '{case.name}': cases are "
                "named by their file names in per_case.csv and the predictions; rename one."
            )
        seen[case.name] = case.image


def header_shape(path: Path) -> tuple[int, ...]:
    """A volume's shape from its header alone (a NIfTI file's voxels unread)."""
    try:
        return volume_files.header(path).shape
    except (OSError, ValueError, nib.filebasedimages.ImageFileError) as err:
        raise NiftiDataError(f"cannot read {path}: {err}") from err


def channel_count(shape: Sequence[int]) -> int:
    """Channels of a volume of ``shape``: 3D is one, 4D has them last (one per modality)."""
    return shape[3] if len(shape) == 4 else 1


def _load(
    path: Path, spacing: Sequence[float] | None = None, as_stored: bool = False
) -> nib.Nifti1Image:
    """A volume file read whole (a truncated file fails here, named): as float32 (an
    image), or ``as_stored``, decoded once in the type it is stored in (a label: a mask's
    uint8, so that a case of a hundred masks reads each once)."""
    try:
        img = volume_files.read(path, spacing)
        if as_stored:
            return nib.Nifti1Image(np.asanyarray(img.dataobj), img.affine, img.header)
        img.get_fdata(dtype=np.float32)
        return img
    except (OSError, EOFError, zlib.error, nib.filebasedimages.ImageFileError, ValueError) as err:
        raise NiftiDataError(f"cannot read {path}: {err} (corrupt or truncated file?)") from err


def read_stored(path: Path, spacing: Sequence[float] | None = None) -> nib.Nifti1Image:
    """A label file as it is stored (:func:`_load` ``as_stored``): an unreadable one is
    refused naming it."""
    return _load(path, spacing, as_stored=True)


def _load_image(case: Case) -> nib.Nifti1Image:
    """A case's image; a case of a file per channel as one 4D image of them, each file a
    3D volume on the first one's grid (as nnU-Net requires of them)."""
    first = _load(case.image, case.spacing)
    if not case.channels:
        return first
    planes = [first, *(_load(path, case.spacing) for path in case.channels)]
    for path, img in zip(case.image_files, planes, strict=True):
        if img.ndim != 3:
            raise NiftiDataError(
                f"channel file {path} of case {case.name} has shape {img.shape}: each channel "
                "file of a case is one 3D volume."
            )
        if img.shape != first.shape or not np.allclose(img.affine, first.affine, atol=1e-3):
            what = (
                f"shapes ({first.shape} and {img.shape})"
                if img.shape != first.shape
                else "affines (voxel positions in space)"
            )
            raise NiftiDataError(
                f"channel files {case.image} and {path} of case {case.name} have different "
                f"{what}: resample every channel onto the first one's grid, as nnU-Net "
                "requires of a case's channels."
            )
    data = np.empty((*first.shape, len(planes)), np.float32)
    for k, plane in enumerate(planes):  # each plane's cached voxels let go once copied
        data[..., k] = plane.get_fdata(dtype=np.float32)
        plane.uncache()
    return nib.Nifti1Image(data, first.affine, first.header)


def load_volume(
    case: Case, num_classes: int | None = None, ignore_value: int | None = None
) -> Volume:
    """Read, validate and reorient one case. Errors name the file and what is wrong. A
    label's ``ignore_value`` (nnU-Net's ignore label) is read as ``num_classes``, the index
    training and scores leave out."""
    img = _load_image(case)
    if img.ndim not in (3, 4):
        raise NiftiDataError(
            f"image {case.image} has {img.ndim} dimensions {img.shape}; expected a 3D volume "
            "or a 4D one with the channels (modalities) last."
        )
    canonical = nib.as_closest_canonical(img)
    data = canonical.get_fdata(dtype=np.float32)
    image = data[None] if data.ndim == 3 else np.moveaxis(data, -1, 0)
    if not np.isfinite(image).all():
        # one NaN would make every loss NaN, and a prediction all background, without a word
        bad = int(np.size(image) - np.isfinite(image).sum())
        raise NiftiDataError(
            f"image {case.image} holds {bad} NaN or infinite voxel value(s); replace them "
            "(e.g. with the background intensity) before training or predicting."
        )
    label = None
    if case.label is not None:
        label = _read_label(case, img, canonical)
        if num_classes == 2 and ignore_value != 255:  # 255 nnU-Net's ignore label: void
            white_as_foreground(label, case)
        # the values a label may hold: the classes', and the ignore index past them
        allowed = num_classes
        if ignore_value is not None and num_classes is not None:
            label[label == ignore_value] = num_classes
            allowed += 1
        if label.min() < 0 or (allowed is not None and label.max() >= allowed):
            bad = sorted(int(v) for v in np.unique(label) if v < 0 or (allowed and v >= allowed))
            raise NiftiDataError(
                f"label {case.label} holds values {bad}; the classes are 0..{num_classes - 1}, "
                "one per class name. To train: name every label value in data.class_names "
                "or dataset.json's labels, background first. To evaluate: the classes are "
                "the checkpoint's, and these labels hold classes it was not trained on. A "
                "value that is nnU-Net's ignore label is read as void only where the "
                "dataset.json naming it ('ignore') lies beside the cases."
            )
        label = compact_labels(label)
    return Volume(
        name=case.name,
        image=np.ascontiguousarray(image),
        label=label,
        affine=img.affine.copy(),
        header=img.header.copy(),
        source_shape=tuple(img.shape[:3]),
        spacing=ras_zooms(img.affine),
    )


# the label folders whose black-and-white labels were said to be read as class 1
_WHITE_SAID: set[Path] = set()


def white_as_foreground(label: np.ndarray, case: Case) -> None:
    """A black-and-white label of two classes, 0 and 255 (ImageJ's and Fiji's binary
    masks, thresholded volumes saved as 8-bit), has its white (255) read as class 1, in
    place; said once per label folder. Any other label is left as it is (a value past the
    classes is then refused, naming the file)."""
    if label.max(initial=0) != 255:  # one pass, no sort: most labels end here
        return
    values = np.unique(label)
    if not set(values.tolist()) <= {0, 255}:
        return
    label[label == 255] = 1
    folder = Path(case.label).parent if case.label is not None else Path(".")
    if folder not in _WHITE_SAID:
        _WHITE_SAID.add(folder)
        log.info(
            "labels in %s hold 0 and 255 (black and white, as ImageJ saves binary masks): "
            "255 is read as class 1 of the two", folder,
        )  # fmt: skip


def _read_label(case: Case, img: nib.Nifti1Image, canonical: nib.Nifti1Image) -> np.ndarray:
    """A case's label (RAS) on its image's grid: its label file (int64), or its masks given
    one per class read into one label map (int16: :mod:`segnet.data.volume_class_masks`)."""
    if not case.class_masks:
        return _label_values(case.label, case, img, canonical)
    paths = case.label_files
    # read one at a time: a CT's 100 masks side by side would not fit in memory
    masks = (_label_values(path, case, img, canonical, widen=False) for path in paths)
    if not case.combinations:
        return volume_class_masks.combine_masks(masks, paths, case.name)
    bits = volume_class_masks.combine_masks(masks, paths, case.name, overlap=True)
    names = [name for name, _ in case.class_masks]
    return volume_class_masks.combination_indices(bits, case.combinations, names, case.name)


def mask_combinations(case: Case) -> dict[int, int]:
    """The voxel count of each combination of a case's masks (given one per class) as bits
    (mask k adds 2**k), read without its image (each mask in RAS: masks stored in other
    axis orders combine voxel by voxel)."""
    masks = (
        np.asarray(nib.as_closest_canonical(_load(path, case.spacing, as_stored=True)).dataobj)
        for path in case.label_files
    )
    bits = volume_class_masks.combine_masks(masks, case.label_files, case.name, overlap=True)
    counts = np.bincount(bits.ravel(order="K"))
    return {int(c): int(counts[c]) for c in np.flatnonzero(counts)}


def three_axes(label: nib.Nifti1Image) -> nib.Nifti1Image:
    """A label saved with trailing axes of one past its three (x, y, z, 1), as some tools
    save a 3D label, as the 3D label it is; any other as it is (a slice, (x, y, 1), keeps
    its third axis)."""
    shape = label.shape
    while len(shape) > 3 and shape[-1] == 1:
        shape = shape[:-1]
    if shape == label.shape:
        return label
    return nib.Nifti1Image(np.asanyarray(label.dataobj).reshape(shape), label.affine)


def _label_values(
    path: Path, case: Case, img: nib.Nifti1Image, canonical: nib.Nifti1Image, widen: bool = True
) -> np.ndarray:
    """The whole numbers of a label file (int64 where ``widen``, else as stored; RAS),
    checked against its image: one grid, and no fraction a resampling left."""
    # compared once both are in RAS: a label stored in another axis order or direction
    # (LPS against RAS, say) on the same voxels in space is the same label
    stored = three_axes(_load(path, case.spacing, as_stored=True))
    lab = nib.as_closest_canonical(stored)
    same_grid = lab.shape == canonical.shape[:3]
    if lab.ndim != 3 or (not same_grid and stored.shape != img.shape[:3]):
        reoriented = lab.shape != stored.shape or canonical.shape != img.shape
        in_ras = f" ({lab.shape} against {canonical.shape[:3]} in RAS order)" * reoriented
        raise NiftiDataError(
            f"label {path} has shape {stored.shape} but image {case.image} has "
            f"{img.shape}{in_ras}; the label must be 3D with the image's spatial shape."
        )
    if not same_grid or not np.allclose(lab.affine, canonical.affine, atol=1e-3):
        raise NiftiDataError(affine_mismatch(case, lab.affine, canonical, stored, img, path))
    values = np.asarray(lab.dataobj)
    # some labels are stored as floats holding 0/1/2: accept those, refuse real fractions
    fractions = (
        ~np.isfinite(values) | (values != np.round(values)) if values.dtype.kind == "f" else None
    )
    if fractions is not None and fractions.any():
        some = ", ".join(f"{v:g}" for v in np.unique(values[fractions])[:3])
        raise NiftiDataError(
            f"label {path} holds {int(fractions.sum())} voxel(s) that are not a "
            f"class index (e.g. {some}): a label holds one whole class number per voxel; "
            "a label resampled with linear interpolation needs nearest-neighbour instead."
        )
    return values.astype(np.int64) if widen else values


def affine_mismatch(
    case: Case,
    label_affine: np.ndarray,
    image: nib.Nifti1Image,
    stored_label: nib.Nifti1Image,
    stored_image: nib.Nifti1Image,
    path: Path | None = None,
) -> str:
    """A label and image on different grids (``label_affine`` and ``image`` in RAS), with
    how far apart: the farthest a corner voxel lies from its image counterpart, in mm and in
    voxels, so that rounding in a header (a fraction of a voxel) reads differently from a
    misregistered label. Copying the image's affine into the label is advised only where
    both files store their voxels in the same axis order and direction: into a label
    stored otherwise (LPS against RAS, say) it would mirror or transpose the label."""
    corners = np.array([[i, j, k, 1] for i in (0, 1) for j in (0, 1) for k in (0, 1)], float)
    corners[:, :3] *= np.array(image.shape[:3]) - 1
    apart = np.linalg.norm((corners @ label_affine.T - corners @ image.affine.T)[:, :3], axis=1)
    mm = float(apart.max())
    voxels = mm / float(min(ras_zooms(image.affine)))
    label_axes = "".join(nib.aff2axcodes(stored_label.affine))
    image_axes = "".join(nib.aff2axcodes(stored_image.affine))
    if voxels >= 0.1:
        advice = "resample the label onto the image grid first"
    elif label_axes == image_axes:
        advice = (
            "header rounding, most likely: save the label with the image's affine "
            "(nib.Nifti1Image(label, image.affine, label.header))"
        )
    else:
        advice = (
            f"header rounding, most likely, but the label is stored in {label_axes} order "
            f"and the image in {image_axes}: resample the label onto the image grid "
            "(nearest neighbour), as the image's affine alone would mirror it"
        )
    return (
        f"label {path or case.label} and image {case.image} have different affines (voxel positions "
        f"in space, up to {mm:.3g} mm or {voxels:.2g} voxel apart at the corners); {advice}."
    )


def compact_labels(label: np.ndarray) -> np.ndarray:
    """Class indices (0 or more) in the smallest integer type that holds them: a CT label
    map of 512x512x400 voxels takes 105 MB as uint8 against 840 MB as int64, and volumes
    stay in memory for the whole run. Batches widen them to int64.

    Example:
        >>> compact_labels(np.array([0, 2, 1])).dtype, compact_labels(np.array([0, 300])).dtype
        (dtype('uint8'), dtype('int16'))
    """
    top = int(label.max()) if label.size else 0
    dtype = np.uint8 if top < 2**8 else np.int16 if top < 2**15 else np.int32
    return label.astype(dtype, copy=False)


def ras_zooms(affine: np.ndarray) -> tuple[float, ...]:
    """The voxel sizes (mm) an affine gives, in RAS axis order: the geometry nibabel and
    viewers use, rather than the header's pixdim, which a tool may have left stale.

    Example:
        >>> ras_zooms(np.array([[0, 0, -2.5, 0], [-0.8, 0, 0, 0], [0, 1.2, 0, 0], [0, 0, 0, 1]]))
        (2.5, 0.8, 1.2)
    """
    return tuple(float(s) for s in ras_order(nib.affines.voxel_sizes(affine)[:3], affine))


def ras_order(values: Sequence[float], affine: np.ndarray) -> tuple[float, ...]:
    """Per-voxel-axis ``values`` (sizes, voxel counts) reordered to RAS axis order."""
    out = [0.0] * 3
    for source, ras in enumerate(nib.orientations.io_orientation(affine)[:3, 0]):
        out[int(ras)] = values[source]
    return tuple(out)


def ras_spacing(path: Path, spacing: Sequence[float] | None = None) -> tuple[float, ...]:
    """An image's voxel spacing (mm) in RAS axis order, from its header alone
    (``spacing``: a stack's or array's where the file carries none)."""
    return ras_grid(path, spacing)[0]


def ras_grid(
    path: Path, spacing: Sequence[float] | None = None
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """An image's voxel spacing (mm) and voxel counts, both in RAS axis order, from its
    header alone (``spacing``: a stack's or array's where the file carries none)."""
    try:
        img = volume_files.header(path, spacing)
    except (OSError, ValueError, nib.filebasedimages.ImageFileError) as err:
        raise NiftiDataError(f"cannot read {path}: {err}") from err
    spacing = check_voxel_sizes(ras_zooms(img.affine), str(path))
    return spacing, tuple(int(n) for n in ras_order(img.shape[:3], img.affine))


def header_voxel_size(
    path: Path, spacing: Sequence[float] | None = None
) -> tuple[float, ...] | None:
    """An image's voxel size (mm, RAS order) from its header, or None where the header
    gives no usable one (refused where a size is needed: ``check_voxel_sizes``)."""
    try:
        spacing = ras_zooms(volume_files.header(path, spacing).affine)
    except (OSError, ValueError, nib.filebasedimages.ImageFileError) as err:
        raise NiftiDataError(f"cannot read {path}: {err}") from err
    usable = len(spacing) == 3 and all(np.isfinite(s) and s > 0 for s in spacing)
    return spacing if usable else None


def voxel_size_range(
    paths: Sequence[Path], spacing: Sequence[float] | None = None
) -> list[list[float]] | None:
    """The smallest and the largest voxel size (mm) along each RAS axis over ``paths``'
    headers, ``[[min, ...], [max, ...]]``, leaving out headers without a usable one; None
    when none has one."""
    sizes = [s for p in paths if (s := header_voxel_size(p, spacing)) is not None]
    if not sizes:
        return None
    a = np.asarray(sizes, dtype=np.float64)
    return [[round(float(s), 6) for s in a.min(0)], [round(float(s), 6) for s in a.max(0)]]


def check_voxel_sizes(spacing: Sequence[float], where: str) -> tuple[float, ...]:
    """``spacing`` if every size is a positive finite number, else a clear refusal: a zero
    or NaN in an affine would otherwise collapse or break the resampled grid."""
    if len(spacing) != 3 or not all(np.isfinite(s) and s > 0 for s in spacing):
        raise NiftiDataError(
            f"{where}: its affine gives voxel sizes {list(spacing)} mm, not three positive "
            "numbers, so it cannot be resampled to data.spacing; fix the file's header "
            "(sform/qform), or leave data.spacing null."
        )
    return tuple(spacing)


# Resampling beyond this many times a case's voxels is taken for a unit slip (data.spacing
# in metres or cm) rather than meant: it would fill the memory before saying why.
MAX_GROWTH = 64


def grid_shape(
    shape: Sequence[int], spacing: Sequence[float], target: Sequence[float]
) -> tuple[int, ...]:
    """The voxel counts that cover the same extent at the ``target`` spacing.

    Example:
        >>> grid_shape((35, 50, 20), (1.0, 1.0, 3.0), (1.0, 1.0, 1.5))
        (35, 50, 40)
    """
    return tuple(max(1, round(n * s / t)) for n, s, t in zip(shape, spacing, target, strict=True))


def resample_to_spacing(volume: Volume, target: Sequence[float]) -> Volume:
    """``volume`` with its image on a grid of ``target`` spacing (trilinear) and the label
    there as ``grid_label`` (nearest, never blended), the source-grid label kept for scoring.

    Both directions, this one and the logits' way back (``segnet.serving.inference.resize``),
    interpolate with half-voxel centres (``align_corners=False``), so they map the same
    extent onto each other.
    """
    source = check_voxel_sizes(volume.spacing, f"case {volume.name}")
    shape = grid_shape(volume.image.shape[1:], source, target)
    if shape == tuple(volume.image.shape[1:]):
        return volume
    growth = np.prod(shape) / np.prod(volume.image.shape[1:])
    if growth > MAX_GROWTH:
        raise NiftiDataError(
            f"case {volume.name}: data.spacing={list(target)} mm would resample its "
            f"{list(volume.image.shape[1:])} voxels of {list(source)} mm to {list(shape)}, "
            f"{growth:.0f} times as many; data.spacing is in millimetres, per RAS axis."
        )
    image = F.interpolate(
        torch.from_numpy(volume.image)[None], size=shape, mode="trilinear", align_corners=False
    )[0]
    volume.image = np.ascontiguousarray(image.numpy())
    if volume.label is not None:
        label = torch.from_numpy(volume.label)[None, None].float()
        label = F.interpolate(label, size=shape, mode="nearest-exact")[0, 0]
        volume.grid_label = label.numpy().astype(volume.label.dtype)
    return volume


def normalize_intensity(image: np.ndarray, clip: tuple[float, float] | None = None) -> np.ndarray:
    """Per-volume, per-channel z-score (after optional clipping, e.g. CT windows)."""
    out = np.empty_like(image, dtype=np.float32)
    for c, channel in enumerate(image):
        if clip is not None:
            channel = np.clip(channel, *clip)
        std = channel.std()
        out[c] = (channel - channel.mean()) / (std if std > 0 else 1.0)
    return out


def prediction_name(case: Case) -> str:
    """The file a case's predicted label map is written to: ``<case>.nii.gz`` for a NIfTI
    image, else in the image's own form (``<case>.tif``, ``<case>.npz``)."""
    suffix = volume_files.suffix_of(case.image) or ".nii.gz"
    return case.name + (".nii.gz" if suffix == ".nii" else suffix)


def to_source_orientation(array_ras: np.ndarray, volume: Volume) -> np.ndarray:
    """An array on the case's RAS grid (X, Y, Z, ...: trailing axes kept, e.g. classes)
    back in the axis order and directions of its source file."""
    src = nib.orientations.io_orientation(volume.affine)
    ras = nib.orientations.axcodes2ornt(("R", "A", "S"))
    return nib.orientations.apply_orientation(array_ras, nib.orientations.ornt_transform(ras, src))


def save_probability_volume(probs_ras: np.ndarray, volume: Volume, path: Path) -> Path:
    """Class probabilities (a region network's: each region's sigmoid) on the case's RAS
    grid (C, X, Y, Z) as a float32 NIfTI file (X, Y, Z, C) in the source image's
    orientation and affine, whatever the image's own file format; never over an existing
    file."""
    if path.exists():
        raise FileExistsError(f"{path} exists; predictions are never overwritten.")
    back = to_source_orientation(np.moveaxis(probs_ras.astype(np.float32), 0, -1), volume)
    out = nib.Nifti1Image(np.ascontiguousarray(back), volume.affine)
    out.header.set_intent("vector", name="class probabilities")
    with staged(path) as tmp:
        nib.save(out, str(tmp))
    return path


def save_label_volume(label_ras: np.ndarray, volume: Volume, path: Path) -> Path:
    """Write a RAS label map back in the source image's orientation, affine and header."""
    if path.exists():
        raise FileExistsError(f"{path} exists; predictions are never overwritten.")
    back = to_source_orientation(label_ras, volume)
    header = volume.header.copy()
    header.set_data_dtype(np.uint8 if back.max() < 256 else np.int16)
    header.set_slope_inter(1, 0)
    out = nib.Nifti1Image(back.astype(header.get_data_dtype()), volume.affine, header=header)
    with staged(path) as tmp:
        volume_files.write(out, tmp)  # as NIfTI, a TIFF stack or an array, by its name
    return path
