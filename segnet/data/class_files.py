"""Class lists that datasets and annotation tools ship beside their images, read so that
such a folder trains with no class settings:

* Roboflow's ``_classes.csv`` (``Pixel Value, Class``): each class's mask value;
* a class dictionary, ``class_dict.csv`` (Kaggle's CamVid, DeepGlobe, Semantic Drone:
  ``name,r,g,b``): each class's colour;
* CVAT's and Datumaro's ``labelmap.txt`` (``name:r,g,b:parts:actions``): each class's
  colour;
* labelme's ``class_names.txt`` (written by labelme2voc, ``_background_`` first): the class
  of mask value ``i`` on line ``i``;
* ADE20K's ``objectInfo150.txt``: its 150 classes by mask value, 0 void.

A class named as void (``Void``, ``unlabelled``, ``ignore``, ``unknown``) is void: neither
trained nor scored. The file is looked for in ``data.root`` and in the folders directly in
it (Roboflow writes one per split); several that name different classes are refused. A
folder laid out as Pascal VOC that ships none has VOC's 21 classes, 255 void; one laid out
as Cityscapes (``leftImg8bit/``, ``gtFine/``) its 19 classes, the other label ids void.
Settings given win: with ``data.class_names``, ``data.label_values``, ``data.palette`` or
``data.instance_masks`` the file is not read (a run records the classes it read from it,
so evaluation and export read the data as training did).
"""

from __future__ import annotations

import csv
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from segnet.data.errors import DataError
from segnet.data.image_sets import LISTS, PET_LIST_NAMES, PET_LISTS, list_files, listed_ids

# names a class list gives the pixels nobody labelled (CamVid's Void, Cityscapes'
# unlabeled, DeepGlobe's unknown, labelme's __ignore__, nnU-Net's ignore, LoveDA's no-data)
VOID_NAMES = frozenset(
    {"void", "ignore", "ignored", "__ignore__", "unlabelled", "unlabeled", "unknown",
     "dontcare", "don't care", "dont care", "no-data", "no data", "nodata"}
)  # fmt: skip
LABELME_BACKGROUND = "_background_"
# Pascal VOC's classes, by mask value, and its void (the outlines of objects, 255): what
# its format means where no list of classes is shipped (CVAT reads such a folder so too)
VOC_CLASSES = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
    "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
VOC_VOID = 255
SPLIT_ORDER = ("train", "training", "valid", "val", "validation", "test", "testing")
# the folders of images and of masks a class list may lie in (lower case)
DATA_FOLDERS = (
    "labels", "label", "masks", "mask", "annotations", "gt", "groundtruth",
    "segmentationclass", "images", "image", "imgs", "img",
)  # fmt: skip
# names of the class that is the background: put first, where the file lists it elsewhere
BACKGROUND_NAMES = frozenset({"background", "_background_", "bg"})
VOC_FOLDERS = (LISTS, Path("SegmentationClass"))
# Cityscapes' 19 classes scored, by their label id in *_gtFine_labelIds.png; every other
# id (0-6, 9, 10, 14-16, 18, 29, 30: unlabelled, ego vehicle, parking, guard rail, ...)
# is void, as its benchmark scores them
CITYSCAPES_CLASSES = (
    ("road", 7), ("sidewalk", 8), ("building", 11), ("wall", 12), ("fence", 13),
    ("pole", 17), ("traffic light", 19), ("traffic sign", 20), ("vegetation", 21),
    ("terrain", 22), ("sky", 23), ("person", 24), ("rider", 25), ("car", 26), ("truck", 27),
    ("bus", 28), ("train", 31), ("motorcycle", 32), ("bicycle", 33),
)  # fmt: skip
CITYSCAPES_IDS = 34
CITYSCAPES_FOLDERS = (Path("leftImg8bit"), Path("gtFine"))
# LoveDA's classes by mask value from 1 (0 is no data: void), and its domain folders
LOVEDA_CLASSES = ("background", "building", "road", "water", "barren", "forest", "agriculture")
LOVEDA_DOMAINS = ("Urban", "Rural")
# ADE20K's class list (ADEChallengeData2016/objectInfo150.txt; the devkit's .csv): its
# mask value 0 is "other objects", which its benchmark does not score
ADE_LISTS = ("objectinfo150.txt", "objectinfo150.csv")
log = logging.getLogger(__name__)


class ClassFileError(DataError):
    """A class list beside the data cannot be read as one."""


