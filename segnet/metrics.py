"""Segmentation metrics derived from a confusion matrix, and per-case Dice.

One ``MulticlassConfusionMatrix`` per stage gives every dataset-level figure papers report
(global accuracy, class-average accuracy, IoU per class and mean IoU); it reduces across
DDP ranks by summing, so multi-GPU metrics equal single-process ones.
"""

from __future__ import annotations

import torch


def scores_from_confusion(cm: torch.Tensor) -> dict[str, torch.Tensor]:
    """``cm[true, pred]`` counts -> global_acc, class_acc, iou (per class), miou.

    Classes absent from both labels and predictions get NaN IoU/accuracy and are left out
    of the means, as in the SegNet and Cityscapes evaluation code.
    """
    cm = cm.double()
    tp = cm.diag()
    gt = cm.sum(1)
    pred = cm.sum(0)
    union = gt + pred - tp
    iou = torch.where(union > 0, tp / union.clamp(min=1), torch.nan)
    class_acc = torch.where(gt > 0, tp / gt.clamp(min=1), torch.nan)
    return {
        "global_acc": tp.sum() / cm.sum().clamp(min=1),
        "class_acc": class_acc.nanmean(),
        "miou": iou.nanmean(),
        "iou": iou,
    }


def per_case_dice(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int | None = None
) -> torch.Tensor:
    """Dice of each case (batch item) and class, shape (N, C); NaN where a class is absent
    from both prediction and label (the Decathlon convention leaves those cases out)."""
    n = pred.shape[0]
    pred, target = pred.reshape(n, -1), target.reshape(n, -1)
    valid = (
        torch.ones_like(target, dtype=torch.bool)
        if ignore_index is None
        else target != ignore_index
    )
    classes = torch.arange(num_classes, device=pred.device).view(1, -1, 1)
    p = (pred.unsqueeze(1) == classes) & valid.unsqueeze(1)
    t = (target.unsqueeze(1) == classes) & valid.unsqueeze(1)
    inter = (p & t).sum(-1).double()
    total = (p.sum(-1) + t.sum(-1)).double()
    return torch.where(total > 0, 2 * inter / total.clamp(min=1), torch.nan)
