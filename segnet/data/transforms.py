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


# A one-pixel line through a 3x3 block covers a third of it.
THIN_COVER = 1 / 3


def resize_labels(
    labels: torch.Tensor, size: Sequence[int], priority: Sequence[float] | None = None
) -> torch.Tensor:
    """Resize a (N, H, W) label stack: nearest pixel, or with ``priority`` (one number per
    class, higher first) each pixel takes the highest-priority class that covers at least a
    third of its source area, and the most common one where none does.

    Why: nearest-pixel sampling keeps one source pixel per block, so a pole two pixels wide
    at 360x480 vanishes from a third of the 120x160 frames it is in (its column falls
    between samples), and the network is taught that poles are background. Values without
    a priority (void) rank below every class.
    """
    if tuple(labels.shape[-2:]) == tuple(size):
        return labels
    if priority is None:
        return v2.functional.resize(
            labels.unsqueeze(1), list(size), interpolation=v2.InterpolationMode.NEAREST_EXACT
        ).squeeze(1)
    values = max(int(labels.max()) + 1, len(priority))
    rank = torch.full((values,), -1.0)
    rank[: len(priority)] = (
        torch.as_tensor(priority, dtype=torch.float32).argsort().argsort().float()
    )
    rank = rank.view(1, -1, 1, 1)
    out = []
    for chunk in labels.split(16):  # one-hot at full size: 16 frames at a time
        onehot = torch.nn.functional.one_hot(chunk.long(), values).permute(0, 3, 1, 2).float()
        cover = torch.nn.functional.interpolate(onehot, size=tuple(size), mode="area")
        # covering classes outrank the rest by priority; coverage breaks ties and decides
        # where no class covers a third
        score = (cover >= THIN_COVER - 1e-6) * (values + rank) + cover
        out.append(score.argmax(1).to(labels.dtype))
    return torch.cat(out)
