"""Run-length CSVs, read as masks: the ``train.csv`` most Kaggle segmentation datasets
ship instead of mask images (Severstal's ``ImageId,ClassId,EncodedPixels``, Airbus's
``ImageId,EncodedPixels``, TGS Salt's ``id,rle_mask``, Carvana's ``img,rle_mask``,
Understanding Clouds' ``Image_Label,EncodedPixels``, Sartorius' ``id,annotation``), so
that such a folder trains with no conversion.

* **Where**: CSV files in ``data.root``, its split folders and its annotations folder
  with a column naming the image and one of run lengths (``start length`` pairs, the
  first pixel numbered 1, in ascending order; or, where a row's do not ascend, each
  start counted from the last run's end, from 0, as SIIM-ACR's), told by their header
  and first cells; a
  sample submission (its name says ``submission``) is not read. A file's split is its
  folder's or its name's (``train.csv``: train). Images are found by the path or the
  name a row gives, by their name without its suffix (TGS Salt's ids), or by a folder
  and the start of their name (UW-Madison GI's ids). Runs number
  the pixels of the image as viewers show it (its EXIF orientation applied).
* **Pixel order** (``data.rle_order``): ``auto`` tells it from the masks
  (:mod:`segnet.data.pixel_order`) and the run records what it told, so that
  evaluation reads another export of the data so too; where the masks do not tell, the
  run is refused before training, asking for the setting; a given order the masks
  contradict is warned of.
* **Masks**: a row per object, or per class of an image: the rows of one image are laid
  into its mask, larger objects first (:func:`segnet.data.coco.draw_mask`), so that a
  smaller one keeps its class where two overlap. An empty cell (or ``-1``) is an image
  with no object. Where (almost) no row is empty and some images of the folders the rows
  name are in no row (Severstal lists defects only), those images have no object,
  warned; where rows do list empty images, unlisted images are left out, warned (nobody
  annotated them).
* **Classes**: a class column's values (``ClassId``, ``class``): numbers name class
  ``class<n>``, or ``data.class_names[n]`` (numbers from 0: ``[n + 1]``), words
  themselves; an id ending in ``_<class>`` after the image's name (``0011165.jpg_Fish``)
  gives the class; with neither, one class, ``foreground``.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import csv
import functools
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

import numpy as np

from segnet.data import class_masks
from segnet.data.class_files import BACKGROUND_NAMES, ShippedClasses
from segnet.data.coco import draw_mask
from segnet.data.drawn_masks import (
    AnnotatedImage,
    cache_folder,
    check_size,
    drawn_classes,
    export_places,
    file_split,
    image_index,
    image_of,
    mask_path,
    name_below,
    parsed_by_reader,
    say_missing,
    values_by_name,
    write_mask,
)
from segnet.data.errors import ImageDataError
from segnet.data.name_rules import IMAGE_SUFFIXES
from segnet.data.pixel_order import ORDER_WORDS, VOTES, decode, tell_order

DRAWING = "run-length-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
ORDERS = ("auto", "columns", "rows")  # data.rle_order
# column headers as :func:`word` reads them
ID_WORDS = ("imageid", "imagelabel", "imageidclassid", "image", "img", "id", "imagename",
            "filename", "file", "name", "imgid", "imagepath", "path")  # fmt: skip
RUN_WORDS = ("encodedpixels", "rlemask", "rle", "encoding", "maskrle", "rlemasks", "encoded",
             "segmentation", "annotation", "mask")  # fmt: skip
CLASS_WORDS = ("classid", "class", "classname", "label", "labelid", "category", "categoryid",
               "classlabel")  # fmt: skip
HEIGHT_WORDS = ("height", "imgheight", "imageheight")
WIDTH_WORDS = ("width", "imgwidth", "imagewidth")
NO_OBJECT = frozenset({"", "nan", "na", "none", "null", "-1"})  # an image with no object
CELLS_LOOKED_AT = 20  # cells of the run column that tell a run-length CSV from another
LISTS_EMPTY = 0.01  # the share of empty rows from which a file is taken to list every image
NAME_START = 3  # words of an image's name an id may give after a folder (slice_0001)
# the share of rows of several runs whose starts do not ascend from which a file's runs
# count each start from the last run's end (SIIM's); fewer are refused, by line
RELATIVE = 0.5
# the share of the images holding two classes or more on which two of them overlap, from
# which each class is a mask of its own (a region) rather than a class of one label map
OVERLAPPING = 0.05
UNNAMED = "foreground"  # the class where no column or id names one, as binary masks name it
NAME_AND_CLASS = re.compile(
    r"^(?P<image>.+(?:" + "|".join(re.escape(s) for s in IMAGE_SUFFIXES) + r"))_(?P<cls>[^/\\]+)$",
    re.IGNORECASE,
)
_TOLD: dict[tuple, str] = {}  # the order auto told, by the files (as they are now) told of
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Row:
    """One row of a run-length CSV: the image it names, its class ("" where its class
    cell is empty), its runs' text."""

    line: int
    image: str
    label: str
    runs: str
    height: int | None = None
    width: int | None = None
    # each start counted from the last run's end (SIIM's), as its file's rows are
    relative: bool = False

    @property
    def empty(self) -> bool:
        return self.runs.strip().lower() in NO_OBJECT


