"""Label Studio's JSON exports, read as masks: the tasks of a project (``JSON``: each
task's ``data`` naming its image and its ``annotations``' ``result``), or its ``JSON-MIN``
export (an item per annotation), so that a folder of the images and the export trains
with no conversion, brush strokes included (which its COCO export leaves out).

* **Where**: the export's JSON files in ``data.root``, its split folders and its
  annotations folder. A task's image is found by the path its data gives (an upload's,
  ``/data/upload/3/5a3b2c1d-0001.jpg``, by its name without the prefix Label Studio
  added, and as Label Studio stores it: ``my photo.jpg`` as ``my_photo.jpg``; a local
  storage's ``?d=`` path; a URL's path) beside the file or anywhere below
  ``data.root``. A file's split is its folder's, its name's, else its images' split
  folders. A task of several images is refused.
* **Which annotation**: a task's annotation marked ground truth, else its latest (JSON-MIN
  marks none: its latest); cancelled ones (skipped) never; a task nobody annotated is
  left out, said (its predictions are a model's, not labels).
* **Masks**: polygons, rectangles and ellipses (rotated as Label Studio rotates them),
  brush strokes (its run lengths) and bitmasks are drawn as COCO's objects are
  (:func:`segnet.data.coco.draw_mask`), larger ones first; key points are counted, not
  drawn.
* **Classes**: background (mask value 0), then the labels in name order (an export does
  not hold the project's label order: ``data.class_names`` gives one). A region's
  results (one per control) are read together: its shape's own labels, else a
  ``<Labels>`` control's; a region whose labels were all deselected is void.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import base64
import functools
import io
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import numpy as np

from segnet.data.class_files import ShippedClasses
from segnet.data.coco import draw_mask
from segnet.data.drawn_masks import (
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
from segnet.data.name_rules import IMAGE_SUFFIXES

DRAWING = "label-studio-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-(?P<name>.+)$")  # what an upload's name is given
log = logging.getLogger(__name__)


# -- the export -----------------------------------------------------------------------------
def tasks(path: Path) -> list[dict[str, Any]] | None:
    """The tasks of the Label Studio export at ``path``, each as ``image`` (the path its
    data gives), ``upload`` (its uploaded file's name), ``annotations`` (the regions of
    the one read, :func:`regions_of`; none where nobody annotated it) and ``predicted``
    (whether a model pre-labelled it); None for a JSON file of anything else."""
    kind = export_kind(path)
    if kind is None:
        return None
    stat = path.stat()
    return _tasks(path, stat.st_size, stat.st_mtime_ns, kind)


@parsed_by_reader
@functools.lru_cache(maxsize=8)  # the classes and the images each read every task
def _tasks(path: Path, size: int, mtime: int, kind: str) -> list[dict[str, Any]]:
    found = json_file(path)
    return [_task(path, t) for t in found] if kind == "JSON" else _min_tasks(path, found)


def export_kind(path: Path) -> str | None:
    """``JSON`` or ``JSON-MIN`` where ``path`` is such a Label Studio export; None
    otherwise. Told by its shape alone, so that finding the files never refuses one (a
    folder of mask images beside an export is read from its masks, whatever the export
    holds)."""
    found = json_file(path)
    if not isinstance(found, list) or not found or not all(isinstance(t, dict) for t in found):
        return None
    if all(isinstance(t.get("data"), dict) and isinstance(t.get("annotations"), list)
           for t in found):  # fmt: skip
        return "JSON"
    return "JSON-MIN" if all("annotation_id" in t and "data" not in t for t in found) else None


def _task(path: Path, task: dict[str, Any]) -> dict[str, Any]:
    """A task of the JSON export as :func:`tasks` gives it: its ground-truth annotation,
    else its latest, cancelled ones never."""
    kept = [a for a in task["annotations"] if isinstance(a, dict) and not a.get("was_cancelled")]
    chosen = sorted(kept, key=lambda a: (bool(a.get("ground_truth")), str(a.get("updated_at"))))
    return {
        "image": image_reference(path, task["data"], task.get("id")),
        "upload": task.get("file_upload"),
        "annotations": [regions_of(path, chosen[-1].get("result") or [])] if chosen else [],
        "several": len(kept) > 1,
        "predicted": bool(task.get("predictions")),
    }


def _min_tasks(path: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON-MIN's items (one per annotation, its regions under each control's name, each
    with its labels and sizes; an unannotated task's with no ``annotation_id``) as
    :func:`tasks` gives them: the latest per task."""
    by_task: dict[Any, dict[str, Any]] = {}
    for item in sorted(items, key=lambda i: str(i.get("updated_at"))):
        results = [
            {"value": r, "from_name": k, "original_width": r.get("original_width"),
             "original_height": r.get("original_height")}
            for k, v in item.items() if isinstance(v, list)
            for r in v if isinstance(r, dict) and label_key(r) is not None
        ]  # fmt: skip
        annotated = item.get("annotation_id") is not None
        key = item.get("id", len(by_task))
        by_task[key] = {
            "image": image_reference(path, item, key),
            "upload": None,
            "annotations": [regions_of(path, results)] if annotated else [],
            "several": annotated and bool(by_task.get(key, {}).get("annotations")),
            "predicted": False,
        }
    return list(by_task.values())


