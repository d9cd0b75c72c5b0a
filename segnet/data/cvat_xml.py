"""CVAT's own annotation file, read as masks: ``annotations.xml`` as CVAT exports a task, a
job or a project in its default format, *CVAT for images* (an ``<image>`` per picture
holding its ``<polygon>``, ``<box>``, ``<ellipse>`` and ``<mask>`` shapes, the labels
listed in ``<meta>``), so that a folder exported from CVAT trains with no conversion.

* **Where**: an XML file of CVAT's in ``data.root`` or its ``annotations/`` folder, the
  images in ``images/`` beside it (or wherever their names are found below
  ``data.root``). A project's ``subset`` (``Train``, ``Validation``, ``Test``) is the
  image's split; ``default`` leaves it to be drawn.
* **Masks**: shapes are drawn in CVAT's order, by their ``z_order`` and then as listed,
  as CVAT's own *Segmentation mask* export draws them; polygons with pycocotools, as
  COCO's. Boxes and ellipses are areas (rotated where CVAT rotated them); polylines,
  points and skeletons outline none and are counted in a warning.
* **Classes**: the background (mask value 0), then the labels in the order ``<meta>``
  lists them (:func:`segnet.data.drawn_masks.drawn_classes`).
* A file of *CVAT for video* (``<track>`` elements, frames interpolated) is refused:
  export the images' format.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree
from xml.etree.ElementTree import Element

import numpy as np

from segnet.data.class_files import ShippedClasses
from segnet.data.drawn_masks import (
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    image_index,
    image_of,
    mask_path,
    name_below,
    polygon_pixels,
    say_missing,
    values_by_name,
    write_mask,
    xml_file,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_of
from segnet.data.name_rules import IMAGE_SUFFIXES

DRAWING = "cvat-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
AREAS = ("polygon", "box", "ellipse", "mask")
log = logging.getLogger(__name__)


def parsed(path: Path) -> Element | None:
    """CVAT's file at ``path``, as read; None for an XML file of anything else."""
    found = xml_file(path)
    is_cvat = found is not None and found.tag == "annotations" and found.find("meta") is not None
    return found if is_cvat else None


def annotation_files(root: Path) -> list[Path]:
    """CVAT's XML files in ``root`` and its ``annotations/`` folder (its
    ``annotations.xml``: Pascal VOC's ``Annotations/`` of a box file per image is not
    read through), in path order. One whose first element says CVAT's and that does
    not parse (cut short) is refused, named."""
    if not root.is_dir():
        return []
    folders = [d for d in root.iterdir() if d.is_dir() and d.name.lower() == "annotations"]
    files = [*sorted(root.glob("*.xml")), *(d / "annotations.xml" for d in folders)]
    found = [f for f in files if f.is_file() and is_cvat_file(f)]
    for f in found:
        doc = parsed(f)
        if doc.find("track") is not None and doc.find("image") is None:
            raise ImageDataError(
                f"{f} is in CVAT's format for video (tracks of frames): export the task as "
                "'CVAT for images 1.1' (or as COCO), and point data.root at that."
            )
    return found


def is_cvat_file(path: Path) -> bool:
    """Whether ``path``'s first element is CVAT's ``<annotations>`` (read alone, before
    the whole file is), and the file parses."""
    try:
        first = next(ElementTree.iterparse(path, events=("start",)))[1]
    except (ElementTree.ParseError, OSError, StopIteration):
        return False
    if first.tag != "annotations":
        return False
    if parsed(path) is None:
        try:
            ElementTree.parse(path)
        except ElementTree.ParseError as err:
            raise ImageDataError(
                f"{path} is CVAT's annotation file and cannot be read whole ({err}): export "
                "it again (a download cut short?)."
            ) from None
    return parsed(path) is not None


