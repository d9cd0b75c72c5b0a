"""A user's own 2D images and masks: finding the pairs, decoding them, and turning mask
values (or colours) into class indices, with errors that name the file and the setting.

Where pairs come from (:func:`find_pairs`):

* a folder with an image folder and a mask folder (``images/`` + ``labels/`` or ``masks/``,
  or ``data.image_dir`` / ``data.label_dir``), paired by name: ``data.image_name`` and
  ``data.label_name`` are patterns with one ``{id}`` (``{id}_training`` and
  ``{id}_manual1`` pair ``21_training.tif`` with ``21_manual1.gif``); extensions are
  ignored;
* the same under ``train/``, ``val/`` and ``test/`` (or ``training/``, ``validation/``,
  ...): given splits; or split folders inside the image and mask folders
  (``images/training/`` + ``annotations/training/``, as ADE20K and mmsegmentation lay
  them out);
* images in subfolders (``images/<patient>/<n>.png``, ``leftImg8bit/<city>/...``) pair
  with the masks in the same subfolders; a subfolder is a group, which drawn splits keep
  whole;
* a CSV with ``image`` and ``label`` columns, optional ``roi`` and ``split``; a relative
  path is relative to the CSV's folder.

Masks (:class:`LabelMapping`): index masks (value = class), any values listed in
``data.label_values`` (``label_values[i]``: the value of class ``i``; 0/255 binary masks),
palette PNGs (their indices, or their grey values where the palette is grey, as in GIFs),
colour masks through ``data.palette`` (one RGB colour per
class); ``data.ignore_values`` are void. A region-of-interest mask makes its zero pixels
void.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from segnet.data import class_masks
from segnet.data.case_table import read_case_table, resolve
from segnet.data.errors import DataError
from segnet.data.mask_codes import COLOUR, code_text, is_colour  # noqa: F401 (read through here)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")
IMAGE_DIRS = ("images", "image", "imgs", "img")
LABEL_DIRS = ("labels", "label", "masks", "mask", "annotations", "gt", "groundtruth")
ROI_DIRS = ("roi", "rois", "fov")
log = logging.getLogger(__name__)
# Pillow modes by what the network sees: single channel, colour, colour + alpha
COLOR_MODES = {"L": 1, "RGB": 3, "RGBA": 4}


class ImageDataError(DataError):
    """An image, a mask or the list of them cannot be used as it is."""


# a split's folder by its common names (ADE20K's training/ and validation/)
SPLIT_FOLDERS = {
    "train": ("train", "training"),
    "val": ("val", "valid", "validation"),
    "test": ("test", "testing"),
}


@dataclass(frozen=True)
class Pair:
    # the image's path in its image folder (``<group>/<file>``), under its split's name
    # where a split folder holds it: the name splits.json lists and predictions follow
    name: str
    image: Path
    label: Path | None
    roi: Path | None = None
    split: str | None = None  # a given split (folder or CSV column); None: drawn
    # one mask per class instead of ``label``: (class, mask) in the outputs' order
    class_masks: tuple[tuple[str, Path], ...] = ()
    # the subfolder the image sits in, or a CSV's group column: drawn splits keep a
    # group's images together (one patient's slices are never both trained and tested on)
    group: str | None = None

    @property
    def stem(self) -> str:
        """What its prediction files are named after: the name within its split, without
        the file's suffix (``aachen/aachen_000000_000019_leftImg8bit``)."""
        name = self.name.removeprefix(f"{self.split}/") if self.split else self.name
        return str(PurePosixPath(name).with_suffix(""))

    @property
    def masks(self) -> tuple[Path, ...]:
        """The mask file(s) of this image."""
        return tuple(p for _, p in self.class_masks) or ((self.label,) if self.label else ())


# -- finding the pairs -----------------------------------------------------------------
def image_files(folder: Path) -> list[Path]:
    """The image files directly in ``folder``."""
    return sorted(p for p in folder.iterdir() if is_image_file(p))


def files_below(folder: Path) -> list[Path]:
    """The image files in ``folder`` and in every folder below it; hidden ones
    (``.ipynb_checkpoints/``, a zip's ``__MACOSX/`` and ``._0.png``) are left out."""
    found = []
    for path in folder.iterdir():
        if path.is_dir() and not path.name.startswith((".", "__MACOSX")):
            found += files_below(path)
        elif is_image_file(path):
            found.append(path)
    return sorted(found)


def is_image_file(path: Path) -> bool:
    return (
        path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".") and path.is_file()
    )


