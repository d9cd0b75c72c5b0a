"""YOLO segmentation labels, read as masks: a text file per image, an object per line
(``<class> <x1> <y1> <x2> <y2> ...``, fractions of the image's width and height), as
Ultralytics trains from them and Roboflow, CVAT and Label Studio export them, so that a
dataset made for a YOLO segmentation model trains here with no conversion.

* **Where**: an image's label file is where Ultralytics looks for it, the image's path
  with its last ``images/`` folder as ``labels/`` and ``.txt`` for its suffix
  (``images/train/0001.jpg``: ``labels/train/0001.txt``; Roboflow's
  ``train/images/0001.jpg``: ``train/labels/0001.txt``). An image with no label file in
  a folder ``labels/`` mirrors, or an empty one, has no object (background throughout,
  as Ultralytics trains it); one in a folder nothing mirrors is left out
  (:func:`label_state`). Only where no layout of mask images reads the folder
  (:func:`segnet.data.image_pairs.drawn_masks_root`).
* **Splits**: as the dataset's YAML file gives them (``train:``, ``val:``, ``test:``;
  folders, lists of images in a text file, or lists of either), found below its
  ``path:``, beside it, or (written on another machine) by their last folders below
  ``data.root``; images it does not name are in the split folder they lie in
  (``train/``, ``valid/``), else left out. Without a YAML file, the split folders; else
  drawn.
* **Masks**: objects are drawn as COCO's are (:func:`segnet.data.coco.draw_mask`),
  larger ones first, so that a smaller one lying on a larger keeps its class, as
  Ultralytics overlaps them. A line of a box alone (``<class> <cx> <cy> <w> <h>``) is
  void over its box; labels of boxes only (a detection dataset) are refused, and so is a
  pose dataset (``kpt_shape``): neither outlines an area.
* **Classes**: background (mask value 0), then the classes by number, named by the YAML
  file's ``names:``, else by a ``classes.txt`` (labelImg writes one into the labels
  folder) or darknet's ``obj.names``; with neither, by ``data.class_names`` after its
  background, else ``class0``, ``class1``, ...
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from segnet.data.class_files import ShippedClasses
from segnet.data.coco import draw_mask
from segnet.data.drawn_masks import (
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    image_index,
    image_of,
    mask_path,
    name_below,
    polygon_area,
    split_of_folders,
    text_file,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named

DRAWING = "yolo-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
LABEL_FOLDERS = {"labels": "images", "Labels": "Images", "LABELS": "IMAGES"}
IMAGE_FOLDERS = {v: k for k, v in LABEL_FOLDERS.items()}
NAME_FILES = ("classes.txt", "obj.names", "classes.names")
PREFERRED_YAML = ("data.yaml", "dataset.yaml", "data.yml")
SPLIT_KEYS = ("train", "val", "test")
# labels/ folders are looked for this deep: root/labels, root/train/labels, and one
# more (data.root a folder of such datasets); a deep tree of another layout is not walked
LABELS_DEPTH = 3
FIRST_FILES = 20  # label files looked in before a folder is taken for something else
EDGE = 0.01  # coordinates this far past an edge are clipped to it, as Ultralytics does
log = logging.getLogger(__name__)


# -- finding the files ------------------------------------------------------------------
def label_file(image: Path) -> Path | None:
    """Where Ultralytics looks for ``image``'s labels: its path with its last ``images``
    folder as ``labels``, suffix ``.txt``; None for an image in no ``images`` folder."""
    found = _mirror(image)
    return found[1] if found else None


def _mirror(image: Path) -> tuple[Path, Path] | None:
    parts = image.parts
    for k in range(len(parts) - 2, -1, -1):
        mirror = IMAGE_FOLDERS.get(parts[k])
        if mirror:
            folder = Path(*parts[:k], mirror)
            return folder, folder.joinpath(*parts[k + 1 :]).with_suffix(".txt")
    return None


def _walk(top: Path, depth: int | None = None) -> list[tuple[Path, list[str], list[str]]]:
    """``os.walk`` of ``top``, linked folders followed (each real folder once), hidden
    ones passed over, ``depth`` folders deep at most."""
    seen, found = set(), []
    for here, dirs, files in os.walk(top, followlinks=True):
        real = os.path.realpath(here)
        deep = depth is not None and len(Path(here).relative_to(top).parts) >= depth
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [] if deep else sorted(d for d in dirs if not d.startswith("."))
        found.append((Path(here), dirs, files))
    return found


def label_folders(root: Path) -> list[Path]:
    """The ``labels/`` folders below ``root``, down to :data:`LABELS_DEPTH`, with an
    ``images/`` folder beside them (hidden folders passed over), in path order."""
    return [
        here / d
        for here, dirs, _ in _walk(root, LABELS_DEPTH)
        for d in dirs
        if d in LABEL_FOLDERS and (here / LABEL_FOLDERS[d]).is_dir()
    ]


def text_files(folder: Path) -> list[Path]:
    """The label files below ``folder`` (a labels folder), in path order: text files, not
    hidden, not a file of class names."""
    found = [
        os.path.join(here, f) for here, _, files in _walk(folder) for f in files
        if f.endswith(".txt") and not f.startswith(".") and f.lower() not in NAME_FILES
    ]  # fmt: skip
    found = [f for f in found if os.path.isfile(f)]  # not a broken link, nor a file not fetched
    # in the order of paths compared part by part, as Path sorts them: strings sort faster
    return [Path(f) for f in sorted(found, key=lambda f: f.split(os.sep))]


def annotation_files(root: Path) -> list[Path]:
    """The YOLO label files below ``root`` (:func:`label_folders`), in path order; none
    where the text files there are not YOLO labels (the first of them holding any text
    read none)."""
    if not root.is_dir():
        return []
    files = [f for d in label_folders(root) for f in text_files(d)]
    tried = 0
    for f in files:
        lines = [line for line in (text_file(f) or "").splitlines() if line.strip()]
        if lines and _row(lines[0]) is not None:
            return files
        tried += bool(lines)
        if tried >= FIRST_FILES:
            return []
    return files if not tried else []  # all empty: labels with no object yet, said later


def _row(line: str) -> tuple[int, list[float]] | None:
    """A label line's class and coordinates: a polygon's x y pairs (three or more), or a
    box's centre, width and height; None for a line of anything else."""
    words = line.split()
    try:
        number, coordinates = float(words[0]), [float(w) for w in words[1:]]
    except (ValueError, IndexError):
        return None
    if not all(map(math.isfinite, [number, *coordinates])):  # nan, inf: no position
        return None
    if number != int(number) or number < 0 or len(coordinates) < 4 or len(coordinates) % 2:
        return None
    return int(number), coordinates