def labels_of(files: Sequence[Path]) -> list[str]:
    """The labels the files' ``<meta>`` lists, in its order (the first file's where they
    list the same; differing lists are refused); where it lists none, those the shapes
    carry, in name order."""
    lists = []
    for f in files:
        doc = parsed(f)
        # a skeleton's points are labels of their own, under their skeleton's (<parent>)
        listed = [
            label.findtext("name") or ""
            for label in doc.iterfind("meta//labels/label")
            if not (label.findtext("parent") or "").strip()
        ]
        lists.append(listed or sorted({s.get("label", "") for s in doc.iter() if s.get("label")}))
    for f, other in zip(files[1:], lists[1:], strict=True):
        if other != lists[0]:
            raise ImageDataError(
                f"{files[0]} and {f} list different labels ({', '.join(lists[0])} against "
                f"{', '.join(other)}): export them with the same labels."
            )
    return lists[0]


def cvat_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s CVAT files, by mask value, void last; None where it has
    none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    return drawn_classes(f"the labels of {files[0]}", labels_of(files))


# -- drawing --------------------------------------------------------------------------
def shape_pixels(shape: Element, height: int, width: int) -> np.ndarray | None:
    """The pixels a shape covers; None for one that outlines no area."""
    a = {k: float(v) for k, v in shape.attrib.items() if _number(v)}
    if shape.tag == "polygon":
        points = [float(v) for xy in shape.get("points", "").split(";") for v in xy.split(",")]
        return polygon_pixels([points], height, width) if len(points) >= 6 else None
    if shape.tag == "box":
        cx, cy = (a["xtl"] + a["xbr"]) / 2, (a["ytl"] + a["ybr"]) / 2
        rx, ry = (a["xbr"] - a["xtl"]) / 2, (a["ybr"] - a["ytl"]) / 2
        turn = math.radians(a.get("rotation", 0.0))  # clockwise, as an image shows it
        points = [
            v
            for u, w in ((-1, -1), (1, -1), (1, 1), (-1, 1))
            for v in (
                cx + rx * u * math.cos(turn) - ry * w * math.sin(turn),
                cy + rx * u * math.sin(turn) + ry * w * math.cos(turn),
            )
        ]
        return polygon_pixels([points], height, width)
    if shape.tag == "ellipse":
        return _ellipse_pixels(a, height, width)
    if shape.tag == "mask":
        return _mask_pixels(shape, a, height, width)
    return None


def _ellipse_pixels(a: dict[str, float], height: int, width: int) -> np.ndarray:
    """The pixels whose centres lie in the ellipse, its centre and axes rounded to whole
    pixels as CVAT's own mask export draws it (turned by ``rotation``, clockwise)."""
    cx, cy, rx, ry = (round(a[k]) for k in ("cx", "cy", "rx", "ry"))
    turn = math.radians(a.get("rotation", 0.0))
    y, x = np.mgrid[:height, :width]
    u = (x - cx) * math.cos(turn) + (y - cy) * math.sin(turn)
    v = -(x - cx) * math.sin(turn) + (y - cy) * math.cos(turn)
    return (u / max(rx, 0.5)) ** 2 + (v / max(ry, 0.5)) ** 2 <= 1


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _mask_pixels(shape: Element, a: dict[str, float], height: int, width: int) -> np.ndarray:
    """A ``<mask>``: run lengths over its box (``left``, ``top``, ``width``, ``height``),
    row by row, beginning with pixels off."""
    left, top, w, h = (int(a[k]) for k in ("left", "top", "width", "height"))
    runs = [int(v) for v in shape.get("rle", "").split(",") if v.strip()]
    flat = np.zeros(w * h, bool)
    position = 0
    for k, run in enumerate(runs):
        flat[position : position + run] = k % 2 == 1
        position += run
    pixels = np.zeros((height, width), bool)
    y0, x0 = max(top, 0), max(left, 0)  # the part of the box inside the image
    y1, x1 = min(top + h, height), min(left + w, width)
    if y1 > y0 and x1 > x0:
        pixels[y0:y1, x0:x1] = flat.reshape(h, w)[y0 - top : y1 - top, x0 - left : x1 - left]
    return pixels


def draw_mask(
    height: int, width: int, shapes: Sequence[Element], values: dict[str, int]
) -> np.ndarray:
    """The mask of one image's ``shapes``, by their ``z_order`` and then as listed."""
    mask = np.zeros((height, width), np.uint8)
    order = sorted(range(len(shapes)), key=lambda k: (float(shapes[k].get("z_order", 0)), k))
    for k in order:
        pixels = shape_pixels(shapes[k], height, width)
        if pixels is not None:
            mask[pixels] = values[shapes[k].get("label", "")]
    return mask