@dataclass(frozen=True)
class ShippedClasses:
    """The classes a file lists, in its order: each with its mask value (an int) or its
    colour (``(r, g, b)``), void ones included."""

    source: Path | str  # the file, or what the classes are where no file lists them
    names: tuple[str, ...]
    codes: tuple[Any, ...]
    by_colour: bool

    @property
    def void_names(self) -> list[str]:
        return [n for n in self.names if is_void_name(n)]

    @property
    def has_background(self) -> bool:
        return any(n.strip().lower() in BACKGROUND_NAMES for n in self.class_names)

    def classes(self) -> list[tuple[str, Any]]:
        """The classes trained and scored with their codes: in the file's order, but the
        background first wherever the file lists it (the scores' foreground mean and the
        patches centred on foreground take class 0 for the background)."""
        kept = [(n, c) for n, c in zip(self.names, self.codes, strict=True) if not is_void_name(n)]
        return sorted(kept, key=lambda nc: nc[0].strip().lower() not in BACKGROUND_NAMES)

    @property
    def class_names(self) -> list[str]:
        """The classes trained and scored (:meth:`classes`)."""
        return [n for n, _ in self.classes()]

    def settings(self) -> dict[str, Any]:
        """The file as ``data.class_names``, ``data.label_values`` (None where the masks
        hold class numbers), ``data.palette`` and ``data.ignore_values``."""
        kept = [c for _, c in self.classes()]
        void = [c for n, c in zip(self.names, self.codes, strict=True) if is_void_name(n)]
        if self.by_colour:
            values, palette = None, [list(c) for c in kept]
            void = [list(c) for c in void]
        else:
            palette = None
            values = None if kept == list(range(len(kept))) else kept
        return {
            "class_names": self.class_names,
            "label_values": values,
            "palette": palette,
            "ignore_values": void or None,
        }

    @property
    def has_colours(self) -> bool:
        """Whether some class has a colour no grey file can hold (not r = g = b)."""
        return self.by_colour and any(len(set(c)) > 1 for c in self.codes)

    def by_row(self) -> ShippedClasses:
        """The list read by row, for masks that hold class numbers, not colours: each
        class's mask value the number of its row, 0 first (Semantic Drone's grey
        ``label_images_semantic/`` beside its colour ``class_dict_seg.csv``)."""
        return replace(
            self,
            source=f"{self.source}, by row (the masks hold one channel: row k is value k)",
            codes=tuple(range(len(self.names))),
            by_colour=False,
        )

    def same_classes(self, other: ShippedClasses) -> bool:
        """The same classes, whichever file lists them."""
        return replace(other, source=self.source) == self


def is_void_name(name: str) -> bool:
    return name.strip().lower() in VOID_NAMES


def is_class_file(path: Path) -> bool:
    name = path.name.lower()
    return path.is_file() and (
        name in ("_classes.csv", "labelmap.txt", "class_names.txt", *ADE_LISTS)
        or (name.endswith(".csv") and "class_dict" in name)
    )


def class_file_candidates(root: Path | None) -> list[Path]:
    """The class files in ``root`` and in the split, mask and image folders directly in it:
    the root's first, then the split folders' (train, val, test), then the others'. Other
    folders (one per patient, thousands of them) are not looked in."""
    return [f for d in list_folders(root) for f in sorted(d.iterdir()) if is_class_file(f)]


def list_folders(root: Path | None) -> list[Path]:
    """Where a class list may lie: ``root``, then its split folders (train, val, test),
    then its mask and image folders; none where ``root`` is no folder."""
    if root is None or not root.is_dir():
        return []
    order = {name: rank for rank, name in enumerate((*SPLIT_ORDER, *DATA_FOLDERS))}
    return [root] + sorted(
        (d for d in root.iterdir() if d.name.lower() in order and d.is_dir()),
        key=lambda d: (order[d.name.lower()], d.name),
    )  # the training split's own list named first


# a list of class names alone, one a line in the order of the mask values (no values or
# colours: those are a class list's above)
NAME_LISTS = ("classes.txt",)