def rows_of(path: Path) -> list[tuple[int, int, list[float]]]:
    """The objects of the label file at ``path`` (none where it is not there): line
    number, class and coordinates each; a line of anything else is refused."""
    if not path.is_file():
        return []
    text = text_file(path)
    if text is None:
        raise ImageDataError(
            f"{path} cannot be read as UTF-8 text (saved as UTF-16, as PowerShell's > saves?): "
            "save it as UTF-8."
        )
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        row = _row(line) if line.strip() else None
        if line.strip() and row is None:
            raise ImageDataError(
                f"{path}, line {number}: {line.strip()[:60]!r} is not a YOLO label (a class "
                "number, then a polygon's x y pairs, three or more, or a box's centre x y, "
                "width and height, as fractions of the image's width and height)."
            )
        rows += [(number, *row)] if row else []
    return rows


def object_counts(path: Path) -> tuple[int, int, int]:
    """The outlines, the boxes and the outlines of four corners (an oriented box's, as
    Ultralytics' OBB datasets label them) of the label file at ``path``, counted by the
    words of its lines (read in full where they are drawn)."""
    lengths = [len(line.split()) for line in (text_file(path) or "").splitlines()]
    return sum(n >= 7 for n in lengths), sum(n == 5 for n in lengths), lengths.count(9)


