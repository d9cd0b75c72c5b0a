"""VGG Image Annotator's files, read as masks: the JSON file VIA exports of its regions
(``via_region_data.json``, ``via_export_json.json``: each image's ``filename`` and
``regions``) or its project file (``_via_img_metadata``), as the Mask R-CNN tutorials'
balloon dataset ships them, so that such a folder trains with no conversion.

* **Where**: the VIA files in ``data.root`` and its split folders (``train/``,
  ``val/``), the images beside each file (else by name below ``data.root``). A file's
  split is its folder's; a file in ``data.root`` leaves the splits to be drawn.
* **Masks**: polygons, rectangles, circles and ellipses (rotated where VIA rotated
  them) are drawn as COCO's objects are (:func:`segnet.data.coco.draw_mask`), larger
  ones first, so that a smaller one lying on a larger keeps its class. Polylines and
  points outline no area: counted in a warning, not drawn.
* **Classes**: each region's class is its one region attribute's value (``class``,
  ``label``, ``name``, ``type`` or ``category`` where there are several; a region
  where it is empty is void); regions with no attribute at all (the balloon dataset's)
  are one class, ``foreground``, as black-and-white masks name it. Background (mask value 0), then the classes in the
  order the project file's attribute options list them, else in name order.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named

DRAWING = "via-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
CLASS_KEYS = ("class", "label", "name", "type", "category", "object")  # several: in order
UNNAMED = "foreground"  # the class of regions with no attribute, as binary masks name it
UNCLASSED = "__ignore__"  # a region whose class attribute is empty: not known, so void
AREAS = ("polygon", "rect", "circle", "ellipse")
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
    """The VIA files in ``root`` and its split folders, in path order."""
    if not root.is_dir():
        return []
    places = [root, *sorted(d for d in root.iterdir() if d.is_dir() and split_named(d.name))]
    return [f for place in places for f in sorted(place.glob("*.json")) if entries(f)]


def regions_of(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """An image's regions: a list (VIA 2), or a dict of them by number (VIA 1)."""
    regions = entry.get("regions") or []
    return list(regions.values()) if isinstance(regions, dict) else list(regions)


# -- classes --------------------------------------------------------------------------------
def class_key(files: Sequence[Path]) -> str | None:
    """The region attribute that names the class: the only one, else the first of
    :data:`CLASS_KEYS` there; None where regions have none. Others are refused."""
    keys = sorted({k for f in files for e in entries(f) or [] for r in regions_of(e)
                   for k in (r.get("region_attributes") or {})})  # fmt: skip
    if len(keys) <= 1:
        return keys[0] if keys else None
    chosen = next((k for k in CLASS_KEYS if k in keys), None)
    if chosen is None:
        raise ImageDataError(
            f"{files[0]}: its regions have the attributes {', '.join(keys)}, and none is "
            f"named as a class ({', '.join(CLASS_KEYS)}): rename the one naming the class."
        )
    return chosen


def label_of(region: dict[str, Any], key: str | None, path: Path) -> str:
    """A region's class: its ``key`` attribute's value (a checkbox's one ticked option);
    :data:`UNCLASSED` (void) where that is empty, :data:`UNNAMED` where there is no
    ``key``."""
    value = (region.get("region_attributes") or {}).get(key) if key else None
    if isinstance(value, dict):  # a checkbox attribute: {option: true, ...}
        ticked = [k for k, on in value.items() if on]
        if len(ticked) != 1:
            raise ImageDataError(
                f"{path}: a region's {key} ticks {ticked or 'no option'}: a region is of one "
                "class, so tick one."
            )
        value = ticked[0]
    value = str(value).strip() if value is not None else ""
    return value or (UNCLASSED if key else UNNAMED)


def class_list(files: Sequence[Path]) -> list[str]:
    """The classes in the order a project file's attribute options list them, else in
    name order."""
    key = class_key(files)
    labels = {label_of(r, key, f) for f in files for e in entries(f) or [] for r in regions_of(e)}
    for f in files:
        options = ((json_file(f) or {}).get("_via_attributes") or {}).get("region") or {}
        listed = list(((options.get(key) or {}).get("options") or {}) if key else [])
        if listed and labels <= set(listed):
            return listed
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
    own: :func:`via_classes`); ``images`` are the image files below ``root``."""
    files = annotation_files(root)
    names = list(class_names or via_classes(root).class_names)
    labels = class_list(files)
    values = values_by_name(labels, names, f"the regions of {files[0]}")
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
    by_name, key = image_index(images), class_key(files)
    found, undrawn = [], 0
    for f in files:
        split = split_named(f.parent.name) if f.parent != root else None
        listed = entries(f) or []
        missing = []
        for entry in listed:
            image = image_of(entry["filename"], [f.parent, root], by_name)
            if image is None:
                missing.append(entry["filename"])
                continue
            name, regions = name_below(root, image), regions_of(entry)
            mask = mask_path(folder, name)
            areas = sum(outline(r.get("shape_attributes") or {}) is not None for r in regions)
            undrawn += len(regions) - areas
            if not mask.is_file():  # each written whole: one there was drawn from this file
                height, width = check_size(f, entry["filename"], image, None, None)
                write_mask(mask, draw_mask(height, width, objects_of(regions, key, f), values)[0])
            found.append(AnnotatedImage(name, image, mask, split, areas))
        say_missing(f, len(listed), missing, len(listed) - len(missing),
                    "put the images beside the file, under the names it gives.")  # fmt: skip
    if undrawn:
        log.warning("%d VIA region(s) outline no area (polylines, points): not drawn.", undrawn)
    folders = {f.parent for f in files}
    unlisted = sorted({i for i in images if i.parent in folders} - {a.image for a in found})
    if unlisted:
        log.warning(
            "%d image(s) beside the VIA files are in none (e.g. %s): left out (nobody "
            "outlined them).", len(unlisted), unlisted[0],
        )  # fmt: skip
    return found