def image_reference(path: Path, data: dict[str, Any], task: Any) -> str | None:
    """The image a task's data names: its one value that is the path of an image (its
    ``image`` where several are); a task of several images is refused."""
    found = [v for v in data.values() if isinstance(v, str) and is_image_name(reference_path(v))]
    if isinstance(data.get("image"), str):
        return data["image"]
    if len(found) > 1:
        raise ImageDataError(
            f"{path}: task {task} names {len(found)} images ({', '.join(found[:3])}): one "
            "image per task is read. Annotate each image in a task of its own."
        )
    return found[0] if found else None


def annotation_files(root: Path) -> list[Path]:
    """The Label Studio exports in ``root``, its split folders and its annotations folder,
    in path order."""
    if not root.is_dir():
        return []
    files = [
        f for place in export_places(root) for f in sorted(place.glob("*.json")) if f.is_file()
    ]
    return [f for f in files if export_kind(f)]


def stored_name(name: str) -> str:
    """A file's name as Label Studio stores an upload (Django's rule): spaces as ``_``,
    characters other than letters, digits, ``-``, ``_`` and ``.`` left out."""
    return re.sub(r"[^-\w.]", "", name.strip().replace(" ", "_"))


def file_names(reference: str | None, upload: str | None) -> list[str]:
    """Where a task's image may be, best first: the path its data gives (a local
    storage's ``?d=`` path; a URL's path), then an upload's name without the prefix
    Label Studio gave it (``/data/upload/3/5a3b2c1d-0001.jpg``: ``0001.jpg``)."""
    names, uploads = [], [upload] if upload and is_image_name(upload) else []
    if reference:
        path = reference_path(reference)
        names.append(path)
        if urlparse(reference).path.startswith("/data/upload/"):  # served from any host
            uploads.append(path)
    for name in uploads:
        if match := UPLOAD_PREFIX.match(PurePosixPath(name).name):
            names.append(match["name"])
    return [n for n in names if n]


def reference_path(reference: str) -> str:
    """The path a task's image reference gives: a local storage's ``?d=`` path, a URL's
    path (without its host), else the reference itself, unquoted."""
    parsed = urlparse(reference)
    local = parse_qs(parsed.query).get("d")  # decoded already
    if local:
        return local[0].lstrip("/")
    return unquote(parsed.path).lstrip("/") if parsed.scheme else unquote(parsed.path)


def is_image_name(name: str) -> bool:
    """Whether ``name`` is an image's by its suffix (not an imported JSON or CSV file)."""
    return PurePosixPath(name).suffix.lower() in IMAGE_SUFFIXES


# -- regions --------------------------------------------------------------------------------
def label_key(value: dict[str, Any]) -> str | None:
    """The key of a region's labels (``polygonlabels``, ``brushlabels``, ``labels``, ...)."""
    return next((k for k, v in value.items() if k.endswith("labels") and isinstance(v, list)), None)