# -- the YAML file ----------------------------------------------------------------------
def dataset_yaml(root: Path) -> tuple[Path, dict[str, Any]] | None:
    """The dataset's YAML file (one naming its classes and a split) and what it holds: in
    ``root``, ``data.yaml`` before others; else the one in a folder below (data.root the
    folder holding the dataset), two there refused, as are two others in ``root`` and a
    pose dataset's."""
    found = _dataset_yamls([root / f for f in os.listdir(root)] if root.is_dir() else [])
    if not found:
        below = [here / f for here, _, files in _walk(root, 2)[1:] for f in files]
        found = _dataset_yamls(below)
        if len(found) > 1:
            raise ImageDataError(
                f"data.root={root} holds {len(found)} YOLO datasets ({found[0][0]}, "
                f"{found[1][0]}{', ...' * (len(found) > 2)}), each numbering its classes its "
                "own way: point data.root at one of them."
            )
    preferred = [(f, held) for f, held in found if f.name.lower() in PREFERRED_YAML]
    found = preferred[:1] or found
    if len(found) > 1:
        raise ImageDataError(
            f"{found[0][0]} and {found[1][0]} both describe a YOLO dataset: keep one (or name "
            "the one to read data.yaml)."
        )
    if found and "kpt_shape" in found[0][1]:
        raise ImageDataError(
            f"{found[0][0]} describes a YOLO pose dataset (kpt_shape): keypoints outline no "
            "area to segment. Segmentation reads YOLO segmentation labels (polygons)."
        )
    return found[0] if found else None


def _dataset_yamls(files: Sequence[Path]) -> list[tuple[Path, dict[str, Any]]]:
    import yaml

    found = []
    for f in sorted(files):
        if f.suffix.lower() not in (".yaml", ".yml") or f.name.startswith(".") or not f.is_file():
            continue
        try:
            held = yaml.safe_load(text_file(f) or "")
        except yaml.YAMLError:
            continue
        named = isinstance(held, dict) and ("names" in held or "nc" in held)
        if named and any(k in held for k in SPLIT_KEYS):
            found.append((f, held))
    return found


def yaml_names(path: Path, held: dict[str, Any]) -> list[str]:
    """The class names of a YAML file's ``names:`` (a list, or numbers 0, 1, ... each with
    its name), checked against its ``nc:`` where it gives one; ``class0``, ``class1``, ...
    where it gives ``nc:`` alone, said."""
    names = held.get("names")
    try:
        count = int(held["nc"]) if held.get("nc") is not None else None
    except (TypeError, ValueError):
        raise ImageDataError(f"{path}: nc: {held['nc']!r} is not a number of classes.") from None
    if names is None and count is None:
        raise ImageDataError(f"{path}: names: and nc: are both empty: name the classes.")
    if names is None:
        log.warning("%s names no class (nc: %d alone): class0 to class%d", path, count, count - 1)
        return [f"class{k}" for k in range(count)]
    if isinstance(names, dict):
        numbers = {int(k) if str(k).strip().isdigit() else k: v for k, v in names.items()}
        if sorted(numbers, key=str) != sorted(range(len(numbers)), key=str):
            raise ImageDataError(
                f"{path}: names: numbers {list(names)}, and YOLO numbers its classes 0, 1, "
                "2, ... with none left out: number them so."
            )
        names = [numbers[k] for k in range(len(numbers))]
    if not isinstance(names, list) or not names:
        raise ImageDataError(f"{path}: names: is neither a list of names nor numbers with names.")
    if count is not None and count != len(names):
        raise ImageDataError(f"{path}: nc: {count} and {len(names)} names: make them agree.")
    return [str(n) for n in names]


# -- classes --------------------------------------------------------------------------------
def class_names_of(
    root: Path, files: Sequence[Path], given: Sequence[str] | None = None
) -> tuple[list[str], str]:
    """The name of each class number and where it is from: the YAML file's ``names``,
    else a file of names (:func:`names_file`), else ``given`` (``data.class_names``)
    after the background, else ``class<k>``."""
    found = dataset_yaml(root)
    if found:
        _one_dataset(root, found[0].parent, found[0])
        return yaml_names(*found), f"the names of {found[0]}"
    listed = names_file(root)
    if listed:
        _one_dataset(root, dataset_of(listed.parent), listed)
        return _lines(listed), f"the names in {listed}"
    if given:
        return list(given[1:]), "data.class_names (after the background)"
    top = max((int(float(w.split()[0])) for f in files for w in _lines(f) if _row(w)), default=0)
    log.warning(
        "no data.yaml nor classes.txt names the classes of the YOLO labels in %s: they are "
        "named class0 to class%d (data.class_names=[background,...] names them).", root, top,
    )  # fmt: skip
    return [f"class{k}" for k in range(top + 1)], f"the class numbers of the labels in {root}"


