"""Run-length CSVs, read as masks: the ``train.csv`` most Kaggle segmentation datasets
ship instead of mask images (Severstal's ``ImageId,ClassId,EncodedPixels``, Airbus's
``ImageId,EncodedPixels``, TGS Salt's ``id,rle_mask``, Carvana's ``img,rle_mask``,
Understanding Clouds' ``Image_Label,EncodedPixels``, Sartorius' ``id,annotation``), so
that such a folder trains with no conversion.

* **Where**: CSV files in ``data.root``, its split folders and its annotations folder
  with a column naming the image and one of run lengths (``start length`` pairs, the
  first pixel numbered 1), told by their header and first cells; a sample submission
  (its name says ``submission``) is not read. A file's split is its folder's or its
  name's (``train.csv``: train). Images are found by the path or the name a row gives,
  or by their name without its suffix (TGS Salt's ids).
* **Pixel order**: Kaggle numbers pixels top to bottom, then left to right (column by
  column), and some datasets' own tools row by row. ``data.rle_order=auto`` tells which
  from the masks themselves: on images that are not square, the wrong order tears an
  object into stripes (many more edges); on square ones it transposes the object, whose
  edges then miss the image's (:func:`tell_order`). Where the masks do not tell, the
  run is refused before training, asking for the setting; a given order the masks
  contradict is warned of.
* **Masks**: a row per object, or per class of an image: the rows of one image are laid
  into its mask, larger objects first (:func:`segnet.data.coco.draw_mask`), so that a
  smaller one keeps its class where two overlap. An empty cell (or ``-1``) is an image
  with no object. Where no row has an empty cell and some images of the folders the
  rows name are in no row (Severstal lists defects only), those images have no object,
  said; where rows do list empty images, unlisted images are left out, warned (nobody
  annotated them).
* **Classes**: a class column's values (``ClassId``, ``class``), numbers named
  ``class<k>`` unless ``data.class_names`` names them (background first, then in the
  numbers' order), words by their words; an id ending in ``_<class>`` after the image's
  name (``0011165.jpg_Fish``) gives the class; with neither, one class,
  ``foreground``.
* The masks are kept in the cache (:mod:`segnet.data.drawn_masks`).
"""

from __future__ import annotations

import csv
import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from segnet.data.class_files import ShippedClasses
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

DRAWING = "run-length-masks-1"  # bumped where the drawing changes: masks drawn before, redrawn
ORDERS = ("auto", "columns", "rows")  # data.rle_order
# column headers as :func:`word` reads them
ID_WORDS = ("imageid", "imagelabel", "image", "img", "id", "imagename", "filename", "file",
            "name", "imgid", "imagepath", "path")  # fmt: skip
RUN_WORDS = ("encodedpixels", "rlemask", "rle", "encoding", "maskrle", "rlemasks", "encoded",
             "segmentation", "annotation", "mask", "pixels")  # fmt: skip
CLASS_WORDS = ("classid", "class", "classname", "label", "labelid", "category", "categoryid",
               "classlabel")  # fmt: skip
HEIGHT_WORDS, WIDTH_WORDS = (
    ("height", "imgheight", "imageheight"),
    ("width", "imgwidth", "imagewidth"),
)
NO_OBJECT = frozenset({"", "nan", "none", "null", "-1"})  # a cell of an image with no object
CELLS_LOOKED_AT = 20  # cells of the run column that tell a run-length CSV from another
ORDER_SAMPLE = 32  # masks the pixel order is told from
TORN = 1.5  # edges in one order over the other that tell a torn object (images not square)
EDGE_FIT = 1.1  # edge contrast in one order over the other that a square image votes by,
EDGE_SURE = 4.0  # and in standard errors of the difference
UNNAMED = "foreground"  # the class where no column or id names one, as binary masks name it
NAME_AND_CLASS = re.compile(
    r"^(?P<image>.+(?:" + "|".join(re.escape(s) for s in IMAGE_SUFFIXES) + r"))_(?P<cls>[^/\\]+)$",
    re.IGNORECASE,
)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Row:
    """One row of a run-length CSV: the image it names, its class, its runs' text."""

    line: int
    image: str
    label: str
    runs: str
    height: int | None = None
    width: int | None = None

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
    """The rows of the run-length CSV at ``path``; None for any other file (told by its
    header and its first :data:`CELLS_LOOKED_AT` cells of runs, so finding the files
    never refuses one)."""
    if "submission" in path.name.lower():
        return None
    try:
        stat = path.stat()
        return _table(path, stat.st_size, stat.st_mtime_ns)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