def regions_of(path: Path, results: Sequence[Any]) -> list[dict[str, Any]]:
    """An annotation's regions, each its ``label`` (None for a region no control labels;
    :data:`UNCLASSED`, void, for one whose labels were all deselected), its ``value``
    (where it lies) and its ``size`` (the image's, as the region gives it). A region's
    results (one per control, sharing its ``id``) are read together: a shape's own
    labels (``polygonlabels``) before a ``labels`` control's; a region labelled by two
    controls of one kind, or with two labels, is refused."""
    grouped: dict[Any, list[dict]] = {}
    for k, r in enumerate(x for x in results if isinstance(x, dict)):
        grouped.setdefault(r.get("id", f"#{k}"), []).append(r)
    regions = []
    for parts in grouped.values():
        shapes = [r for r in parts if region_kind(r.get("value") or {})]
        labelled = [r for r in parts if label_key(r.get("value") or {})]
        own = [r for r in labelled if label_key(r["value"]) != "labels"] or labelled
        controls = sorted({str(r.get("from_name")) for r in own})
        if len(controls) > 1:
            raise ImageDataError(
                f"{path}: a region is labelled by the controls {', '.join(controls)}: one "
                "of them must be its class. Export a project whose regions one control labels."
            )
        labels = own[0]["value"][label_key(own[0]["value"])] if own else None
        if labels is not None and len(labels) > 1:
            raise ImageDataError(
                f"{path}: a region is labelled {labels}: a region is of one class, so give "
                'it one label (Label Studio\'s choice="single").'
            )
        shape = (shapes or own or parts)[0]
        regions.append({
            "label": None if labels is None else str(labels[0]) if labels else UNCLASSED,
            "value": shape.get("value") or {},
            "size": (shape.get("original_height"), shape.get("original_width")),
            "turned": bool(shape.get("image_rotation")),
        })  # fmt: skip
    return regions


def class_list(files: Sequence[Path]) -> list[str]:
    """The labels of every region of an area (a key point's label is no class), in name
    order."""
    labels = {
        r["label"]
        for f in files for t in tasks(f) or [] for a in t["annotations"] for r in a
        if region_kind(r["value"])
    }  # fmt: skip
    return sorted(labels - {None})


def label_studio_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s Label Studio exports, by mask value, void last; None
    where it has none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    return drawn_classes(f"the labels of {files[0]}", class_list(files))


def brush_pixels(rle: Sequence[int], height: int, width: int) -> np.ndarray:
    """The pixels a brush stroke covers: Label Studio's run lengths (a bit stream: the
    count of values, their size, four run-length sizes, then runs of one value repeated
    or of values each given) of the image's RGBA values, where its alpha is not zero (as
    Label Studio shows a stroke and converts it to COCO's)."""
    bits = np.unpackbits(np.asarray(rle, dtype=np.uint8)).astype(np.int64)
    at = 0

    def read(n: int) -> int:
        nonlocal at
        if at + n > len(bits):
            raise ValueError("its brush's run lengths end early")
        word = bits[at : at + n]
        at += n
        return int(word @ (1 << np.arange(n - 1, -1, -1, dtype=np.int64)))

    count, size = read(32), read(5) + 1
    runs = [read(4) + 1 for _ in range(4)]
    if count != height * width * 4:
        raise ValueError(
            f"its brush holds {count} values, and an RGBA image of {width}x{height} holds "
            f"{height * width * 4}"
        )
    values = np.zeros(count, np.uint8 if size <= 8 else np.uint32)
    i = 0
    while i < count:
        repeated = read(1)
        j = min(i + 1 + read(runs[read(2)]), count)
        if repeated:
            values[i:j] = read(size)
        else:
            values[i:j] = [read(size) for _ in range(j - i)]
        i = j
    return values.reshape(height, width, 4)[..., 3] > 0