def word(header: str) -> str:
    """A column's name as compared: lower case, letters and digits alone."""
    return re.sub(r"[^a-z0-9]", "", str(header).lower())


def columns_of(header: Sequence[str]) -> dict[str, int] | None:
    """The column of each role (``image``, ``runs``, and ``class``, ``height``,
    ``width`` where given), each chosen by the first of its words a header holds; None
    without an image and a run column."""
    words = [word(h) for h in header]
    found: dict[str, int] = {}
    for role, choices in (("image", ID_WORDS), ("runs", RUN_WORDS), ("class", CLASS_WORDS),
                          ("height", HEIGHT_WORDS), ("width", WIDTH_WORDS)):  # fmt: skip
        free = [words.index(w) for w in choices if w in words]
        free = [k for k in free if k not in found.values()]
        if free:
            found[role] = free[0]
    return found if {"image", "runs"} <= found.keys() else None


def looks_like_runs(cell: str) -> bool:
    """Whether ``cell`` is run lengths: an even count of whole numbers."""
    numbers = cell.split()
    return bool(numbers) and len(numbers) % 2 == 0 and all(n.isdigit() for n in numbers)


def table(path: Path) -> list[Row] | None:
    """The rows of the run-length CSV at ``path``; None for any other file, told by its
    header and its first :data:`CELLS_LOOKED_AT` cells of runs (finding the files never
    refuses one: a row's faults are refused where its runs are read)."""
    if "submission" in path.name.lower():
        return None
    try:
        stat = path.stat()
        return _table(path, stat.st_size, stat.st_mtime_ns)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


@contextmanager
def long_cells() -> Iterator[None]:
    """CSV cells of any length while reading (a large image's runs run to megabytes)."""
    before = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        yield
    finally:
        csv.field_size_limit(before)


@parsed_by_reader
@functools.lru_cache(maxsize=32)  # read once per run while unchanged (and the CSVs beside)
def _table(path: Path, size: int, mtime: int) -> list[Row] | None:
    with long_cells(), open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, skipinitialspace=True)
        columns = columns_of(next(reader, []))
        if columns is None:
            return None
        rows = [(k, r) for k, r in enumerate(reader, start=2) if any(c.strip() for c in r)]
    cells = [r[columns["runs"]] for _, r in rows if len(r) > columns["runs"]]
    filled = [c for c in cells if c.strip().lower() not in NO_OBJECT][:CELLS_LOOKED_AT]
    if not filled or not all(looks_like_runs(c) for c in filled):
        return None
    found = [_row(k, r, columns) for k, r in rows]
    several = [r for r in found if len(r.runs.split()) > 2 and looks_like_runs(r.runs)]
    if several and sum(not ascending(r.runs) for r in several) >= RELATIVE * len(several):
        found = [replace(r, relative=True) for r in found]  # every row of the file so
    return found