def names_file(root: Path) -> Path | None:
    """The file of class names in ``root`` or its labels folders (labelImg writes its
    ``classes.txt`` there); two that name other classes are refused."""
    found = [
        place / n for place in [root, *label_folders(root)] for n in NAME_FILES
        if (place / n).is_file()
    ]  # fmt: skip
    other = next((f for f in found if _lines(f) != _lines(found[0])), None)
    if other is not None:
        raise ImageDataError(
            f"{found[0]} and {other} name other classes ({', '.join(_lines(found[0]))}; "
            f"{', '.join(_lines(other))}): YOLO numbers the classes one way for a dataset. "
            "Keep one, or point data.root at one dataset."
        )
    return found[0] if found else None


def dataset_of(folder: Path) -> Path:
    """The dataset folder of a ``labels/`` folder (or of ``data.root``): its parent, or
    the parent's parent where that is a split folder (Roboflow's ``train/labels``)."""
    if folder.name not in LABEL_FOLDERS:
        return folder
    return folder.parent.parent if split_named(folder.parent.name) else folder.parent


def _one_dataset(root: Path, named: Path, source: Path) -> None:
    """Refuses labels of another dataset below ``root`` than the one ``source`` names the
    classes of (in ``named``): a dataset numbers its classes its own way."""
    if named == root:
        return
    other = next((f for f in label_folders(root) if not dataset_of(f).is_relative_to(named)), None)
    if other is not None:
        raise ImageDataError(
            f"data.root={root} holds the labels of more than one dataset ({other} beside "
            f"{named}), and {source} names the classes of one: point data.root at one "
            "dataset, or put a data.yaml naming the classes of all in data.root."
        )


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in (text_file(path) or "").splitlines() if line.strip()]


def yolo_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s YOLO labels (:func:`annotation_files`), by mask value,
    void last; None where it has none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    return drawn_classes(*reversed(class_names_of(root, files)))


# -- splits ---------------------------------------------------------------------------------
def yaml_splits(root: Path, images: Sequence[Path]) -> dict[Path, str]:
    """The split of each image the YAML file names (:func:`dataset_yaml`): the first
    split naming it, where two do (``val:`` the train folder), said."""
    found = dataset_yaml(root)
    if found is None:
        return {}
    path, held = found
    base = Path(os.path.normpath(path.parent / str(held.get("path") or ".")))
    bases = list(dict.fromkeys([base, path.parent]))
    by_name, in_folder = image_index(images), set(images)
    splits: dict[Path, str] = {}
    twice: dict[tuple[str, str], int] = {}
    for key in SPLIT_KEYS:
        entries = held.get(key) or []
        for entry in entries if isinstance(entries, list) else [entries]:
            where = resolved(str(entry), bases, root)
            if where is None:
                log.warning(
                    "%s: %s: %s is not found below data.root=%s: no image is read as %s's "
                    "by it.", path, key, entry, root, key,
                )  # fmt: skip
                continue
            for image in listed_images(where, bases, images, by_name, in_folder):
                first = splits.setdefault(image, key)
                twice[key, first] = twice.get((key, first), 0) + (first != key)
    for (key, first), count in twice.items():
        if count:
            log.warning(
                "%s: %d image(s) of %s: are %s's already: they are kept in %s%s.", path,
                count, key, first, first,
                ", and val is drawn from train (data.val_fraction)" * (key == "val"),
            )  # fmt: skip
    return splits


def labelled_splits(root: Path, images: Sequence[Path]) -> dict[Path, str | None]:
    """Each labelled image (:func:`label_state`) and its split: the YAML file's, else its
    split folder's. Where the YAML file gives splits, images it names none of are left
    out, said (a YAML file lists what a dataset holds, as Ultralytics reads it)."""
    is_dir = functools.cache(Path.is_dir)  # asked for many images of few folders
    states = {i: label_state(i, is_dir) for i in images}
    labelled = [i for i, state in states.items() if state == "labelled"]
    broken = [i for i, state in states.items() if state == "broken"]
    if broken:
        log.warning(
            "%d label file(s) are links to nothing (not fetched? e.g. %s): their images are "
            "left out.", len(broken), label_file(broken[0]),
        )  # fmt: skip
    _refuse_shared_labels(labelled)
    given = yaml_splits(root, labelled) if labelled else {}
    splits = {i: given.get(i) or split_of_folders(root, i) for i in labelled}
    unsplit = [i for i, split in splits.items() if split is None]
    if given and unsplit:
        log.warning(
            "%d labelled image(s) in %s are in no split (%s names none of them, nor does a "
            "split folder hold them; e.g. %s): left out.", len(unsplit), root,
            dataset_yaml(root)[0], unsplit[0],
        )  # fmt: skip
        return {i: split for i, split in splits.items() if split is not None}
    return splits


