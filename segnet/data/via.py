"""VGG Image Annotator's files, read as masks: the JSON file VIA exports of its regions
(``via_region_data.json``, ``via_export_json.json``: each image's ``filename`` and
``regions``) or its project file (``_via_img_metadata``), as the Mask R-CNN tutorials'
balloon dataset ships them, so that such a folder trains with no conversion.

* **Where**: the VIA files in ``data.root``, its split folders (``train/``, ``val/``)
  and its annotations folder, the images beside each file (else by name below
  ``data.root``). A file's split is its folder's, its name's, else its images' split
  folders; an image listed twice with other regions is refused.
* **Masks**: polygons, rectangles, circles and ellipses (rotated where VIA rotated
  them) are drawn as COCO's objects are (:func:`segnet.data.coco.draw_mask`), larger
  ones first, so that a smaller one lying on a larger keeps its class. Polylines and
  points outline no area: counted in a warning, not drawn.
* **Classes**: a region's class is its attribute as :func:`class_key` chooses it (the
  only one, else the one named as a class); a region where it is empty is void, said.
  With none (the balloon dataset's regions), every region is one class,
  ``foreground``, as black-and-white masks name it. Background (mask value 0), then
  the classes in the order a project file's options list them, else in name order.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from segnet.data.class_files import ShippedClasses
from segnet.data.coco import draw_mask
from segnet.data.drawn_masks import (
    ANNOTATION_FOLDERS,
    UNCLASSED,
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    ellipse_outline,
    export_places,
    file_split,
    image_index,
    image_of,
    json_file,
    mask_path,
    name_below,
    parsed_by_reader,
    polygon_area,
    say_missing,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError

DRAWING = "via-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
CLASS_KEYS = ("class", "label", "type", "category", "object", "name")  # as key_word reads
UNNAMED = "foreground"  # the class of regions with no attribute, as binary masks name it
VIA3_KEYS = frozenset({"project", "config", "attribute", "file", "view", "metadata"})
CSV_COLUMNS = ["filename", "file_size", "region_shape_attributes", "region_attributes"]
log = logging.getLogger(__name__)


def entries(path: Path) -> list[dict[str, Any]] | None:
    """The images of the VIA file at ``path`` (each its ``filename`` and ``regions``);
    None for a JSON or CSV file of anything else."""
    if path.suffix.lower() == ".csv":
        return csv_entries(path)
    found = json_file(path)
    if isinstance(found, dict) and isinstance(found.get("_via_img_metadata"), dict):
        found = found["_via_img_metadata"]  # a project file
    if not isinstance(found, dict) or not found:
        return None
    values = list(found.values())
    is_via = all(isinstance(v, dict) and {"filename", "regions"} <= v.keys() for v in values)
    return values if is_via else None


def csv_entries(path: Path) -> list[dict[str, Any]] | None:
    """The images of VIA's CSV export (a row per region: ``filename``, ``file_size``,
    ``region_shape_attributes`` and ``region_attributes`` as JSON; an image of no region
    a row of ``{}``; VIA 1's header begins ``#filename``) as its JSON export lists them;
    None for a CSV of anything else, told by its first line alone."""
    columns = csv_columns(path)
    if columns is None:
        return None
    stat = path.stat()
    return _csv_entries(path, stat.st_size, stat.st_mtime_ns, columns)


def csv_columns(path: Path) -> int | None:
    """The number of columns of VIA's CSV export at ``path``, told by its first line
    alone (so that finding the files never refuses one); None for any other CSV."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = [h.lstrip("#").strip() for h in next(csv.reader(f), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if header[:2] != ["filename", "file_size"] or header[-2:] != CSV_COLUMNS[2:]:
        return None
    return len(header)


@parsed_by_reader
@functools.lru_cache(maxsize=8)  # read once per run while unchanged: a few per folder
def _csv_entries(path: Path, size: int, mtime: int, columns: int) -> list[dict[str, Any]]:
    by_image: dict[tuple[str, str], dict[str, Any]] = {}
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))[1:]
    for k, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) < columns:
            raise ImageDataError(f"{path}, line {k}: {len(row)} fields, not {columns}.")
        # VIA writes the file name unquoted: one holding a comma spans several fields
        name = ",".join(row[: len(row) - columns + 1])
        size_field, *_, shape_text, attributes_text = row[len(row) - columns + 1 :]
        try:
            shape, attributes = json.loads(shape_text or "{}"), json.loads(attributes_text or "{}")
        except ValueError as err:
            raise ImageDataError(f"{path}, line {k}: its region is no JSON ({err}).") from None
        if not isinstance(shape, dict) or not isinstance(attributes, dict):
            raise ImageDataError(f"{path}, line {k}: its region's cells are no JSON objects.")
        entry = by_image.setdefault((name, size_field), {"filename": name, "regions": []})
        if shape:
            entry["regions"].append({"shape_attributes": shape, "region_attributes": attributes})
    return list(by_image.values())


