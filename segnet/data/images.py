"""A user's own 2D images and masks: decoding them, and turning mask
values (or colours) into class indices, with errors that name the file and the setting.

Where the pairs come from: :mod:`segnet.data.image_pairs`.

Masks (:class:`LabelMapping`): index masks (value = class), any values listed in
``data.label_values`` (``label_values[i]``: the value of class ``i``; 0/255 binary masks),
palette PNGs (their indices, or their grey values where the palette is grey, as in GIFs),
colour masks through ``data.palette`` (one RGB colour per
class); ``data.ignore_values`` are void. A region-of-interest mask makes its zero pixels
void.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from segnet.data import bands, class_masks
from segnet.data.image_pairs import (  # noqa: F401 (read through here)
    IMAGE_SUFFIXES,
    NNUNET_CHANNEL,
    ImageDataError,
    Pair,
    drawn_masks_root,
    find_pairs,
    further_channels,
    unwrapped,
)
from segnet.data.mask_codes import COLOUR, code_text, is_colour  # noqa: F401 (read through here)

# Pillow modes by what the network sees: single channel, colour, colour + alpha
COLOR_MODES = {"L": 1, "RGB": 3, "RGBA": 4}


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


def band_file(path: Path) -> bands.Bands | None:
    """The bands of a file read as bands, not through Pillow: an array, or a TIFF of more
    than one channel that Pillow does not read whole (16-bit colour, pages of channels,
    a fourth band that is no alpha, two bands); None for a file Pillow reads (8-bit grey
    and alpha, RGB, RGBA in one page)."""
    found = bands.multi_band(path)
    if found is None or bands.is_array_file(path) or not found.eight_bit:
        return found
    try:
        with Image.open(path) as im:
            frames = getattr(im, "n_frames", 1)
            whole = im.mode == "LA" or COLOR_MODES[color_mode(im)] == found.channels
            return None if frames == 1 and whole else found
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return found


def header(path: Path) -> Header:
    """The image's :class:`Header`, read without decoding it."""
    found = band_file(path)
    if found is not None:
        channel_bytes = 1 if found.eight_bit else 4
        return Header(bands.mode_of(found.channels), found.height, found.width, channel_bytes)
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
        if path.suffix.lower() in bands.TIFF_SUFFIXES:  # one band Pillow lacks (float64)
            found = bands.header(path)
            return Header(bands.mode_of(found.channels), found.height, found.width, 4)
        raise ImageDataError(f"cannot read {path}: {err}") from None


def decode_whole(path: Path) -> None:
    """``path`` decodes whole, as an image of bands or as Pillow reads it."""
    if band_file(path) is not None:
        bands.read(path)
    else:
        open_image(path)


def pair_header(pair: Pair) -> Header:
    """The :class:`Header` of a pair's image; where it comes as one grey file per channel
    (nnU-Net), of them all: ``bands:<C>``, each file checked to be grey, of one size."""
    first = header(pair.image)
    if not pair.channels:
        return first
    headers = [first, *(header(p) for p in pair.channels)]
    for path, h in zip(pair.image_files, headers, strict=True):
        if channel_count(h.mode) != 1 or h.turned:
            raise ImageDataError(
                f"{path} is one of {len(headers)} channel files of its case and is "
                f"{describe_mode(h.mode)}{' turned by its EXIF orientation' * h.turned}: each "
                "channel file holds one grey channel, as nnU-Net has it."
            )
        if (h.height, h.width) != (first.height, first.width):
            raise ImageDataError(
                f"{path} is {h.width}x{h.height} and {pair.image} {first.width}x{first.height} "
                "(W x H): the channel files of a case are of one size."
            )
    wide = max(h.channel_bytes for h in headers)
    return Header(bands.mode_of(len(headers)), first.height, first.width, wide)


def read_pair_image(pair: Pair, mode: str, compact: bool = False) -> np.ndarray:
    """:func:`read_image` of a pair's image, its channel files stacked where it has them."""
    if not pair.channels:
        return read_image(pair.image, mode, compact)
    count = bands.count_of(mode)
    if count != len(pair.image_files):
        raise ImageDataError(
            f"{pair.image} has {len(pair.image_files)} channel files, and the model or the "
            f"other images take {describe_mode(mode)}: give every case the same channels."
        )
    planes = [read_image(p, "L", compact) for p in pair.image_files]
    if len({p.dtype for p in planes}) > 1:  # 8-bit beside 16-bit: all as float32
        planes = [p.astype(np.float32) for p in planes]
    return np.concatenate(planes, axis=-1)


