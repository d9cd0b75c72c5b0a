"""Masks drawn from annotation files (the readers :data:`segnet.data.annotation_formats.
FORMATS` lists): what the formats share once their objects are read. The masks are kept in the cache (``~/.cache/segnet/<kind>``, beside the
statistics of :mod:`segnet.data.stats_cache`), never in the user's data folder, in a
folder keyed by the annotation files' paths, sizes and times: an edited file's masks are
drawn afresh, into another folder. Each mask is written whole, so one found there was
drawn from these very files."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree import ElementTree

import numpy as np

from segnet.data import stats_cache
from segnet.data.class_files import BACKGROUND_NAMES, ShippedClasses, is_void_name
from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import split_named, split_of
from segnet.files import staged

VOID = 255  # a mask value no class takes: what is annotated and not known (a box alone)
UNCLASSED = "__ignore__"  # the label of a region whose class is empty: not known, so void
ANNOTATION_FOLDERS = ("annotations", "annotation", "anns")
CURVE_POINTS = 64  # a circle or an ellipse drawn as a polygon of so many corners
MAX_CLASSES = VOID - 1  # the background and the classes, in one byte
EXIF_ORIENTATION = 0x0112
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnotatedImage:
    """An image an annotation file names, and the mask drawn from its objects."""

    name: str  # its path below data.root: what splits.json and predictions name it by
    image: Path
    mask: Path
    split: str | None
    objects: int  # the objects outlined on it: none, all background (or not annotated yet)
    # one mask per class instead of ``mask`` (classes that overlap): (class, mask) each
    class_masks: tuple[tuple[str, Path], ...] = ()


@functools.cache
def _parsed(path: Path, size: int, mtime: int, kind: str) -> Any:
    try:
        if kind == "xml":
            return ElementTree.parse(path).getroot()
        if kind == "text":
            return path.read_text(encoding="utf-8-sig")
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ElementTree.ParseError):
        return None
    if isinstance(found, dict):  # the picture LabelMe embeds by default: never read here
        found.pop("imageData", None)
    return found


def _parsed_now(path: Path, kind: str) -> Any:
    """:func:`_parsed` for the file as it is now (None for a broken link, a file not
    fetched by git-annex)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _parsed(path, stat.st_size, stat.st_mtime_ns, kind)


def json_file(path: Path) -> Any:
    """What the JSON file at ``path`` holds (None where it holds no JSON), each file
    parsed once while it is unchanged and until :func:`forget_parsed_files`: finding
    the files, their classes and their images all read it."""
    return _parsed_now(path, "json")


def xml_file(path: Path) -> ElementTree.Element | None:
    """The root element of the XML file at ``path`` (None where it holds no XML), parsed
    as :func:`json_file` parses."""
    return _parsed_now(path, "xml")


def text_file(path: Path) -> str | None:
    """The text of the file at ``path`` (None where it cannot be read as UTF-8), read as
    :func:`json_file` reads."""
    return _parsed_now(path, "text")


_FORGOTTEN: list[Any] = []  # the caches of files a reader parses itself (VIA's CSV)


def parsed_by_reader(cache: Any) -> Any:
    """``cache`` (a ``functools`` cache of a reader's own parsing) let go of with the
    files :func:`forget_parsed_files` lets go of."""
    _FORGOTTEN.append(cache)
    return cache


def forget_parsed_files() -> None:
    """Let go of the files parsed (COCO's own, for one, is some gigabytes once parsed):
    done once the masks are drawn, so that no data loader's process inherits them."""
    _parsed.cache_clear()
    for cache in _FORGOTTEN:
        cache.cache_clear()


def drawn_classes(source: str, labels: Sequence[str]) -> ShippedClasses:
    """The classes of annotation files whose labels are ``labels``, in that order: the
    background first (mask value 0; a label named so is that class), then the others,
    void ones (:data:`VOID`) last."""
    void = [n for n in labels if is_void_name(n)]
    kept = [n for n in labels if n not in void and n.strip().lower() not in BACKGROUND_NAMES]
    names = ["background", *kept]
    lowered = [n.strip().lower() for n in names]
    twice = sorted({n for n in lowered if lowered.count(n) > 1})
    if twice:
        raise ImageDataError(
            f"{source}: two labels are named {twice[0]} (case aside): a class is named by "
            "its label, so rename one, or merge them."
        )
    if len(names) > MAX_CLASSES:
        raise ImageDataError(
            f"{source}: {len(kept)} classes, and at most {MAX_CLASSES - 1} are read. Merge "
            "some, or draw masks yourself and point data.root at them."
        )
    void = void or ["void"]
    codes = (*range(len(names)), *[VOID] * len(void))
    return ShippedClasses(source, (*names, *void), codes, by_colour=False)


