"""Image/mask augmentation with torchvision ``transforms.v2``: image and mask move together."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchvision import tv_tensors
from torchvision.transforms import v2

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def normalize(mean: Sequence[float], std: Sequence[float]) -> v2.Transform:
    # ToDtype only touches the image (masks stay integer), then mean/std normalisation.
    return v2.Compose(
        [
            v2.ToDtype({tv_tensors.Image: torch.float32, "others": None}, scale=True),
            v2.Normalize(mean=list(mean), std=list(std)),
        ]
    )


def train_transform(
    size: Sequence[int],
    ignore_index: int,
    mean: Sequence[float],
    std: Sequence[float],
    scale: Sequence[float] = (0.75, 1.5),
    hflip: bool = True,
    color_jitter: float = 0.0,
    crop: Sequence[int] | None = None,
) -> v2.Transform:
    """Random rescale of frames at ``size`` (by ``scale``), random crop to ``crop`` (or to
    ``size``; padding with void), flip, optional jitter."""
    h, w = size
    ops: list[v2.Transform] = []
    if tuple(scale) != (1.0, 1.0):
        ops.append(v2.RandomResize(int(h * scale[0]), int(h * scale[1]) + 1, antialias=True))
    ops.append(
        v2.RandomCrop(
            tuple(crop) if crop else (h, w),
            pad_if_needed=True,
            fill={tv_tensors.Image: 0, tv_tensors.Mask: ignore_index},
        )
    )
    if hflip:
        ops.append(v2.RandomHorizontalFlip())
    if color_jitter > 0:
        j = color_jitter
        ops.append(v2.ColorJitter(brightness=j, contrast=j, saturation=j, hue=min(j, 0.5) / 4))
    ops.append(normalize(mean, std))
    return v2.Compose(ops)


def resize_images(images: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """Resize a uint8 (N, C, H, W) stack once (antialiased), e.g. for a low-resolution recipe."""
    if tuple(images.shape[-2:]) == tuple(size):
        return images
    return v2.functional.resize(images, list(size), antialias=True)


def resize_labels(labels: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    if tuple(labels.shape[-2:]) == tuple(size):
        return labels
    return v2.functional.resize(
        labels.unsqueeze(1), list(size), interpolation=v2.InterpolationMode.NEAREST_EXACT
    ).squeeze(1)