def outline(value: dict[str, Any], kind: str, height: int, width: int) -> list[float] | None:
    """A polygon, rectangle or ellipse as a polygon ``[x0, y0, x1, y1, ...]`` in pixels
    (Label Studio gives percentages of the image's width and height; a rectangle turns
    about its top-left corner, an ellipse about its centre, clockwise in degrees)."""
    sx, sy = width / 100, height / 100
    if kind == "polygon":
        points = value.get("points") or []
        return (
            [v for x, y in points for v in (float(x) * sx, float(y) * sy)]
            if len(points) >= 3
            else None
        )
    turn = math.radians(float(value.get("rotation") or 0))
    cos, sin = math.cos(turn), math.sin(turn)
    x, y = float(value["x"]) * sx, float(value["y"]) * sy
    if kind == "rectangle":
        w, h = float(value["width"]) * sx, float(value["height"]) * sy
        corners = [(0, 0), (w, 0), (w, h), (0, h)]
        return [v for u, t in corners for v in (x + u * cos - t * sin, y + u * sin + t * cos)]
    rx, ry = float(value["radiusX"]) * sx, float(value["radiusY"]) * sy
    return ellipse_outline(x, y, rx, ry, turn)


def bitmask_pixels(value: dict[str, Any], height: int, width: int) -> np.ndarray:
    """The pixels of a bitmask region (a PNG as a data URL: ``<BitmaskLabels>``) where its
    alpha (else its grey) is not zero."""
    from PIL import Image

    url = next(v for v in value.values() if isinstance(v, str) and v.startswith("data:image"))
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
        held = np.asarray(im.getchannel("A") if "A" in im.getbands() else im.convert("L"))
    if held.shape != (height, width):
        raise ValueError(f"its bitmask is {held.shape[1]}x{held.shape[0]}, not {width}x{height}")
    return held > 0


def region_kind(value: dict[str, Any]) -> str | None:
    """How a region is drawn: ``brush``, ``bitmask``, ``polygon``, ``ellipse`` or
    ``rectangle``; None for one of no area (a key point, a polygon of fewer than three
    points)."""
    if "rle" in value:
        return "brush"
    if any(isinstance(v, str) and v.startswith("data:image") for v in value.values()):
        return "bitmask"
    if "points" in value:
        return "polygon" if len(value["points"] or []) >= 3 else None
    if "radiusX" in value:
        return "ellipse"
    return "rectangle" if "width" in value and "height" in value else None


def objects_of(regions: Sequence[dict], height: int, width: int) -> list[dict]:
    """An annotation's labelled regions of an area as the objects
    :func:`segnet.data.coco.draw_mask` draws (their label as their category)."""
    from pycocotools import mask as coco_mask

    objects = []
    for region in regions:
        label, value = region["label"], region["value"]
        kind = region_kind(value)
        if label is None or kind is None:
            continue
        if kind in ("brush", "bitmask"):
            pixels = (
                brush_pixels(value["rle"], height, width)
                if kind == "brush"
                else bitmask_pixels(value, height, width)
            )
            rle = coco_mask.encode(np.asfortranarray(pixels.astype(np.uint8)))
            objects.append({"category_id": label, "segmentation": rle, "area": float(pixels.sum())})
            continue
        polygon = outline(value, kind, height, width)
        if polygon is not None:
            area = polygon_area(polygon[0::2], polygon[1::2])
            objects.append({"category_id": label, "segmentation": [polygon], "area": area})
    return objects


