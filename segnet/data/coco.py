"""COCO-format annotation files, read as masks: what CVAT, Label Studio, Roboflow and COCO
itself export (a JSON file of ``images``, ``annotations`` and ``categories``), so that a
folder of images annotated with outlines trains with no mask files and no class settings.

* **Where**: a JSON file in ``data.root``, in its ``annotations/`` folder, or in a split
  folder beside the images (Roboflow's ``train/_annotations.coco.json``). A file's split
  is its folder's (``valid/``) or its name's (``instances_val2017.json``); a file of
  neither (CVAT's ``instances_default.json``) leaves the splits to be drawn. Only where
  no layout of mask images reads the folder (:func:`segnet.data.image_pairs.
  drawn_masks_root`): masks, where a folder holds both, are what is read. Files of
  keypoints or panoptic segments are not read, and beside COCO's own ``instances_``
  files neither are its ``stuff_`` files.
* **Images**: each file name is looked for beside the JSON file, in ``data.root`` and in
  its ``images/`` folder, then by its name alone anywhere below ``data.root`` (COCO's
  ``train2017/``; Label Studio's upload paths). Images the file lists and the folder
  lacks are left out, counted in a warning; a file none of whose images is there is
  refused.
* **Masks**: each image's objects are drawn into a mask of class numbers with
  pycocotools (polygons and run-length crowd regions, as COCO's own tools draw them),
  larger objects first, so that a smaller one lying on a larger keeps its class (where
  objects of two classes overlap, the log counts the images). An object with no outline,
  a box alone, is void over its box: neither trained nor scored, never background.
* **Classes**: background (mask value 0), then the categories in order of their ids; a
  category that is only the others' supercategory and has no object of its own
  (Roboflow's dataset name) is no class, and one named as void (``ignore``) is void.
  Every file must list the same categories, each name once.
* The masks are drawn once and kept in the cache (``~/.cache/segnet/coco-masks``, beside
  the statistics of :mod:`segnet.data.stats_cache`), never in the data folder: keyed by
  the annotation files' paths, sizes and times, so that an edited file is drawn afresh.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from segnet.data.class_files import ShippedClasses
from segnet.data.drawn_masks import (
    VOID,
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    image_index,
    image_of,
    json_file,
    mask_path,
    name_below,
    polygon_pixels,
    say_missing,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named, split_of

COCO_KEYS = frozenset({"images", "annotations", "categories"})
ANNOTATION_FOLDERS = ("annotations", "annotation", "anns")
DRAWING = "coco-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CocoFile:
    path: Path
    split: str | None  # its folder's or its name's; None: drawn


# -- finding the files ------------------------------------------------------------------
def parsed(path: Path) -> dict[str, Any] | None:
    """The COCO file at ``path`` as read; None for a JSON file of anything else."""
    found = json_file(path)
    return found if isinstance(found, dict) and found.keys() >= COCO_KEYS else None


def annotation_files(root: Path, say: bool = False) -> list[CocoFile]:
    """The COCO files in ``root``, its annotations folder and its split folders, in path
    order; none where a folder of mask images is there (its masks are read instead)."""
    if not root.is_dir():
        return []
    places = [root]
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if d.name.lower() in ANNOTATION_FOLDERS or split_named(d.name):
            places.append(d)
    found = []
    for place in places:
        for f in sorted(place.glob("*.json")):
            if f.is_file() and parsed(f) is not None and outlines_objects(parsed(f)):
                split = split_named(place.name) if place != root else None
                found.append(CocoFile(f, split or split_of(f.stem.removesuffix(".coco"))))
    # COCO's own folder holds instances_ (things) beside stuff_ files of other categories
    instances = [f for f in found if f.path.name.lower().startswith("instances_")]
    if say and instances and len(instances) < len(found):
        log.info(
            "COCO's instances files are read (%s); the others are not: %s",
            ", ".join(f.path.name for f in instances),
            ", ".join(f.path.name for f in found if f not in instances),
        )  # fmt: skip
    return instances or found


def outlines_objects(coco: dict[str, Any]) -> bool:
    """Whether a COCO file outlines objects: not one of keypoints (``person_keypoints``)
    nor of panoptic segments, whose outlines are in PNG files of their own."""
    first = next(iter(coco["annotations"]), {})
    return "keypoints" not in first and "segments_info" not in first


# -- classes --------------------------------------------------------------------------------
def categories(files: Sequence[CocoFile]) -> list[tuple[int, str]]:
    """The classes' categories, ``(id, name)`` in order of id, that every file lists
    alike (:func:`kept_categories`); files that list others are refused, naming two."""
    read = [(f.path, parsed(f.path) or {}) for f in files]
    used = {obj.get("category_id") for _, coco in read for obj in coco["annotations"]}
    lists = [(path, kept_categories(coco["categories"], used)) for path, coco in read]
    first_path, first = lists[0]
    names = [n.strip().lower() for _, n in first]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        ids = [i for i, n in first if n.strip().lower() == twice[0]]
        raise ImageDataError(
            f"{first_path} lists two categories named {twice[0]} (ids {ids[0]} and {ids[1]}): "
            "a class is named by its category, so rename one (or merge them) and export again."
        )
    for path, other in lists[1:]:
        if other != first:
            raise ImageDataError(
                f"{first_path} and {path} list different categories "
                f"({', '.join(n for _, n in first)} against {', '.join(n for _, n in other)}): "
                "export every split with the same categories."
            )
    return first


def kept_categories(listed: list[dict[str, Any]], used: set[Any]) -> list[tuple[int, str]]:
    """Categories in order of id, without those that are only other categories'
    supercategory and hold no object in any file (Roboflow lists its dataset's name so;
    COCO's person, its own supercategory, is a class however rare)."""
    cats = sorted((int(c["id"]), str(c["name"])) for c in listed)
    parents = {str(c.get("supercategory")) for c in listed if c.get("supercategory") != c["name"]}
    return [(i, n) for i, n in cats if i in used or n not in parents]


def coco_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s COCO files (:func:`annotation_files`), by mask value,
    void last; None where it has none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    source = ", ".join(str(f.path) for f in files[:2]) + (" ..." if len(files) > 2 else "")
    return drawn_classes(f"the categories of {source}", [n for _, n in categories(files)])


# -- drawing ------------------------------------------------------------------------------
def object_pixels(segmentation: Any, height: int, width: int) -> np.ndarray | None:
    """The pixels an object's outline covers (polygons, or run lengths as COCO writes a
    crowd; or the pixels themselves, as a reader decoded them), as a boolean array; None
    where it has no outline."""
    from pycocotools import mask as coco_mask

    if isinstance(segmentation, np.ndarray):
        if segmentation.shape != (height, width):
            raise ValueError(f"its pixels are of size {segmentation.shape}")
        return segmentation.astype(bool)
    if isinstance(segmentation, list):
        polygons = [p for p in segmentation if len(p) >= 6]  # three points or more
        return polygon_pixels(polygons, height, width) if polygons else None
    if isinstance(segmentation, dict) and "counts" in segmentation:
        if list(segmentation.get("size", [])) != [height, width]:
            raise ValueError(f"its run lengths are of size {segmentation.get('size')}")
        counts = segmentation["counts"]
        rle = (
            coco_mask.frPyObjects(segmentation, height, width)
            if isinstance(counts, list)
            else {
                "size": [height, width],
                "counts": counts.encode() if isinstance(counts, str) else counts,
            }
        )
        return coco_mask.decode(rle).astype(bool)
    return None


def draw_mask(
    height: int, width: int, objects: Sequence[dict[str, Any]], values: dict[int, int]
) -> tuple[np.ndarray, bool]:
    """The mask of one image's ``objects``, larger ones first; and whether objects of
    two classes overlap. An object of a category that is no class is refused."""
    mask = np.zeros((height, width), np.uint8)
    overlap = False
    for obj in sorted(objects, key=area, reverse=True):
        value = values.get(obj.get("category_id"))
        if value is None:
            raise ValueError(f"its category_id {obj.get('category_id')} is no category listed")
        pixels = object_pixels(obj.get("segmentation"), height, width)
        if pixels is None:  # a box alone: not known to be background, so void
            x, y, w, h = obj.get("bbox") or (0, 0, 0, 0)
            rows = slice(max(0, math.floor(y)), max(0, math.ceil(y + h)))
            cols = slice(max(0, math.floor(x)), max(0, math.ceil(x + w)))
            mask[rows, cols] = VOID
            continue
        under = mask[pixels]
        overlap = overlap or bool(np.any((under != 0) & (under != VOID) & (under != value)))
        mask[pixels] = value
    return mask, overlap


def area(obj: dict[str, Any]) -> float:
    if obj.get("area"):
        return float(obj["area"])
    box = obj.get("bbox") or (0, 0, 0, 0)
    return float(box[2]) * float(box[3])


# -- the images -----------------------------------------------------------------------------
def annotated_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every image ``root``'s COCO files list and the folder holds, each with its mask
    (drawn now, or found drawn in the cache) of ``class_names`` (given, or the files'
    own: :func:`coco_classes`); ``images`` are the image files below ``root``."""
    files = annotation_files(root, say=True)
    names = list(class_names or coco_classes(root).class_names)
    cats = categories(files)
    by_label = values_by_name([n for _, n in cats], names, f"{files[0].path.parent}'s COCO files")
    values = {cat_id: by_label[name] for cat_id, name in cats}
    folder = cache_folder(DRAWING, [f.path for f in files], values)
    if not folder.is_dir():
        log.info("drawing the masks of %s's COCO files, once, into %s", root, folder)
    by_name = image_index(images)
    found: list[AnnotatedImage] = []
    listed_in: dict[Path, Path] = {}
    for f in files:
        for a in _file_images(root, f, values, folder, by_name):
            if a.image in listed_in:  # in train's file and in val's: a leak between splits
                raise ImageDataError(
                    f"{a.image} is listed in {listed_in[a.image]} and again in {f.path}: an "
                    "image is read from one file (one split). Remove it from one of them, or "
                    "merge the files where each holds other categories of the same images."
                )
            listed_in[a.image] = f.path
            found.append(a)
    return found


def _file_images(
    root: Path, f: CocoFile, values: dict[int, int], folder: Path, by_name: dict[str, Path]
) -> list[AnnotatedImage]:
    coco = parsed(f.path) or {}
    objects: dict[Any, list[dict[str, Any]]] = {}
    for obj in coco["annotations"]:
        objects.setdefault(obj.get("image_id"), []).append(obj)
    places = list(dict.fromkeys([f.path.parent, root, f.path.parent.parent, root / "images"]))
    found, missing, overlapping, boxes = [], [], 0, 0
    for entry in coco["images"]:
        image = image_of(entry["file_name"], places, by_name)
        if image is None:
            missing.append(entry["file_name"])
            continue
        name = name_below(root, image)
        mask = mask_path(folder, name)
        own = objects.get(entry["id"], [])
        outlined = sum(_outlined(o) for o in own)
        boxes += len(own) - outlined
        if not mask.is_file():  # each written whole: one there was drawn from this file
            overlapping += _draw_one(f.path, entry, image, own, values, mask)
        found.append(AnnotatedImage(name, image, mask, f.split, outlined))
    _say_what_was_left(f.path, len(coco["images"]), missing, found, overlapping, boxes)
    return found


def _outlined(obj: dict[str, Any]) -> bool:
    seg = obj.get("segmentation")
    return bool(seg) and not (isinstance(seg, list) and all(len(p) < 6 for p in seg))


def _draw_one(
    path: Path, entry: dict[str, Any], image: Path, objects: list, values: dict, mask: Path
) -> bool:
    height, width = check_size(
        path, entry["file_name"], image, entry.get("height"), entry.get("width")
    )
    try:
        drawn, overlap = draw_mask(height, width, objects, values)
    except (ValueError, TypeError, KeyError) as err:
        raise ImageDataError(
            f"{path}: an object of {entry['file_name']} cannot be drawn: {err}."
        ) from None
    write_mask(mask, drawn)
    return overlap


def _say_what_was_left(
    path: Path, listed: int, missing: list[str], found: list, overlapping: int, boxes: int
) -> None:
    say_missing(
        path, listed, missing, len(found),
        "put the images beside the file, in an images/ folder, or anywhere below data.root "
        "under the names the file gives.",
    )  # fmt: skip
    if overlapping:
        log.info(
            "%s: in %d image(s) objects of two classes overlap: the smaller object's class "
            "is kept where they do.", path, overlapping,
        )  # fmt: skip
    if boxes and not any(a.objects for a in found):
        raise ImageDataError(
            f"{path}: its {boxes} objects are boxes with no outline, as a detection dataset's "
            "are: segmentation trains on outlines (polygons or run lengths). Export the "
            "annotations as polygons or masks."
        )
    if boxes:
        log.warning(
            "%s: %d object(s) have a box and no outline: their boxes are void (neither "
            "trained nor scored).", path, boxes,
        )  # fmt: skip