def annotation_files(root: Path, say: bool = False) -> list[Path]:
    """The VIA files in ``root``, its split folders and its annotations folder, in path
    order; a CSV export only where no VIA JSON file lies beside it (the two are exports
    of one project, perhaps at two times: the JSON file is read, said where ``say``)."""
    if not root.is_dir():
        return []
    files = [
        f for place in export_places(root) for f in sorted(place.iterdir())
        if f.suffix.lower() in (".json", ".csv") and f.is_file()
    ]  # fmt: skip
    found = [f for f in files if (csv_columns(f) if f.suffix.lower() == ".csv" else entries(f))]
    beside = {f.parent for f in found if f.suffix.lower() == ".json"}
    left = [f for f in found if f.suffix.lower() == ".csv" and f.parent in beside]
    if left and say:
        log.info("%s: a VIA JSON file lies beside it, and is read instead", left[0])
    return [f for f in found if f not in left]


def via3_files(root: Path) -> list[Path]:
    """VIA 3 projects in ``root`` or its annotations folder (another schema, not read):
    for naming them where no masks are found."""
    places = [root, *(root / n for n in ANNOTATION_FOLDERS)]
    found = []
    for f in (f for place in places if place.is_dir() for f in sorted(place.glob("*.json"))):
        held = json_file(f)
        if isinstance(held, dict) and held.keys() >= VIA3_KEYS and isinstance(held["file"], dict):
            found.append(f)
    return found


