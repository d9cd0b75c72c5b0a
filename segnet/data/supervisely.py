"""Supervisely projects, read as masks: ``meta.json`` (the classes) beside a folder per
dataset, each holding ``img/`` and ``ann/`` (``ann/<image name>.json``), as Supervisely
exports a project and Dataset Ninja ships its datasets, so that such a folder trains
with no conversion.

* **Where**: ``data.root`` holds ``meta.json``, and the datasets are the folders below
  it holding ``ann/`` (nested datasets' too, at any depth); a dataset folder alone
  (``ann/`` and ``img/``, no ``meta.json``) is read as well. The masks Supervisely
  exports beside them (``masks_machine/``, ``masks_human/``) are not read.
* **Masks**: polygons (their edges included: a vertex is a pixel, as Supervisely takes
  it; their holes left out), bitmaps (placed at their origin; an alpha mask where at
  least half opaque), rectangles and rotated boxes are drawn in the annotation's order,
  a later object over an earlier, as Supervisely shows them and exports their masks.
  Lines, points, keypoint graphs and cuboids outline no area: counted in a warning, not
  drawn.
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
import math
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
    split_of_folders,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named
from segnet.files import staged

DRAWING = "supervisely-masks-3"  # bumped where the drawing changes: masks drawn before, redrawn
INDEX = "supervisely-index-2"  # each annotation's split and classes (:func:`summary`), kept
# between runs: bumped where what summary() counts changes
META = "meta.json"
AREA_SHAPES = ("polygon", "bitmap", "rectangle", "alpha_mask", "oriented_bbox", "any")
DRAWN = ("polygon", "bitmap", "rectangle", "alpha_mask", "oriented_bbox")  # geometryType
# a dataset's own folders of per-image files: not looked in for datasets
ITEM_FOLDERS = ("ann", "img", "img_info", "meta", "masks_machine", "masks_human", "blob")
OWN_MASKS = ("masks_machine", "masks_human")  # the masks Supervisely exports: colours, no class
FIRST_FILES = 20  # annotation files looked in for one of Supervisely's
NESTING = 64  # datasets' depth at most: a folder linked into itself ends there
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
    """The dataset folders (those holding ``ann/``) below ``root``, ``root`` itself and
    nested datasets (``<dataset>/datasets/<dataset>/``) included, in path order."""
    found, stack, seen = [], [(root, 0)], set()
    while stack:
        folder, depth = stack.pop()
        if os.path.realpath(folder) in seen:  # a link to a folder read already
            continue
        seen.add(os.path.realpath(folder))
        try:
            below = [d for d in folder.iterdir() if d.is_dir() and not d.name.startswith(".")]
        except OSError:
            continue
        dataset = any(d.name == "ann" for d in below)
        if dataset:
            found.append(folder)
        if depth < NESTING:
            # a dataset's own item folders hold no dataset; elsewhere, any name may
            stack += [(d, depth + 1) for d in below if not (dataset and d.name in ITEM_FOLDERS)]
    return sorted(found)


def annotation_files(root: Path) -> list[Path]:
    """The files of the Supervisely project (or dataset folder) ``root`` is: its
    ``meta.json``, then each dataset's annotations in path order; [] for any other
    folder. A project whose ``meta.json`` cannot be read is refused."""
    if not root.is_dir():
        return []
    meta = root / META
    alone = (root / "img").is_dir() and (root / "ann").is_dir()  # a dataset folder alone
    sets = datasets(root) if meta.is_file() else ([root] if alone else [])
    files = [
        d / "ann" / name
        for d in sets
        for name in sorted(os.listdir(d / "ann"))  # names, not paths: some 100,000 sorted
        if name.endswith(".json") and not name.startswith(".")  # a Mac's ._0.png.json
    ]
    held = json_file(meta) if meta.is_file() else None
    listed = isinstance(held, dict) and isinstance(held.get("classes"), list)
    if not files or not (listed or any(is_annotation(json_file(f)) for f in files[:FIRST_FILES])):
        return []  # a class list beside ann/ folders is Supervisely's: a bad file is named then
    if not meta.is_file():
        return files
    if not listed:
        raise ImageDataError(
            f"{meta} holds no class list (a Supervisely project's meta.json has 'classes'), "
            f"and {files[0]} is a Supervisely annotation: download the project again."
        )
    return [meta, *files]


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


# -- what each annotation holds, kept between runs -------------------------------------------
def summary(path: Path, annotation: dict[str, Any]) -> dict[str, Any]:
    """What the run needs of one annotation without drawing it: its split tag, the
    classes of the objects drawn, and how many are drawn, boxes, and not drawn."""
    objects = [o for o in annotation["objects"] if isinstance(o, dict)]
    drawn = [o for o in objects if has_area(o)]
    return {
        "split": tagged_split(path, annotation),
        "classes": sorted({str(o.get("classTitle")) for o in drawn}),
        "drawn": len(drawn),
        "boxes": sum(o.get("geometryType") == "rectangle" for o in drawn),
        "undrawn": len(objects) - len(drawn),
    }


def key(path: Path) -> str:
    """An annotation file as :func:`summaries` names it: its absolute path."""
    return os.path.abspath(path)


def summaries(annotations: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """:func:`summary` of each annotation file, by path: read from the cache where these
    very files were summed up before (bitmaps make a project gigabytes of JSON), else
    read once and kept there."""
    kept = cache_folder(INDEX, annotations, {}) / "index.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(kept.read_text(encoding="utf-8"))
    found = {key(f): summary(f, _read(f)) for f in annotations}
    with contextlib.suppress(OSError), staged(kept) as tmp:  # a cache: a run goes on without
        tmp.write_text(json.dumps(found), encoding="utf-8")
    return found


# -- classes --------------------------------------------------------------------------------
def class_list(root: Path, index: dict[str, dict[str, Any]]) -> list[str]:
    """The classes: ``meta.json``'s of shapes with an area, in its order, else those the
    objects drawn name, in name order."""
    meta = json_file(root / META) if (root / META).is_file() else None
    if meta:
        return [
            str(c["title"])
            for c in meta["classes"]
            if isinstance(c, dict) and "title" in c and c.get("shape", "any") in AREA_SHAPES
        ]
    return sorted({c for s in index.values() for c in s["classes"]})


def supervisely_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of the Supervisely project ``root`` is, by mask value, void last; None
    where it is none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    if files[0] == root / META:  # the classes it lists, whatever the annotations hold
        return drawn_classes(f"the classes of {files[0]}", class_list(root, {}))
    return drawn_classes(f"the classes of {root}", class_list(root, summaries(files)))


# -- drawing --------------------------------------------------------------------------------
def bitmap_pixels(obj: dict[str, Any]) -> tuple[np.ndarray, int, int]:
    """A bitmap's pixels (a PNG, zlib-compressed and base64-encoded, as Supervisely
    writes it: its alpha, else its grey; an alpha mask's where at least half opaque) and
    the column and row of its top-left corner."""
    from PIL import Image

    raw = base64.b64decode(obj["bitmap"]["data"])
    with contextlib.suppress(zlib.error):  # else an uncompressed PNG, as converters write
        raw = zlib.decompress(raw)
    with Image.open(io.BytesIO(raw)) as im:
        if "transparency" in im.info:  # a palette's: its transparent colour is no object
            im = im.convert("RGBA")
        held = np.asarray(im.getchannel("A") if "A" in im.getbands() else im.convert("L"))
    x, y = (int(round(float(v))) for v in obj["bitmap"]["origin"])
    return held >= (128 if obj.get("geometryType") == "alpha_mask" else 1), x, y


def rotated_box_corners(obj: dict[str, Any]) -> list[tuple[float, float]]:
    """A rotated box's corners: its two corners before turning (``points``' ``exterior``,
    or ``points`` itself as the SDK's ``OrientedBBox.to_json`` writes them) turned by its
    ``angle`` (radians, clockwise as an image shows it) about its centre."""
    points = obj.get("points")
    (x1, y1), (x2, y2) = (points.get("exterior") if isinstance(points, dict) else points)[:2]
    cx, cy = (float(x1) + float(x2)) / 2, (float(y1) + float(y2)) / 2
    rx, ry = abs(float(x2) - float(x1)) / 2, abs(float(y2) - float(y1)) / 2
    turn = float(obj.get("angle") or 0)
    return [
        (cx + u * rx * math.cos(turn) - w * ry * math.sin(turn),
         cy + u * rx * math.sin(turn) + w * ry * math.cos(turn))
        for u, w in ((-1, -1), (1, -1), (1, 1), (-1, 1))
    ]  # fmt: skip


def clipped(xs: Sequence[float], ys: Sequence[float], height: int, width: int) -> tuple:
    """The rows and columns (slices) of the image that points ``xs``, ``ys`` span; None
    where they lie wholly outside it."""
    rows = slice(max(0, math.floor(min(ys))), min(height, math.floor(max(ys)) + 1))
    cols = slice(max(0, math.floor(min(xs))), min(width, math.floor(max(xs)) + 1))
    return (rows, cols) if rows.stop > rows.start and cols.stop > cols.start else None


NOWHERE = (np.zeros((0, 0), bool), (slice(0, 0), slice(0, 0)))  # an object outside the image


def outlined(
    height: int, width: int, ring: Sequence[Sequence], holes: Sequence = ()
) -> tuple[np.ndarray, tuple]:
    """The pixels a polygon covers, its edges included (a vertex is a pixel, as
    Supervisely takes it), its ``holes`` left out: drawn over the part of the image it
    spans (a dense image's objects, each of the whole image, would not fit in memory),
    and those rows and columns."""
    from PIL import Image, ImageDraw

    spans = clipped([float(p[0]) for p in ring], [float(p[1]) for p in ring], height, width)
    if spans is None:
        return NOWHERE
    rows, cols = spans
    im = Image.new("1", (cols.stop - cols.start, rows.stop - rows.start), 0)
    draw = ImageDraw.Draw(im)
    for points, fill in [(ring, 1), *((h, 0) for h in holes)]:
        xy = [(float(p[0]) - cols.start, float(p[1]) - rows.start) for p in points]
        if len(xy) >= 3:
            draw.polygon(xy, fill=fill, outline=fill)
    return np.asarray(im, dtype=bool), (rows, cols)


def has_area(obj: dict[str, Any]) -> bool:
    """Whether an object is drawn: one of :data:`DRAWN`, a polygon of three points or more."""
    kind = obj.get("geometryType")
    if kind == "polygon":
        return len((obj.get("points") or {}).get("exterior") or []) >= 3
    return kind in DRAWN


def object_pixels(obj: dict[str, Any], height: int, width: int) -> tuple[np.ndarray, tuple]:
    """The pixels an object covers, over the part of the image it spans, and those rows
    and columns (slices)."""
    kind = obj.get("geometryType")
    if kind in ("bitmap", "alpha_mask"):
        pixels, x, y = bitmap_pixels(obj)
        spans = clipped([x, x + pixels.shape[1] - 1], [y, y + pixels.shape[0] - 1], height, width)
        if spans is None:
            return NOWHERE
        rows, cols = spans
        return pixels[rows.start - y : rows.stop - y, cols.start - x : cols.stop - x], spans
    if kind == "rectangle":  # its corners, both inside it
        (x1, y1), (x2, y2) = obj["points"]["exterior"][:2]
        xs, ys = [round(float(x1)), round(float(x2))], [round(float(y1)), round(float(y2))]
        spans = clipped(xs, ys, height, width)
        if spans is None:
            return NOWHERE
        rows, cols = spans
        return np.ones((rows.stop - rows.start, cols.stop - cols.start), bool), spans
    if kind == "oriented_bbox":
        return outlined(height, width, rotated_box_corners(obj))
    points = obj.get("points") or {}
    return outlined(height, width, points["exterior"], points.get("interior") or [])


def draw_mask(
    path: Path, height: int, width: int, objects: Sequence[dict], values: dict[str, int]
) -> np.ndarray:
    """The mask of one image's ``objects`` (those :func:`has_area`), in the annotation's
    order, a later object over an earlier, as Supervisely shows them and exports their
    masks."""
    mask = np.zeros((height, width), np.uint8)
    try:
        for obj in (o for o in objects if isinstance(o, dict) and has_area(o)):
            value = values.get(str(obj.get("classTitle")))
            if value is None:
                raise ValueError(f"its class {obj.get('classTitle')!r} is not in meta.json")
            pixels, (rows, cols) = object_pixels(obj, height, width)
            mask[rows, cols][pixels] = value
    except (KeyError, TypeError, ValueError, IndexError, OSError, zlib.error) as err:
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
            f"{path}: its image is tagged as of {len(splits)} splits "
            f"({', '.join(sorted(splits))}): tag it with one."
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
    index = summaries(annotations)
    names = list(class_names or supervisely_classes(root).class_names)
    values = values_by_name(class_list(root, index), names, f"the Supervisely project {root}")
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
        held = index[key(f)]
        said["undrawn"] += held["undrawn"]
        said["boxes"] += held["boxes"]
        name = name_below(root, image)
        mask = mask_path(folder, name)
        if not mask.is_file():  # each written whole: one there was drawn from this file
            annotation = _read(f)
            size = annotation["size"]
            height, width = check_size(f, image.name, image, size.get("height"), size.get("width"))
            write_mask(mask, draw_mask(f, height, width, annotation["objects"], values))
        split = split_of_folders(root, f)
        if split is None and (split := held["split"]):
            said["tagged"] += 1
        found.append(AnnotatedImage(name, image, mask, split, held["drawn"]))
    _say_what_was_left(root, annotations, found, said)
    return found


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
            f"the Supervisely project {root} outlines no area (polygons, bitmaps, "
            "rectangles): annotate the images first."
        )
    if said["undrawn"]:
        log.warning(
            "%d Supervisely object(s) of %s are not drawn: lines, points, keypoint graphs "
            "and cuboids outline no area of the image.", said["undrawn"], root,
        )  # fmt: skip
    if said["boxes"] == drawn:
        log.warning(
            "every object of %s is a rectangle, as a detection project's are: the masks "
            "are boxes. Outline the objects (polygons, brush) for masks that follow them.", root,
        )  # fmt: skip
    if said["tagged"]:
        log.info("%d image(s) in the split their tag names (train, val, test)", said["tagged"])