def export_places(root: Path) -> list[Path]:
    """Where a tool's export of many images lies: ``root``, its split folders and its
    annotations folder, in that order."""
    return [root] + sorted(
        d for d in root.iterdir()
        if d.is_dir() and (split_named(d.name) or d.name.lower() in ANNOTATION_FOLDERS)
    )  # fmt: skip


def ellipse_outline(cx: float, cy: float, rx: float, ry: float, turn: float) -> list[float]:
    """An ellipse (a circle where ``rx == ry``) as a polygon ``[x0, y0, x1, y1, ...]`` of
    :data:`CURVE_POINTS` corners, turned ``turn`` radians about its centre (clockwise as
    an image shows it)."""
    cos, sin = math.cos(turn), math.sin(turn)
    out = []
    for k in range(CURVE_POINTS):
        u, t = (
            rx * math.cos(2 * math.pi * k / CURVE_POINTS),
            ry * math.sin(2 * math.pi * k / CURVE_POINTS),
        )
        out += [cx + u * cos - t * sin, cy + u * sin + t * cos]
    return out


def polygon_area(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The area a polygon of corners ``xs``, ``ys`` encloses (the shoelace formula): what
    orders objects larger first."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    return 0.5 * abs(float(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def polygon_pixels(polygons: Sequence[Sequence[float]], height: int, width: int) -> np.ndarray:
    """The pixels ``polygons`` (``[x0, y0, x1, y1, ...]`` each, three points or more)
    cover, drawn with pycocotools as COCO's own tools draw them."""
    from pycocotools import mask as coco_mask

    rle = coco_mask.merge(coco_mask.frPyObjects([list(p) for p in polygons], height, width))
    return coco_mask.decode(rle).astype(bool)


def cache_folder(
    kind: str, files: Sequence[Path], values: Mapping[Any, int], how: str = ""
) -> Path:
    """Where the masks drawn from ``files`` (their paths, sizes and times) with ``values``
    (each label's mask value) are kept: ``kind`` names the drawing, with a version bumped
    where it changes, so that masks drawn before are drawn again; ``how`` is a setting
    the drawing took (a run-length CSV's pixel order)."""
    described = []
    for f in files:  # one stat each: a YOLO dataset keys some 100,000 files
        try:
            stat = os.stat(f)
            described.append([os.path.abspath(f), stat.st_size, stat.st_mtime_ns])
        except OSError:
            described.append([os.path.abspath(f)])
    drawn_as = [f"{label!r}={value}" for label, value in sorted(values.items(), key=str)]
    text = json.dumps([kind, described, drawn_as] + ([how] if how else []))
    return (
        stats_cache.folder()
        / kind.rsplit("-", 1)[0]
        / hashlib.sha256(text.encode()).hexdigest()[:24]
    )


def values_by_name(
    labels: Sequence[str], class_names: Sequence[str], source: str
) -> dict[str, int]:
    """Each label's mask value: its class's place in ``class_names`` (names compared in
    any case), the background's 0 and void's :data:`VOID`; a label no class is named for
    is background, said, and so is a class no label names (misspelt, or none there). A
    label first is refused: class 0 is the pixels no object covers."""
    key = {label: label.strip().lower() for label in labels}
    index = {n.strip().lower(): k for k, n in enumerate(class_names)}
    first = class_names[0].strip().lower()
    if first in key.values() and first not in BACKGROUND_NAMES:
        raise ImageDataError(
            f"data.class_names={list(class_names)}: the first class is the background, the "
            f"pixels no object of {source} covers, and {class_names[0]} labels objects there: "
            "put the background first ([background, ...])."
        )
    missing = [
        n for n in class_names[1:] if n.strip().lower() not in key.values() and not is_void_name(n)
    ]
    if missing and len(missing) == len(class_names) - 1:  # none of the classes is labelled
        index, missing = none_labelled(key, index, class_names, source), []
    if missing:  # a class list may name what these files hold none of; a typo would, too
        log.warning(
            "the classes %s are labelled on no object of %s (its labels: %s): they have no "
            "pixel there.", ", ".join(missing), source, ", ".join(sorted(labels)),
        )  # fmt: skip
    values, unnamed = {}, []
    for label, low in key.items():
        if low in BACKGROUND_NAMES or is_void_name(label):
            values[label] = 0 if low in BACKGROUND_NAMES else VOID
        else:
            values[label] = index.get(low, 0)
            unnamed += [label] * (low not in index)
    if unnamed:
        log.info(
            "labels of %s that data.class_names does not name are background: %s",
            source, ", ".join(sorted(unnamed)),
        )  # fmt: skip
    return values


def none_labelled(
    key: dict[str, str], index: dict[str, int], class_names: Sequence[str], source: str
) -> dict[str, int]:
    """``index`` where no class after the background is labelled: one class named
    ``foreground`` (a checkpoint of black-and-white masks) takes a single label, and one
    class takes a single label ``foreground`` (regions with no class name), said; any
    other list is refused, as every object would be background."""
    objects = sorted(
        label
        for label, low in key.items()
        if low not in BACKGROUND_NAMES and not is_void_name(label)
    )
    if not objects:
        return index
    first, second = (n.strip().lower() for n in [*class_names, ""][:2])
    one_class = len(class_names) == 2 and len(objects) == 1 and first in BACKGROUND_NAMES
    one_class = one_class and second not in BACKGROUND_NAMES and not is_void_name(second)
    if one_class and "foreground" in (second, key[objects[0]]):
        log.warning(
            "the one label of %s, %s, is the one class %s (foreground is what black-and-white "
            "masks and unnamed regions call it)", source, objects[0], class_names[1],
        )  # fmt: skip
        return {**index, key[objects[0]]: 1}
    raise ImageDataError(
        f"the classes {list(class_names)} (data.class_names, or a checkpoint's) name none of "
        f"the labels of {source} ({', '.join(objects)}): every object would be background. "
        "Name the classes as the labels are named."
    )


def mask_path(folder: Path, name: str) -> Path:
    """The drawn mask of the image named ``name``: its whole name and ``.png``, so that
    ``0.jpg`` and ``0.png`` in one folder keep masks of their own."""
    return folder / f"{PurePosixPath(name)}.png"


def name_below(root: Path, image: Path) -> str:
    return image.relative_to(root).as_posix() if image.is_relative_to(root) else image.name


def split_of_folders(root: Path, file: Path) -> str | None:
    """The split of the first split folder (``train/``, ``valid/``) ``file`` lies in below
    ``root``; None where it lies in none."""
    for part in file.relative_to(root).parts[:-1]:
        if split_named(part):
            return split_named(part)
    return None


def file_split(root: Path, file: Path, image: Path) -> str | None:
    """The split of an image an annotation file of many lists: the file's folder's
    (``train/``), else the file's name's (``via_val.json``), else that of the split
    folder the image lies in."""
    split = split_named(file.parent.name) if file.parent != root else None
    split = split or split_of(file.stem)
    inside = image.is_relative_to(root)
    return split or (split_of_folders(root, image) if inside else None)


def write_mask(path: Path, mask: np.ndarray) -> None:
    from PIL import Image

    with staged(path) as tmp:
        Image.fromarray(mask, mode="L").save(tmp, format="PNG")


def image_index(images: Sequence[Path]) -> dict[str, Path]:
    """The images below data.root by file name, names that occur once only."""
    by_name: dict[str, Path] = {}
    twice = set()
    for f in images:
        if f.name in by_name:
            twice.add(f.name)
        by_name[f.name] = f
    return {n: f for n, f in by_name.items() if n not in twice}


def image_of(file_name: str, places: Sequence[Path], by_name: dict[str, Path]) -> Path | None:
    """The image an annotation file names: in one of ``places``, else by its name alone
    (a path of the machine it was annotated on, Windows' included)."""
    rel = PurePosixPath(str(file_name).replace("\\", "/"))
    for place in places:
        candidate = Path(os.path.normpath(Path(rel) if rel.is_absolute() else place / rel))
        if candidate.is_file():  # normalised: ../images/0.png is images/0.png
            return candidate
    return by_name.get(rel.name)


def check_size(source: Path, named: str, image: Path, height: Any, width: Any) -> tuple[int, int]:
    """``image``'s height and width as viewers show it (a quarter turn of its EXIF
    orientation swaps them, as training reads it), checked against those ``source``
    gives it, where it gives them (old LabelMe files, some COCO files do not)."""
    from PIL import Image, UnidentifiedImageError

    from segnet.data import bands  # arrays, DICOM, MetaImage: read as training reads them

    turned = False
    try:
        if bands.is_array_file(image):
            found = bands.header(image)
            shown = (found.height, found.width)
        else:
            with Image.open(image) as im:
                turned = im.getexif().get(EXIF_ORIENTATION) in (5, 6, 7, 8)
                shown = (im.width, im.height) if turned else (im.height, im.width)
    except ImageDataError:
        raise  # it names the file already
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ImageDataError(f"cannot read {image}: {err}") from None
    if height is None or width is None:
        return shown
    if shown != (int(height), int(width)):
        raise ImageDataError(
            f"{source} gives {named} the size {width}x{height}, and {image} is "
            f"{shown[1]}x{shown[0]}{' as its EXIF orientation shows it' * turned}: annotate "
            "(or export the annotations of) these very images."
        )
    return shown


def say_missing(path: Path, listed: int, missing: Sequence[str], found: int, advice: str) -> None:
    """Refuses a file none of whose ``listed`` images is there (``advice``: where to put
    them); counts those ``missing`` in a warning where some are."""
    if not found and listed:
        raise ImageDataError(
            f"{path} lists {listed} images and none is in the folder (the first: "
            f"{missing[0]}): {advice}"
        )
    if missing:
        log.warning(
            "%s: %d of its %d images are not in the folder (e.g. %s): left out.",
            path, len(missing), listed, missing[0],
        )  # fmt: skip