def read_input(path: Path, mode: str, channel_files: bool = False) -> np.ndarray:
    """An input to predict, as :func:`read_image`; for a model trained on nnU-Net's one
    grey file per channel (``channel_files``), ``<case>_0000.png`` with its further channel
    files beside it, checked as training checks them (:func:`first_channel` says which
    inputs those are)."""
    if not channel_files:
        return read_image(path, mode)
    found = NNUNET_CHANNEL.match(path.stem)
    if not found or found["channel"] != "0000":
        raise ImageDataError(
            f"{path}: this model takes nnU-Net's one grey file per channel; give each case's "
            "channel 0000 file (<case>_0000.png), and its other channels are read beside it."
        )
    pair = Pair(path.name, path, None, channels=further_channels(path))
    if not pair.channels or pair_header(pair).mode != mode:
        raise ImageDataError(
            f"{path} has {len(pair.image_files)} channel file(s) beside it, and the model takes "
            f"{describe_mode(mode)}: give each case all its channels."
        )
    return read_pair_image(pair, mode)


def first_channel(path: Path, channel_files: bool) -> Path | None:
    """For a further channel file (``<case>_0001.png`` and on) and a model trained on
    channel files, its case's ``<case>_0000`` file, which reads it; None otherwise."""
    found = NNUNET_CHANNEL.match(path.stem)
    if not channel_files or found is None or found["channel"] == "0000":
        return None
    return path.with_stem(f"{found['case']}_0000")


def output_stem(path: Path, channel_files: bool) -> str:
    """What the prediction of ``path`` is named after: its stem, or for a model trained on
    channel files its case (``case7_0000.png``: ``case7``), as nnU-Net and evaluate.py name
    a case's prediction."""
    found = NNUNET_CHANNEL.match(path.stem)
    return found["case"] if channel_files and found and found["channel"] == "0000" else path.stem


def channel_count(mode: str) -> int:
    """The channels the network takes from images of ``mode``: ``L`` 1, ``RGB`` 3, ``RGBA``
    4, ``bands:<C>`` C."""
    return COLOR_MODES.get(mode) or bands.count_of(mode) or 0


def dataset_mode(headers: Sequence[Header], pairs: Sequence[Pair], given: str | None) -> str:
    """The one mode a dataset's images are read in: ``data.color_mode`` where given, else
    the widest of grey, RGB and RGBA its files hold (grey converts to colour); images of
    several bands share one count, and are not mixed with others."""
    modes = {h.mode for h in headers}
    banded = sorted(m for m in modes if bands.count_of(m) is not None)
    # a mode Pillow reads, given (a checkpoint from before bands, or by hand), reads every
    # file through Pillow as it always did: 16-bit colour as 8-bit RGB, a TIFF's first page
    if given in COLOR_MODES:
        return given
    if banded and (len(modes) > 1 or (given and given != banded[0])):
        first: dict[str, Path] = {}  # the first file of each kind, in the pairs' order
        for h, p in zip(headers, pairs, strict=True):
            first.setdefault(h.mode, p.image)
        kinds = "; ".join(f"{path} is {describe_mode(m)}" for m, path in first.items())
        why = f"data.color_mode={given}" if given else "the images are of several kinds"
        raise ImageDataError(
            f"{why}: {kinds}. Images of several bands are read as they are, all with one "
            "count of bands: give one kind (leave data.color_mode null for them)."
        )
    if given or banded:
        return given or banded[0]
    return "RGBA" if "RGBA" in modes else "RGB" if "RGB" in modes else "L"