def listed_names(root: Path | None) -> tuple[Path, list[str]] | None:
    """The class names a ``classes.txt`` in ``root`` or its split, mask and image folders
    lists, one a line (blank lines and ``#`` comments left out; ``0 background`` or
    ``0: background`` read as the name, where the numbers run 0, 1, 2 ...), with its path;
    None where there is none. Two that differ, or a name twice, are refused."""
    found = [(f, names_of(f)) for d in list_folders(root) for f in sorted(d.iterdir())
             if f.name.lower() in NAME_LISTS and f.is_file()]  # fmt: skip
    for path, names in found:
        if names is None:
            log.info("%s is not read as class names: its lines are not names alone (a "
                     "number or colour after a name, or numbers not from 0)", path)  # fmt: skip
    found = [(path, names) for path, names in found if names is not None]
    for path, names in found[1:]:
        if names != found[0][1]:
            raise ClassFileError(
                f"{found[0][0]} and {path} list different classes ({', '.join(found[0][1])} "
                f"against {', '.join(names)}): keep one, or give data.class_names."
            )
    return found[0] if found else None


def names_of(path: Path) -> list[str] | None:
    """The names of a ``classes.txt`` (:func:`listed_names`); None where its lines are not
    names alone (``background 0 0 0``, numbers from 1)."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ClassFileError(f"{path}: cannot be read as a list of class names ({err}).") from err
    lines = [s.strip() for s in lines if s.strip() and not s.strip().startswith("#")]
    numbered = [re.fullmatch(r"(\d+)\s*[:,\s]\s*(.+)", s) for s in lines]
    if lines and all(numbered) and [int(m[1]) for m in numbered] == list(range(len(lines))):
        lines = [m[2].strip() for m in numbered]
    if any(re.search(r"(^|\s)\d+$", s) or re.match(r"\d+\s", s) for s in lines):
        return None  # a colour, a value or a number from 1 beside a name: not names alone
    twice = sorted({n for n in lines if lines.count(n) > 1})
    if not lines or twice:
        raise ClassFileError(
            f"{path} lists {'no class' if not lines else f'the class {twice[0]!r} twice'}: "
            "one name a line, in the order of the mask values; mend it, or give data.class_names."
        )
    return lines


def shipped_classes(root: Path | None, own_layout: bool = True) -> ShippedClasses | None:
    """The class list shipped in ``root`` (:func:`class_file_candidates`); None where it
    has none. Files that list different classes are refused, naming two. Where it ships
    none and ``own_layout`` (no folder or name setting says how to read it), a folder laid
    out as Pascal VOC or Cityscapes has their classes."""
    found = [read_class_file(f) for f in class_file_candidates(root)] if root else []
    for other in found[1:]:
        if not found[0].same_classes(other):
            raise ClassFileError(
                f"{found[0].source} and {other.source} list different classes "
                f"({', '.join(found[0].names)} against {', '.join(other.names)}): keep one, "
                "or give the classes with data.class_names (and data.label_values or "
                "data.palette)."
            )
    if found or not own_layout:
        return found[0] if found else None
    return (
        voc_classes(root) or cityscapes_classes(root) or pet_classes(root) or loveda_classes(root)
    )


def loveda_classes(root: Path | None) -> ShippedClasses | None:
    """LoveDA's seven land covers by mask value, 0 (no data) void, as its benchmark scores
    them, where ``root`` is laid out as LoveDA (``Urban/`` or ``Rural/`` holding
    ``masks_png/``, in ``root`` or in its split folders); None for any other folder."""
    if root is None or not root.is_dir():
        return None
    places = [root, *(d for d in root.iterdir() if d.is_dir())]
    if not any((d / domain / "masks_png").is_dir() for d in places for domain in LOVEDA_DOMAINS):
        return None
    return ShippedClasses(
        f"LoveDA's layout in {root} (its 7 classes, 0 no data; give data.class_names for others)",
        ("no-data", *LOVEDA_CLASSES), (0, *range(1, len(LOVEDA_CLASSES) + 1)), by_colour=False,
    )  # fmt: skip


def pet_classes(root: Path | None) -> ShippedClasses | None:
    """Oxford-IIIT Pet's trimap classes (1 the pet, 2 the background, 3 the border between
    them, a class as its benchmark scores it) where ``root`` is laid out as Oxford-IIIT
    Pet (``annotations/trimaps/`` with its ``trainval.txt`` or ``test.txt``); None for any
    other folder."""
    if root is None or not (root / PET_LISTS / "trimaps").is_dir():
        return None
    if not any((root / PET_LISTS / name).is_file() for name in PET_LIST_NAMES):
        return None
    return ShippedClasses(
        f"Oxford-IIIT Pet's trimaps in {root} (for the border as void: "
        "'data.class_names=[background,pet]' 'data.label_values=[2,1]' 'data.ignore_values=[3]')",
        ("pet", "background", "border"), (1, 2, 3), by_colour=False,
    )  # fmt: skip


def is_cityscapes_layout(root: Path | None) -> bool:
    return root is not None and all((root / f).is_dir() for f in CITYSCAPES_FOLDERS)


def cityscapes_classes(root: Path | None) -> ShippedClasses | None:
    """Cityscapes' 19 classes where ``root`` is laid out as Cityscapes (``leftImg8bit/``,
    ``gtFine/``); None for any other folder."""
    if not is_cityscapes_layout(root):
        return None
    scored = dict(CITYSCAPES_CLASSES)
    void = [("void", i) for i in range(CITYSCAPES_IDS) if i not in scored.values()]
    entries = [*CITYSCAPES_CLASSES, *void]
    return ShippedClasses(
        f"Cityscapes' format (its 19 classes scored, the other label ids void; give "
        f"data.class_names for others) in {root}",
        tuple(n for n, _ in entries), tuple(v for _, v in entries), by_colour=False,
    )  # fmt: skip


def voc_classes(root: Path | None) -> ShippedClasses | None:
    """Pascal VOC's classes where ``root`` is laid out as VOC (``ImageSets/Segmentation/``,
    ``SegmentationClass/``) and ships no list of them; None for any other folder."""
    if root is None or not all((root / f).is_dir() for f in VOC_FOLDERS):
        return None
    # VOC's own images (2007_000032): another dataset in its layout has its own classes
    lists = list_files(root)
    first = next(iter(listed_ids(lists[0])), "") if lists else ""
    if not re.fullmatch(r"\d{4}_\d{6}", first):
        return None
    return ShippedClasses(
        f"Pascal VOC's format (no class list in {root}; give data.class_names, or a "
        "labelmap.txt, for others)",
        (*VOC_CLASSES, "void"), (*range(len(VOC_CLASSES)), VOC_VOID), by_colour=False,
    )  # fmt: skip


def read_class_file(path: Path) -> ShippedClasses:
    """One class file, by its name's kind (:func:`is_class_file`)."""
    name = path.name.lower()
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise ClassFileError(f"{path}: cannot be read as a class list ({err}).") from err
    if name == "labelmap.txt":
        entries, by_colour = labelmap_entries(text, path), True
    elif name == "class_names.txt":
        entries, by_colour = labelme_entries(text, path), False
    elif name in ADE_LISTS:
        entries, by_colour = [("void", 0), *ade_entries(text, path)], False
    elif name == "_classes.csv":
        entries, by_colour = table_entries(text, path, ("pixel value", "value"), False), False
    else:
        entries, by_colour = table_entries(text, path, ("r", "g", "b"), True), True
    if not entries:
        raise ClassFileError(f"{path} lists no class: list them, or remove the file.")
    names = tuple(n for n, _ in entries)
    codes = tuple(c for _, c in entries)
    for what, items in (("name", [n.lower() for n in names]), ("value", codes)):
        twice = sorted({str(i) for i in items if items.count(i) > 1})
        if twice:
            raise ClassFileError(
                f"{path} gives two classes the {what} {twice[0]}: each class needs its own "
                f"{what}; mend the file, or give the classes with data.class_names."
            )
    return ShippedClasses(path, names, codes, by_colour)


