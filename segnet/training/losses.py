"""Loss terms beyond cross-entropy that need the void label handled."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from segnet.data.regions import region_targets


def lovasz_softmax(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int | None = None,
    stride: int = 1,
) -> torch.Tensor:
    """Lovasz-softmax loss (Berman et al., CVPR 2018): a convex surrogate of 1 - IoU,
    averaged over the classes present in ``target``, over all pixels of the batch.

    It optimises the Jaccard index directly, so a thin class (a pole, a sign) weighs as
    much as the road; ignored pixels (``ignore_index``) take no part. ``stride`` > 1
    evaluates it on every stride-th pixel along each spatial axis: sorting the pixels
    dominates its cost, and a regular subsample keeps the estimate of the IoU.

    Example:
        >>> logits = torch.tensor([[[[8.0, -8.0]], [[-8.0, 8.0]]]])  # (1, 2, 1, 2), right
        >>> float(lovasz_softmax(logits, torch.tensor([[[0, 1]]]))) < 1e-3
        True
        >>> float(lovasz_softmax(-logits, torch.tensor([[[0, 1]]]))) > 0.99
        True
    """
    if stride > 1:
        every = (slice(None, None, stride),) * (target.ndim - 1)  # the spatial axes
        logits, target = logits[(..., *every)], target[(..., *every)]
    num_classes = logits.shape[1]
    probs = logits.float().softmax(1).movedim(1, -1).reshape(-1, num_classes)
    labels = target.reshape(-1)
    if ignore_index is not None:
        keep = labels != ignore_index
        probs, labels = probs[keep], labels[keep]
    if labels.numel() == 0:  # every pixel ignored
        return logits.sum() * 0
    classes = labels.unique()
    # all present classes at once: one batched sort is faster than a loop over classes
    fg = (labels.unsqueeze(0) == classes.unsqueeze(1)).float()  # (classes, pixels)
    errors, order = (fg - probs.t()[classes]).abs().sort(1, descending=True)
    fg_sorted = fg.gather(1, order)
    # gradient of the Lovasz extension of the Jaccard loss at the sorted errors
    total = fg_sorted.sum(1, keepdim=True)
    intersection = total - fg_sorted.cumsum(1)
    union = total + (1 - fg_sorted).cumsum(1)
    jaccard = 1 - intersection / union
    grad = torch.cat([jaccard[:, :1], jaccard[:, 1:] - jaccard[:, :-1]], 1)
    return (errors * grad).sum(1).mean()


def cross_entropy(ce: torch.nn.CrossEntropyLoss, logits: torch.Tensor, target: torch.Tensor):
    """``ce(logits, target)`` (mean over the labelled pixels, class-weighted), exactly, but 0
    rather than NaN (0/0) for a batch with no labelled pixel: a crop of void alone would
    otherwise make the epoch's loss NaN. (A NaN from anything else stays NaN.)

    Example:
        >>> ce = torch.nn.CrossEntropyLoss(ignore_index=3)
        >>> float(cross_entropy(ce, torch.randn(2, 3, 4, 4), torch.full((2, 4, 4), 3)))
        0.0
    """
    labelled = (target != ce.ignore_index).any()  # a tensor: no wait for the GPU
    return torch.where(labelled, ce(logits, target), torch.zeros((), device=logits.device))


def soft_dice(
    logits: torch.Tensor,
    target: torch.Tensor,
    dice_loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ignore_index: int | None = None,
) -> torch.Tensor:
    """``dice_loss`` (MONAI's ``DiceLoss``, without its own softmax and one-hot) on the
    softmax of ``logits`` against the one-hot ``target``. Pixels labelled ``ignore_index``
    are left out of both, so void is neither predicted nor labelled: MONAI's loss has no
    ignore label of its own.

    Example:
        >>> from monai.losses import DiceLoss
        >>> target = torch.tensor([[[0, 1, 9]]])  # the last pixel is void
        >>> good = torch.tensor([[[[9.0, -9, 0]], [[-9, 9, 5]]]])
        >>> bad = good.clone(); bad[..., 2] = -good[..., 2]  # void logits changed only
        >>> loss = DiceLoss(include_background=True, batch=True)
        >>> bool(soft_dice(good, target, loss, 9) == soft_dice(bad, target, loss, 9))
        True
    """
    probs = logits.float().softmax(1)
    labels = target.long()
    if ignore_index is None:
        return dice_loss(probs, F.one_hot(labels, probs.shape[1]).movedim(-1, 1).to(probs.dtype))
    valid = labels != ignore_index
    onehot = F.one_hot(labels.where(valid, 0), probs.shape[1]).movedim(-1, 1).to(probs.dtype)
    valid = valid.unsqueeze(1)
    return dice_loss(probs * valid, onehot * valid)


def top_k_cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    fraction: float,
    weight: torch.Tensor | None = None,
    ignore_index: int | None = None,
) -> torch.Tensor:
    """Bootstrapped cross-entropy: the mean over the hardest ``fraction`` of the labelled
    pixels of the batch (Wu et al. 2016; Panoptic-DeepLab's ``top_k_percent_pixels``).

    Once the large, easy regions (road, sky) are learnt, most pixels' losses are near zero
    and the mean is spent on them; keeping only the hardest pixels leaves the gradient to
    boundaries and thin objects (poles, signs) without re-weighting whole classes. Class
    ``weight`` scales each pixel's loss before the selection.

    Example:
        >>> logits = torch.tensor([[[[4.0, 0.0]], [[0.0, 0.0]]]])  # pixel 0 easy, 1 unsure
        >>> full = F.cross_entropy(logits, torch.tensor([[[0, 0]]]), reduction="none")
        >>> hard = top_k_cross_entropy(logits, torch.tensor([[[0, 0]]]), fraction=0.5)
        >>> bool(torch.isclose(hard, full.max()))
        True
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"top-k cross-entropy fraction {fraction}: use a value in (0, 1].")
    per_pixel = F.cross_entropy(
        logits.float(),
        target,
        weight=weight,
        ignore_index=-100 if ignore_index is None else ignore_index,
        reduction="none",
    ).reshape(-1)
    if ignore_index is not None:
        per_pixel = per_pixel[target.reshape(-1) != ignore_index]
    if per_pixel.numel() == 0:  # every pixel ignored
        return logits.sum() * 0
    k = max(1, round(fraction * per_pixel.numel()))
    return per_pixel.topk(k, sorted=False).values.mean()


def deep_supervision_weights(num_outputs: int) -> list[float]:
    """Loss weights for deep-supervision outputs, full resolution first: halved at each
    coarser scale and normalised to sum to 1, as nnU-Net weights them.

    Example:
        >>> [round(w, 3) for w in deep_supervision_weights(3)]
        [0.571, 0.286, 0.143]
    """
    weights = [0.5**i for i in range(num_outputs)]
    return [w / sum(weights) for w in weights]


def labels_at(target: torch.Tensor, size: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """``target`` (N, *spatial) class indices at spatial ``size`` by nearest neighbour:
    the labels a coarser deep-supervision output is scored against, labels (void included)
    never blended. A coarse voxel covers a block of pooled voxels, so it takes the label
    nearest the block's centre ("nearest-exact"), not its first corner, which would shift
    the targets by up to half a block (3.5 voxels at 1/8).

    Example:
        >>> labels_at(torch.tensor([[[0, 1, 1, 1, 2, 2, 2, 2]]]), (1, 2)).tolist()
        [[[1, 2]]]
    """
    if tuple(target.shape[1:]) == tuple(size):
        return target
    resized = F.interpolate(target[:, None].float(), size=tuple(size), mode="nearest-exact")
    return resized[:, 0].to(target.dtype)


def region_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    regions: Sequence[Sequence[int]],
    ignore_index: int | None,
    bce_weight: float,
    dice_weight: float,
) -> torch.Tensor:
    """The loss of a region network (one sigmoid per region, as nnU-Net trains regions):
    binary cross-entropy per voxel and region, plus soft Dice per region over the batch
    (1 - 2|P∩T| / (|P| + |T|), averaged over the regions), each weighted. Voxels labelled
    ``ignore_index`` are left out of both.

    Example:
        >>> target = torch.tensor([[[0, 1, 2]]])
        >>> sure = torch.tensor([[[[-9.0, 9, 9]], [[-9.0, -9, 9]]]])  # whole, then inner
        >>> float(region_loss(sure, target, [[1, 2], [2]], None, 1.0, 1.0)) < 0.01
        True
    """
    inside = region_targets(target, regions).float()
    logits = logits.float()
    if ignore_index is None:
        valid = torch.ones_like(inside[:, :1])
    else:
        valid = (target != ignore_index).unsqueeze(1).float()
    loss = logits.new_zeros(())
    if bce_weight > 0:
        bce = F.binary_cross_entropy_with_logits(logits, inside, reduction="none") * valid
        loss = loss + bce_weight * bce.sum() / (valid.sum() * inside.shape[1]).clamp_min(1)
    if dice_weight > 0:
        probs = logits.sigmoid() * valid
        dims = (0, *range(2, probs.ndim))  # over the batch and space: one Dice per region
        overlap = (probs * inside).sum(dims)
        total = probs.sum(dims) + (inside * valid).sum(dims)
        dice = (2 * overlap + 1e-5) / (total + 1e-5)
        loss = loss + dice_weight * (1 - dice).mean()
    return loss
