"""VGG Image Annotator's files, read as masks: the JSON file VIA exports of its regions
(``via_region_data.json``, ``via_export_json.json``: each image's ``filename`` and
``regions``) or its project file (``_via_img_metadata``), as the Mask R-CNN tutorials'
balloon dataset ships them, so that such a folder trains with no conversion.

* **Where**: the VIA files in ``data.root``, its split folders (``train/``, ``val/``)
  and its annotations folder, the images beside each file (else by name below
  ``data.root``). A file's split is its folder's, else its images' split folders; an
  image listed twice is refused, and so is a VIA 3 project (another schema).
* **Masks**: polygons, rectangles, circles and ellipses (rotated where VIA rotated
  them) are drawn as COCO's objects are (:func:`segnet.data.coco.draw_mask`), larger
  ones first, so that a smaller one lying on a larger keeps its class. Polylines and
  points outline no area: counted in a warning, not drawn.
* **Classes**: a region's class is its attribute named as a class (:data:`CLASS_KEYS`,
  any case), else the one attribute of choices a project file declares; a region where
  it is empty is void, said. With neither (the balloon dataset's regions), every region
  is one class, ``foreground``, as black-and-white masks name it. Background (mask
  value 0), then the classes in the order a project file's options list them, else in
  name order.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from segnet.data.class_files import ShippedClasses
from segnet.data.coco import draw_mask
from segnet.data.drawn_masks import (
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    image_index,
    image_of,
    json_file,
    mask_path,
    name_below,
    say_missing,
    split_of_folders,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named

DRAWING = "via-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
CLASS_KEYS = ("class", "label", "name", "type", "category", "object")  # several: in order
UNNAMED = "foreground"  # the class of regions with no attribute, as binary masks name it
UNCLASSED = "__ignore__"  # a region whose class attribute is empty: not known, so void
ANNOTATION_FOLDERS = ("annotations", "annotation", "anns")
CURVE_POINTS = 64  # a circle or an ellipse drawn as a polygon of so many corners
log = logging.getLogger(__name__)


def entries(path: Path) -> list[dict[str, Any]] | None:
    """The images of the VIA file at ``path`` (each its ``filename`` and ``regions``);
    None for a JSON file of anything else."""
    found = json_file(path)
    if isinstance(found, dict) and isinstance(found.get("_via_img_metadata"), dict):
        found = found["_via_img_metadata"]  # a project file
    if not isinstance(found, dict) or not found:
        return None
    values = list(found.values())
    is_via = all(isinstance(v, dict) and {"filename", "regions"} <= v.keys() for v in values)
    return values if is_via else None


def annotation_files(root: Path) -> list[Path]:
    """The VIA files in ``root``, its split folders and its annotations folder, in path
    order; a file of VIA 3, whose schema is another, is refused."""
    if not root.is_dir():
        return []
    places = [root] + sorted(
        d for d in root.iterdir()
        if d.is_dir() and (split_named(d.name) or d.name.lower() in ANNOTATION_FOLDERS)
    )  # fmt: skip
    files = [f for place in places for f in sorted(place.glob("*.json")) if f.is_file()]
    for f in files:
        found = json_file(f)
        if isinstance(found, dict) and {"project", "file", "metadata"} <= found.keys():
            raise ImageDataError(
                f"{f} is a VGG Image Annotator 3 project, which is not read: export its "
                "annotations as COCO from VIA 3 (read with no setting), or annotate with "
                "VIA 2 (via_region_data.json)."
            )
    return [f for f in files if entries(f)]


def regions_of(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """An image's regions: a list (VIA 2), or a dict of them by number (VIA 1)."""
    regions = entry.get("regions") or []
    return list(regions.values()) if isinstance(regions, dict) else list(regions)


# -- classes --------------------------------------------------------------------------------
def class_key(files: Sequence[Path]) -> str | None:
    """The region attribute that names the class: the first of :data:`CLASS_KEYS` (in
    any case) the regions have, else the one attribute of choices (a dropdown, radio
    or checkbox) a project file declares; None where neither is (every region is then
    :data:`UNNAMED`, whatever other attributes, a note, say)."""
    keys = {k for f in files for e in entries(f) or [] for r in regions_of(e)
            for k in (r.get("region_attributes") or {})}  # fmt: skip
    by_lower = {k.strip().lower(): k for k in sorted(keys)}
    chosen = next((by_lower[k] for k in CLASS_KEYS if k in by_lower), None)
    if chosen is None:
        choices = {k for f in files for k, a in declared(f).items() if a.get("options")}
        chosen = next(iter(choices)) if len(choices) == 1 else None
    if chosen is None and keys:
        log.info(
            "the VIA regions' attributes (%s) name no class (%s): every region is one "
            "class, %s", ", ".join(sorted(keys)), ", ".join(CLASS_KEYS), UNNAMED,
        )  # fmt: skip
    return chosen


