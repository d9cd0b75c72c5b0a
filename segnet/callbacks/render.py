"""Pictures of predictions: input | ground truth | prediction, for 2D and 3D."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from segnet.data.camvid import colorize

GAP = 4  # white pixels between panels


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


def hstack(panels: Sequence[np.ndarray]) -> np.ndarray:
    h = max(p.shape[0] for p in panels)
    gap = np.full((h, GAP, 3), 255, np.uint8)
    padded = [np.pad(p, ((0, h - p.shape[0]), (0, 0), (0, 0)), constant_values=255) for p in panels]
    out = [padded[0]]
    for p in padded[1:]:
        out += [gap, p]
    return np.concatenate(out, axis=1)


def vstack(rows: Sequence[np.ndarray]) -> np.ndarray:
    w = max(r.shape[1] for r in rows)
    padded = [np.pad(r, ((0, GAP), (0, w - r.shape[1]), (0, 0)), constant_values=255) for r in rows]
    return np.concatenate(padded, axis=0)[:-GAP]


def triptych(image: torch.Tensor, label: torch.Tensor, pred: torch.Tensor, palette) -> np.ndarray:
    """input | ground truth | prediction for one 2D sample; the input is shown at the
    label's size so the three line up."""
    rgb = _resize_nearest(to_gray_rgb(image), label.shape[-2:])
    return hstack([rgb, colorize(label.cpu(), palette), colorize(pred.cpu(), palette)])


def middle_slices(volume: torch.Tensor) -> list[torch.Tensor]:
    """Middle axial, coronal and sagittal slices of a (..., X, Y, Z) tensor (RAS order)."""
    x, y, z = volume.shape[-3:]
    return [volume[..., :, :, z // 2], volume[..., :, y // 2, :], volume[..., x // 2, :, :]]


def volume_triptych(
    image: torch.Tensor, label: torch.Tensor, pred: torch.Tensor, palette
) -> np.ndarray:
    """One row per orientation (axial, coronal, sagittal) of input | truth | prediction.
    Slices are rotated so that anterior/superior point up, as radiologists view them."""
    rows = []
    for img, lab, prd in zip(
        middle_slices(image), middle_slices(label), middle_slices(pred), strict=True
    ):
        rot = lambda t: torch.rot90(t, 1, dims=(-2, -1))  # noqa: E731
        rows.append(triptych(rot(img), rot(lab), rot(prd), palette))
    return vstack(rows)
