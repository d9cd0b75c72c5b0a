"""The scale your own 2D images are trained at (``data.downscale``): native size, or every
image downscaled by one factor, planned from the data as nnU-Net plans a target spacing
for volumes. Scores, ``evaluate.py`` and predictions stay at each image's native size:
the logits are resized back to it before the argmax.

Why: a network trained on 128x128 patches of 4000x3000 photos sees a car or a skin lesion
only in part, and every validation and test image is read whole, which on a CPU takes
minutes each. Downscaled to about eight training patches, each patch sees more of an
object, and validation and testing cost the factor squared less. Not below what the
data's thinnest class allows: structures a few pixels across (cell nuclei, roads, vessels)
would vanish.

Torch and NumPy only: prediction of a served model resizes its inputs with these same
functions."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

# the median training image is downscaled to about this many training patches of area
# (about 362x362 for images_quick's 128x128 patch). On photos enlarged four times (15
# minutes, test Dice): native size 0.62, 16 patches 0.79, 8 patches 0.84, 4 patches 0.89;
# but enlarged photos hold no detail to lose (docs/results.md), and 8 leaves images of
# CamVid's size (480x360, 10.5 patches) at native size
PATCHES_PER_IMAGE = 8
# the thinnest class keeps at least this thickness (pixels) after downscaling
MIN_THICKNESS = 8.0
# smaller factors are not worth the blur: the images stay at native size
MIN_FACTOR = 1.25
# where masks are measured as raw values (no classes settled yet), a value below this
# share of the pixels looked at is left out (the few grey levels of a JPEG mask's edges
# are not a class)
MIN_SHARE = 0.005
# masks read to measure the classes' thickness
MASKS_LOOKED_AT = 16


def check_downscale(setting: object) -> float | str:
    """``data.downscale``: ``auto`` (planned from the data), or a factor >= 1 (1: native
    size; 2: half the width and height)."""
    if setting == "auto":
        return "auto"
    if isinstance(setting, int | float) and not isinstance(setting, bool) and setting >= 1:
        return float(setting)
    raise ValueError(
        f"data.downscale={setting!r}: give auto (planned from the data: large images are "
        f"downscaled so that the median one spans about {PATCHES_PER_IMAGE} training "
        "patches), or a factor of 1 or more (2 halves the width and height; 1 trains at "
        "native size)."
    )


def scaled_size(height: int, width: int, factor: float) -> tuple[int, int]:
    """An image's (height, width) downscaled by ``factor``, rounded, at least 1."""
    return max(1, round(height / factor)), max(1, round(width / factor))


def area_and_boundary(mask: np.ndarray) -> tuple[dict[int, int], dict[int, int]]:
    """Each value's pixels in ``mask`` (2D), and its boundary pixels: those with a
    4-neighbour of another value (the image's border is no boundary)."""
    boundary = np.zeros(mask.shape, bool)
    rows, cols = mask[1:] != mask[:-1], mask[:, 1:] != mask[:, :-1]
    boundary[1:] |= rows
    boundary[:-1] |= rows
    boundary[:, 1:] |= cols
    boundary[:, :-1] |= cols
    return value_counts(mask), value_counts(mask[boundary])


def thickness(
    counted: Iterable[tuple[dict[int, int], dict[int, int]]],
    void: Iterable[int] = (),
    min_share: float = 0.0,
) -> dict[int, float]:
    """How thick each value's regions are over masks counted by :func:`area_and_boundary`:
    twice its pixels over its boundary pixels, which is the width of a strip and the radius
    of a disc. Values in ``void``, values with no boundary, and values under ``min_share``
    of the pixels (a JPEG mask's stray edge levels, where raw codes are measured rather
    than classes) are left out.

    Example:
        >>> mask = np.zeros((40, 40), np.uint8); mask[10:30, 18:22] = 1  # a strip 4 wide
        >>> round(thickness([area_and_boundary(mask)])[1], 1)
        3.6
    """
    area: dict[int, int] = {}
    edge: dict[int, int] = {}
    for pixels, boundary in counted:
        for total, counts in ((area, pixels), (edge, boundary)):
            for v, c in counts.items():
                total[v] = total.get(v, 0) + c
    everything = sum(area.values())
    left_out = set(void)
    return {
        v: 2 * a / edge[v]
        for v, a in sorted(area.items())
        if v not in left_out and edge.get(v) and a >= min_share * everything
    }