def split_folders(folder: Path) -> dict[str, Path]:
    """The split folders directly in ``folder`` (``train/``, ``Validation/``, ...) by the
    split each holds, in the order train, val, test; two folders for one split are
    refused."""
    by_name = {name: split for split, names in SPLIT_FOLDERS.items() for name in names}
    found: dict[str, Path] = {}
    for d in sorted(folder.iterdir()) if folder.is_dir() else ():
        split = by_name.get(d.name.lower())
        if split is None or not d.is_dir():
            continue
        if split in found:
            raise ImageDataError(
                f"{folder} has both {found[split].name}/ and {d.name}/, two folders for the "
                f"{split!r} split: merge them, or rename one."
            )
        found[split] = d
    return {split: found[split] for split in SPLIT_FOLDERS if split in found}


def name_pattern(pattern: str, setting: str) -> re.Pattern:
    """``{id}_manual1`` as a regular expression matching a file stem, ``id`` captured."""
    if pattern.count("{id}") != 1:
        raise ValueError(
            f"{setting}={pattern!r}: give a file-name pattern with one {{id}} (the part that "
            "image and mask share), e.g. '{id}_training' and '{id}_manual1'."
        )
    head, tail = pattern.split("{id}")
    return re.compile(f"^{re.escape(head)}(?P<id>.+?){re.escape(tail)}$")


def keyed(files: list[Path], pattern: re.Pattern, folder: Path, setting: str) -> dict[str, Path]:
    """``files`` (in ``folder`` or below it) by their key: the ``{id}`` of the name, after
    the subfolder it sits in (``aachen/aachen_000000_000019``)."""
    out: dict[str, Path] = {}
    for path in files:
        match = pattern.match(path.stem)
        if match is None:
            continue
        key = path.parent.relative_to(folder).joinpath(match["id"]).as_posix()
        if key in out:
            raise ImageDataError(
                f"{out[key].relative_to(folder)} and {path.relative_to(folder)} in {folder} "
                f"both match {setting} with the same id {match['id']!r}: keep one, or make "
                "the pattern tell them apart."
            )
        out[key] = path
    return out


def subfolder(root: Path, given: str | None, choices: Sequence[str], what: str) -> Path | None:
    if given:
        folder = root / given
        if not folder.is_dir():
            raise FileNotFoundError(f"data.{what}_dir={given}: no folder {folder}.")
        return folder
    return next((root / c for c in choices if (root / c).is_dir()), None)


