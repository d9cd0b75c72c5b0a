"""Class colours: a palette for any number of classes, and label maps painted with one.
Shared by the datasets, TensorBoard's panels and ``segnet.serving.predict`` (plain numpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def label_palette(num_classes: int) -> list[tuple[int, int, int]]:
    """Background black, then well-separated colours."""
    base = [
        (0, 0, 0),
        (230, 25, 75),
        (60, 180, 75),
        (255, 225, 25),
        (0, 130, 200),
        (245, 130, 48),
        (145, 30, 180),
        (70, 240, 240),
        (240, 50, 230),
        (210, 245, 60),
    ]
    return [base[i % len(base)] for i in range(num_classes)]


def with_void_colour(palette: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """``palette`` with a colour for void after its classes: black where no class is
    black (CamVid's void), else Pascal VOC's void colour, so void never looks like a class
    (a background painted black).

    Example:
        >>> with_void_colour([(0, 0, 0), (230, 25, 75)])[-1]
        (224, 224, 192)
    """
    colours = [tuple(int(v) for v in c) for c in palette]
    greys = ((v, v, v) for v in range(256))  # past these three, the first grey no class has
    choices = ((0, 0, 0), (224, 224, 192), (255, 255, 255), *greys)
    void = next((c for c in choices if c not in colours), (0, 0, 0))
    return colours + [void]


def colorize(label: np.ndarray | torch.Tensor, palette: Sequence[Sequence[int]]) -> np.ndarray:
    """(H, W) class indices -> (H, W, 3) uint8 colours; values past the palette are black.

    Example:
        >>> colorize(np.array([[0, 1], [2, 7]]), [(0, 0, 0), (255, 0, 0), (0, 9, 0)])[..., :2].tolist()
        [[[0, 0], [255, 0]], [[0, 9], [0, 0]]]
    """
    lut = np.zeros((256, 3), dtype=np.uint8)
    lut[: len(palette)] = np.asarray(palette, dtype=np.uint8)
    return lut[np.asarray(label, dtype=np.int64).clip(0, 255)]