def declared(path: Path) -> dict[str, dict[str, Any]]:
    """The region attributes a VIA project file declares (none in an export)."""
    found = json_file(path)
    attributes = found.get("_via_attributes") if isinstance(found, dict) else None
    region = attributes.get("region") if isinstance(attributes, dict) else None
    return {k: a for k, a in (region or {}).items() if isinstance(a, dict)}


def label_of(region: dict[str, Any], key: str | None, path: Path) -> str:
    """A region's class: its ``key`` attribute's value (a checkbox's one ticked option);
    :data:`UNCLASSED` (void) where that is empty, :data:`UNNAMED` where there is no
    ``key``."""
    value = (region.get("region_attributes") or {}).get(key) if key else None
    if isinstance(value, dict | list):  # a checkbox's {option: true}, a list of values
        ticked = [k for k, on in value.items() if on] if isinstance(value, dict) else value
        if len(ticked) > 1:
            raise ImageDataError(
                f"{path}: a region's {key} is {ticked}: a region is of one class, so give it one."
            )
        value = ticked[0] if ticked else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1.0 and 1: one class
    value = str(value).strip() if value is not None else ""
    return value or (UNCLASSED if key else UNNAMED)


def class_list(files: Sequence[Path]) -> list[str]:
    """The classes in the order a project file's attribute options list them, else in
    name order."""
    key = class_key(files)
    labels = {label_of(r, key, f) for f in files for e in entries(f) or [] for r in regions_of(e)}
    for f in files:
        listed = [str(o) for o in ((declared(f).get(key) or {}).get("options") or {})]
        if listed and labels - {UNCLASSED} <= set(listed):
            return listed + sorted(labels - set(listed))
    return sorted(labels)


def via_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s VIA files, by mask value, void last; None where it has
    none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    return drawn_classes(f"the regions of {files[0]}", class_list(files))


# -- drawing --------------------------------------------------------------------------------
def outline(shape: dict[str, Any]) -> list[float] | None:
    """A region's outline as a polygon ``[x0, y0, x1, y1, ...]`` in pixels; None for a
    shape of no area (a polyline, a point) or one missing its numbers."""
    kind = shape.get("name")
    try:
        if kind == "polygon":
            xs, ys = shape["all_points_x"], shape["all_points_y"]
            return (
                [float(v) for xy in zip(xs, ys, strict=True) for v in xy] if len(xs) >= 3 else None
            )
        if kind == "rect":
            x, y, w, h = (float(shape[k]) for k in ("x", "y", "width", "height"))
            return [x, y, x + w, y, x + w, y + h, x, y + h]
        if kind in ("circle", "ellipse"):
            cx, cy = float(shape["cx"]), float(shape["cy"])
            rx = float(shape["r"] if kind == "circle" else shape["rx"])
            ry = float(shape["r"] if kind == "circle" else shape["ry"])
            turn = float(shape.get("theta") or 0)
            corners = [2 * math.pi * k / CURVE_POINTS for k in range(CURVE_POINTS)]
            return [
                v for a in corners for v in (
                    cx + rx * math.cos(a) * math.cos(turn) - ry * math.sin(a) * math.sin(turn),
                    cy + rx * math.cos(a) * math.sin(turn) + ry * math.sin(a) * math.cos(turn),
                )
            ]  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None
    return None


def objects_of(regions: Sequence[dict], key: str | None, path: Path) -> list:
    """An image's regions with an area as the objects :func:`segnet.data.coco.draw_mask`
    draws (their label as their category)."""
    objects = []
    for region in regions:
        polygon = outline(region.get("shape_attributes") or {})
        if polygon is None:
            continue
        xs, ys = polygon[0::2], polygon[1::2]
        area = 0.5 * abs(sum(xs[k - 1] * ys[k] - xs[k] * ys[k - 1] for k in range(len(xs))))
        label = label_of(region, key, path)
        objects.append({"category_id": label, "segmentation": [polygon], "area": area})
    return objects


