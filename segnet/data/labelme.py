"""LabelMe's annotation files, read as masks: a JSON file per image (``shapes``, each a
``label`` and its ``points``; ``imagePath``), as LabelMe and AnyLabeling save them beside
the images, so that a folder annotated with it trains with no conversion.

* **Where**: the JSON files anywhere below ``data.root``, each naming its image by its
  ``imagePath`` (relative to the file), else the image of its own name beside it. A
  file's split is the split folder it lies in (``train/``, ``valid/``), else drawn.
  Images with no file are left out, said (nobody outlined them: their objects are not
  known to be background). Only where no layout of mask images reads the folder.
* **Masks**: polygons, rectangles (two corners, or X-AnyLabeling's four), rotated
  boxes, circles and LabelMe's own masks are drawn in the
  file's order, a later shape over an earlier one, as LabelMe's own ``labelme_json_to_
  dataset`` draws them; lines and points, which outline no area, are not drawn, counted
  in a warning.
* **Classes**: background (mask value 0), then the labels in name order; or in the order
  of a ``labels.txt`` beside the files, as labelme2voc takes it (``__ignore__`` void,
  ``_background_`` the background). ``_background_`` and ``background`` are the
  background, and ``__ignore__`` is void: neither trained nor scored.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import base64
import io
import logging
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
    image_index,
    image_of,
    json_file,
    mask_path,
    name_below,
    split_of_folders,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.name_rules import IMAGE_SUFFIXES

DRAWING = "labelme-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
CLASS_LIST = "labels.txt"
FIRST_FILES = 20  # looked in for a LabelMe file before the others are
log = logging.getLogger(__name__)


def parsed(path: Path) -> dict[str, Any] | None:
    """The LabelMe file at ``path`` as read; None for a JSON file of anything else."""
    found = json_file(path)
    return found if isinstance(found, dict) and {"shapes", "imagePath"} <= found.keys() else None


def annotation_files(root: Path) -> list[Path]:
    """The LabelMe files below ``root``, in path order (other JSON files left alone);
    none where no LabelMe file is among its first JSON files (a dataset of JSON files of
    its own, ADE20K's one per image, is not read through for them)."""
    if not root.is_dir():
        return []
    files = sorted(
        f for f in root.rglob("*.json")
        if not any(part.startswith(".") for part in f.relative_to(root).parts)
    )  # fmt: skip
    if not any(parsed(f) is not None for f in files[:FIRST_FILES]):
        return []
    return [f for f in files if parsed(f) is not None]


# -- classes ----------------------------------------------------------------------------
def class_list(root: Path, files: Sequence[Path]) -> list[str]:
    """The labels in the order of ``labels.txt`` in ``root``, else in name order
    (:func:`segnet.data.drawn_masks.drawn_classes` puts the background first, void
    last)."""
    listed = root / CLASS_LIST
    labels = labels_of(files)
    if listed.is_file():
        order = [line.strip() for line in listed.read_text().splitlines() if line.strip()]
        unlisted = sorted(labels - set(order))
        if unlisted:
            raise ImageDataError(
                f"{listed} does not list {', '.join(unlisted)}, which shapes are labelled "
                f"(e.g. in {first_with(files, unlisted[0])}): add them, or correct the labels."
            )
        return order
    return sorted(labels)


def first_with(files: Sequence[Path], label: str) -> Path | None:
    for f in files:
        if any(str(s.get("label")) == label for s in (parsed(f) or {})["shapes"]):
            return f
    return None


def labels_of(files: Sequence[Path]) -> set[str]:
    return {str(s.get("label", "")) for f in files for s in (parsed(f) or {})["shapes"]}


def labelme_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s LabelMe files (:func:`annotation_files`), by mask value,
    void last; None where it has none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    listed = root / CLASS_LIST
    order = f" (in the order of {listed})" if listed.is_file() else ""
    return drawn_classes(
        f"the labels of {len(files)} LabelMe file(s) in {root}{order}", class_list(root, files)
    )


# -- drawing ------------------------------------------------------------------------------
def area_kind(shape: dict[str, Any]) -> str | None:
    """How a shape is drawn: ``polygon``, ``rectangle``, ``circle`` or ``mask``; None for
    one that outlines no area (a line, a point) or too few points to."""
    kind, points = shape.get("shape_type") or "polygon", shape.get("points") or []
    if kind in ("polygon", "rotation") or (kind == "rectangle" and len(points) == 4):
        return "polygon" if len(points) >= 3 else None  # X-AnyLabeling's four corners
    if kind in ("rectangle", "circle"):
        return kind if len(points) == 2 else None
    return "mask" if kind == "mask" and shape.get("mask") and points else None


def draw_mask(
    height: int, width: int, shapes: Sequence[dict[str, Any]], values: dict[str, int]
) -> np.ndarray:
    """The mask of one image's ``shapes``, in their order (:func:`area_kind`; those of
    no area are not drawn)."""
    from PIL import Image, ImageDraw

    mask = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(mask)
    for shape in shapes:
        kind = area_kind(shape)
        value = values[str(shape.get("label"))]
        points = [(float(x), float(y)) for x, y in shape.get("points") or []]
        if kind == "polygon":
            draw.polygon(points, fill=value, outline=value)
        elif kind == "rectangle":
            (x1, y1), (x2, y2) = points
            draw.rectangle([min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)], fill=value)
        elif kind == "circle":
            (cx, cy), (px, py) = points
            r = ((cx - px) ** 2 + (cy - py) ** 2) ** 0.5
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=value, outline=value)
        elif kind == "mask":
            part = Image.open(io.BytesIO(base64.b64decode(shape["mask"]))).convert("1")
            x, y = (round(v) for v in points[0])
            mask.paste(value, (x, y), part)
    return np.array(mask, np.uint8)