@parsed_by_reader
@functools.lru_cache(maxsize=8)  # read once per run while unchanged
def _table(path: Path, size: int, mtime: int) -> list[Row] | None:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        columns = columns_of(next(reader, []))
        if columns is None:
            return None
        rows = [(k, r) for k, r in enumerate(reader, start=2) if r]
    cells = [r[columns["runs"]] for _, r in rows if len(r) > columns["runs"]]
    filled = [c for c in cells if c.strip().lower() not in NO_OBJECT][:CELLS_LOOKED_AT]
    if not filled or not all(looks_like_runs(c) for c in filled):
        return None
    return [_row(path, k, r, columns) for k, r in rows]


def _row(path: Path, line: int, cells: list[str], columns: dict[str, int]) -> Row:
    if len(cells) <= max(columns.values()):
        raise ImageDataError(f"{path}, line {line}: {len(cells)} fields, fewer than its header's.")
    size = []
    for role in ("height", "width"):
        text = cells[columns[role]].strip() if role in columns else ""
        size.append(int(float(text)) if re.fullmatch(r"\d+(\.0*)?", text) else None)
    image, label = cells[columns["image"]].strip(), ""
    if "class" in columns:
        label = cells[columns["class"]].strip()
    elif found := NAME_AND_CLASS.match(image):  # Understanding Clouds' 0011165.jpg_Fish
        image, label = found["image"], found["cls"]
    return Row(line, image, label or UNNAMED, cells[columns["runs"]], *size)


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
    """The classes the rows give: numbers in their order, else names in name order."""
    labels = {r.label for f in files for r in table(f) or []}
    numbers = all(re.fullmatch(r"\d+", n) for n in labels)
    return sorted(labels, key=lambda n: (int(n), n) if numbers else (0, n))


def class_names_of(files: Sequence[Path], given: Sequence[str] | None) -> list[str]:
    """The name of each label (:func:`labels_of`): numbered labels are ``class<k>``, or
    ``given``'s (``data.class_names``) after the background, one for each; named labels
    keep their names."""
    labels = labels_of(files)
    if not all(re.fullmatch(r"\d+", n) for n in labels):
        return labels
    if given is None:
        return [f"class{n}" for n in labels]
    lowered = [str(n).strip().lower() for n in given]
    if {f"class{n}" for n in labels} <= set(lowered):  # a checkpoint's names
        return [f"class{n}" for n in labels]
    if len(given) != len(labels) + 1:
        raise ImageDataError(
            f"data.class_names={list(given)}: {files[0]} numbers {len(labels)} classes "
            f"({', '.join(labels)}), so give {len(labels) + 1} names, the background first, "
            "then one for each number in order."
        )
    return [str(n) for n in given[1:]]


def run_length_classes(root: Path | None) -> ShippedClasses | None:
    """The classes of ``root``'s run-length CSVs, by mask value; None where it has none."""
    files = annotation_files(root) if root is not None else []
    if not files:
        return None
    return drawn_classes(f"the classes of {files[0]}", class_names_of(files, None))


# -- pixels ---------------------------------------------------------------------------------
def runs_of(text: str, height: int, width: int, where: str) -> np.ndarray:
    """The ``(start, length)`` pairs of ``text`` with starts from 0, checked to lie in an
    image of ``height`` x ``width``."""
    if text.strip().lower() in NO_OBJECT:
        return np.zeros((0, 2), np.int64)
    if not looks_like_runs(text):
        raise ImageDataError(f"{where}: its runs are not pairs of whole numbers ({text[:40]!r}).")
    runs = np.asarray(text.split(), np.int64).reshape(-1, 2)
    if (runs[:, 0] < 1).any():
        raise ImageDataError(f"{where}: a run starts at pixel 0, and pixels are numbered from 1.")
    runs[:, 0] -= 1
    end = int((runs[:, 0] + runs[:, 1]).max())
    if end > height * width:
        raise ImageDataError(
            f"{where}: its runs reach pixel {end}, past the {height * width} pixels of its "
            f"{width}x{height} image: are these runs of this very image, at this size?"
        )
    return runs


def decode(runs: np.ndarray, height: int, width: int, order: str) -> np.ndarray:
    """The pixels ``runs`` cover, numbered column by column (``columns``: top to bottom,
    then left to right) or row by row (``rows``)."""
    flat = np.zeros(height * width + 1, np.int32)
    np.add.at(flat, runs[:, 0], 1)
    np.add.at(flat, runs[:, 0] + runs[:, 1], -1)
    covered = np.cumsum(flat[:-1]) > 0
    if order == "columns":
        return covered.reshape(width, height).T
    return covered.reshape(height, width)