def label_state(image: Path, is_dir=Path.is_dir) -> str | None:
    """``labelled`` where ``image``'s label file is there, or where it has no object in a
    folder the ``labels/`` folder mirrors (``labels/train/`` for
    ``images/train/cam2/0.jpg``; ``labels/`` itself for ``images/0.jpg``), as Ultralytics
    trains such images as background; ``broken`` where its label file is a link to
    nothing (not fetched); else None (an unlabelled ``images/test/`` beside
    ``labels/train/``)."""
    found = _mirror(image)
    if found is None:
        return None
    folder, label = found
    if label.is_file():
        return "labelled"
    if os.path.lexists(label):
        return "broken"
    below = label.relative_to(folder).parts
    return "labelled" if is_dir(folder.joinpath(*below[:1]) if len(below) > 1 else folder) else None


def _refuse_shared_labels(labelled: Sequence[Path]) -> None:
    by_label: dict[Path, Path] = {}
    for image in labelled:
        other = by_label.setdefault(label_file(image), image)
        if other != image:
            raise ImageDataError(
                f"{other} and {image} share the label file {label_file(image)} (and would "
                "share their predictions' names): rename one."
            )


def resolved(entry: str, bases: Sequence[Path], root: Path) -> Path | None:
    """Where a YAML file's split entry points below ``root``: below each of ``bases``
    (Roboflow's ``../train/images`` also without its ``../``), else by its last folders
    (a path of the machine the file was written on)."""
    rel = PurePosixPath(entry.replace("\\", "/"))
    tries = [Path(os.path.normpath(b / rel)) for b in bases]
    tries += [Path(os.path.normpath(b / entry[3:])) for b in bases if entry.startswith("../")]
    parts = [p for p in rel.parts if p not in ("/", ".", "..") and not p.endswith(":/")]
    # by its last two folders at least: valid/images is not any images/ folder
    tries += [root.joinpath(*parts[k:]) for k in range(max(1, len(parts) - 1))]
    return next((t for t in tries if t.exists() and t.is_relative_to(root)), None)


def listed_images(
    where: Path, bases: Sequence[Path], images: Sequence[Path], by_name: dict, in_folder: set
) -> list[Path]:
    """The images a split entry gives: those below a folder, or those a text file lists
    a line each (relative to itself, to the dataset's path, or by name)."""
    if where.is_dir():
        return [i for i in images if i.is_relative_to(where)]
    places = [where.parent, *bases]
    lines = [line.strip() for line in (text_file(where) or "").splitlines() if line.strip()]
    return [i for i in (image_of(line, places, by_name) for line in lines) if i in in_folder]