def labelled_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every image a LabelMe file below ``root`` names and the folder holds, each with its
    mask (drawn now, or found drawn in the cache) of ``class_names`` (given, or the
    files' own: :func:`labelme_classes`); ``images`` are the image files below ``root``."""
    files = annotation_files(root)
    names = list(class_names or labelme_classes(root).class_names)
    values = values_by_name(sorted(labels_of(files)), names, f"the LabelMe files in {root}")
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %d LabelMe file(s), once, into %s", len(files), folder)
    by_name = image_index(images)
    found, undrawn, missing = [], 0, []
    for f in files:
        entry = parsed(f) or {}
        image = image_of(entry["imagePath"] or "", [f.parent], by_name) or beside(f)
        if image is None:
            missing.append(f)
            continue
        name = name_below(root, image)
        mask = mask_path(folder, name)
        if not mask.is_file():  # each written whole: one there was drawn from this file
            _draw_one(f, entry, image, values, mask)
        areas = sum(area_kind(s) is not None for s in entry["shapes"])
        undrawn += len(entry["shapes"]) - areas
        found.append(AnnotatedImage(name, image, mask, split_of_folders(root, f), areas))
    _say_what_was_left(root, files, missing, found, undrawn, images)
    return found


def beside(file: Path) -> Path | None:
    """The image of the file's own name beside it (``0001.jpg`` for ``0001.json``)."""
    found = [file.with_suffix(s) for s in IMAGE_SUFFIXES if file.with_suffix(s).is_file()]
    return found[0] if len(found) == 1 else None


def _draw_one(path: Path, entry: dict, image: Path, values: dict[str, int], mask: Path) -> None:
    named = entry["imagePath"]
    height, width = check_size(
        path, named, image, entry.get("imageHeight"), entry.get("imageWidth")
    )
    try:
        drawn = draw_mask(height, width, entry["shapes"], values)
    except (ValueError, TypeError, KeyError, OSError) as err:
        raise ImageDataError(f"{path}: a shape cannot be drawn: {err}.") from None
    write_mask(mask, drawn)


def _say_what_was_left(
    root: Path, files: list[Path], missing: list[Path], found: list, undrawn: int, images
) -> None:
    if not found:
        raise ImageDataError(
            f"the {len(files)} LabelMe file(s) in {root} name no image that is there (the "
            f"first: {missing[0]} names {(parsed(missing[0]) or {}).get('imagePath')}): put "
            "each image where its file's imagePath says, or beside the file under its name."
        )
    if missing:
        log.warning(
            "%d LabelMe file(s) name no image that is there (e.g. %s): left out.",
            len(missing), missing[0],
        )  # fmt: skip
    unlabelled = len({*images} - {a.image for a in found})
    if unlabelled:
        log.warning(
            "%d image(s) in %s have no LabelMe file: left out (nobody outlined them).",
            unlabelled, root,
        )  # fmt: skip
    if undrawn:
        log.warning(
            "%d shape(s) outline no area (lines, points, or too few points): not drawn.",
            undrawn,
        )  # fmt: skip