def ascending(text: str) -> bool:
    """Whether a cell's runs are pixel numbers from 1 that ascend, each past the last
    run's end (or no runs at all): else they count from the last run's end."""
    if not looks_like_runs(text):
        return True  # no runs, or none to read (refused where drawn)
    runs = np.asarray(text.split(), np.int64).reshape(-1, 2)
    return bool(runs[0, 0] >= 1 and (runs[1:, 0] >= runs[:-1, 0] + runs[:-1, 1]).all())


def _row(line: int, cells: list[str], columns: dict[str, int]) -> Row:
    """A row, its missing last cells empty (a row of no object written without them)."""
    cells = [c.strip() for c in cells] + [""] * (max(columns.values()) + 1 - len(cells))
    size = [cells[columns[r]] if r in columns else "" for r in ("height", "width")]
    size = [int(float(s)) if re.fullmatch(r"\d+(\.0*)?", s) else None for s in size]
    image, label = cells[columns["image"]], UNNAMED
    if "class" in columns:
        label = re.sub(r"^(\d+)\.0*$", r"\1", cells[columns["class"]])  # 1.0 is class 1
    elif found := NAME_AND_CLASS.match(image):  # Understanding Clouds' 0011165.jpg_Fish
        image, label = found["image"], found["cls"]
    return Row(line, image, label, cells[columns["runs"]], *size)


def annotation_files(root: Path) -> list[Path]:
    """The run-length CSVs in ``root``, its split folders and its annotations folder, in
    path order."""
    if not root.is_dir():
        return []
    return [
        f for place in export_places(root) for f in sorted(place.iterdir())
        if f.suffix.lower() == ".csv" and f.is_file() and table(f) is not None
    ]  # fmt: skip


# -- classes --------------------------------------------------------------------------------
def labels_of(files: Sequence[Path]) -> list[str]:
    """The classes the rows give: numbers in their order, else names in name order; a
    row of runs with an empty class cell is refused (an empty row's cell is no class)."""
    return list(_labels(_files_now(files))[0])


@parsed_by_reader
@functools.lru_cache(maxsize=8)  # asked for the classes, the overlap and the drawing alike
def _labels(files: tuple) -> tuple[tuple[str, ...], frozenset[str]]:
    """The files' labels (:func:`labels_of`), and those of rows holding objects: one pass
    over their rows."""
    labels, held = set(), set()
    for f, *_ in files:
        for row in table(f) or []:
            if not row.label and not row.empty:
                raise ImageDataError(
                    f"{f}, line {row.line}: runs with an empty class cell: give every "
                    "object its class."
                )
            labels |= {row.label} - {""}
            held |= set() if row.empty else {row.label}
    numbers = all(n.isdigit() for n in labels)
    ordered = sorted(labels, key=lambda n: (int(n), n) if numbers else (0, n))
    return tuple(ordered), frozenset(held)


def class_names_of(files: Sequence[Path], given: Sequence[str] | None) -> list[str]:
    """The name of each label (:func:`labels_of`): words are their own names; number
    ``n`` is ``class<n>``, or ``given[n]`` (``data.class_names``, the background first;
    ``given[n + 1]`` where the numbers start from 0) where ``given`` names its classes
    otherwise."""
    labels = labels_of(files)
    if not labels or not all(n.isdigit() for n in labels):
        return labels
    own = [f"class{n}" for n in labels]
    if given is None or any(re.fullmatch(r"class\d+", str(n).strip().lower()) for n in given):
        return own  # a checkpoint's class<n> names them by number too
    shift = 1 if "0" in labels else 0
    top = max(int(n) for n in labels) + shift
    if top >= len(given):
        raise ImageDataError(
            f"data.class_names={list(given)} names {len(given) - 1} classes after the "
            f"background, and {files[0]} numbers its classes up to {labels[-1]}"
            f"{' from 0' * shift}: name every number's class, the background first."
        )
    lowered = [str(n).strip().lower() for n in given]
    twice = sorted({n for n in lowered if lowered.count(n) > 1})
    if twice:
        raise ImageDataError(
            f"data.class_names={list(given)} names {twice[0]} twice: each number's class "
            "has a name of its own (classes are not merged)."
        )
    return [str(given[int(n) + shift]) for n in labels]