# -- drawing --------------------------------------------------------------------------------
def objects_of(path: Path, rows: Sequence, height: int, width: int) -> list[dict[str, Any]]:
    """A label file's rows as the objects :func:`segnet.data.coco.draw_mask` draws (pixel
    coordinates; a box with no outline); coordinates beyond the image refused."""
    objects = []
    for number, cls, coordinates in rows:
        xy = np.asarray(coordinates, dtype=float)
        if xy.min() < -EDGE or xy.max() > 1 + EDGE:
            raise ImageDataError(
                f"{path}, line {number}: coordinates from {xy.min():g} to {xy.max():g}, and "
                "YOLO labels give positions as fractions (0 to 1) of the image's width and "
                f"height{': these look like pixels' * bool(xy.max() > 2)}. Convert them."
            )
        xy = xy.clip(0, 1) * np.tile([width, height], len(xy) // 2)
        if len(xy) == 4:  # a box alone: its centre, width and height
            cx, cy, w, h = xy
            # to a hundredth of a pixel: what six decimals of a fraction blur
            box = [round(float(v), 2) for v in (cx - w / 2, cy - h / 2, w, h)]
            objects.append({"category_id": cls, "segmentation": [], "bbox": box, "area": w * h})
            continue
        xs, ys = xy[0::2], xy[1::2]
        area = polygon_area(xs, ys)
        objects.append({"category_id": cls, "segmentation": [xy.tolist()], "area": area})
    return objects


def check_classes(path: Path, rows: Sequence, names: Sequence[str], source: str) -> None:
    for number, cls, _ in rows:
        if cls >= len(names):
            raise ImageDataError(
                f"{path}, line {number}: class {cls}, and {source} name(s) {len(names)} "
                f"(0 to {len(names) - 1}): add its name, or correct the label."
            )


# -- the images -----------------------------------------------------------------------------
def yolo_images(
    root: Path, images: Sequence[Path], class_names: Sequence[str] | None = None
) -> list[AnnotatedImage]:
    """Every image with a ``labels/`` mirror below ``root`` (:func:`labelled_splits`),
    each with its mask (drawn now, or found drawn in the cache) of ``class_names``
    (given, or the labels' own: :func:`yolo_classes`), in its split; ``images`` are the
    image files below ``root``."""
    files = annotation_files(root)
    names, source = class_names_of(root, files, class_names)
    chosen = list(class_names or drawn_classes(source, names).class_names)
    by_label = values_by_name(names, chosen, source)
    values = {k: by_label[n] for k, n in enumerate(names)}
    splits = labelled_splits(root, images)
    labels = {i: label_file(i) for i in splits}
    # keyed by the images too: a label's fractions are drawn at its image's size
    read = [*splits, *(f for f in labels.values() if f.is_file())]
    folder = cache_folder(DRAWING, read, values)
    if not folder.is_dir():
        log.info(
            "drawing the masks of %d YOLO-labelled image(s), once, into %s", len(splits), folder
        )
    found, boxes, corners, overlapping = [], 0, 0, 0
    for image, split in splits.items():
        label, name = labels[image], name_below(root, image)
        mask = mask_path(folder, name)
        if not mask.is_file():  # each written whole: one there was drawn from this file
            overlapping += _draw_one(label, image, values, names, source, mask)
        outlined, boxed, four = object_counts(label) if label.is_file() else (0, 0, 0)
        boxes, corners = boxes + boxed, corners + four
        found.append(AnnotatedImage(name, image, mask, split, outlined))
    unread = [i for i in images if i not in splits and label_state(i) is None]
    _say_what_was_left(root, files, unread, found, boxes, overlapping)
    if corners and corners == sum(a.objects for a in found):
        log.warning(
            "every YOLO outline below %s has four corners, as an oriented-box (OBB) "
            "dataset's or boxes exported as polygons have: where these are boxes, the masks "
            "are boxes, not the objects' outlines (four-sided objects aside).", root,
        )  # fmt: skip
    return found


def _draw_one(
    label: Path, image: Path, values: dict[int, int], names: Sequence[str], source: str,
    mask: Path,
) -> bool:  # fmt: skip
    rows = rows_of(label)
    check_classes(label, rows, names, source)
    height, width = check_size(label, image.name, image, None, None)
    drawn, overlap = draw_mask(height, width, objects_of(label, rows, height, width), values)
    write_mask(mask, drawn)
    return overlap


def _say_what_was_left(
    root: Path, files: list[Path], unread: Sequence[Path], found: list, boxes: int,
    overlapping: int,
) -> None:  # fmt: skip
    if not any(a.objects for a in found):
        raise ImageDataError(
            f"the {len(files)} YOLO label file(s) below {root} outline no object"
            + (
                f": their {boxes} objects are boxes (cx cy w h), as a detection dataset's are, "
                "and segmentation trains on outlines. Export the labels as YOLO segmentation "
                "(polygons)."
                if boxes
                else " (every one is empty): outline the objects first."
            )
        )
    if unread:
        log.warning(
            "%d image(s) in %s are in no images/ folder a labels/ folder mirrors (e.g. %s): "
            "left out, as nobody labelled them.", len(unread), root, unread[0],
        )  # fmt: skip
    if overlapping:
        log.info(
            "in %d image(s) objects of two classes overlap: the smaller object's class is "
            "kept where they do.", overlapping,
        )  # fmt: skip
    if boxes:
        log.warning(
            "%d YOLO label line(s) are boxes with no outline: their boxes are void (neither "
            "trained nor scored).", boxes,
        )  # fmt: skip