def folder_pairs(
    root: Path,
    image_dir: str | None,
    label_dir: str | None,
    roi_dir: str | None,
    image_name: str,
    label_name: str,
    split: str | None = None,
    skip_unlabelled: bool = False,
) -> list[Pair]:
    """The pairs of ``root``'s image and mask folders; where those hold split folders
    (``images/training/``, ``annotations/training/``), the pairs of each, in its split."""
    images = subfolder(root, image_dir, IMAGE_DIRS, "image")
    labels = subfolder(root, label_dir, LABEL_DIRS, "label")
    if images is None or labels is None:
        have = sorted(p.name + "/" for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise FileNotFoundError(
            f"{root}: expected an image folder ({'/, '.join(IMAGE_DIRS)}/) and a mask folder "
            f"({'/, '.join(LABEL_DIRS)}/), or train/ val/ test/ holding them; it has "
            f"{', '.join(have) or 'no folders'}. Name them with data.image_dir= and "
            "data.label_dir=, or list the pairs in a CSV (data.csv=)." + side_by_side_hint(root)
        )
    rois = subfolder(root, roi_dir, ROI_DIRS if roi_dir is None else (), "roi")
    names = (image_name, label_name)
    # split folders inside the image folder, where it holds them and no images itself
    inner = split_folders(images) if split is None and not image_files(images) else {}
    if not inner:
        return paired(images, labels, rois, *names, split, skip_unlabelled)
    pairs = []
    mask_splits = split_folders(labels)
    roi_splits = split_folders(rois) if rois else {}
    for inner_split, folder in inner.items():
        if inner_split not in mask_splits:
            log.warning(
                "%s has no masks (no %s folder in %s): it is left out; python -m "
                "segnet.predict segments its images.", folder, inner_split, labels,
            )  # fmt: skip
            continue
        pairs += paired(folder, mask_splits[inner_split], roi_splits.get(inner_split), *names,
                        inner_split, skip_unlabelled)  # fmt: skip
    if not pairs:
        raise ImageDataError(f"{labels}: no split folder ({', '.join(inner)}) holds masks.")
    return pairs


def side_by_side_hint(root: Path) -> str:
    """Where ``root`` holds images (in it or below), how to read masks kept beside them."""
    if not root.is_dir() or not files_below(root):
        return ""
    return (
        " Where each mask lies beside its image (scan_1.tif and scan_1_mask.tif, in one "
        "folder or one per patient): data.image_dir=. data.label_dir=. and data.label_name "
        "set to the rule that names a mask ('data.label_name={id}_mask')."
    )


def paired(
    images: Path,
    labels: Path,
    rois: Path | None,
    image_name: str,
    label_name: str,
    split: str | None,
    skip_unlabelled: bool = False,
) -> list[Pair]:
    """Each image of ``images`` (or a folder below it) with the mask of the same name
    rule in the same place under ``labels`` (or one mask per class: a folder of them for
    each class under ``labels``). With ``skip_unlabelled``, an image without a mask is
    left out (counted in a warning) rather than refused."""
    image_re = name_pattern(image_name, "data.image_name")
    label_re = name_pattern(label_name, "data.label_name")
    found = files_below(images)
    if images.resolve() == labels.resolve():  # scan_1.tif beside scan_1_mask.tif
        if image_name == label_name:
            raise ImageDataError(
                f"{images} holds the images and the masks: set data.label_name to the rule "
                "that names a mask after its image (e.g. '{id}_mask'), so that they are told "
                "apart."
            )
        found = [f for f in found if not label_re.match(f.stem)]  # a mask is not an image
    by_id = keyed(found, image_re, images, "data.image_name")
    roi_masks = keyed(files_below(rois), image_re, rois, "data.image_name") if rois else {}
    if not by_id:
        raise ImageDataError(
            f"{images}: no image files ({', '.join(IMAGE_SUFFIXES)}) whose names match "
            f"data.image_name={image_name!r}."
        )
    # under split folders the name keeps its split: train/0.png and test/0.png differ
    prefix = f"{split}/" if split else ""

    def pair(key: str, label: Path | None, masks: tuple = ()) -> Pair:
        path = by_id[key]
        name = path.relative_to(images).as_posix()
        group = path.parent.relative_to(images).as_posix()
        return Pair(prefix + name, path, label, roi_masks.get(key), split, masks,
                    None if group == "." else group)  # fmt: skip

    ids = sorted(by_id, key=lambda k: by_id[k].relative_to(images).as_posix())
    class_dirs = class_mask_folders(labels) if image_files(images) else []
    if class_dirs:  # one mask per class: a folder of masks for each class
        per_class, skipped = {}, set()
        for folder in class_dirs:
            per_class[folder.name] = keyed(image_files(folder), label_re, folder, "data.label_name")
            skipped |= check_paired(images, folder, by_id, per_class[folder.name], image_name,
                                    label_name, skip_unlabelled)  # fmt: skip
        return [
            pair(k, None, tuple((c, masks[k]) for c, masks in per_class.items()))
            for k in ids
            if k not in skipped
        ]
    masks = keyed(files_below(labels), label_re, labels, "data.label_name")
    skipped = check_paired(images, labels, by_id, masks, image_name, label_name, skip_unlabelled)
    return [pair(k, masks[k]) for k in ids if k not in skipped]


def class_mask_folders(labels: Path) -> list[Path]:
    """The folders of a mask folder that holds no masks itself but a folder of them per
    class (``masks/vessel/``, ``masks/artery/``), in the order of their names."""
    if image_files(labels):
        return []
    return sorted(
        (d for d in labels.iterdir() if d.is_dir() and image_files(d)), key=lambda d: d.name
    )


def check_paired(
    images: Path,
    labels: Path,
    by_id: dict[str, Path],
    masks: dict[str, Path],
    image_name: str,
    label_name: str,
    skip_unlabelled: bool = False,
) -> set[str]:
    """Every image of ``images`` has its mask in ``labels`` and every mask its image; with
    ``skip_unlabelled``, the images without a mask are said and returned (to leave out)."""
    if masks and not set(masks) & set(by_id):
        raise ImageDataError(unpaired_message(images, labels, by_id, masks))
    lonely_masks = sorted(set(masks) - set(by_id))
    if lonely_masks:
        path = masks[lonely_masks[0]]
        raise ImageDataError(
            f"mask {path} has no image in {images} (looked for "
            f"{image_name.replace('{id}', lonely_masks[0])}.*); {len(lonely_masks)} mask(s) "
            "in all have none. Add the images, remove the masks, or set data.image_name / "
            "data.label_name to the rule that pairs their names."
        )
    unlabelled = sorted(set(by_id) - set(masks))
    if unlabelled and skip_unlabelled:
        log.warning(
            "%d of the %d images in %s have no mask in %s (e.g. %s): left out "
            "(data.skip_unlabelled=true)", len(unlabelled), len(by_id), images, labels,
            by_id[unlabelled[0]].name,
        )  # fmt: skip
    elif unlabelled:
        path = by_id[unlabelled[0]]
        raise ImageDataError(
            f"image {path} has no mask in {labels} (looked for "
            f"{label_name.replace('{id}', unlabelled[0])}.*); {len(unlabelled)} image(s) in all "
            "have none. Add the masks, remove the images, or set data.label_name (e.g. "
            "'{id}_mask') to the rule that pairs their names; where only some images have "
            "masks (Pascal VOC's JPEGImages/), data.skip_unlabelled=true leaves the others out."
        )
    return set(unlabelled)


def unpaired_message(
    images: Path, labels: Path, by_id: dict[str, Path], masks: dict[str, Path]
) -> str:
    """No image pairs with any mask by name: show one of each, and the naming rule that
    would pair them where one does (``21_training`` and ``21_manual1``: the part before
    the first separator they share)."""
    image, mask = by_id[min(by_id)].stem, masks[min(masks)].stem
    hint = ""
    head = re.match(r"^(.*?)([_\-. ])", image)
    if head and mask.startswith(head[0]):
        key, sep = head[1], head[2]
        rules = (f"{{id}}{sep}{image[len(head[0]) :]}", f"{{id}}{sep}{mask[len(head[0]) :]}")
        paired = [
            keyed(list(by_id.values()), name_pattern(rules[0], ""), images, ""),
            keyed(list(masks.values()), name_pattern(rules[1], ""), labels, ""),
        ]
        if key and set(paired[0]) & set(paired[1]):
            hint = f" To pair them: 'data.image_name={rules[0]}' 'data.label_name={rules[1]}'."
    return (
        f"no image in {images} pairs with a mask in {labels} by name (e.g. {image} and "
        f"{mask}): data.image_name and data.label_name are the rule, patterns with one {{id}} "
        f"for the part image and mask share.{hint}"
    )


def csv_pairs(path: Path) -> list[Pair]:
    """Rows of ``image,label[,roi][,split][,group]``, or ``image,label_<class>,...`` with one mask per
    class (overlapping classes, in the columns' order); relative paths are relative to the
    CSV."""
    rows = read_case_table(path, required=("image",), error=ImageDataError)
    columns = [c for c in (rows[0] if rows else {}) if c != "line"]
    per_class = [c for c in columns if c.startswith("label_")]
    if ("label" in columns) == bool(per_class):
        raise ImageDataError(
            f"data.csv={path}: give the masks in a 'label' column (one mask per image), or in "
            "'label_<class>' columns (one black-and-white mask per class, e.g. label_vessel, "
            f"label_artery); it has {'both' if per_class else 'neither'} (its columns: "
            f"{', '.join(map(repr, columns)) or 'none'})."
        )
    pairs = []
    for row in rows:
        n = row["line"]
        missing = [c for c in ("image", *(per_class or ["label"])) if not row[c]]
        if missing:
            raise ImageDataError(f"data.csv={path}, line {n}: no {' and no '.join(missing)}.")
        split = row.get("split") or None
        image = resolve(path, row["image"])
        label = resolve(path, row["label"]) if not per_class else None
        masks = tuple((c.removeprefix("label_"), resolve(path, row[c])) for c in per_class)
        roi = resolve(path, row["roi"]) if row.get("roi") else None
        pairs.append(Pair(image.name, image, label, roi, split, masks, row.get("group") or None))
    return pairs


def find_pairs(
    root: Path,
    csv_file: str | None,
    image_dir: str | None = None,
    label_dir: str | None = None,
    roi_dir: str | None = None,
    image_name: str = "{id}",
    label_name: str = "{id}",
    skip_unlabelled: bool = False,
) -> list[Pair]:
    """Every (image, mask) pair of the data, each with its given split if any."""
    if csv_file:
        pairs = csv_pairs(Path(csv_file).expanduser())
    elif split_folders(root) and not any(
        (root / d).is_dir() for d in ([image_dir] if image_dir else IMAGE_DIRS)
    ):  # train/ val/ test/ folders, each with its images and masks
        pairs = []
        for split, folder in split_folders(root).items():
            pairs += folder_pairs(folder, image_dir, label_dir, roi_dir, image_name, label_name,
                                  split, skip_unlabelled)  # fmt: skip
    elif not root.is_dir():
        raise FileNotFoundError(
            f"data.root={root}: no such folder. Point data.root at the folder holding your "
            "images and masks, or data.csv at a CSV listing them."
        )
    else:
        pairs = folder_pairs(root, image_dir, label_dir, roi_dir, image_name, label_name,
                             None, skip_unlabelled)  # fmt: skip
    for pair in pairs:
        for what, path in (("image", pair.image), *(("mask", m) for m in pair.masks),
                           ("roi", pair.roi)):  # fmt: skip
            if path is not None and not path.is_file():
                raise FileNotFoundError(f"{what} {path}: no such file.")
    kinds = {tuple(c for c, _ in p.class_masks) for p in pairs}
    if len(kinds) > 1:
        a, b = sorted(kinds)[:2]
        raise ImageDataError(
            "the masks are not of one kind in every split: "
            + " and ".join(f"classes {', '.join(k)}" if k else "one mask per image" for k in (a, b))
            + ". Give every split the same mask folders (or CSV columns)."
        )
    names = [p.name for p in pairs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ImageDataError(
            f"{len(twice)} image name(s) occur twice, e.g. {twice[0]}: predictions and the "
            "per-image scores are named after the image, so give each image its own name."
        )
    return pairs


# -- decoding -------------------------------------------------------------------------
# EXIF orientations that turn a picture a quarter turn: its height and width swap
QUARTER_TURNS = (5, 6, 7, 8)
ORIENTATION = 0x0112  # the EXIF tag


def open_image(path: Path) -> Image.Image:
    """The decoded picture upright, as viewers show it: a phone photo's EXIF orientation
    applied, so that its mask, drawn over the picture as shown, lies over it here too."""
    try:
        im = Image.open(path)
        im.load()
        if im.getexif().get(ORIENTATION, 1) != 1:  # else no copy: most files have none
            im = ImageOps.exif_transpose(im)
        return im
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ImageDataError(f"cannot read {path}: {err}") from None


class Header(NamedTuple):
    """What a file's header says of an image: its colour mode as the network takes it
    (``L``, ``RGB`` or ``RGBA``), its size, and the bytes of a channel's value once
    decoded (1 for 8-bit files, 4 for 16-bit and float ones, held as float32)."""

    mode: str
    height: int
    width: int
    channel_bytes: int
    turned: bool = False  # shown a quarter turn from how it is stored (EXIF orientation)


def header(path: Path) -> Header:
    """The image's :class:`Header`, read without decoding it."""
    try:
        with Image.open(path) as im:
            wide = im.mode in (*WIDE_MODES, "I", "F")
            h, w = im.height, im.width
            # a PNG's EXIF may sit after its pixels: asked for without one, Pillow decodes
            # the whole picture to look, so only where its header announced one
            has_exif = im.format != "PNG" or "exif" in im.info
            turned = has_exif and im.getexif().get(ORIENTATION) in QUARTER_TURNS
            if turned:  # shown turned (open_image)
                h, w = w, h
            return Header(color_mode(im), h, w, 4 if wide else 1, turned)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ImageDataError(f"cannot read {path}: {err}") from None


def color_mode(im: Image.Image) -> str:
    """What an image is to the network: ``L`` (one channel, any bit depth), ``RGB`` or
    ``RGBA``."""
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        return "RGBA" if im.mode != "LA" else "L"
    if im.mode in ("RGB", "CMYK", "YCbCr", "P", "HSV", "LAB"):
        return "RGB"
    return "L"  # 1, L, I, I;16, F


def read_image(path: Path, mode: str, compact: bool = False) -> np.ndarray:
    """(H, W, C) in the image's own units (0-255 for 8-bit, 0-65535 for 16-bit), float32;
    with ``compact``, uint8 where the file is 8-bit (a quarter of the memory: what a
    dataset holds), float32 otherwise."""
    im = open_image(path)
    eight_bit = np.uint8 if compact else np.float32
    if mode == "L":
        if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
            array = np.asarray(im, dtype=np.float32)
        else:
            array = np.asarray(im.convert("L"), dtype=eight_bit)
        return array[..., None]
    if mode not in COLOR_MODES:
        raise ValueError(f"colour mode {mode!r}: one of {', '.join(COLOR_MODES)}.")
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        raise ImageDataError(
            f"image {path} is a 16-bit grey image, and the others are {mode}: give one kind."
        )
    return np.asarray(im.convert(mode), dtype=eight_bit)


# Masks are read into codes as segnet.data.mask_codes defines them.
# the version of this reading, in the statistics cache's keys (2: masks as they look)
MASK_READING = 2
WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")


def read_mask(path: Path, one_bit_white: int = 255, palette_colours: bool = False) -> np.ndarray:
    """A mask as a viewer shows it, one integer code per pixel (see ``COLOUR``): 1-bit
    files 0 black and 255 white (``one_bit_white``: 1 where masks hold class numbers);
    8-bit grey their level; 16-bit grey their value, or the 8-bit level where the file
    holds 8-bit greys widened (multiples of 257: 65535 is 255); RGB(A) and palette files
    their colours, a grey colour as its level. A palette of colours is read by its index
    (the class number of VOC-style masks) unless ``palette_colours`` (``data.palette``
    maps colours)."""
    im = open_image(path)
    if im.mode == "1":
        return np.asarray(im).astype(np.int64) * one_bit_white
    if im.mode in WIDE_MODES:
        codes = np.asarray(im).astype(np.int64)
        widened = codes.max(initial=0) <= 65535 and not (codes % 257).any()
        return codes // 257 if widened else codes
    if im.mode == "F":
        values = np.asarray(im)
        if not np.array_equal(values, np.round(values)) or values.min(initial=0) < 0:
            raise ImageDataError(
                f"mask {path} holds fractions or negative numbers (a floating-point image): "
                "save the mask with whole class values or colours."
            )
        return values.astype(np.int64)
    if im.mode in ("L", "LA"):
        return np.asarray(im.getchannel("L") if im.mode == "LA" else im).astype(np.int64)
    if im.mode in ("P", "PA") and not palette_colours:
        indices = np.asarray(im.getchannel(0) if im.mode == "PA" else im).astype(np.int64)
        palette = np.array(im.getpalette() or [], np.int64).reshape(-1, 3)
        used = np.unique(indices)
        if len(palette) <= used.max() or (palette[used] != palette[used][:, :1]).any():
            return indices  # a palette of colours: the index is the class number
    rgb = np.asarray(im.convert("RGB")).astype(np.int64)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return np.where((r == g) & (g == b), r, COLOUR + r * 65536 + g * 256 + b)


def read_codes(pair: Pair, reading: dict[str, Any], ignore: Sequence[int] = ()) -> np.ndarray:
    """The mask codes of a pair: its mask read as ``reading`` says (:func:`read_mask`), or
    its masks per class combined into one label map of bits (:mod:`segnet.data.class_masks`;
    ``ignore``: the codes that are void in any of them)."""
    if not pair.class_masks:
        return read_mask(pair.label, **reading)
    names = [c for c, _ in pair.class_masks]
    masks = [read_mask(p, one_bit_white=255, palette_colours=True) for p in pair.masks]
    return class_masks.combine(masks, pair.masks, names, ignore)


def order_class_masks(
    pairs: list[Pair], class_names: Sequence[str] | None
) -> tuple[list[str], list[int] | None]:
    """The classes of masks given one per class, in the outputs' order: ``data.class_names``
    where it names them, else the folders' (or columns') order; the pairs' masks put in that
    order. Returns them with the combinations a checkpoint was trained for, where
    ``data.class_names`` holds those (its classes as evaluate reads them back), else None."""
    found = [c for c, _ in pairs[0].class_masks]
    where = f"the masks of {pairs[0].image.parent.parent}"
    codes = class_masks.combination_codes(class_names, found) if class_names else None
    names = found if codes is not None or not class_names else list(class_names)
    if sorted(names) != sorted(found):
        raise ImageDataError(
            f"data.class_names={list(class_names or [])}: the masks are given one per class, "
            f"for {', '.join(found)}; name exactly these (in the order the outputs should "
            "have), or leave data.class_names null."
        )
    names = class_masks.check_mask_classes(names, where)
    for i, pair in enumerate(pairs):
        by_class = dict(pair.class_masks)
        pairs[i] = replace(pair, class_masks=tuple((c, by_class[c]) for c in names))
    return names, codes


def colour_code(value: int | Sequence[int], setting: str) -> int:
    """A mask value (a number) or colour ([r, g, b]) as a code :func:`read_mask` gives: a
    grey colour is its level, as a grey pixel of any mask is."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, Sequence) and len(value) == 3 and all(0 <= int(v) <= 255 for v in value):
        r, g, b = (int(v) for v in value)
        if r == g == b:
            return r
        return COLOUR + r * 65536 + g * 256 + b
    raise ValueError(
        f"{setting}: {value!r} is neither a mask value (a whole number >= 0) nor an RGB "
        "colour [r, g, b]."
    )


def code_rgb(codes: Sequence[int]) -> np.ndarray:
    """Codes as RGB points (N, 3), float: a grey level ``v`` is ``(v, v, v)``."""
    codes = np.asarray(codes, dtype=np.int64)
    rgb = codes - COLOUR
    coloured = np.stack([rgb >> 16, (rgb >> 8) & 255, rgb & 255], -1)
    return np.where((codes >= COLOUR)[:, None], coloured, codes[:, None]).astype(np.float64)


def nearest_of(codes: Sequence[int], given: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``codes``, the index of the nearest of ``given`` and its distance (the
    root-mean-square difference of the R, G and B levels)."""
    distance = np.sqrt(((code_rgb(codes)[:, None] - code_rgb(given)[None]) ** 2).mean(-1))
    return distance.argmin(1), distance.min(1)


# -- mask values to classes -----------------------------------------------------------
# a value far from every given one that holds this share of the pixels is a class nobody
# named, not noise: refused rather than read as the nearest class
NAMED_SHARE = 0.005
# given values closer than this (grey levels) are class numbers: no value is read as the
# nearest of them
MIN_GAP = 16


@dataclass
class LabelMapping:
    """How mask codes become class indices; ``void`` is the index of unlabelled pixels."""

    class_names: list[str]
    label_values: list[int] | None  # code of class i; None: the value is the class
    ignore: list[int]
    by_colour: bool = False  # data.palette: palette files are read by their colours
    # values near a given one read as it (JPEG noise, smoothed edges): see near_values()
    nearest: bool = False
    # each value's class as decided over the masks of every split (training's check), so
    # that one mask is read as the whole folder was judged, not by its own shares
    decided: dict[int, int] | None = None

    def reading(self) -> dict[str, Any]:
        """How :func:`read_mask` reads masks for this mapping: as a viewer shows them where
        values or colours are given; 1-bit files as the class numbers 0 and 1 where masks
        hold class numbers (no ``data.label_values``)."""
        return {
            "one_bit_white": 1 if self.label_values is None else 255,
            "palette_colours": self.by_colour,
        }

    @property
    def void(self) -> int:
        return len(self.class_names)

    @classmethod
    def from_settings(
        cls,
        class_names: Sequence[str],
        label_values: Sequence | None,
        palette: Sequence | None,
        ignore_values: Sequence | None,
    ) -> LabelMapping:
        names = list(class_names)
        if label_values is not None and palette is not None:
            raise ValueError(
                "data.label_values and data.palette both map masks to classes: give "
                "label_values for masks of numbers, palette for colour masks."
            )
        given = label_values if label_values is not None else palette
        setting = "data.label_values" if label_values is not None else "data.palette"
        codes = None
        if given is not None:
            codes = [colour_code(v, setting) for v in given]
            if len(codes) != len(names):
                raise ValueError(
                    f"{setting} has {len(codes)} entries and data.class_names {len(names)}: "
                    f"give one per class ({setting}[i] is the mask value of class i)."
                )
            if len(set(codes)) != len(codes):
                raise ValueError(f"{setting}={list(given)}: a value is given to two classes.")
        ignore = [colour_code(v, "data.ignore_values") for v in (ignore_values or [])]
        clash = set(ignore) & set(codes if codes is not None else range(len(names)))
        if clash:
            raise ValueError(
                f"data.ignore_values: {code_text(min(clash))} is also a class's value; a "
                "value is either a class or void."
            )
        return cls(names, codes, ignore, by_colour=palette is not None, nearest=given is not None)

    def lookup(self) -> dict[int, int]:
        codes = self.label_values if self.label_values is not None else range(self.void)
        table = {code: i for i, code in enumerate(codes)}
        table.update({code: self.void for code in self.ignore})
        return table

    def tolerance(self) -> float | None:
        """How far from every given value (a class's or void's) a mask value lies before it
        could be a class of its own: a quarter of the distance between the two closest given
        values (the root-mean-square difference of the R, G and B levels: for two greys,
        the difference of their levels). None where values are not read by the nearest:
        index masks (a value is a class number, and one off them is a mistake) and masks
        per class."""
        given = [*(self.label_values or []), *self.ignore]
        if not self.nearest or len(given) < 2:
            return None
        points = code_rgb(given)
        gaps = np.sqrt(((points[:, None] - points[None]) ** 2).mean(-1))
        closest = float(gaps[np.triu_indices(len(given), 1)].min())
        # values a level or a few apart (0, 1, 2, ...) are class numbers, not looks
        return closest / 4 if closest >= MIN_GAP else None

    def far_values(self, counts: dict[int, int]) -> dict[int, int]:
        """Those of :meth:`near_values` farther than :meth:`tolerance` from every given
        value: few pixels, read as the nearest class, but worth a look (a rare class
        nobody named would be among them)."""
        tolerance, table = self.tolerance(), self.lookup()
        near = self.near_values(counts)
        if not near:
            return {}
        given = list(table)
        off = list(near)
        gap = nearest_of(off, given)[1]
        return {c: near[c] for c, d in zip(off, gap, strict=True) if d > tolerance}

    def near_values(self, counts: dict[int, int]) -> dict[int, int]:
        """The values of ``counts`` (value -> pixels) that are no given value, each with the
        class (or void) of the nearest given value, as a viewer shows them: a JPEG's
        compression noise (254 beside 255, a red a few levels off) and the in-between
        colours of a smoothed edge. Left out, so that they stay unmapped and are refused: a
        value farther than :meth:`tolerance` from every given one that holds at least
        ``NAMED_SHARE`` of the pixels, which is a class nobody named rather than noise
        (noise spreads over many values, each a small share)."""
        tolerance = self.tolerance()
        table = self.lookup()
        off = sorted(int(c) for c in counts if int(c) not in table)
        if tolerance is None or not off:
            return {}
        total = sum(counts.values())
        given = list(table)
        nearest, gap = nearest_of(off, given)
        return {
            code: table[given[k]]
            for code, k, d in zip(off, nearest, gap, strict=True)
            if d <= tolerance or counts[code] < NAMED_SHARE * total
        }

    def classes_of(self, counts: dict[int, int]) -> dict[int, int]:
        """The class (or void) index of each value of ``counts`` that maps: the given
        values, and the others read as the nearest (:meth:`near_values`)."""
        return {**self.lookup(), **self.near_values(counts)}

    def apply(
        self,
        codes: np.ndarray,
        path: Path,
        unmapped_error: Callable[[list[int]], Exception] | None = None,
    ) -> np.ndarray:
        """Class indices (uint8; ``void`` for ignored values) of a mask's codes; codes the
        mapping lacks raise ``unmapped_error(codes)`` where the caller knows better what
        they mean, else an error naming ``path`` and the settings that map values."""
        values, inverse, n = np.unique(codes, return_inverse=True, return_counts=True)
        table = {
            **self.classes_of(dict(zip(values.tolist(), n.tolist(), strict=True))),
            **(self.decided or {}),
        }
        unmapped = [int(v) for v in values if int(v) not in table]
        if unmapped:
            if unmapped_error is not None:
                raise unmapped_error(unmapped)
            raise ImageDataError(self.unmapped_message(path, unmapped))
        classes = np.array([table[int(v)] for v in values], dtype=np.uint8)
        return classes[inverse.reshape(codes.shape)]

    def unmapped_message(self, path: Path, unmapped: list[int]) -> str:
        shown = ", ".join(code_text(v) for v in unmapped[:8])
        if self.label_values is None:
            how = (
                f"index masks (data.label_values null) hold the class number, 0 to "
                f"{self.void - 1} for data.class_names={self.class_names}"
            )
        else:
            how = "data.label_values / data.palette list the value of each class"
        return (
            f"mask {path} holds {shown}, which the settings do not map to a class ({how}). "
            "Map every value to a class (data.label_values=[...], one per class; "
            "data.palette=[[r,g,b],...] for colour masks) or to void "
            "(data.ignore_values=[...])."
        )


def suggestion(counts: dict[int, int], class_names: Sequence[str] | None) -> str:
    """The settings that would map the values counted over the training masks; values
    that each hold under ``NAMED_SHARE`` of the pixels and lie near a larger one are left
    out (noise, edges: with these settings they are read as the nearest); a rare value
    far from the others, or among class numbers, stays in (it may be a class)."""
    total = sum(counts.values()) or 1
    major = [c for c in counts if counts[c] >= NAMED_SHARE * total]
    codes = sorted(counts)
    if len(major) >= 2:  # the small values that would be read as the nearest of these
        tolerance = LabelMapping([str(c) for c in major], major, [], nearest=True).tolerance()
        minor = [c for c in codes if c not in major]
        if tolerance is not None and minor:  # else class numbers, or nothing to leave out
            gap = nearest_of(minor, major)[1]
            far = [c for c, d in zip(minor, gap, strict=True) if d > tolerance]
            codes = sorted(major + far)
    colour = any(is_colour(c) for c in codes)
    names = list(class_names or [])
    if len(codes) == 2 and not colour and len(names) in (0, 2):
        names = names or ["background", "foreground"]
        return (
            f"'data.class_names=[{','.join(names)}]' 'data.label_values=[{codes[0]},{codes[1]}]' "
            "(label_values[i] is the mask value of class i: swap them, or the names, to "
            "choose which is which)"
        )
    # in a palette, a grey level is the colour [v,v,v] (as a grey pixel reads)
    listed = ",".join(f"[{c},{c},{c}]" if colour and c <= 255 else code_text(c) for c in codes[:16])
    setting = "data.palette" if colour else "data.label_values"
    return (
        f"'{setting}=[{listed}]' with one name per value in data.class_names (values that "
        "are no class go in data.ignore_values)"
    )


def value_table(counts: dict[int, int], mapping: LabelMapping | None) -> str:
    """One line per mask value: its pixel share and the class it is read as."""
    total = sum(counts.values()) or 1
    table = mapping.classes_of(counts) if mapping else {}
    near = mapping.near_values(counts) if mapping else {}
    far = mapping.far_values(counts) if mapping else {}
    near = {c: t for c, t in near.items() if c not in far}  # far ones get a line each
    lines = []
    if near:  # noise around the given values: one line per class, not a line per value
        for target in sorted(set(near.values())):
            values = sorted((c for c, t in near.items() if t == target), key=lambda c: -counts[c])
            share = sum(counts[c] for c in values)
            read_as = "void" if target == mapping.void else mapping.class_names[target]
            lines.append(
                f"{'nearest':>13} {100 * share / total:6.2f}%  -> {read_as} ({len(values)} "
                f"value(s) nearest its own, most {code_text(values[0])}: compression noise or "
                "smoothed edges)"
            )
        counts = {c: n for c, n in counts.items() if c not in near}
    for code in sorted(counts, key=lambda c: -counts[c])[:24]:
        target = table.get(code)
        if target is None:
            read_as = "unmapped"
        elif mapping is not None and target == mapping.void:
            read_as = "void"
        else:
            read_as = mapping.class_names[target]
        if code in far:
            read_as += " (the nearest, though far from its value)"
        lines.append(f"{code_text(code):>13} {100 * counts[code] / total:6.2f}%  -> {read_as}")
    if len(counts) > 24:
        lines.append(f"... and {len(counts) - 24} more values")
    return "\n  ".join(lines)