def run_length_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s run-length CSVs, by mask value; None where it has none."""
    files = annotation_files(root) if root is not None else []
    if not files or classes_overlap(files):  # then each mask names its class
        return None
    return drawn_classes(f"the rows of {files[0]}", class_names_of(files, None))


def spans(rows: Sequence[Row]) -> np.ndarray:
    """The ``(first, past)`` pixel numbers (from 0) of ``rows``' runs, in order,
    overlapping ones merged; none for cells that are no runs (refused where the masks
    are drawn)."""
    found = [pixel_runs(r) for r in rows if looks_like_runs(r.runs)]
    if not found:
        return np.zeros((0, 2), np.int64)
    runs = np.concatenate(found)
    runs = runs[np.argsort(runs[:, 0], kind="stable")]
    runs[:, 1] += runs[:, 0]
    merged = [runs[0].tolist()]
    for first, past in runs[1:].tolist():
        if first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], past)
        else:
            merged.append([first, past])
    return np.asarray(merged, np.int64)


def meet(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether spans ``a`` and ``b`` (:func:`spans`) share a pixel: for each of ``a``'s,
    the last of ``b``'s starting before it ends must end before it starts."""
    if not len(a) or not len(b):
        return False
    last = np.searchsorted(b[:, 0], a[:, 1]) - 1
    return bool(((last >= 0) & (b[np.maximum(last, 0), 1] > a[:, 0])).any())


def classes_overlap(files: Sequence[Path]) -> bool:
    """Whether two classes overlap on :data:`OVERLAPPING` of the images holding two or
    more (Understanding Clouds' cloud forms, a scan's organs), and are few enough to be
    a mask each (:data:`segnet.data.class_masks.MAX_CLASSES`)."""
    overlap = _overlap(_files_now(files))[1] > 0
    return overlap and len(object_labels(files)[0]) <= class_masks.MAX_CLASSES


@parsed_by_reader
@functools.lru_cache(maxsize=8)
def _overlap(files: tuple) -> tuple[int, int]:
    """The images holding two classes or more, and (where those overlap on
    :data:`OVERLAPPING` of them, else 0) those on which two classes overlap."""
    by_image: dict[str, dict[str, list[Row]]] = {}
    for f, *_ in files:
        for row in table(f) or []:
            if not row.empty:
                by_image.setdefault(row.image, {}).setdefault(row.label, []).append(row)
    several = [labels for labels in by_image.values() if len(labels) > 1]
    overlapping = 0
    for labels in several:
        found = [spans(rows) for rows in labels.values()]
        overlapping += any(meet(a, b) for i, a in enumerate(found) for b in found[i + 1 :])
    enough = overlapping and overlapping >= OVERLAPPING * len(several)
    return len(several), overlapping if enough else 0


# -- runs -----------------------------------------------------------------------------------
def pixel_runs(row: Row) -> np.ndarray:
    """``row``'s runs as ``(start, length)`` pairs, starts from 0: from 1 in the file, or
    counted from the last run's end where the row is ``relative`` (SIIM's). Not checked."""
    runs = np.asarray(row.runs.split(), np.int64).reshape(-1, 2)
    if row.relative:  # from 0, each start after the last run's end
        runs[:, 0] = np.cumsum(runs[:, 0] + runs[:, 1]) - runs[:, 1]
    else:
        runs[:, 0] -= 1
    return runs


def runs_of(row: Row, height: int, width: int, where: str) -> np.ndarray:
    """``row``'s runs (:func:`pixel_runs`), checked to ascend from pixel 1 (where not
    ``relative``) and to lie in an image of ``height`` x ``width``."""
    text = row.runs
    if text.strip().lower() in NO_OBJECT:
        return np.zeros((0, 2), np.int64)
    if not looks_like_runs(text):
        raise ImageDataError(f"{where}: its runs are not pairs of whole numbers ({text[:40]!r}).")
    runs = pixel_runs(row)
    if not row.relative and (runs[:, 0] < 0).any():
        raise ImageDataError(f"{where}: a run starts at pixel 0, and pixels are numbered from 1.")
    if not row.relative and (runs[1:, 0] < runs[:-1, 0] + runs[:-1, 1]).any():
        raise ImageDataError(
            f"{where}: a run starts before the one ahead of it ends: runs are pixel numbers "
            "in ascending order (where most rows' are not, each start is read as counted "
            "from the last run's end, as SIIM's are)."
        )
    end = int((runs[:, 0] + runs[:, 1]).max())
    if end > height * width:
        counted = " (counted from the last run's end, as most rows of its file are)" * row.relative
        raise ImageDataError(
            f"{where}: its runs{counted} reach pixel {end}, past the {height * width} pixels "
            f"of its {width}x{height} image: are these runs of this very image, at this size?"
        )
    return runs