# -- the images -----------------------------------------------------------------------------
def via_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every image ``root``'s VIA files list and the folder holds, each with its mask
    (drawn now, or found drawn in the cache) of ``class_names`` (given, or the files'
    own: :func:`via_classes`); ``images`` are the image files below ``root``. An image
    listed twice (in two files, or twice in one) is refused."""
    files = annotation_files(root)
    names = list(class_names or via_classes(root).class_names)
    values = values_by_name(class_list(files), names, f"the regions of {files[0]}")
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
    by_name, key = image_index(images), class_key(files)
    found: dict[Path, AnnotatedImage] = {}
    listed_in: dict[Path, Path] = {}
    said = {"undrawn": 0, "void": 0, "outside": 0, "resaved": 0, "example": None}
    for f in files:
        listed, missing = entries(f) or [], []
        for entry in listed:
            image = image_of(_file_name(entry["filename"]), [f.parent, root], by_name)
            if image is None:
                missing.append(entry["filename"])
                continue
            if image in listed_in:
                raise ImageDataError(
                    f"{image} is listed in {listed_in[image]} and again in {f}: keep one VIA "
                    "file (or one entry) per image."
                )
            listed_in[image] = f
            split = (
                split_named(f.parent.name) if f.parent != root else split_of_folders(root, image)
            )
            found[image] = _annotated(root, f, entry, image, split, key, values, folder, said)
        say_missing(f, len(listed), missing, len(listed) - len(missing),
                    "put the images beside the file, under the names it gives.")  # fmt: skip
    _say_what_was_left(files, images, list(found.values()), key, said)
    return list(found.values())


def _file_name(name: str) -> str:
    """An entry's file name as a path: a URL's without its query, unquoted."""
    return unquote(str(name).split("?")[0]) if "://" in str(name) else str(name)


def _annotated(
    root: Path, f: Path, entry: dict, image: Path, split: str | None, key: str | None,
    values: dict[str, int], folder: Path, said: dict,
) -> AnnotatedImage:  # fmt: skip
    """One listed image with its mask, drawn where the cache has none; what was left
    undrawn or void counted into ``said``."""
    name, regions = name_below(root, image), regions_of(entry)
    outlines = [outline(r.get("shape_attributes") or {}) for r in regions]
    said["undrawn"] += sum(o is None for o in outlines)
    void = sum(label_of(r, key, f) == UNCLASSED for r in regions)
    said["void"] += void
    said["example"] = said["example"] or (image if void else None)
    mask = mask_path(folder, name)
    if not mask.is_file():  # each written whole: one there was drawn from this file
        height, width = check_size(f, entry["filename"], image, None, None)
        said["outside"] += sum(
            o is not None and (max(o[0::2]) > 1.01 * width or max(o[1::2]) > 1.01 * height)
            for o in outlines
        )  # fmt: skip
        size = entry.get("size")
        said["resaved"] += isinstance(size, int) and size > 0 and size != image.stat().st_size
        write_mask(mask, draw_mask(height, width, objects_of(regions, key, f), values)[0])
    areas = sum(o is not None for o in outlines)
    return AnnotatedImage(name, image, mask, split, areas)


def _say_what_was_left(
    files: list[Path], images: Sequence[Path], found: list, key: str | None, said: dict
) -> None:
    if not any(a.objects for a in found):
        raise ImageDataError(
            f"the VIA file(s) {', '.join(map(str, files))} outline no region: draw the "
            "regions first (polygons, rectangles, circles or ellipses)."
        )
    if said["undrawn"]:
        log.warning(
            "%d VIA region(s) of %s outline no area (polylines, points, polygons of fewer "
            "than three points or of unequal x and y lists): not drawn.", said["undrawn"],
            ", ".join(map(str, files)),
        )  # fmt: skip
    if said["void"]:
        log.warning(
            "%d VIA region(s) have no %s (e.g. on %s): void, neither trained nor scored; "
            "give them their class in VIA.", said["void"], key, said["example"],
        )  # fmt: skip
    if said["outside"] or said["resaved"]:
        log.warning(
            "%d VIA region(s) reach past their image's edge, and %d image(s) are not the "
            "size in bytes the VIA file gives: are these the images annotated (resized "
            "since?)", said["outside"], said["resaved"],
        )  # fmt: skip
    folders = {f.parent for f in files}
    unlisted = sorted({i for i in images if i.parent in folders} - {a.image for a in found})
    if unlisted:
        log.warning(
            "%d image(s) beside the VIA files are in none (e.g. %s): left out (nobody "
            "outlined them).", len(unlisted), unlisted[0],
        )  # fmt: skip