def regions_of(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """An image's regions: a list (VIA 2), or a dict of them by number (VIA 1)."""
    regions = entry.get("regions") or []
    return list(regions.values()) if isinstance(regions, dict) else list(regions)


# -- classes --------------------------------------------------------------------------------
def key_word(name: str) -> str:
    """An attribute's name as compared: any case, without ``_``, ``-`` and spaces, a
    trailing ``name`` or ``s`` (``Class``, ``class_name``, ``labels``: class, label)."""
    word = re.sub(r"[\s_\-]+", "", str(name).lower())
    word = word.removesuffix("name") or word
    plural = [word[:-n] for n in (1, 2) if word[-n:] == "es"[2 - n :] and word[:-n] in CLASS_KEYS]
    return plural[0] if plural else word


def class_key(files: Sequence[Path]) -> str | None:
    """The region attribute that names the class (as :func:`key_word` reads it): the
    only one the regions give a value, else the one named as a class
    (:data:`CLASS_KEYS`; one a project file gives choices first: ``type`` a radio over
    ``name`` a text); None where regions have none (each is then :data:`UNNAMED`).
    Several attributes none of which is named as a class are refused, and so is a lone
    attribute not so named that some regions lack (a note, not a class)."""
    given = [
        (key_word(k), bool(str(v).strip()) and v not in ({}, []))
        for f in files for e in entries(f) or [] for r in regions_of(e)
        for k, v in (r.get("region_attributes") or {}).items()
    ]  # fmt: skip
    keys = sorted({k for k, filled in given if filled})
    if not keys:
        return None
    choices = {key_word(k) for f in files for k, a in declared(f).items() if a.get("options")}
    named = sorted((k for k in keys if k in CLASS_KEYS),
                   key=lambda k: (k not in choices, CLASS_KEYS.index(k)))  # fmt: skip
    if named or len(keys) == 1:
        chosen = (named or keys)[0]
        regions = sum(1 for f in files for e in entries(f) or [] for _ in regions_of(e))
        filled = sum(1 for k, on in given if k == chosen and on)
        if not named and filled < regions:
            raise ImageDataError(
                f"{files[0]}: {filled} of its {regions} regions give {chosen!r}, the only "
                "region attribute: if it is their class, give it to every region; if it is "
                f"a note, name the class attribute 'class' (or delete {chosen!r})."
            )
        log.info("the VIA regions' class is their attribute %r", chosen)
        return chosen
    raise ImageDataError(
        f"{files[0]}: its regions have the attributes {', '.join(keys)}, and none is named "
        f"as a class ({', '.join(CLASS_KEYS)}): rename the one naming the class 'class'."
    )


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
    found = {key_word(k): v for k, v in (region.get("region_attributes") or {}).items()}
    value = found.get(key) if key else None
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


def class_list(files: Sequence[Path], key: str | None = None) -> list[str]:
    """The classes in the order a project file's attribute options list them, else in
    name order."""
    key = key or class_key(files)
    labels = {label_of(r, key, f) for f in files for e in entries(f) or [] for r in regions_of(e)}
    for f in files:
        attributes = {key_word(k): a for k, a in declared(f).items()}
        listed = [str(o) for o in ((attributes.get(key) or {}).get("options") or {})]
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
            rx = float(shape["r"] if kind == "circle" else shape["rx"])
            ry = float(shape["r"] if kind == "circle" else shape["ry"])
            turn = float(shape.get("theta") or 0)
            return ellipse_outline(float(shape["cx"]), float(shape["cy"]), rx, ry, turn)
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
        area = polygon_area(xs, ys)
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
    files = annotation_files(root, say=True)
    key = class_key(files)
    names = list(class_names or via_classes(root).class_names)
    values = values_by_name(class_list(files, key), names, f"the regions of {files[0]}")
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
    by_name = image_index(images)
    found: dict[Path, AnnotatedImage] = {}
    listed_in: dict[Path, tuple[Path, list]] = {}
    said = {"undrawn": 0, "void": 0, "outside": 0, "twice": 0, "example": None}
    for f in files:
        listed, missing = entries(f) or [], []
        for entry in listed:
            image = image_of(_file_name(entry["filename"]), [f.parent, root], by_name)
            if image is None:
                missing.append(entry["filename"])
                continue
            if _listed_before(image, f, regions_of(entry), listed_in, said):
                continue
            split = file_split(root, f, image)
            found[image] = _annotated(root, f, entry, image, split, key, values, folder, said)
        say_missing(f, len(listed), missing, len(listed) - len(missing),
                    "put the images beside the file, under the names it gives.")  # fmt: skip
    _say_what_was_left(files, images, list(found.values()), key, said)
    return list(found.values())


def _listed_before(image: Path, f: Path, regions: list, listed_in: dict, said: dict) -> bool:
    """Whether ``image`` was listed before with these very regions (a project file and
    its own export), counted; listed before with others, it is refused."""
    if image not in listed_in:
        listed_in[image] = (f, regions)
        return False
    if listed_in[image][1] != regions:
        raise ImageDataError(
            f"{image} is listed in {listed_in[image][0]} and again in {f}, with other "
            "regions: keep one VIA file (or one entry) per image."
        )
    said["twice"] += 1
    return True


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
        said["outside"] += sum(  # VIA keeps polygons and boxes within the image it shows
            o is not None and (r.get("shape_attributes") or {}).get("name") in ("polygon", "rect")
            and (max(o[0::2]) > 1.05 * width or max(o[1::2]) > 1.05 * height)
            for o, r in zip(outlines, regions, strict=True)
        )  # fmt: skip
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
    if said["void"] and said["void"] >= sum(a.objects for a in found):
        raise ImageDataError(
            f"every region of {', '.join(map(str, files))} has an empty {key}: give the "
            "regions their class in VIA."
        )
    if said["void"]:
        log.warning(
            "%d VIA region(s) have no %s (e.g. on %s): void, neither trained nor scored; "
            "give them their class in VIA.", said["void"], key, said["example"],
        )  # fmt: skip
    if said["outside"]:
        log.warning(
            "%d VIA polygon(s) or box(es) reach more than 5%% past their image's edge: are "
            "these the images annotated (resized since?)", said["outside"],
        )  # fmt: skip
    if said["twice"]:
        log.info("%d image(s) listed again with the same regions: read once", said["twice"])
    folders = {f.parent for f in files}
    unlisted = sorted({i for i in images if i.parent in folders} - {a.image for a in found})
    if unlisted:
        log.warning(
            "%d image(s) beside the VIA files are in none (e.g. %s): left out (nobody "
            "outlined them).", len(unlisted), unlisted[0],
        )  # fmt: skip