def pixel_order(path: Path, rows: dict[Path, tuple[Path, list[Row]]], given: str) -> str:
    """The order the runs number pixels in: ``given`` unless ``auto``, else as the images
    holding objects tell it (:func:`segnet.data.pixel_order.tell_order`: the first 32
    that tell, of at most 128), refused where they do not; a given order they contradict
    is warned of."""

    def sample() -> Iterator[tuple[Path, np.ndarray, int, int]]:
        for image in sorted(rows):
            f, own = rows[image][0], [r for r in rows[image][1] if not r.empty]
            if own:
                height, width = check_size(f, own[0].image, image, own[0].height, own[0].width)
                where = f"{f}, line {own[0].line}"
                runs = np.concatenate([runs_of(r, height, width, where) for r in own])
                yield image, runs[np.argsort(runs[:, 0], kind="stable")], height, width

    # an order given is only checked: as few images as would tell it
    told, votes = tell_order(sample(), looked_at=128 if given == "auto" else VOTES)
    counted = (f"{votes['columns']} of {sum(votes.values())} images fit column by column, "
               f"{votes['rows']} row by row")  # fmt: skip
    if given == "auto" and told is None:
        raise ImageDataError(
            f"{path}: its runs do not tell whether they number the pixels "
            f"{ORDER_WORDS['columns']} or {ORDER_WORDS['rows']} ({counted}): give "
            "data.rle_order=columns or data.rle_order=rows (the dataset's own decoding code "
            "says: a reshape in Fortran order, or a transpose, is columns)."
        )
    if given == "auto":
        log.info("the runs of %s number the pixels %s (%s; data.rle_order sets it)",
                 path, ORDER_WORDS[told], counted)  # fmt: skip
        return told
    if told is not None and told != given:
        log.warning(
            "data.rle_order=%s, and the masks of %s fit their images better read %s (%s): "
            "look at a drawn mask over its image.", given, path, ORDER_WORDS[told], counted,
        )  # fmt: skip
    return given


def told_order(root: Path | None) -> str | None:
    """The order ``data.rle_order=auto`` told for ``root``'s run-length CSVs (the run
    records it as its own setting); None where it told none."""
    return _TOLD.get(_files_now(annotation_files(root))) if root is not None else None


def _files_now(files: Sequence[Path]) -> tuple:
    """``files`` as they are now: their paths, sizes and times."""
    stats = [f.stat() for f in files]
    return tuple((f, s.st_size, s.st_mtime_ns) for f, s in zip(files, stats, strict=True))


