"""The training patch and batch planned from the data, as nnU-Net plans its own: a patch
as large as the median case allows within a voxel budget, and a batch of as many patches
as fill a step of a set size, for 2D images and 3D volumes alike."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# nnU-Net's bounds on a planned batch: at least 2 patches, and no more than make up 5%
# of the training pixels (a small set is not seen whole in every step)
MIN_BATCH, MAX_BATCH_SHARE = 2, 0.05

# a volume patch's sides are whole multiples of this (three poolings divide it), short
# sides (thick-slice axes) of half of it
VOLUME_MULTIPLE = 8


def plan_batch_size(patch: Sequence[int], sizes: Sequence[Sequence[int]], batch_voxels: int) -> int:
    """The training batch planned from the data, as nnU-Net plans its own: as many patches
    as fill ``batch_voxels`` (the step a recipe is timed and sized for: 8 of 128x128 in
    ``images_quick``), so that small inputs train in fewer, larger batches at about the
    same cost per step; at most 5% of the training voxels (``sizes``: each training
    case's), at least 2.

    Example:
        >>> plan_batch_size((32, 48, 32), [(36, 50, 35)] * 145, 4 * 32 * 48 * 32)
        4
    """
    patch_voxels = math.prod(patch)
    share = int(MAX_BATCH_SHARE * sum(math.prod(s) for s in sizes) // patch_voxels)
    return max(MIN_BATCH, min(batch_voxels // patch_voxels, share))


def middle_spacing(low: Sequence[float], high: Sequence[float]) -> tuple[float, ...]:
    """The voxel size a patch is planned at where cases keep their own grids: the middle
    (geometric) of the smallest and largest along each axis, the one figure the
    checkpoint's ``voxel_sizes`` range gives back, so the network's poolings are planned
    at the same size as the patch.

    Example:
        >>> middle_spacing((1.0, 1.0, 1.0), (1.0, 1.0, 4.0))
        (1.0, 1.0, 2.0)
    """
    return tuple(math.sqrt(a * b) for a, b in zip(low, high, strict=True))


def plan_volume_patch(
    shapes: Sequence[Sequence[int]], spacing: Sequence[float], max_voxels: int
) -> tuple[int, ...]:
    """A volume's training patch: the training cases' median shape (``shapes``, voxels on
    the grid training reads, of ``spacing`` mm), shortened along the axis it spans most
    millimetres of until it holds at most ``max_voxels``, so that a patch over the budget
    keeps its proportions in space, not in voxels (a thick-slice axis keeps its few
    slices while the fine axes give way); then each side rounded down to a multiple of
    8, or below 16 voxels to the nearest multiple of 4 within the budget (a case smaller
    than its patch is padded).

    Example:
        >>> plan_volume_patch([(36, 50, 35)] * 3, (1.0, 1.0, 1.0), 48**3)
        (32, 48, 32)
        >>> plan_volume_patch([(320, 320, 20)] * 3, (0.6, 0.6, 3.6), 48**3)
        (80, 80, 16)
    """
    patch = np.median(np.asarray(shapes, dtype=np.float64), axis=0)
    mm = np.asarray(spacing, dtype=np.float64)
    while np.prod(patch) > max_voxels:
        extent = patch * mm
        longest = extent >= extent.max() * 0.999  # equal sides shrink together
        patch[longest] = np.maximum(patch[longest] * 0.95, 1.0)
    sides = tuple(_whole_side(p) for p in patch)
    if math.prod(sides) > max_voxels:  # a short side rounded up past the budget
        sides = tuple(_whole_side(p, down=True) for p in patch)
    return sides


def _whole_side(side: float, down: bool = False) -> int:
    """A patch side rounded down to a whole multiple of 8 voxels; a short one (a few
    thick slices) to the nearest multiple of 4 (``down``: the one below), as rounding
    down would cut a third of 11 slices; never below 4 (a shorter case is padded)."""
    if side >= 2 * VOLUME_MULTIPLE:
        return int(side // VOLUME_MULTIPLE * VOLUME_MULTIPLE)
    short = VOLUME_MULTIPLE // 2
    steps = side // short if down else round(side / short)
    return int(max(short, steps * short))