def table_entries(
    text: str, path: Path, code_columns: Sequence[str], colour: bool
) -> list[tuple[str, Any]]:
    """The rows of a CSV with a name column (``name``, ``class``, ``class_name``,
    ``label``) and the code's: ``r,g,b`` or a pixel value; headers in any case, with
    spaces around them."""
    rows = list(csv.reader(text.splitlines()))
    header = [h.strip().lower() for h in rows[0]] if rows else []
    name_col = next(
        (header.index(h) for h in ("name", "class", "class_name", "classes", "label")
         if h in header), None,
    )  # fmt: skip
    if colour:
        code_cols = [header.index(c) for c in code_columns if c in header]
        wanted = "r, g, b"
    else:
        code_cols = [header.index(c) for c in code_columns if c in header][:1]
        wanted = "'Pixel Value'"
    if name_col is None or len(code_cols) != (3 if colour else 1):
        raise ClassFileError(
            f"{path} needs a header with a name column and {wanted} columns (it has "
            f"{', '.join(repr(h) for h in header) or 'none'})."
        )
    entries = []
    for line, row in enumerate(rows[1:], start=2):
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        try:
            code = [int(cells[i]) for i in code_cols]
            name = cells[name_col]
        except (ValueError, IndexError):
            raise ClassFileError(f"{path}, line {line}: {','.join(row)!r} is not a class's "
                                 f"name and {wanted}.") from None  # fmt: skip
        entries.append((name, tuple(code) if colour else code[0]))
    return entries