# -- the images -----------------------------------------------------------------------------
def run_length_images(
    root: Path,
    images: Sequence[Path],
    class_names: Sequence[str] | None = None,
    rle_order: str = "auto",
    trained_mask_classes: Sequence[str] | None = None,
) -> list[AnnotatedImage]:
    """Every image ``root``'s run-length CSVs name and the folder holds, each with its
    mask (drawn now, or found drawn in the cache) of ``class_names`` (given, or the
    files' own: :func:`run_length_classes`), its runs read in ``rle_order``
    (``data.rle_order``: :func:`pixel_order`); ``images`` are the image files below
    ``root``. Where ``trained_mask_classes`` are given (a checkpoint's of a mask per
    class), a mask for each of them, overlapping or not."""
    if rle_order not in ORDERS:
        raise ValueError(f"data.rle_order={rle_order!r}: one of {', '.join(ORDERS)}.")
    files = annotation_files(root)
    for f, listed in ((f, table(f) or []) for f in files):
        if listed and listed[0].relative:
            log.info(
                "the runs of %s do not ascend from pixel 1 (line %d): each start is read as "
                "counted from the last run's end, from 0, as SIIM's are", f,
                next(r.line for r in listed if not ascending(r.runs)),
            )  # fmt: skip
    rows, splits = rows_by_image(root, files, images)
    order = pixel_order(files[0], rows, rle_order)
    if rle_order == "auto":
        _TOLD[_files_now(files)] = order
    each_class = bool(trained_mask_classes) or mask_per_class(files, class_names)
    classes = list(trained_mask_classes or object_labels(files)[1] * each_class)
    # one mask per class: each class's folder class-<k> (in the cache's key with the rest)
    values = (
        {n: k for k, n in enumerate(classes)} if each_class else label_values(files, class_names)
    )
    folder = cache_folder(DRAWING, files, values, how=f"order={order}" + " each class" * each_class)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
    if each_class:
        found = class_mask_images(root, files, rows, splits, order, folder, classes)
        return found + unlisted_images(root, images, rows, folder, classes)
    found, overlapping = [], 0
    for image, (f, own) in rows.items():
        name = name_below(root, image)
        mask = mask_path(folder, name)
        if not mask.is_file():  # each written whole: one there was drawn from these rows
            overlapping += _draw_one(f, image, own, values, order, mask)
        objects = sum(not r.empty for r in own)
        found.append(AnnotatedImage(name, image, mask, splits[image], objects))
    if overlapping:
        log.info(
            "in %d image(s) of %s objects of two classes overlap: the smaller object's class "
            "is kept where they do.", overlapping, files[0],
        )  # fmt: skip
    return found + unlisted_images(root, images, rows, folder)


def label_values(files: Sequence[Path], class_names: Sequence[str] | None) -> dict[str, int]:
    """Each label's value in the one label map of an image: its class's place in
    ``class_names`` (given, or the files' own)."""
    labels, source = labels_of(files), f"the rows of {files[0]}"
    names = class_names_of(files, class_names)
    chosen = list(class_names or drawn_classes(source, names).class_names)
    by_name = values_by_name(names, chosen, source)
    return {label: by_name[n] for label, n in zip(labels, names, strict=True)}


def mask_per_class(files: Sequence[Path], class_names: Sequence[str] | None) -> bool:
    """Whether each class is drawn as a mask of its own, where no checkpoint of a mask per
    class says so: where the classes overlap (:func:`classes_overlap`), unless they are
    more than masks of their own take or ``class_names`` name a label map (background
    first: a checkpoint of one, or ``data.class_names``), said."""
    if not _overlap(_files_now(files))[1]:
        return False
    count = len(object_labels(files)[0])
    named = bool(class_names) and str(class_names[0]).strip().lower() in BACKGROUND_NAMES
    if count > class_masks.MAX_CLASSES or named:
        why = (
            f"they are {count}, more than masks of their own take ({class_masks.MAX_CLASSES})"
            if count > class_masks.MAX_CLASSES
            else f"the classes given, {list(class_names)}, are one per pixel (a checkpoint "
            "of one label map; or data.class_names, which at training leaves a mask per "
            "class where it is left out)"
        )
        log.warning(
            "the classes of %s overlap, and %s: one label map, the smaller object's class "
            "kept where two overlap", files[0], why,
        )  # fmt: skip
        return False
    return True


def object_labels(files: Sequence[Path]) -> tuple[list[str], list[str]]:
    """The labels of rows that hold objects, and their classes' names (numbers as
    ``class<n>``): a class of empty rows alone (a cloud form no image shows) would be an
    output never on, so it is no mask's class."""
    labels, names = labels_of(files), class_names_of(files, None)
    held = _labels(_files_now(files))[1]
    kept = [(label, n) for label, n in zip(labels, names, strict=True) if label in held]
    return [label for label, _ in kept], [n for _, n in kept]


