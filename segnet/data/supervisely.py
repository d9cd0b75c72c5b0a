"""Supervisely projects, read as masks: ``meta.json`` (the classes) beside a folder per
dataset, each holding ``img/`` and ``ann/`` (``ann/<image name>.json``), as Supervisely
exports a project and Dataset Ninja ships its datasets, so that such a folder trains
with no conversion.

* **Where**: ``data.root`` holds ``meta.json``, and the datasets are the folders below
  it holding ``ann/`` and ``img/`` (a nested dataset's too); a dataset folder alone
  (``ann/`` and ``img/``, no ``meta.json``) is read as well.
* **Masks**: polygons (their holes left out), bitmaps (placed at their origin) and
  rectangles are drawn, larger ones first, so that a smaller one lying on a larger keeps
  its class. Lines, points and keypoint graphs outline no area: counted in a warning,
  not drawn.
* **Classes**: background (mask value 0), then ``meta.json``'s classes of shapes that
  have an area, in its order (else the objects' classes in name order).
* **Splits**: a dataset named as a split (``train``, ``val``, ``test``) is that split;
  else an image tagged ``train``, ``val`` or ``test`` (or ``split: val``), as
  Supervisely's split apps and Dataset Ninja tag them; else splits are drawn.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from segnet.data.class_files import ShippedClasses
from segnet.data.drawn_masks import (
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    json_file,
    mask_path,
    name_below,
    polygon_area,
    polygon_pixels,
    split_of_folders,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named

DRAWING = "supervisely-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
META = "meta.json"
AREA_SHAPES = ("polygon", "bitmap", "rectangle", "alpha_mask", "any")  # a class's shape
DRAWN = ("polygon", "bitmap", "rectangle", "alpha_mask")  # an object's geometryType
DATASET_DEPTH = 4  # folders below data.root looked in for datasets (nested ones included)
log = logging.getLogger(__name__)


# -- finding the files ----------------------------------------------------------------------
def is_annotation(found: Any) -> bool:
    """Whether ``found`` (a parsed JSON file) is a Supervisely image annotation."""
    return (
        isinstance(found, dict)
        and isinstance(found.get("objects"), list)
        and isinstance(found.get("size"), dict)
    )


def datasets(root: Path) -> list[Path]:
    """The dataset folders (``ann/`` beside ``img/``) below ``root``, ``root`` itself
    included, in path order."""
    found, stack = [], [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            below = sorted((d for d in folder.iterdir() if d.is_dir()), reverse=True)
        except OSError:
            continue
        names = {d.name for d in below}
        if {"ann", "img"} <= names:
            found.append(folder)
        if depth < DATASET_DEPTH:
            stack += [(d, depth + 1) for d in below if d.name not in ("ann", "img")]
    return sorted(found)


def annotation_files(root: Path) -> list[Path]:
    """The annotation files of the Supervisely project (or dataset folder) ``root`` is,
    in path order; [] for any other folder."""
    if not root.is_dir():
        return []
    meta = root / META
    if meta.is_file() and not isinstance((json_file(meta) or {}).get("classes"), list):
        return []
    if not meta.is_file() and not {"ann", "img"} <= {d.name for d in root.iterdir() if d.is_dir()}:
        return []  # a dataset folder alone, else no Supervisely folder
    files = [
        d / "ann" / name
        for d in datasets(root)
        for name in sorted(os.listdir(d / "ann"))  # names, not paths: some 100,000 sorted
        if name.endswith(".json")
    ]
    if not files or not is_annotation(json_file(files[0])):
        return []
    return [root / META, *files] if meta.is_file() else files


def _annotations(root: Path, files: Sequence[Path]) -> list[Path]:
    """:func:`annotation_files` without ``meta.json``."""
    return [f for f in files if f != root / META]


def _read(path: Path) -> dict[str, Any]:
    """An annotation file's contents, read afresh (bitmaps make them large: none is kept
    once drawn); refused where it is no annotation."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ImageDataError(f"cannot read {path}: {err}") from None
    if not is_annotation(found):
        raise ImageDataError(
            f"{path} is no Supervisely image annotation (no 'objects' and 'size'): "
            "export the project again from Supervisely, or remove the file."
        )
    return found


