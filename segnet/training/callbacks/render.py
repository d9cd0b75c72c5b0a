"""Pictures of predictions for TensorBoard: input | truth | prediction per sample (three
orientations per volume), with column titles and a colour legend of the classes.

Layout is torchvision's ``make_grid``; class colours are a palette lookup
(``segnet.data.palette.colorize``): exact, and one indexing operation where
``draw_segmentation_masks`` would take one boolean mask per class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont
from torchvision.utils import make_grid

from segnet.data.palette import colorize

GAP = 4  # white pixels between panels
TITLES = ("input", "truth", "prediction")
MIN_SIDE = 160  # volume slices are enlarged (nearest) to at least this many pixels


def to_gray_rgb(image: torch.Tensor) -> np.ndarray:
    """(C, H, W) float image of any scale -> (H, W, 3) uint8: RGB if 3 channels, else the
    first channel as grey, min-max scaled."""
    x = image.detach().float().cpu()
    x = x[:3] if x.shape[0] == 3 else x[:1].expand(3, *x.shape[1:])
    lo, hi = x.amin(), x.amax()
    x = (x - lo) / (hi - lo).clamp(min=1e-8)
    return (x.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)


def _resize_nearest(rgb: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    rows = np.linspace(0, rgb.shape[0] - 1, shape[0]).round().astype(int)
    cols = np.linspace(0, rgb.shape[1] - 1, shape[1]).round().astype(int)
    return rgb[rows][:, cols]


def sample_panels(
    image: torch.Tensor, label: torch.Tensor, pred: torch.Tensor, palette, scale: int = 1
) -> list[np.ndarray]:
    """[input, truth, prediction] of one 2D sample as RGB arrays; the input at the label's
    size so the three line up, all enlarged ``scale`` times (nearest)."""
    rgb = _resize_nearest(to_gray_rgb(image), label.shape[-2:])
    panels = [rgb, colorize(label.cpu(), palette), colorize(pred.cpu(), palette)]
    return [p.repeat(scale, 0).repeat(scale, 1) for p in panels]


def middle_slices(volume: torch.Tensor) -> list[torch.Tensor]:
    """Middle axial, coronal and sagittal slices of a (..., X, Y, Z) tensor (RAS order)."""
    x, y, z = volume.shape[-3:]
    return [volume[..., :, :, z // 2], volume[..., :, y // 2, :], volume[..., x // 2, :, :]]


def volume_panels(
    image: torch.Tensor, label: torch.Tensor, pred: torch.Tensor, palette
) -> list[list[np.ndarray]]:
    """One row per orientation (axial, coronal, sagittal) of input | truth | prediction,
    rotated so that anterior/superior point up, as radiologists view them, and enlarged
    to a readable size."""
    scale = max(1, -(-MIN_SIDE // max(label.shape[-3:])))
    rot = lambda t: torch.rot90(t, 1, dims=(-2, -1))  # noqa: E731
    return [
        sample_panels(rot(img), rot(lab), rot(prd), palette, scale)
        for img, lab, prd in zip(
            middle_slices(image), middle_slices(label), middle_slices(pred), strict=True
        )
    ]


def _font():
    try:
        return ImageFont.load_default(size=14)
    except TypeError:  # Pillow < 10.1: the fixed bitmap font
        return ImageFont.load_default()


def _text_strip(width: int, items: Sequence[tuple[float, str]], height: int = 22) -> np.ndarray:
    """A white strip with each text centred at its x."""
    strip = Image.new("RGB", (width, height), "white")
    draw, font = ImageDraw.Draw(strip), _font()
    for x, text in items:
        w = draw.textlength(text, font=font)
        draw.text((max(0, x - w / 2), 3), text, fill="black", font=font)
    return np.asarray(strip)


def legend(width: int, class_names: Sequence[str], palette) -> np.ndarray:
    """Colour swatches with class names, wrapped to ``width``."""
    font, row_h, x, y = _font(), 22, 4, 3
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    places = []
    # a name past the palette (void) is black, as colorize paints it
    colours = [*palette, *[(0, 0, 0)] * max(0, len(class_names) - len(palette))]
    for name, colour in zip(class_names, colours, strict=False):
        item_w = 18 + int(probe.textlength(name, font=font)) + 14
        if x + item_w > width and x > 4:
            x, y = 4, y + row_h
        places.append((x, y, name, tuple(int(c) for c in colour)))
        x += item_w
    image = Image.new("RGB", (width, y + row_h), "white")
    draw = ImageDraw.Draw(image)
    for x, y, name, colour in places:
        draw.rectangle((x, y + 2, x + 13, y + 15), fill=colour, outline="black")
        draw.text((x + 18, y), name, fill="black", font=font)
    return np.asarray(image)


def prediction_grid(rows: Sequence[Sequence[np.ndarray]], class_names, palette) -> np.ndarray:
    """Rows of [input, truth, prediction] panels -> one (H, W, 3) uint8 picture: column
    titles on top, every panel padded (white) to its column's width and row's height so
    the columns line up, and the class legend below."""
    heights = [max(p.shape[0] for p in row) for row in rows]
    widths = [max(row[c].shape[1] for row in rows) for c in range(len(rows[0]))]
    cell_h, cell_w = max(heights), max(widths)
    cells = []
    for row in rows:
        for panel in row:
            h, w = panel.shape[:2]
            top, left = (cell_h - h) // 2, (cell_w - w) // 2
            padded = np.full((cell_h, cell_w, 3), 255, np.uint8)
            padded[top : top + h, left : left + w] = panel
            cells.append(torch.from_numpy(padded).permute(2, 0, 1))
    grid = make_grid(cells, nrow=len(rows[0]), padding=GAP, pad_value=255)
    grid = grid.permute(1, 2, 0).numpy()
    width = grid.shape[1]
    centres = [GAP + c * (cell_w + GAP) + cell_w / 2 for c in range(len(rows[0]))]
    header = _text_strip(width, list(zip(centres, TITLES, strict=True)))
    return np.concatenate([header, grid, legend(width, class_names, palette)], axis=0)