def edges(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where ``mask`` changes between horizontal and between vertical neighbours."""
    return mask[:, 1:] != mask[:, :-1], mask[1:] != mask[:-1]


def edge_steps(grey: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """How much the image changes across each of ``mask``'s edges (between the two
    neighbours the edge parts)."""
    across, down = edges(mask)
    return np.concatenate(
        [np.abs(np.diff(grey, axis=1))[across], np.abs(np.diff(grey, axis=0))[down]]
    )


def follows_edges(grey: np.ndarray, one: np.ndarray, other: np.ndarray) -> int:
    """1 where mask ``one`` follows the image's edges better than ``other`` does, -1
    where ``other`` does, 0 where neither clearly does: the image changes more across
    its edges by :data:`EDGE_FIT` times and by :data:`EDGE_SURE` standard errors (noise
    along a few edge pixels tells nothing)."""
    a, b = edge_steps(grey, one), edge_steps(grey, other)
    if len(a) < 2 or len(b) < 2:
        return 0
    error = np.sqrt(a.var() / len(a) + b.var() / len(b)) + 1e-12
    if abs(a.mean() - b.mean()) < EDGE_SURE * error:
        return 0
    high, low = max(a.mean(), b.mean()), min(a.mean(), b.mean())
    return 0 if high < EDGE_FIT * low else (1 if a.mean() > b.mean() else -1)


def grey_image(path: Path) -> np.ndarray:
    """The image at ``path`` as one float channel, turned as its EXIF orientation shows it."""
    from PIL import Image, ImageOps

    if path.suffix.lower() == ".npy":
        pixels = np.load(path).astype(np.float32)
    else:
        with Image.open(path) as im:
            pixels = np.asarray(ImageOps.exif_transpose(im)).astype(np.float32)
    return pixels.mean(axis=-1) if pixels.ndim == 3 else pixels


def order_vote(image: Path, runs: np.ndarray, height: int, width: int) -> str | None:
    """The order one image's runs fit (:func:`tell_order`); None where it does not tell."""
    by_columns, by_rows = (decode(runs, height, width, o) for o in ("columns", "rows"))
    if height != width:  # the wrong order tears objects into stripes
        count = [sum(int(e.sum()) for e in edges(m)) for m in (by_columns, by_rows)]
        if max(count) >= TORN * max(min(count), 1):
            return "columns" if count[0] < count[1] else "rows"
        return None
    if (by_columns == by_rows).all():
        return None  # an object its own transpose: either order
    grey = grey_image(image)
    if grey.shape != (height, width):
        return None
    return {1: "columns", -1: "rows", 0: None}[follows_edges(grey, by_columns, by_rows)]


def tell_order(sample: Sequence[tuple[Path, np.ndarray, int, int]]) -> tuple[str | None, dict]:
    """The pixel order the runs of ``sample`` (image, runs, height, width) were written
    in, by their votes (:func:`order_vote`): one order where at least three in four of the
    images that tell vote for it; None where none tells or they disagree."""
    votes = {"columns": 0, "rows": 0, "none": 0}
    for image, runs, height, width in sample:
        votes[order_vote(image, runs, height, width) or "none"] += 1
    told = votes["columns"] + votes["rows"]
    winner = max(("columns", "rows"), key=votes.get)
    return (winner if told and votes[winner] >= 0.75 * told else None), votes


ORDER_WORDS = {
    "columns": "column by column (top to bottom, then left to right, as Kaggle numbers pixels)",
    "rows": "row by row (left to right, then top to bottom)",
}


# -- the images -----------------------------------------------------------------------------
def run_length_images(
    root: Path,
    images: Sequence[Path],
    class_names: Sequence[str] | None = None,
    rle_order: str = "auto",
) -> list[AnnotatedImage]:
    """Every image ``root``'s run-length CSVs name and the folder holds, each with its
    mask (drawn now, or found drawn in the cache) of ``class_names`` (given, or the
    files' own: :func:`run_length_classes`), its runs read in ``rle_order``
    (``data.rle_order``: :func:`pixel_order`); ``images`` are the image files below
    ``root``."""
    if rle_order not in ORDERS:
        raise ValueError(f"data.rle_order={rle_order!r}: one of {', '.join(ORDERS)}.")
    files = annotation_files(root)
    labels, source = labels_of(files), f"the classes of {files[0]}"
    names = class_names_of(files, class_names)
    chosen = list(class_names or drawn_classes(source, names).class_names)
    by_name = values_by_name(names, chosen, source)
    values = {label: by_name[n] for label, n in zip(labels, names, strict=True)}
    rows, splits = rows_by_image(root, files, images)
    order = pixel_order(files[0], rows, rle_order)
    folder = cache_folder(f"{DRAWING}-{order}", files, values)
    if not folder.is_dir():
        log.info("drawing the masks of %s, once, into %s", ", ".join(map(str, files)), folder)
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
    return found + unlisted_images(root, files, images, rows, splits, folder)