def value_counts(values: np.ndarray) -> dict[int, int]:
    """How many times each value occurs: by counting where the values are 8 or 16 bits (a
    12-megapixel mask in a few milliseconds), else by sorting."""
    if values.dtype.kind in "ub" and values.dtype.itemsize <= 2:
        n = np.bincount(values.ravel())
        present = np.flatnonzero(n)
        return dict(zip(present.tolist(), n[present].tolist(), strict=True))
    found, n = np.unique(values, return_counts=True)
    return dict(zip(found.tolist(), n.tolist(), strict=True))


def plan_downscale(
    sizes: Sequence[tuple[int, int]], patch_area: int, thinnest: float | None
) -> tuple[float, str]:
    """The factor ``data.downscale=auto`` trains at, and why: the median image of
    ``sizes`` brought to about ``PATCHES_PER_IMAGE`` training patches of ``patch_area``
    pixels, no further than keeps the ``thinnest`` class ``MIN_THICKNESS`` pixels thick;
    1 (native size) where that is under ``MIN_FACTOR``.

    Example:
        >>> plan_downscale([(3000, 4000)], 128 * 128, 120.0)[0]
        9.57
        >>> plan_downscale([(3000, 4000)], 128 * 128, 12.0)[0]  # thin roads: 1.5 at most
        1.5
        >>> plan_downscale([(360, 480)], 128 * 128, None)[0]
        1.0
    """
    median = float(np.median([h for h, _ in sizes])) * float(np.median([w for _, w in sizes]))
    by_area = math.sqrt(median / (PATCHES_PER_IMAGE * patch_area))
    if by_area < MIN_FACTOR:
        return 1.0, "the images are small enough to train whole"
    factor, why = by_area, f"the median image brought to about {PATCHES_PER_IMAGE} patches"
    if thinnest is not None and by_area > thinnest / MIN_THICKNESS:
        factor = thinnest / MIN_THICKNESS
        why = (
            f"no further than keeps the thinnest class {MIN_THICKNESS:g} pixels thick (it is "
            f"{thinnest:.1f} at native size)"
        )
    if factor < MIN_FACTOR:
        return 1.0, why.replace("no further than keeps", "native size, which keeps")
    return round(factor, 2), why


def downscale_array(raw: np.ndarray, factor: float, whole: bool = False) -> np.ndarray:
    """A decoded image (H, W, C) ``factor`` times smaller: bilinear, antialiased, as
    ``torch.nn.functional.interpolate`` does, on float32; rounded where its values are
    whole numbers, so that training and prediction feed the network the same values.
    Integer images keep their type (a folder is held in memory through training);
    ``whole``: rounded where every value is a whole number, whatever the type (prediction
    reads images as float32, training the same file in 8 or 16 bits)."""
    size = scaled_size(raw.shape[0], raw.shape[1], factor)
    integer = bool(np.issubdtype(raw.dtype, np.integer))
    rounded = integer or (whole and bool(np.array_equal(raw, np.round(raw))))
    x = torch.from_numpy(np.ascontiguousarray(raw.transpose(2, 0, 1)).astype(np.float32))
    out = F.interpolate(x[None], size=size, mode="bilinear", align_corners=False,
                        antialias=True)[0]  # fmt: skip
    out = (out.round() if rounded else out).numpy().transpose(1, 2, 0)
    return out.astype(raw.dtype) if integer else np.ascontiguousarray(out)
