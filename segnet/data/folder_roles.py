"""What a folder holds, read from the words of its name, for folders not named as the
layouts name them (``images/``, ``labels/``): images (``Image/``, ``images_png/``,
``original_images/``, ``ISIC2018_Task1-2_Training_Input/``), masks (``Mask/``,
``label_images_semantic/``, ``ISIC2018_Task1_Training_GroundTruth/``, ``1st_manual/``,
``trimaps/``, mmsegmentation's ``ann_dir/``) or regions of interest (``fov/``), and the split a name gives
(``Training``, ``Validation``, ``test``), or the split that the first word of a file's name
gives (GlaS's ``train_1.bmp`` and ``testA_1.bmp``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

# a split's folder by its common names (ADE20K's training/ and validation/)
SPLIT_FOLDERS = {
    "train": ("train", "training"),
    "val": ("val", "valid", "validation"),
    "test": ("test", "testing"),
}
MASK_WORDS = frozenset(
    [
        "label",
        "labels",
        "mask",
        "masks",
        "msk",
        "msks",
        "annotation",
        "annotations",
        "annot",
        "annots",
        "anno",
        "ann",
        "gt",
        "groundtruth",
        "manual",
        "segmentation",
        "segmentations",
        "seg",
        "segs",
        "trimap",
        "trimaps",
        "target",
        "targets",
        # radiotherapy's structure sets, as DICOM converters name their folders
        "structure",
        "structures",
        "rtstruct",
        "rtstructs",
    ]
)
ROI_WORDS = frozenset(["roi", "rois", "fov"])
IMAGE_WORDS = frozenset(
    [
        "image",
        "images",
        "img",
        "imgs",
        "input",
        "inputs",
        "original",
        "originals",
        "photo",
        "photos",
        "frames",
        "sat",
    ]
)
# A region of interest's words first (roi_masks/), then a mask's (label_images_semantic/)
ROLES = {"roi": ROI_WORDS, "labels": MASK_WORDS, "images": IMAGE_WORDS}
_SPLIT_BY_NAME = {name: split for split, names in SPLIT_FOLDERS.items() for name in names}


def name_parts(name: str) -> list[str]:
    """A name's lower-case parts, split at separators, case changes and digits."""
    return [p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def name_words(name: str) -> frozenset[str]:
    """The lower-case words of a folder's name, split at separators, case changes and
    digits (``ISIC2018_Task1-2_Training_Input``: isic, 2018, task, 1, 2, training,
    input), with each two neighbours joined too (``GroundTruth``: groundtruth) and a split's
    name glued to a role word taken apart (``trainannot``: train, annot)."""
    parts = name_parts(name)
    words = set(parts) | {a + b for a, b in zip(parts, parts[1:], strict=False)}
    for part in parts:
        for split_name in _SPLIT_BY_NAME:
            rest = part.removeprefix(split_name)
            if rest != part and any(rest in w for w in ROLES.values()):
                words |= {split_name, rest}
    return frozenset(words)


# parts of a mask folder's name that say nothing else (labelsTr's tr, 1st_manual's st)
FILLER_PARTS = frozenset(["tr", "ts", "st", "nd", "rd", "th"])


def says_labels_alone(name: str) -> bool:
    """Whether every word of a folder's name says it holds labels, bar a split's name, a
    number and fillers (``masks``, ``segmentations``, ``labelsTr``, ``1st_manual``,
    ``GroundTruth``); ``Kvasir-SEG`` or ``ann_arbor`` say something else too.

    >>> [says_labels_alone(n) for n in ("labelsTr", "GroundTruth", "Kvasir-SEG", "images")]
    [True, True, False, False]
    """
    parts = name_parts(name)
    pairs = {a + b for a, b in zip(parts, parts[1:], strict=False)} & MASK_WORDS
    said = [p in MASK_WORDS or any(p in pair for pair in pairs) for p in parts]
    other = [
        p for p, says in zip(parts, said, strict=True)
        if not says and not p.isdigit() and p not in _SPLIT_BY_NAME and p not in FILLER_PARTS
    ]  # fmt: skip
    return any(said) and not other


# Words that may say mask (PH2's IMD002_lesion/) or picture (skin_lesions/ beside masks/):
# read as masks only where no other folder's name says masks (:func:`weak_mask_name`)
WEAK_MASK_WORDS = frozenset(["lesion", "lesions"])


def role_of(name: str) -> str | None:
    """What a folder of that name holds: "labels", "roi" or "images"; None where its
    name does not say."""
    words = name_words(name)
    return next((role for role, known in ROLES.items() if words & known), None)


def says_mask(name: str) -> bool:
    """Whether a file's name (its kind left out) says it holds a label or a mask: as a
    folder's would, or by its first or last word (``mask_ROI_1``, ``roi_mask``, whose
    other words say region of interest)."""
    words = [w.lower() for w in re.split(r"[_\-. ]+", name) if w]
    return (
        role_of(name) == "labels"
        or bool(words)
        and (words[0] in MASK_WORDS or words[-1] in MASK_WORDS)
    )


def weak_mask_name(name: str) -> bool:
    """A name that says nothing else and a word that may say mask (``IMD002_lesion``):
    the mask folder where no folder beside it says masks."""
    return role_of(name) is None and bool(name_words(name) & WEAK_MASK_WORDS)


def split_of(name: str) -> str | None:
    """The split a folder's name gives (``ISIC2018_Task1-2_Validation_Input``: val); None
    where it gives none, or two."""
    splits = {_SPLIT_BY_NAME[w] for w in name_words(name) if w in _SPLIT_BY_NAME}
    return splits.pop() if len(splits) == 1 else None


def split_named(name: str) -> str | None:
    """The split whose folder ``name`` alone is (``Validation``: val); None otherwise."""
    return _SPLIT_BY_NAME.get(name.lower())


def split_of_file(name: str) -> str | None:
    """The split the first word of a file's name gives (``testA_12.bmp``: test,
    ``train-003.png``: train); None where that word gives none."""
    stem = PurePosixPath(name).stem
    return split_of(re.split(r"[_\-. ]", stem, maxsplit=1)[0])


def splits_of_file_names(names: Sequence[str]) -> list[str] | None:
    """The split of each file that its name's first word gives, where every name gives
    one and they give train and test (GlaS: ``train_``, ``testA_``, ``testB_``; val too,
    or drawn from train); None otherwise: names that all begin with ``train`` say nothing
    of a split, and names of train and val alone would leave the run no test split (drawn
    instead, as before)."""
    splits = [split_of_file(n) for n in names]
    if None in splits or not {"train", "test"} <= set(splits):
        return None
    return splits  # type: ignore[return-value]