# -- classes --------------------------------------------------------------------------------
def class_list(root: Path, files: Sequence[Path]) -> list[str]:
    """The classes: ``meta.json``'s of shapes with an area, in its order, else those the
    objects name, in name order."""
    meta = json_file(root / META) if (root / META).is_file() else None
    if meta:
        return [
            str(c["title"])
            for c in meta["classes"]
            if isinstance(c, dict) and "title" in c and c.get("shape", "any") in AREA_SHAPES
        ]
    return sorted({str(o.get("classTitle")) for f in files for o in _read(f)["objects"]})


def supervisely_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of the Supervisely project ``root`` is, by mask value, void last; None
    where it is none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    source = f"the classes of {files[0] if files[0].name == META else files[0].parent}"
    return drawn_classes(source, class_list(root, _annotations(root, files)))


# -- drawing --------------------------------------------------------------------------------
def bitmap_pixels(bitmap: dict[str, Any]) -> tuple[np.ndarray, int, int]:
    """A bitmap's pixels (a PNG, zlib-compressed and base64-encoded, as Supervisely
    writes it: its alpha, else its grey, where not zero) and the column and row of its
    top-left corner."""
    from PIL import Image

    raw = base64.b64decode(bitmap["data"])
    with contextlib.suppress(zlib.error):  # else an uncompressed PNG, as converters write
        raw = zlib.decompress(raw)
    with Image.open(io.BytesIO(raw)) as im:
        held = np.asarray(im.getchannel("A") if "A" in im.getbands() else im.convert("L"))
    x, y = (int(round(float(v))) for v in bitmap["origin"])
    return held > 0, x, y


def object_area(obj: dict[str, Any]) -> float:
    """An object's area, which orders the drawing: larger ones first."""
    kind = obj.get("geometryType")
    if kind in ("bitmap", "alpha_mask"):
        return float(len(obj["bitmap"]["data"]))  # its encoded size: in the order of its area
    exterior = (obj.get("points") or {}).get("exterior") or []
    if kind == "rectangle" and len(exterior) == 2:
        (x1, y1), (x2, y2) = exterior
        return abs(float(x2) - float(x1)) * abs(float(y2) - float(y1))
    return polygon_area([p[0] for p in exterior], [p[1] for p in exterior]) if exterior else 0.0


def paint(mask: np.ndarray, obj: dict[str, Any], value: int) -> None:
    """Draws one object into ``mask`` with ``value``."""
    height, width = mask.shape
    kind, points = obj.get("geometryType"), obj.get("points") or {}
    if kind in ("bitmap", "alpha_mask"):
        pixels, x, y = bitmap_pixels(obj["bitmap"])
        top, left = max(y, 0), max(x, 0)
        part = pixels[top - y : height - y, left - x : width - x]
        mask[top : top + part.shape[0], left : left + part.shape[1]][part] = value
    elif kind == "rectangle":  # its corners, both inside it
        (x1, y1), (x2, y2) = points["exterior"]
        rows = slice(max(0, round(min(y1, y2))), max(0, round(max(y1, y2)) + 1))
        mask[rows, slice(max(0, round(min(x1, x2))), max(0, round(max(x1, x2)) + 1))] = value
    elif kind == "polygon" and len(points.get("exterior") or []) >= 3:
        flat = [[float(v) for p in ring for v in p[:2]] for ring in [points["exterior"]]]
        inside = polygon_pixels(flat, height, width)
        holes = [[float(v) for p in h for v in p[:2]] for h in points.get("interior") or []]
        holes = [h for h in holes if len(h) >= 6]
        if holes:
            inside &= ~polygon_pixels(holes, height, width)
        mask[inside] = value


def draw_mask(
    path: Path, height: int, width: int, objects: Sequence[dict], values: dict[str, int]
) -> np.ndarray:
    """The mask of one image's ``objects`` (:data:`DRAWN` ones), larger ones first."""
    mask = np.zeros((height, width), np.uint8)
    drawn = [o for o in objects if o.get("geometryType") in DRAWN]
    try:
        for obj in sorted(drawn, key=object_area, reverse=True):
            value = values.get(str(obj.get("classTitle")))
            if value is None:
                raise ValueError(f"its class {obj.get('classTitle')!r} is not in meta.json")
            paint(mask, obj, value)
    except (KeyError, TypeError, ValueError, OSError, zlib.error) as err:
        raise ImageDataError(
            f"{path}: an object cannot be drawn ({type(err).__name__}: {err}): export the "
            "project again from Supervisely."
        ) from None
    return mask