def class_mask_images(
    root: Path, files: Sequence[Path], rows: dict, splits: dict, order: str, folder: Path,
    classes: Sequence[str],
) -> list[AnnotatedImage]:  # fmt: skip
    """Each image with a mask of its own for each of ``classes`` (:func:`mask_per_class`,
    or a checkpoint's): read as masks given one per class are
    (:mod:`segnet.data.class_masks`), each class a region with a sigmoid output of its
    own, said. A class of the files not among ``classes`` is drawn in none, warned."""
    name_of = dict(zip(labels_of(files), class_names_of(files, None), strict=True))
    several, overlapping = _overlap(_files_now(files))
    unheld = [n for n in name_of.values() if n not in classes]
    if unheld:
        log.warning(
            "the classes %s of %s are no mask's class (%s): not drawn", ", ".join(unheld),
            files[0], "none of their rows holds an object" if overlapping else "the "
            "checkpoint has no output for them",
        )  # fmt: skip
    log.info(
        "the classes of %s are masks of their own and regions of the network (a sigmoid "
        "output each), as masks given one per class are read (classes: %s; they overlap on "
        "%d of the %d images holding two or more)", files[0], ", ".join(classes),
        overlapping, several,
    )  # fmt: skip
    found = []
    for image, (f, own) in rows.items():
        name = name_below(root, image)
        masks = [(n, mask_path(folder / f"class-{k}", name)) for k, n in enumerate(classes)]
        if not all(m.is_file() for _, m in masks):
            height, width = check_size(f, own[0].image, image, own[0].height, own[0].width)
            for cls, mask in masks:
                pixels = np.zeros((height, width), bool)
                for row in (r for r in own if name_of.get(r.label) == cls):
                    runs = runs_of(row, height, width, f"{f}, line {row.line}")
                    pixels |= decode(runs, height, width, order)
                write_mask(mask, pixels.astype(np.uint8))  # 1: 255 is the drawing's void
        objects = sum(not r.empty for r in own)
        found.append(AnnotatedImage(name, image, masks[0][1], splits[image], objects, tuple(masks)))
    return found


def rows_by_image(
    root: Path, files: Sequence[Path], images: Sequence[Path]
) -> tuple[dict[Path, tuple[Path, list[Row]]], dict[Path, str | None]]:
    """The rows of each image the files name and the folder holds (with the file naming
    it), and each image's split; an image two files name is refused (a leak between
    splits), and a file none of whose images is there."""
    by_name = image_index(images)
    stems = _unique_stems(images)
    by_folder = functools.cache(lambda: _folder_and_name_start(root, images))
    found_for: dict[tuple[Path, str], Path | None] = {}  # an id's image, once per file
    rows: dict[Path, tuple[Path, list[Row]]] = {}
    splits: dict[Path, str | None] = {}
    for f in files:
        listed, missing, seen = table(f) or [], [], set()
        for row in listed:
            if (f, row.image) not in found_for:
                found_for[f, row.image] = _image_named(
                    row.image, f, root, by_name, stems, by_folder
                )
            image = found_for[f, row.image]
            if image is None:
                missing.append(row.image)
                continue
            if image in rows and rows[image][0] != f:
                raise ImageDataError(
                    f"{image} is named in {rows[image][0]} and again in {f}: an image is read "
                    "from one file (one split). Keep its rows in one of them."
                )
            rows.setdefault(image, (f, []))[1].append(row)
            splits[image] = file_split(root, f, image)
            seen.add(row.image)
        names = {r.image for r in listed}
        say_missing(f, len(names), sorted(set(missing)), len(seen),
                    "put the images beside the file, or anywhere below data.root under the "
                    "names its rows give.")  # fmt: skip
    return rows, splits


def _image_named(
    name: str, f: Path, root: Path, by_name: dict, stems: dict, by_folder: Callable
) -> Path | None:
    """The image a row names: a name alone that one image below the root has (no search),
    a path beside the file or below the root, a name without its suffix, or a folder and
    the start of a name (:func:`_folder_and_name_start`)."""
    image = by_name.get(name) if "/" not in name else None
    image = image or image_of(name, [f.parent, root], by_name)
    image = image or stems.get(PurePosixPath(name.replace("\\", "/")).name)
    return image or by_folder().get(name)


