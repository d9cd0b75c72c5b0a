"""Whole-input inference with any network: sliding windows for large volumes, padding for
small ones, mirroring test-time augmentation, and logits resized to the label's size.

Plain torch (plus MONAI's sliding-window inferer), so that the training module, evaluation
and a deployed model (``segnet.serving.predict``) share one code path and serving needs none of
the training stack.

Example:
    >>> from segnet.models import create_model
    >>> net = create_model("segnet_basic", out_channels=4).eval()
    >>> inference = Inference.for_net(net)
    >>> inference.logits(net, torch.zeros(1, 3, 30, 40), size=(60, 80)).shape
    torch.Size([1, 4, 60, 80])
    >>> inference.logits(net, torch.zeros(1, 3, 5, 7)).shape  # padded, then cropped back
    torch.Size([1, 4, 5, 7])
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from segnet.data.info import WINDOW_BLENDING, test_mirror_axes
from segnet.data.regions import to_label_map

Net = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Inference:
    """How a network is applied to a whole image or volume.

    Args:
        min_input: the smallest axis the network takes (``2 * net.min_size - 1``: its
            deepest feature map keeps 2 elements per axis; instance norm needs more than
            one value). Smaller inputs are zero-padded and the logits cropped back.
        sliding_window: ``None`` for one pass over the whole input, or MONAI
            ``SlidingWindowInferer`` settings (``roi_size``, ``overlap``, ``mode``,
            ``sw_batch_size``) for volumes larger than the training patch.
        tta: mirroring test-time augmentation (see :meth:`logits`).
        mirror_axes: the spatial axes (0-based) mirroring flips, the ones training flipped
            (``DataInfo.mirror_axes``); None: every axis of a volume, an image's width.
        sigmoid: the outputs are regions, each read with a sigmoid (``DataInfo.regions``),
            rather than classes read with a softmax: mirrored passes average sigmoids.
    """

    min_input: int = 1
    sliding_window: dict[str, Any] | None = None
    tta: bool = False
    mirror_axes: Sequence[int] | None = None
    sigmoid: bool = False

    @classmethod
    def for_net(
        cls,
        net: Any,
        sliding_window: dict[str, Any] | None = None,
        mirror_axes: Sequence[int] | None = None,
        sigmoid: bool = False,
    ) -> Inference:
        return cls(
            min_input=2 * getattr(net, "min_size", 1) - 1,
            sliding_window=sliding_window,
            mirror_axes=mirror_axes,
            sigmoid=sigmoid,
        )

    def __post_init__(self) -> None:
        self._window = None
        if self.sliding_window:
            from monai.inferers import SlidingWindowInferer

            self._window = SlidingWindowInferer(**{**WINDOW_BLENDING, **self.sliding_window})

    def logits(
        self,
        net: Net,
        x: torch.Tensor,
        size: Sequence[int] | None = None,
        tta: bool | None = None,
    ) -> torch.Tensor:
        """Logits for whole inputs, resized to ``size`` (a reduced-resolution recipe is
        scored at the labels' native resolution).

        With ``tta`` (None: ``self.tta``): the softmax (a region network's sigmoids)
        averaged over every combination of flips of the mirror axes (those training
        flipped: by default all three for volumes, as nnU-Net does, and left-right for 2D
        scenes, where an upside-down street is not a street), returned as logits of that
        average (log-probabilities; for regions, log-odds).
        """
        if not (self.tta if tta is None else tta):
            return resize(self._logits(net, x), size)
        axes = [2 + a for a in test_mirror_axes(x.ndim - 2, self.mirror_axes)]
        combos = [c for r in range(len(axes) + 1) for c in itertools.combinations(axes, r)]
        probs = None
        for flip in combos:
            xf = x.flip(flip) if flip else x
            logits = self._logits(net, xf).float()
            p = probabilities(logits.flip(flip) if flip else logits, self.sigmoid)
            probs = p if probs is None else probs + p
        return resize(as_logits(probs / len(combos), self.sigmoid), size)

    def _logits(self, net: Net, x: torch.Tensor) -> torch.Tensor:
        small = [max(0, self.min_input - s) for s in x.shape[2:]]
        if any(small):
            # An input smaller than the network's deepest stage can take is padded with
            # zeros (the mean, after normalisation), as training pads small volumes to the
            # patch size, and the logits cropped back: the same rule in validation, testing,
            # evaluate and predict, whatever the format of the model.
            pad = [p for axis in reversed(small) for p in (axis // 2, axis - axis // 2)]
            logits = self._logits(net, F.pad(x, pad))
            crop = tuple(slice(a // 2, a // 2 + s) for a, s in zip(small, x.shape[2:], strict=True))
            return logits[(..., *crop)]
        if self._window is None or all(
            s <= r for s, r in zip(x.shape[2:], self._window.roi_size, strict=True)
        ):
            # A volume that fits in one window gets one plain pass: MONAI would pad it to
            # the window first, and the padding changes what the network sees.
            return net(x)
        return self._window(x, net)


def check_mirroring(tta: bool, mirror_axes: Sequence[int] | None, model: Any = None) -> None:
    """Mirroring at test time flips the axes training flipped: a network trained without
    flips has none, and mirroring it anyway would show it inputs it never learnt (on data
    whose left and right differ, the wrong side). ``model``: its file, for the message."""
    if tta and mirror_axes is not None and not list(mirror_axes):
        which = f"{model} was" if model else "this network was"
        raise ValueError(
            "mirroring test-time augmentation flips the axes the network was trained "
            f"flipping, and {which} trained without flips (data.flip=false or "
            "data.hflip=false): test without it (model.tta=false in training, tta=false in "
            "evaluate.py, --no-tta in segnet.serving.predict), or train with flips."
        )


def label_map(logits: torch.Tensor, info: Any) -> torch.Tensor:
    """(N, outputs, *spatial) logits -> (N, *spatial) label values: the arg-max over the
    classes, or a region network's regions (sigmoid above 0.5, a logit above 0) turned
    back into labels (``segnet.data.regions``); ``info`` is the model's ``DataInfo``."""
    if not info.regions:
        return logits.argmax(1)
    regions = list(info.regions.values())
    return to_label_map(logits > 0, regions, info.regions_class_order, info.num_classes)


def probabilities(logits: torch.Tensor, sigmoid: bool = False) -> torch.Tensor:
    """A softmax over the classes, or each region's sigmoid."""
    return logits.float().sigmoid() if sigmoid else logits.float().softmax(1)


def as_logits(probs: torch.Tensor, sigmoid: bool = False) -> torch.Tensor:
    """Probabilities back as logits that give them again (log-probabilities for a softmax,
    log-odds for sigmoids), so that the arg-max, a threshold at 0 or the loss read them as
    they read a network's output."""
    if sigmoid:
        return torch.logit(probs.clamp(1e-6, 1 - 1e-6))
    return probs.clamp_min(1e-8).log()


def resize(logits: torch.Tensor, size: Sequence[int] | None) -> torch.Tensor:
    """Logits interpolated (bilinear/trilinear) to ``size``; unchanged when it matches."""
    if size is not None and tuple(logits.shape[2:]) != tuple(size):
        mode = "bilinear" if logits.ndim == 4 else "trilinear"
        logits = F.interpolate(logits.float(), size=tuple(size), mode=mode, align_corners=False)
    return logits