def rows_by_image(
    root: Path, files: Sequence[Path], images: Sequence[Path]
) -> tuple[dict[Path, tuple[Path, list[Row]]], dict[Path, str | None]]:
    """The rows of each image the files name and the folder holds (with the file naming
    it), and each image's split; an image two files name is refused (a leak between
    splits), and a file none of whose images is there."""
    by_name = image_index(images)
    stems = _unique_stems(images)
    rows: dict[Path, tuple[Path, list[Row]]] = {}
    splits: dict[Path, str | None] = {}
    for f in files:
        listed, missing, seen = table(f) or [], [], set()
        for row in listed:
            image = image_of(row.image, [f.parent, root], by_name)
            image = image or stems.get(PurePosixPath(row.image.replace("\\", "/")).name)
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


def _unique_stems(images: Sequence[Path]) -> dict[str, Path]:
    """The images by their name without its suffix, names that occur once only."""
    by_stem: dict[str, list[Path]] = {}
    for f in images:
        by_stem.setdefault(f.stem, []).append(f)
    return {s: found[0] for s, found in by_stem.items() if len(found) == 1}


def pixel_order(path: Path, rows: dict[Path, tuple[Path, list[Row]]], given: str) -> str:
    """The order the runs number pixels in: ``given`` unless ``auto``, else as the first
    :data:`ORDER_SAMPLE` images holding objects tell it (:func:`tell_order`), refused
    where they do not; a given order they contradict is warned of."""
    sample = []
    for image in sorted(rows)[: ORDER_SAMPLE * 4]:
        own = [r for r in rows[image][1] if not r.empty]
        if not own:
            continue
        height, width = check_size(rows[image][0], own[0].image, image, own[0].height, own[0].width)
        where = f"{rows[image][0]}, line {own[0].line}"
        runs = np.concatenate([runs_of(r.runs, height, width, where) for r in own])
        sample.append((image, runs, height, width))
        if len(sample) == ORDER_SAMPLE:
            break
    told, votes = tell_order(sample)
    counted = f"{votes['columns']} of {len(sample)} images fit column by column, {votes['rows']} row by row"
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


def _draw_one(
    f: Path, image: Path, rows: list[Row], values: dict[str, int], order: str, mask: Path
) -> bool:
    """Draws the mask of ``image``'s ``rows``; whether objects of two classes overlap."""
    height, width = check_size(f, rows[0].image, image, rows[0].height, rows[0].width)
    objects = []
    for row in rows:
        runs = runs_of(row.runs, height, width, f"{f}, line {row.line}")
        if len(runs):
            pixels = decode(runs, height, width, order)
            objects.append({"category_id": row.label, "segmentation": pixels,
                            "area": float(pixels.sum())})  # fmt: skip
    drawn, overlap = draw_mask(height, width, objects, values)
    write_mask(mask, drawn)
    return overlap


def unlisted_images(
    root: Path, files: Sequence[Path], images: Sequence[Path], rows: dict, splits: dict,
    folder: Path,
) -> list[AnnotatedImage]:  # fmt: skip
    """The images of the folders the rows name that no row names: where the files list
    images with no object, nobody annotated these (left out, warned); where they list
    objects alone (Severstal's defects), these have none (read as background, said)."""
    folders = {image.parent for image in rows}
    unlisted = sorted(i for i in images if i.parent in folders and i not in rows)
    if not unlisted:
        return []
    if any(r.empty for _, own in rows.values() for r in own):
        log.warning(
            "%d image(s) beside those %s names are in no row of it (e.g. %s): left out "
            "(nobody annotated them).", len(unlisted), files[0], unlisted[0],
        )  # fmt: skip
        return []
    log.info(
        "%d image(s) beside those %s names are in no row of it (e.g. %s), and it names no "
        "image without an object: they have none, as such files leave them out "
        "(data.skip_unlabelled=true leaves them out instead)", len(unlisted), files[0], unlisted[0],
    )  # fmt: skip
    split_of_folder = {image.parent: splits[image] for image in rows}
    found = []
    for image in unlisted:
        name = name_below(root, image)
        mask = mask_path(folder, name)
        if not mask.is_file():
            height, width = check_size(files[0], image.name, image, None, None)
            write_mask(mask, np.zeros((height, width), np.uint8))
        found.append(AnnotatedImage(name, image, mask, split_of_folder[image.parent], 0))
    return found
