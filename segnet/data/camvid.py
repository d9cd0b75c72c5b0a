"""CamVid in the SegNet layout: 11 classes + void (label 11), PNG frames and label maps.

::

    root/train/*.png  root/trainannot/*.png  root/train.txt   (and val/, test/ alike)

The list files hold absolute paths from the machine that made them; only the last two
path components (folder/file) are used, resolved against ``root``. Without a list file,
images and labels are paired by file name.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from segnet.data.errors import DataError

CLASS_NAMES = (
    "Sky", "Building", "Pole", "Road", "Pavement", "Tree",
    "SignSymbol", "Fence", "Car", "Pedestrian", "Bicyclist",
)  # fmt: skip
VOID = 11
# The palette of the SegNet tutorial's CamVid colour maps; void is black.
PALETTE = (
    (128, 128, 128), (128, 0, 0), (192, 192, 128), (128, 64, 128), (60, 40, 222),
    (128, 128, 0), (192, 128, 128), (64, 64, 128), (64, 0, 128), (64, 64, 0),
    (0, 128, 192), (0, 0, 0),
)  # fmt: skip
EXPECTED_COUNTS = {"train": 367, "val": 101, "test": 233}


class CamVidDataError(DataError):
    """The CamVid folder is missing files or holds files that cannot be used."""


def split_pairs(root: Path, split: str) -> list[tuple[Path, Path]]:
    """(image, label) paths of ``split``, from ``<split>.txt`` or by matching file names."""
    image_dir, label_dir = root / split, root / f"{split}annot"
    listing = root / f"{split}.txt"
    if listing.is_file():
        pairs = []
        for n, line in enumerate(listing.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2:
                raise CamVidDataError(
                    f"{listing}:{n}: expected '<image path> <label path>', got {line!r}."
                )
            image, label = (root / Path(p).parent.name / Path(p).name for p in parts)
            pairs.append((image, label))
    elif image_dir.is_dir():
        pairs = [(p, label_dir / p.name) for p in sorted(image_dir.glob("*.png"))]
    else:
        raise CamVidDataError(
            f"CamVid split '{split}' not found: neither {listing} nor {image_dir}/ exists."
        )
    if not pairs:
        raise CamVidDataError(f"CamVid split '{split}' under {root} is empty (no PNG images).")
    for image, label in pairs:
        if not image.is_file():
            raise CamVidDataError(f"image {image} (listed for split '{split}') does not exist.")
        if not label.is_file():
            raise CamVidDataError(
                f"image {image} has no label: expected {label}. Add the label map or remove "
                "the image from the split."
            )
    return pairs


# Modes whose values are not 8-bit intensities: converted to RGB they clip (a 16-bit grey
# image turns white), so such images are refused rather than misread
WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def rgb_of(im: Image.Image, path: Path) -> np.ndarray:
    """An 8-bit image (colour, grey or palette) as (H, W, 3) uint8 RGB."""
    if im.mode in WIDE_MODES:
        raise CamVidDataError(
            f"image {path} is a {im.mode} (16-bit or floating-point) image, which the network "
            "does not take: save it as an 8-bit RGB or grey image first."
        )
    return np.asarray(im.convert("RGB"))


def check_image(path: Path) -> None:
    """``path`` decodes whole as an image the network takes (before any is predicted)."""
    try:
        with Image.open(path) as im:
            im.load()
            rgb_of(im, path)
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise CamVidDataError(f"cannot read {path}: {err}") from err


def _read_png(path: Path, mode: str) -> np.ndarray:
    try:
        with Image.open(path) as im:
            if mode == "L" and im.mode not in ("L", "P", "I", "I;16"):
                raise CamVidDataError(
                    f"label map {path} is a {im.mode} image; CamVid labels are 8-bit "
                    "single-channel maps of class indices 0..11."
                )
            if mode == "L":
                # the stored values are the class indices, whatever the PNG's mode: a
                # palette (P) image's colours, or 16-bit values, must not be mapped to grey
                return np.asarray(im)
            return rgb_of(im, path)
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise CamVidDataError(f"cannot read {path}: {err}") from err


def _load_pair(pair: tuple[Path, Path]) -> tuple[np.ndarray, np.ndarray]:
    image_path, label_path = pair
    image, label = _read_png(image_path, "RGB"), _read_png(label_path, "L")
    if image.shape[:2] != label.shape:
        raise CamVidDataError(
            f"image {image_path} is {image.shape[1]}x{image.shape[0]} but its label "
            f"{label_path} is {label.shape[1]}x{label.shape[0]} (W x H); they must match."
        )
    if label.max() > VOID:
        bad = sorted(int(v) for v in np.unique(label) if v > VOID)
        raise CamVidDataError(
            f"label {label_path} holds values {bad}; CamVid labels are 0..10 plus {VOID} (void)."
        )
    label = label.astype(np.uint8)
    return image, label


def load_split(
    root: Path, split: str, threads: int = 4
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Decode a whole split once: uint8 images (N,3,H,W), labels (N,H,W) and file names.

    The train split is ~190 MB as uint8; holding it in memory means every epoch after the
    first costs no PNG decoding, and forked workers share it copy-on-write.
    """
    pairs = split_pairs(root, split)
    with ThreadPoolExecutor(threads) as pool:  # PIL releases the GIL while decoding
        loaded = list(pool.map(_load_pair, pairs))
    shapes = [img.shape for img, _ in loaded]
    if len(set(shapes)) > 1:
        # the size most frames have, and the first frame of each other size, by name
        usual = max(set(shapes), key=shapes.count)
        odd = {}
        for (image, _), shape in zip(pairs, shapes, strict=True):
            if shape != usual:
                odd.setdefault(shape, image)
        others = "; ".join(
            f"{shapes.count(s)} at {s[1]}x{s[0]}, e.g. {path}" for s, path in odd.items()
        )
        raise CamVidDataError(
            f"split '{split}' under {root} mixes image sizes: {shapes.count(usual)} frames at "
            f"{usual[1]}x{usual[0]} (W x H), {others}; resize them to one size first."
        )
    images = torch.from_numpy(np.stack([img for img, _ in loaded])).permute(0, 3, 1, 2)
    labels = torch.from_numpy(np.stack([lab for _, lab in loaded]))
    return images.contiguous(), labels, [image.name for image, _ in pairs]


def class_pixel_counts(
    labels: torch.Tensor, num_classes: int = VOID
) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame pixel counts of each class (frames x classes; void not a class) and each
    frame's size in pixels (void included): what median-frequency weights are made of
    (:func:`segnet.data.class_weights.median_frequency`)."""
    flat = labels.reshape(labels.shape[0], -1).long()
    counts = torch.stack(
        [torch.bincount(row, minlength=num_classes + 1)[:num_classes] for row in flat]
    )
    return counts.numpy(), np.full(len(flat), flat.shape[1])