# -- the images -----------------------------------------------------------------------------
def tagged_split(path: Path, annotation: dict[str, Any]) -> str | None:
    """The split an image's tags give (a tag ``train``, ``val``, ``test``, or ``split``
    of such a value); refused where they give two."""
    splits = set()
    for tag in annotation.get("tags") or []:
        if not isinstance(tag, dict):
            continue
        name, value = str(tag.get("name", "")), tag.get("value")
        found = split_named(str(value)) if name.lower() == "split" and value else split_named(name)
        splits |= {found} if found else set()
    if len(splits) > 1:
        raise ImageDataError(
            f"{path}: its image is tagged as of {len(splits)} splits ({', '.join(sorted(splits))}): "
            "tag it with one."
        )
    return splits.pop() if splits else None


def supervisely_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every image of ``root``'s Supervisely datasets that has its annotation file, each
    with its mask (drawn now, or found drawn in the cache) of ``class_names`` (given, or
    the project's own: :func:`supervisely_classes`). ``images`` (the image files below
    ``root``) are not needed: each annotation names its image beside it."""
    files = annotation_files(root)
    annotations = _annotations(root, files)
    source = f"the Supervisely project {root}"
    names = list(class_names or supervisely_classes(root).class_names)
    values = values_by_name(class_list(root, annotations), names, source)
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %d Supervisely annotation(s), once, into %s",
                 len(annotations), folder)  # fmt: skip
    found, said = [], {"missing": [], "undrawn": 0, "boxes": 0, "tagged": 0}
    for f in annotations:
        image = f.parent.parent / "img" / f.name.removesuffix(".json")
        if not image.is_file():
            said["missing"].append(f)
            continue
        annotation = _read(f)
        found.append(_annotated(root, f, image, annotation, values, folder, said))
    _say_what_was_left(root, annotations, found, said)
    return found


def _annotated(
    root: Path, f: Path, image: Path, annotation: dict, values: dict, folder: Path, said: dict
) -> AnnotatedImage:
    """One image with its mask, drawn where the cache has none, its split, and what was
    left undrawn counted into ``said``."""
    objects = [o for o in annotation["objects"] if isinstance(o, dict)]
    drawn = [o for o in objects if o.get("geometryType") in DRAWN]
    said["undrawn"] += len(objects) - len(drawn)
    said["boxes"] += sum(o.get("geometryType") == "rectangle" for o in drawn)
    name = name_below(root, image)
    mask = mask_path(folder, name)
    if not mask.is_file():  # each written whole: one there was drawn from this file
        size = annotation["size"]
        height, width = check_size(f, image.name, image, size.get("height"), size.get("width"))
        write_mask(mask, draw_mask(f, height, width, drawn, values))
    split = split_of_folders(root, f)
    if split is None and (split := tagged_split(f, annotation)):
        said["tagged"] += 1
    return AnnotatedImage(name, image, mask, split, len(drawn))


def _say_what_was_left(root: Path, annotations: list[Path], found: list, said: dict) -> None:
    missing = said["missing"]
    if missing and not found:
        raise ImageDataError(
            f"none of the {len(annotations)} annotation files of {root} has its image in "
            f"img/ beside ann/ (the first: {missing[0]}): download the project with its images."
        )
    if missing:
        log.warning("%d Supervisely annotation(s) have no image in img/ (e.g. %s): left out.",
                    len(missing), missing[0])  # fmt: skip
    drawn = sum(a.objects for a in found)
    if not drawn:
        raise ImageDataError(
            f"the Supervisely project {root} outlines no area (polygons, bitmaps or "
            "rectangles): annotate the images first."
        )
    if said["undrawn"]:
        log.warning(
            "%d Supervisely object(s) of %s outline no area (lines, points, keypoint "
            "graphs): not drawn.", said["undrawn"], root,
        )  # fmt: skip
    if said["boxes"] == drawn:
        log.warning(
            "every object of %s is a rectangle, as a detection project's are: the masks "
            "are boxes. Outline the objects (polygons, brush) for masks that follow them.", root,
        )  # fmt: skip
    if said["tagged"]:
        log.info("%d image(s) in the split their tag names (train, val, test)", said["tagged"])