# -- the images -----------------------------------------------------------------------
def cvat_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every image ``root``'s CVAT files list and the folder holds, each with its mask
    (drawn now, or found drawn in the cache) of ``class_names`` (given, or the files'
    own: :func:`cvat_classes`); ``images`` are the image files below ``root``."""
    files = annotation_files(root)
    names = list(class_names or cvat_classes(root).class_names)
    labels = sorted({*labels_of(files), *(s.get("label", "") for f in files for s in _shapes(f))})
    values = values_by_name(labels, names, f"{files[0]}")
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
    by_name = image_index(images)
    found: list[AnnotatedImage] = []
    for f in files:
        found += _file_images(root, f, values, folder, by_name)
    return found


def _shapes(path: Path) -> list[Element]:
    return [s for image in parsed(path).iterfind("image") for s in shapes_of(image)]


def shapes_of(image: Element) -> list[Element]:
    """An ``<image>``'s shapes: its labelled children, but its tags (a label of the whole
    image, no shape)."""
    return [s for s in image if s.get("label") and s.tag != "tag"]


def _file_images(
    root: Path, f: Path, values: dict[str, int], folder: Path, by_name: dict[str, Path]
) -> list[AnnotatedImage]:
    places = list(dict.fromkeys([f.parent / "images", f.parent, f.parent.parent / "images", root]))
    found, missing, undrawn = [], [], 0
    entries = list(parsed(f).iterfind("image"))
    for entry in entries:
        image = image_named(entry, places, by_name)
        if image is None:
            missing.append(entry.get("name", ""))
            continue
        shapes = shapes_of(entry)
        name = name_below(root, image)
        mask = mask_path(folder, name)
        if not mask.is_file():  # each written whole: one there was drawn from this file
            _draw_one(f, entry, image, shapes, values, mask)
        areas = sum(s.tag in AREAS for s in shapes)
        undrawn += len(shapes) - areas
        found.append(AnnotatedImage(name, image, mask, split_of(entry.get("subset", "")), areas))
    _say_what_was_left(f, len(entries), missing, found, undrawn)
    return found


def image_named(entry: Element, places: Sequence[Path], by_name: dict[str, Path]) -> Path | None:
    """The image an ``<image>`` names: in its subset's folder first (a project's export
    keeps ``images/<subset>/<name>``), then as :func:`image_of` finds one; a video's
    frame, named with no suffix (``frame_000000``), by its name with any image suffix."""
    name, subset = entry.get("name", ""), entry.get("subset")
    inside = [place / subset for place in places if subset and place.name == "images"]
    ordered = [*inside, *places]
    found = image_of(name, ordered, {} if subset else by_name)
    if found is None and not Path(name).suffix:
        for place in ordered:
            frames = [f for f in place.glob(f"{name}.*") if f.suffix.lower() in IMAGE_SUFFIXES]
            if frames:
                return frames[0]
    return found or (image_of(name, [], by_name) if subset else None)


def _draw_one(
    path: Path, entry: Element, image: Path, shapes: list, values: dict, mask: Path
) -> None:
    named = entry.get("name", "")
    height, width = check_size(path, named, image, entry.get("height"), entry.get("width"))
    try:
        drawn = draw_mask(height, width, shapes, values)
    except (ValueError, TypeError, KeyError) as err:
        raise ImageDataError(f"{path}: a shape of {named} cannot be drawn: {err}.") from None
    write_mask(mask, drawn)


def _say_what_was_left(
    path: Path, listed: int, missing: list[str], found: list[Any], undrawn: int
) -> None:
    say_missing(
        path, listed, missing, len(found),
        "export the task with its images (an images/ folder beside the file), or put them "
        "anywhere below data.root under the names the file gives.",
    )  # fmt: skip
    if undrawn:
        log.warning(
            "%s: %d shape(s) are polylines, points or skeletons, which outline no area: "
            "not drawn.", path, undrawn,
        )  # fmt: skip