def _folder_and_name_start(root: Path, images: Sequence[Path]) -> dict[str, Path]:
    """The images by a folder they lie in and the start of their name, joined by ``_``
    (UW-Madison GI's ``case123_day20_slice_0001`` for
    ``case123/case123_day20/scans/slice_0001_266_266_1.50_1.50.png``: the name's first
    :data:`NAME_START` words at most), keys that name one image only; made only where an
    id names no image otherwise."""
    found: dict[str, Path | None] = {}
    for image in images:
        words = image.stem.split("_")[:NAME_START]
        starts = ["_".join(words[:k]) for k in range(1, len(words) + 1)]
        folders = image.relative_to(root).parts[:-1] if image.is_relative_to(root) else ()
        for key in {f"{d}_{w}" for d in folders for w in starts}:
            found[key] = None if key in found else image
    return {k: v for k, v in found.items() if v is not None}


def _unique_stems(images: Sequence[Path]) -> dict[str, Path]:
    """The images by their name without its suffix, names that occur once only."""
    by_stem: dict[str, list[Path]] = {}
    for f in images:
        by_stem.setdefault(f.stem, []).append(f)
    return {s: found[0] for s, found in by_stem.items() if len(found) == 1}


def _draw_one(
    f: Path, image: Path, rows: list[Row], values: dict[str, int], order: str, mask: Path
) -> bool:
    """Draws the mask of ``image``'s ``rows``; whether objects of two classes overlap."""
    height, width = check_size(f, rows[0].image, image, rows[0].height, rows[0].width)
    objects = []
    for row in rows:
        runs = runs_of(row, height, width, f"{f}, line {row.line}")
        if len(runs):
            pixels = decode(runs, height, width, order)
            objects.append({"category_id": row.label, "segmentation": pixels,
                            "area": float(pixels.sum())})  # fmt: skip
    drawn, overlap = draw_mask(height, width, objects, values)
    write_mask(mask, drawn)
    return overlap


def unlisted_images(
    root: Path, images: Sequence[Path], rows: dict, folder: Path, classes: Sequence[str] = ()
) -> list[AnnotatedImage]:
    """The images of the folders the rows name that no row names, where one file names
    the folder's images: where it lists images with no object (:data:`LISTS_EMPTY` of
    its rows or more), nobody annotated these (left out, warned); where it lists objects
    alone (Severstal's defects), these have none (background, warned): a blank mask, or
    one for each of ``classes`` where masks are drawn one per class."""
    named_by: dict[Path, set[Path]] = {}
    for image, (f, _) in rows.items():
        named_by.setdefault(image.parent, set()).add(f)
    unlisted = sorted(i for i in images if i.parent in named_by and i not in rows)
    found = []
    for place in sorted({i.parent for i in unlisted}):
        left = [i for i in unlisted if i.parent == place]
        if len(named_by[place]) > 1:
            log.warning(
                "%d image(s) of %s are in no row of %s (e.g. %s): left out (in which split?).",
                len(left), place, " nor ".join(map(str, sorted(named_by[place]))), left[0],
            )  # fmt: skip
            continue
        (f,) = named_by[place]
        found += _unlisted_in(root, f, left, folder, classes)
    return found


def _unlisted_in(
    root: Path, f: Path, left: list[Path], folder: Path, classes: Sequence[str]
) -> list[AnnotatedImage]:
    listed = table(f) or []
    if sum(r.empty for r in listed) >= LISTS_EMPTY * len(listed):
        log.warning(
            "%d image(s) beside those %s names are in no row of it (e.g. %s), and it lists "
            "images with no object: left out (nobody annotated them).", len(left), f, left[0],
        )  # fmt: skip
        return []
    log.warning(
        "%d image(s) beside those %s names are in no row of it (e.g. %s), and it lists "
        "images with objects alone: they have none, as such files leave them out "
        "(data.skip_unlabelled=true leaves them out instead)", len(left), f, left[0],
    )  # fmt: skip
    split = file_split(root, f, left[0])
    found = []
    for image in left:
        name = name_below(root, image)
        masks = [(n, mask_path(folder / f"class-{k}", name)) for k, n in enumerate(classes)]
        masks = masks or [("", mask_path(folder, name))]
        for _, mask in masks:
            if not mask.is_file():
                height, width = check_size(f, image.name, image, None, None)
                write_mask(mask, np.zeros((height, width), np.uint8))
        per_class = tuple(masks) if classes else ()
        found.append(AnnotatedImage(name, image, masks[0][1], split, 0, per_class))
    return found