def describe_mode(mode: str) -> str:
    count = bands.count_of(mode)
    return f"of {count} band(s)" if count is not None else mode


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
    dataset holds), float32 otherwise. ``bands:<C>``: C channels as the file holds them
    (:mod:`segnet.data.bands`)."""
    count = bands.count_of(mode)
    if count is not None:
        array = bands.read(path, compact)
        if array.shape[2] != count:
            raise ImageDataError(
                f"image {path} has {array.shape[2]} band(s), and the others {count}: give "
                "every image the same bands."
            )
        return array
    if bands.is_array_file(path):
        raise ImageDataError(
            f"image {path} is an array of bands, and the others are {mode}: give one kind."
        )
    try:
        im = open_image(path)
    except ImageDataError:
        found = bands.multi_band(path)
        if found is None:
            raise
        raise ImageDataError(
            f"image {path} has {found.channels} bands, which do not read as {mode} (the "
            "colour mode given, or the checkpoint's): leave data.color_mode null to read "
            "every band, or score it with a model trained on such images."
        ) from None
    eight_bit = np.uint8 if compact else np.float32
    if mode == "L":
        if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
            array = np.asarray(im, dtype=np.float32)
        else:
            array = np.asarray(im.convert("L"), dtype=eight_bit)
        return array[..., None]
    if mode not in COLOR_MODES:
        raise ValueError(f"colour mode {mode!r}: one of {', '.join(COLOR_MODES)}, bands:<C>.")
    if im.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        raise ImageDataError(
            f"image {path} is a 16-bit grey image, and the others are {mode}: give one kind."
        )
    return np.asarray(im.convert(mode), dtype=eight_bit)


# more grey values than this besides 0 look like instance masks (one value per object)
INSTANCE_VALUES = 24
# Masks are read into codes as segnet.data.mask_codes defines them.
# the version of this reading, in the statistics cache's keys (2: masks as they look;
# 3: wholly transparent pixels as nothing drawn)
MASK_READING = 3
WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")


def read_mask(path: Path, one_bit_white: int = 255, palette_colours: bool = False) -> np.ndarray:
    """A mask as a viewer shows it, one integer code per pixel (see ``COLOUR``): 1-bit
    files 0 black and 255 white (``one_bit_white``: 1 where masks hold class numbers);
    8-bit grey their level; 16-bit grey their value, or the 8-bit level where the file
    holds 8-bit greys widened (multiples of 257: 65535 is 255); RGB(A) and palette files
    their colours, a grey colour as its level; a wholly transparent pixel of an RGBA or
    grey-and-alpha file is 0 (nothing drawn). A palette of colours is read by its index
    (the class number of VOC-style masks) unless ``palette_colours`` (``data.palette``
    maps colours). An array (``.npy``) holds its values as they are."""
    if bands.is_array_file(path):
        return bands.read_mask(path, one_bit_white)
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
    if im.mode == "L":
        return np.asarray(im).astype(np.int64)
    if im.mode == "LA":
        return shown_over_black(np.asarray(im).astype(np.int64))
    if im.mode in ("P", "PA") and not palette_colours:
        indices = np.asarray(im.getchannel(0) if im.mode == "PA" else im).astype(np.int64)
        palette = np.array(im.getpalette() or [], np.int64).reshape(-1, 3)
        used = np.unique(indices)
        if len(palette) <= used.max() or (palette[used] != palette[used][:, :1]).any():
            return indices  # a palette of colours: the index is the class number
    if im.mode == "RGBA":
        rgb = shown_over_black(np.asarray(im).astype(np.int64))
    else:
        rgb = np.asarray(im.convert("RGB")).astype(np.int64)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return np.where((r == g) & (g == b), r, COLOUR + r * 65536 + g * 256 + b)


def shown_over_black(levels: np.ndarray) -> np.ndarray:
    """The grey or colour levels of pixels with their alpha last, a wholly transparent
    pixel as 0: nothing drawn, whatever colour the file keeps under it (a mask painted on
    a transparent layer, a cut-out). Any other pixel keeps its colour, however opaque (a
    class drawn at half opacity is still its class)."""
    colour = np.where(levels[..., -1:] == 0, 0, levels[..., :-1])
    return colour[..., 0] if colour.shape[-1] == 1 else colour


def one_channel_masks(paths: Sequence[Path]) -> bool:
    """Whether every mask file holds one channel of values and no colours (grey or 16-bit
    files, arrays of two axes): class numbers, where a list of colours names the classes
    (Semantic Drone's ``label_images_semantic/`` beside ``class_dict_seg.csv``). Headers
    only; a file that cannot be read is no such mask (reading it later says why)."""
    for path in paths:
        try:
            if bands.is_array_file(path):
                if bands.header(path).channels != 1:
                    return False
                continue
            with Image.open(path) as im:
                if im.mode not in ("L", "1", *WIDE_MODES):
                    return False
        except (OSError, ValueError, UnidentifiedImageError, ImageDataError):
            return False
    return bool(paths)


def read_codes(pair: Pair, reading: dict[str, Any], ignore: Sequence[int] = ()) -> np.ndarray:
    """The mask codes of a pair: its mask read as ``reading`` says (:func:`read_mask`), or
    its masks per class combined into one label map of bits (:mod:`segnet.data.class_masks`;
    ``ignore``: the codes that are void in any of them). With ``reading["instances"]``
    (instance masks: one value per object), every value but 0 is 1, the object."""
    if not pair.class_masks:
        how = {k: v for k, v in reading.items() if k != "instances"}
        codes = with_further_masks(read_mask(pair.label, **how), pair, how)
        if reading.get("instances"):
            if (codes >= COLOUR).any():
                raise ImageDataError(
                    f"mask {pair.label} holds colours, and data.instance_masks=true reads "
                    "masks of one grey value per object (0 the background)."
                )
            return (codes != 0).astype(np.int64)
        return codes
    names = [c for c, _ in pair.class_masks]
    masks = [read_mask(p, one_bit_white=255, palette_colours=True) for p in pair.masks]
    return class_masks.combine(masks, pair.masks, names, ignore)


def with_further_masks(codes: np.ndarray, pair: Pair, how: dict[str, Any]) -> np.ndarray:
    """``codes``, the codes of ``pair``'s mask, with the pixels of its further masks that
    are not 0 laid over them, in order (BUSI's second lesion of ``_mask_1``)."""
    for path in pair.further_masks:
        further = read_mask(path, **how)
        if further.shape != codes.shape:
            raise ImageDataError(
                f"mask {path} is {further.shape[1]}x{further.shape[0]} and {pair.label}, the "
                f"mask it is laid over, is {codes.shape[1]}x{codes.shape[0]}: give them one size."
            )
        codes = np.where(further != 0, further, codes)
    return codes


def order_class_masks(
    pairs: list[Pair], class_names: Sequence[str] | None, trained: Sequence[str] | None = None
) -> tuple[list[str], list[int] | None]:
    """The classes of masks given one per class, in the outputs' order: a checkpoint's
    (``trained``, its regions' order), or ``data.class_names`` where it names them, else
    the folders' (or columns') order; the pairs' masks put in that order. Returns them with
    the combinations a checkpoint was trained for, where ``data.class_names`` holds those
    (its classes as evaluate reads them back), else None."""
    found = [c for c, _ in pairs[0].class_masks]
    where = f"the masks of {pairs[0].image.parent.parent}"
    order = list(trained or found)
    codes = class_masks.combination_codes(class_names, order) if class_names else None
    names = order if codes is not None or not class_names else list(class_names)
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
# this many values or more far from every given one, each a small share: the ramp of a
# smoothed edge (masks resized with interpolation, or drawn anti-aliased), not classes
EDGE_RAMP = 24


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


def values_that_count(counts: dict[int, int]) -> list[int]:
    """The values of ``counts`` (value -> pixels) a setting would name: all of them, but
    those that each hold under ``NAMED_SHARE`` of the pixels and lie near a larger one
    (noise, edges: read as the nearest); a rare value far from the others, or among class
    numbers, stays in (it may be a class)."""
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
    return codes


def background_and_foreground(counts: dict[int, int]) -> tuple[int, int] | None:
    """Grey masks of two values, one 0, with their compression noise or smoothed edges:
    0 and the other value, the background and the foreground, where they are the two
    values that hold the most pixels and every other value lies near one of them
    (:meth:`LabelMapping.near_values`, and none of :meth:`LabelMapping.far_values`: a rare
    value far from both may be a class) and holds few pixels beside theirs; None for any
    other masks."""
    top = sorted(counts, key=lambda c: (-counts[c], c))[:2]
    if len(top) < 2 or 0 not in top or any(map(is_colour, counts)):
        return None
    values = (0, max(top))
    reading = LabelMapping(["background", "foreground"], list(values), [], nearest=True)
    others = {c for c in counts if c not in values}
    far = reading.far_values(counts)
    near = set(reading.near_values(counts)) == others and (
        not far or smoothed_edges(far, counts, values[1])
    )
    # noise spreads thin: a value holding a quarter of the smaller class's pixels or more is
    # a convention of its own (masks of 0/1 beside masks of 0/255), not noise
    thin = all(4 * counts[c] < min(counts[v] for v in values) for c in others)
    return values if near and thin else None


def a_ramp(far: dict[int, int]) -> bool:
    """Whether values far from every given one are as many as a smoothed edge's levels
    (``EDGE_RAMP`` or more): summed up, not named one by one."""
    return len(far) >= EDGE_RAMP


def smoothed_edges(far: dict[int, int], counts: dict[int, int], white: int) -> bool:
    """Whether the values far from black and ``white`` are the levels a smoothed edge
    holds between them (a mask resized with interpolation, or drawn anti-aliased): white
    is the whitest level (255, or 65535), they are ``EDGE_RAMP`` levels or more, all
    between black and white, and together a thin band beside the white they border (at
    most half its pixels). Instance masks (a value per object) are no such band: their
    objects' values hold more pixels together than any one object."""
    between = all(0 < c < white for c in counts if c not in (0, white))
    band = sum(counts[c] for c in far)
    return white in (255, 65535) and a_ramp(far) and between and 2 * band <= counts[white]


def suggestion(counts: dict[int, int], class_names: Sequence[str] | None) -> str:
    """The settings that would map the values counted over the training masks (those of
    :func:`values_that_count`)."""
    codes = list(background_and_foreground(counts) or values_that_count(counts))
    colour = any(is_colour(c) for c in codes)
    names = list(class_names or [])
    objects = [c for c in codes if c != 0]  # noise and edges left out: values that count
    if not colour and 0 in codes and len(objects) > INSTANCE_VALUES:
        return (
            f"'data.class_names=[background,object]' data.instance_masks=true, where the "
            f"masks hold one value per object ({len(objects)} values besides 0: instance "
            "masks, as cellpose or StarDist keep them), to train every object against the "
            f"background; or, where each value is a class, 'data.label_values=[{','.join(map(str, sorted(counts)[:16]))}]' "
            "with one name per value in data.class_names"
        )
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
    if len(codes) > 16 or names:
        return (
            f"'{setting}=[{listed}]' with one name per value in data.class_names (values "
            "that are no class go in data.ignore_values)"
        )
    # a line to paste, with names to replace: class i named by its place (or its value)
    placeholders = ",".join(
        "background" if c == 0 else f"class_{c if not colour else i}" for i, c in enumerate(codes)
    )
    numbers = [c for c in codes if c != 255]
    if not colour and len(numbers) == len(codes) - 1 >= 2 and numbers == list(range(len(numbers))):
        named = ",".join("background" if c == 0 else f"class_{c}" for c in numbers)
        return (
            f"'data.class_names=[{named}]' 'data.ignore_values=[255]' (the masks hold class "
            f"numbers 0 to {len(numbers) - 1}, and 255, the void of Pascal VOC's "
            "masks: object outlines, pixels nobody labelled; where 255 is a class, "
            f"'data.label_values=[{','.join(map(str, codes))}]' with a name for it)"
        )
    if not colour and sorted(codes) == list(range(len(codes))):
        return (
            f"'data.class_names=[{placeholders}]' (the masks hold class numbers 0 to "
            f"{len(codes) - 1}: one name each, in that order; values that are no class go "
            "in data.ignore_values)"
        )
    return (
        f"'data.class_names=[{placeholders}]' '{setting}=[{listed}]' (one name per value, "
        "in that order; values that are no class go in data.ignore_values)"
    )


def value_table(counts: dict[int, int], mapping: LabelMapping | None) -> str:
    """One line per mask value: its pixel share and the class it is read as."""
    total = sum(counts.values()) or 1
    table = mapping.classes_of(counts) if mapping else {}
    near = mapping.near_values(counts) if mapping else {}
    far = mapping.far_values(counts) if mapping else {}
    if a_ramp(far):  # a smoothed edge's levels: summed up with the near ones
        far = {}
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
