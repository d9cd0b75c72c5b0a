"""What a dataset tells the model: one value, read by the training module, the model card,
evaluation and prediction alike.

Example:
    >>> info = DataInfo(
    ...     spatial_dims=2, in_channels=3, class_names=["sky", "road"], palette=[[0, 0, 255],
    ...     [128, 64, 128]], ignore_index=None, normalization=rgb_normalization([0.5] * 3,
    ...     [0.25] * 3), input_size=[120, 160], sliding_window=None, monitor="val/miou",
    ...     per_case=False)
    >>> info.num_classes
    2
    >>> DataInfo.from_dict(info.to_dict()) == info
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DataInfo:
    """Args:
    spatial_dims: 2 for images, 3 for volumes.
    in_channels: image channels or volume modalities.
    class_names: one per label value, in label order.
    palette: one RGB colour per class (colour masks, TensorBoard panels).
    ignore_index: the label value metrics and losses leave out (CamVid's void), or None.
    normalization: how raw inputs become network inputs, always with a ``kind``: see
        :func:`rgb_normalization` and :func:`zscore_normalization`.
    input_size: the spatial size the network was trained at (2D: images are resized to
        it and the logits resized back; 3D: the training patch), or None for native size.
    sliding_window: MONAI ``SlidingWindowInferer`` settings for inputs larger than the
        training patch (volumes), or None for one pass over the whole input.
    monitor: the validation metric that picks the best checkpoint.
    per_case: also score each case (mean Dice over cases; HD95 and NSD at test time).
    mirror_axes: the spatial axes (0-based: a volume's RAS axes, an image's height and
        width) that training flipped, and so the ones mirroring test-time augmentation
        flips; None in a description written before they were recorded: every axis of a
        volume, an image's width (see :func:`test_mirror_axes`).
    voxel_sizes: volumes trained on each case's own grid (no resampling): the smallest and
        the largest voxel size (mm) along each RAS axis over the training cases, as
        ``[[min, min, min], [max, max, max]]``, so that inference can tell a case the
        network would see at another scale (:func:`voxel_size_warning`); None otherwise.
    patch_size: the training patch of DataModules that train on patches and infer on
        whole inputs (your own images, volumes): a UNet's poolings are planned from it;
        None otherwise (CamVid's frames).
    regions: classes that overlap or nest (``segnet.data.regions``): name -> the label
        values it holds; the network then has one sigmoid output per region instead of a
        softmax over the classes. None: one class per voxel.
    regions_class_order: the label each region paints where predicted, in order (nnU-Net's
        ``regions_class_order``); None: by membership (``segnet.data.regions``).
    """

    spatial_dims: int
    in_channels: int
    class_names: list[str]
    palette: list[list[int]]
    ignore_index: int | None
    normalization: dict[str, Any]
    input_size: list[int] | None
    sliding_window: dict[str, Any] | None
    monitor: str
    per_case: bool
    mirror_axes: list[int] | None = None
    voxel_sizes: list[list[float]] | None = None
    patch_size: list[int] | None = None
    regions: dict[str, list[int]] | None = None
    regions_class_order: list[int] | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def out_channels(self) -> int:
        """The network's outputs: one per region, else one per class."""
        return len(self.regions) if self.regions else self.num_classes

    @property
    def output_names(self) -> list[str]:
        """What each output channel is: a region's name, else a class's."""
        return list(self.regions) if self.regions else list(self.class_names)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataInfo:
        names = {f.name for f in dataclasses.fields(cls)}
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}
        missing = required - set(data)
        if missing:
            raise ValueError(
                f"data description lacks {sorted(missing)}: it was written by another version "
                "of segnet; re-export the model or retrain."
            )
        fields = {k: data[k] for k in names if k in data}
        norm = fields["normalization"]
        if norm.get("kind") == "zscore_per_volume" and "spacing" not in norm:
            # written before resampling existed: no resampling (see zscore_normalization),
            # stated, so that every description of a volume model compares alike
            fields["normalization"] = {**norm, "spacing": None}
        return cls(**fields)


def test_mirror_axes(spatial_dims: int, mirror_axes: Sequence[int] | None) -> list[int]:
    """The spatial axes mirroring test-time augmentation flips: those training flipped;
    where they were not recorded (None), every axis of a volume (as nnU-Net) and an image's
    width (an upside-down street is not a street)."""
    if mirror_axes is not None:
        return [int(a) for a in mirror_axes]
    return [0, 1, 2] if spatial_dims == 3 else [spatial_dims - 1]


# Voxel sizes within this factor of the training cases' count as the same scale (the
# spread training itself accepts among its cases without a warning)
VOXEL_SIZE_TOLERANCE = 1.1


def voxel_size_warning(info: DataInfo, cases: dict[str, Sequence[float]]) -> str | None:
    """A warning naming the ``cases`` (name -> voxel size in mm, RAS order) whose voxel size
    lies outside the training cases' on some axis, when the network was trained on each
    case's own grid: it sees their anatomy at a scale it never met, and nothing resamples
    them. None when every case fits, or the network resamples its inputs itself.

    Example:
        >>> info = DataInfo(3, 1, ["bg", "fg"], [[0, 0, 0], [255, 0, 0]], None,
        ...     zscore_normalization(None), [32, 32, 32], None, "val/dice", True,
        ...     voxel_sizes=[[1.0, 1.0, 1.0], [1.0, 1.0, 1.5]])
        >>> voxel_size_warning(info, {"a": (1.0, 1.0, 1.2), "b": (1.0, 1.0, 1.6)}) is None
        True
        >>> print(voxel_size_warning(info, {"c": (2.0, 2.0, 2.0)})[:54])
        1 of 1 volume(s) have voxel sizes outside the training
    """
    if info.voxel_sizes is None or info.normalization.get("spacing"):
        return None
    low, high = info.voxel_sizes
    odd = {
        name: spacing
        for name, spacing in cases.items()
        if any(
            s < lo / VOXEL_SIZE_TOLERANCE or s > hi * VOXEL_SIZE_TOLERANCE
            for s, lo, hi in zip(spacing, low, high, strict=True)
        )
    }
    if not odd:
        return None
    name, spacing = next(iter(odd.items()))
    trained = _mm(low) if low == high else f"{_mm(low)} to {_mm(high)}"
    return (
        f"{len(odd)} of {len(cases)} volume(s) have voxel sizes outside the training cases' "
        f"({trained} mm per RAS axis), e.g. {name} at {_mm(spacing)} mm. The "
        "network was trained on each case's own grid (data.spacing null), so it sees their "
        "anatomy at a scale it never met and may segment them poorly: resample them to the "
        "training voxel size, or train with data.spacing=median."
    )


def _mm(sizes: Sequence[float]) -> str:
    return "[" + ", ".join(f"{s:g}" for s in sizes) + "]"


def rgb_normalization(mean: Sequence[float], std: Sequence[float]) -> dict[str, Any]:
    """8-bit RGB images: ``(pixel / 255 - mean) / std`` per channel, in RGB order."""
    return {
        "kind": "rgb_mean_std",
        "channel_order": "RGB",
        "scale": 1 / 255,
        "mean": [float(m) for m in mean],
        "std": [float(s) for s in std],
    }


# How sliding-window outputs are blended and short axes padded: MONAI's defaults, stated
# here so that every run passes them explicitly and a model card can tell a deployment
# without MONAI what they are
WINDOW_BLENDING = {"sigma_scale": 0.125, "padding_mode": "constant", "cval": 0.0}


def sliding_window_steps(window: dict[str, Any]) -> dict[str, str]:
    """MONAI's ``SlidingWindowInferer`` with the card's ``sliding_window`` arguments, spelt
    out for a deployment that has only numpy."""
    return {
        "skip_if": "no spatial axis is longer than roi_size: then one run over the whole input",
        "pad": "each axis shorter than roi_size with cval up to roi_size, half before and the "
        "rest after; crop the blended logits back at the end",
        "windows": "per axis, starts 0, s, 2s, ... with s = max(1, int(roi_size * (1 - "
        "overlap))) (s = roi_size where the axis equals it), up to the first window that "
        "reaches the axis's end, which is moved back to end exactly there",
        "blend": "logits of all windows summed, each voxel weighted by w, then divided by the "
        "summed weights"
        + (
            "; w = the product over the axes of exp(-d**2 / (2 * (sigma_scale * roi_size)**2)), "
            "d = the offset from the window's centre, (roi_size - 1) / 2; then the whole "
            "product map clamped below at max(its smallest value, 0.001)"
            if window.get("mode", "constant") == "gaussian"
            else "; w = 1"
        ),
    }


def zscore_normalization(
    clip: Sequence[float] | None,
    spacing: Sequence[float] | None = None,
    stack_spacing: Sequence[float] | None = None,
    channel_suffixes: Sequence[str] = (),
) -> dict[str, Any]:
    """Volumes (NIfTI, reoriented to RAS): intensities clipped to ``clip`` (if set), then
    zero mean and unit variance over each whole volume, per channel; then, with ``spacing``
    (mm per RAS axis), resampled to that voxel spacing, the logits resampled back to the
    source grid before the argmax. A description without ``spacing`` (written before it
    existed) means no resampling. ``stack_spacing`` (z, y, x), where training gave one: the
    voxel size of TIFF stacks and arrays that carry none, so that prediction reads them on
    the grid training did. ``channel_suffixes``, where each channel of a case was a file
    of its own: every channel's word after the case's name (nnU-Net's ``0000``, ``0001``;
    BraTS's ``flair``, ``t1`` ...), so that prediction reads a case from the same files."""
    described = {
        "kind": "zscore_per_volume",
        "clip": list(clip) if clip else None,
        "spacing": [float(s) for s in spacing] if spacing else None,
    }
    if stack_spacing:
        described["stack_spacing"] = [float(s) for s in stack_spacing]
    if channel_suffixes:
        described["channel_suffixes"] = list(channel_suffixes)
    return described
