"""The annotation formats whose outlines are drawn into masks, one entry each, in the
order a folder is tried for them: adding a format is one line here and a module that
reads it (:mod:`segnet.data.coco` is the pattern: its files, its classes, its images
each with a drawn mask)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from segnet.data import (
    coco,
    cvat_xml,
    label_studio,
    labelme,
    run_length,
    supervisely,
    via,
    yolo,
)
from segnet.data.class_files import ShippedClasses
from segnet.data.drawn_masks import AnnotatedImage

LISTED = 3  # annotation files named in the log before the rest are counted


class AnnotationFormat(NamedTuple):
    name: str  # as the log names it
    files: Callable[[Path], list[Path]]  # the format's files below a root; [] for none
    classes: Callable[[Path | None], ShippedClasses | None]  # background first, void last
    # every image the files name and the folder holds, with its mask, of the classes given
    images: Callable[[Path, Sequence[Path], Sequence[str] | None], list[AnnotatedImage]]
    # folders of the masks the format exports itself, in colours that name no class:
    # beside its files, no mask images (masks a user brings win over the files)
    own_masks: tuple[str, ...] = ()
    # the data settings (data.<name>) its images' reader takes as keywords besides
    settings: tuple[str, ...] = ()


# Tried in this order, the first whose files a folder holds read. No file is two formats'
# (COCO's and VIA's are JSON objects of other keys, Label Studio's a JSON list, LabelMe's
# one object per image, Supervisely's below ann/, a run-length CSV's header no column of
# VIA's CSV), so the order decides only for a folder holding two formats' files, and
# speed: YOLO's, which walks every folder below, last.
FORMATS = (
    AnnotationFormat(
        "COCO",
        lambda root: [f.path for f in coco.annotation_files(root)],
        coco.coco_classes,
        coco.annotated_images,
    ),
    AnnotationFormat(
        "CVAT", cvat_xml.annotation_files, cvat_xml.cvat_classes, cvat_xml.cvat_images
    ),
    AnnotationFormat(
        "Supervisely",
        supervisely.annotation_files,
        supervisely.supervisely_classes,
        supervisely.supervisely_images,
        own_masks=supervisely.OWN_MASKS,
    ),
    AnnotationFormat(
        "LabelMe", labelme.annotation_files, labelme.labelme_classes, labelme.labelled_images
    ),
    AnnotationFormat("VIA", via.annotation_files, via.via_classes, via.via_images),
    AnnotationFormat(
        "Label Studio",
        label_studio.annotation_files,
        label_studio.label_studio_classes,
        label_studio.label_studio_images,
    ),
    AnnotationFormat(
        "run-length CSV",
        run_length.annotation_files,
        run_length.run_length_classes,
        run_length.run_length_images,
        settings=("rle_order", "trained_mask_classes"),
    ),
    AnnotationFormat("YOLO", yolo.annotation_files, yolo.yolo_classes, yolo.yolo_images),
)


def format_of(root: Path) -> tuple[AnnotationFormat, list[Path]] | None:
    """The first format (:data:`FORMATS`) ``root`` holds files of, and those files; None
    where it holds none."""
    for found in FORMATS:
        if files := found.files(root):
            return found, files
    return None


def annotation_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s annotation files, by mask value; None where it has none."""
    found = format_of(root) if root is not None and root.is_dir() else None
    return found[0].classes(root) if found else None


def described(root: Path, fmt: AnnotationFormat, files: Sequence[Path]) -> str:
    """The files masks were drawn from, as the log names them: the first few below
    ``root``, the rest counted."""
    names = [os.path.relpath(f, root) for f in files[:LISTED]]
    more = f" and {len(files) - LISTED} more" if len(files) > LISTED else ""
    return f"{fmt.name}'s {'file' if len(files) == 1 else 'files'} {', '.join(names)}{more}"