# -- the images -----------------------------------------------------------------------------
def label_studio_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every annotated task's image ``root``'s Label Studio exports name and the folder
    holds, each with its mask (drawn now, or found drawn in the cache) of
    ``class_names`` (given, or the exports' own: :func:`label_studio_classes`)."""
    files = annotation_files(root)
    names = list(class_names or label_studio_classes(root).class_names)
    values = values_by_name(class_list(files), names, f"the labels of {files[0]}")
    folder = cache_folder(DRAWING, files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
    by_name = image_index(images)  # an upload's name as stored, where no image has that name
    by_name = {**{stored_name(n): i for n, i in by_name.items()}, **by_name}
    found: dict[Path, AnnotatedImage] = {}
    said = {"unannotated": 0, "predicted": 0, "several": 0, "undrawn": 0, "twice": [],
            "turned": 0, "void": 0}  # fmt: skip
    for f in files:
        listed, missing = tasks(f) or [], []
        before = (said["unannotated"], len(found))
        for task in listed:
            image = next(
                (i for n in file_names(task["image"], task["upload"])
                 if (i := image_of(n, [f.parent, root], by_name))), None,
            )  # fmt: skip
            if image is None:
                missing.append(task["image"] or task["upload"] or "a task naming no image")
                continue
            if not task["annotations"]:
                said["unannotated"] += 1
                said["predicted"] += task["predicted"]
                continue
            said["several"] += task["several"]
            if image in found:
                said["twice"].append(image)
            found[image] = _annotated(root, f, task, image, values, folder, said)
        unannotated, read = said["unannotated"] - before[0], len(found) - before[1]
        say_missing(f, len(listed) - unannotated, missing, read,
                    "put the images beside the file, or anywhere below data.root.")  # fmt: skip
    _say_what_was_left(files, list(found.values()), said)
    return list(found.values())


def _annotated(
    root: Path, f: Path, task: dict, image: Path, values: dict, folder: Path, said: dict
) -> AnnotatedImage:
    """One task's image with its mask, drawn where the cache has none."""
    regions = [r for r in task["annotations"][0] if r["label"] is not None]
    areas = [r for r in regions if region_kind(r["value"])]
    said["undrawn"] += len(regions) - len(areas)
    said["turned"] += any(r["turned"] for r in areas)
    said["void"] += sum(r["label"] == UNCLASSED for r in areas)
    name = name_below(root, image)
    mask = mask_path(folder, name)
    if not mask.is_file():  # each written whole: one there was drawn from this file
        given = next((r["size"] for r in areas if r["size"][0]), (None, None))
        height, width = check_size(f, image.name, image, *given)
        try:
            drawn = draw_mask(height, width, objects_of(areas, height, width), values)[0]
        except (KeyError, TypeError, ValueError, OSError) as err:
            raise ImageDataError(
                f"{f}: a region of {image.name} cannot be drawn ({type(err).__name__}: {err}): "
                "export the project again from Label Studio."
            ) from None
        write_mask(mask, drawn)
    return AnnotatedImage(name, image, mask, file_split(root, f, image), len(areas))


def _say_what_was_left(files: list[Path], found: list, said: dict) -> None:
    where = ", ".join(map(str, files))
    if said["twice"]:
        raise ImageDataError(
            f"{said['twice'][0]} is the image of two tasks of {where}: keep one task per "
            "image (or one export)."
        )
    if not found:
        raise ImageDataError(
            f"no task of {where} is annotated ({said['unannotated']} are not, "
            f"{said['predicted']} of them with a model's predictions): submit the "
            "annotations in Label Studio, then export again."
        )
    if not any(a.objects for a in found):
        raise ImageDataError(
            f"the annotations of {where} outline no region: label polygons, rectangles, "
            "ellipses, brush strokes or bitmasks."
        )
    if said["unannotated"]:
        log.warning(
            "%d task(s) of %s are not annotated (%d with a model's predictions, which are no "
            "labels): left out.", said["unannotated"], where, said["predicted"],
        )  # fmt: skip
    if said["several"]:
        log.info(
            "%d task(s) have several annotations: the one marked ground truth is read, "
            "else the latest", said["several"],
        )  # fmt: skip
    if said["undrawn"]:
        log.warning(
            "%d Label Studio region(s) outline no area (key points, polygons of fewer than "
            "three points): not drawn.", said["undrawn"],
        )  # fmt: skip
    if said["void"] and said["void"] >= sum(a.objects for a in found):
        raise ImageDataError(
            f"every region of {where} has its labels deselected: label the regions in Label "
            "Studio, then export again."
        )
    if said["void"]:
        log.warning(
            "%d Label Studio region(s) have no label (all deselected): void, neither trained "
            "nor scored; label them in Label Studio.", said["void"],
        )  # fmt: skip
    if said["turned"]:
        log.warning(
            "%d image(s) were turned in Label Studio's editor (image_rotation): their regions "
            "are drawn as exported; check a saved mask against its image.", said["turned"],
        )  # fmt: skip