def ade_entries(text: str, path: Path) -> list[tuple[str, int]]:
    """ADE20K's ``objectInfo150``: ``Idx``, ``Ratio``, ``Train``, ``Val``, ``Name`` by tabs
    (the dataset's .txt) or commas (the devkit's .csv); a class is named by the first of
    its names (``building, edifice``: building), or all of them where two share it."""
    lines = [row for row in text.splitlines() if row.strip()]
    rows = [r.split("\t") if "\t" in r else next(csv.reader([r])) for r in lines]
    header = [h.strip().lower() for h in rows[0]] if rows else []
    if "idx" not in header or "name" not in header:
        raise ClassFileError(f"{path} needs Idx and Name columns, as ADE20K's lists have.")
    at_idx, at_name = header.index("idx"), header.index("name")
    entries = []
    for line, row in enumerate(rows[1:], start=2):
        try:
            entries.append((row[at_name].strip(), int(row[at_idx])))
        except (ValueError, IndexError):
            raise ClassFileError(f"{path}, line {line}: no Idx and Name.") from None
    first = [re.split(r"[,;]", n)[0].strip() for n, _ in entries]
    return [(f if first.count(f) == 1 else n, v)
            for f, (n, v) in zip(first, entries, strict=True)]  # fmt: skip


def labelmap_entries(text: str, path: Path) -> list[tuple[str, tuple[int, ...]]]:
    """CVAT's ``labelmap.txt``: ``name:r,g,b:parts:actions`` a line, ``#`` comments."""
    entries = []
    for line, row in enumerate(text.splitlines(), start=1):
        if not row.strip() or row.lstrip().startswith("#"):
            continue
        match = re.match(r"^([^:]+):\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*(:.*)?$", row.strip())
        if not match:
            raise ClassFileError(
                f"{path}, line {line}: {row.strip()!r} is not 'name:r,g,b::' as CVAT writes it."
            )
        entries.append((match[1].strip(), tuple(int(match[k]) for k in (2, 3, 4))))
    return entries


def labelme_entries(text: str, path: Path) -> list[tuple[str, int]]:
    """labelme2voc's ``class_names.txt``: a name a line, ``_background_`` (value 0) first;
    a list that does not start with it is not labelme's, and is refused rather than read
    with its first class taken for the masks' value 0."""
    names = [n.strip() for n in text.splitlines() if n.strip()]
    if names and names[0] != LABELME_BACKGROUND:
        raise ClassFileError(
            f"{path} does not start with {LABELME_BACKGROUND}, as labelme's class lists do, "
            "so which mask value each class has is not known: give the classes with "
            "data.class_names, or rename the file."
        )
    # labelme2voc writes its __ignore__ pixels (-1) as 255 in the 8-bit masks
    return [*((n, v) for v, n in enumerate(names)), ("__ignore__", 255)]


def classes_given(given: dict[str, Any]) -> list[str]:
    """The class settings among ``given`` that say how masks map to classes: where any is
    given, a class list shipped with the data is not read (nor parsed)."""
    keys = ("class_names", "label_values", "palette", "instance_masks")
    return [k for k in keys if given.get(k) not in (None, False, [])]


def with_shipped_classes(found: ShippedClasses | None, **given: Any) -> dict[str, Any]:
    """The class settings ``given`` (``ignore_values``, ``regions``, ... but none of
    :func:`classes_given`), with what ``found`` lists (said by :func:`say_classes`, once
    the masks have shown how the list is read)."""
    if found is None:
        return given
    shipped = found.settings()
    out = {**given, **{k: v for k, v in shipped.items() if k != "ignore_values"}}
    void = [*(given.get("ignore_values") or []), *(shipped["ignore_values"] or [])]
    out["ignore_values"] = [v for k, v in enumerate(void) if v not in void[:k]] or None
    return out


def say_classes(found: ShippedClasses) -> None:
    """The classes a list gives, each with its mask value or colour, and its void ones."""
    shipped = found.settings()
    codes = shipped["palette"] or shipped["label_values"] or range(len(found.class_names))
    log.info(
        "classes from %s: %s%s", found.source,
        ", ".join(f"{code} {n}" for code, n in zip(codes, found.class_names, strict=True)),
        f"; void (neither trained nor scored): {', '.join(found.void_names)}"
        if found.void_names else "",
    )  # fmt: skip
