"""Segmentation metrics derived from a confusion matrix, and per-case Dice.

One ``MulticlassConfusionMatrix`` per stage gives every dataset-level figure papers report
(global accuracy, class-average accuracy, IoU per class and mean IoU); it reduces across
DDP ranks by summing, so multi-GPU metrics equal single-process ones.
"""

from __future__ import annotations

import torch


def scores_from_confusion(cm: torch.Tensor) -> dict[str, torch.Tensor]:
    """``cm[true, pred]`` counts -> global_acc, class_acc, iou (per class), miou, and per
    class precision and recall.

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
    precision = torch.where(pred > 0, tp / pred.clamp(min=1), torch.nan)
    return {
        "global_acc": tp.sum() / cm.sum().clamp(min=1),
        "class_acc": class_acc.nanmean(),
        "miou": iou.nanmean(),
        "iou": iou,
        # per class, over all pixels of the split: recall is the class accuracy
        "precision": precision,
        "recall": class_acc,
    }


def class_counts(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per case (batch item) and class, shape (N, C) each: true positives, predicted and
    labelled pixels (voxels), pixels labelled ``ignore_index`` left out."""
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
    return (p & t).sum(-1).double(), p.sum(-1).double(), t.sum(-1).double()


def ratio(part: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """``part / whole``, NaN where ``whole`` is 0 (the score is undefined there)."""
    return torch.where(whole > 0, part / whole.clamp(min=1), torch.nan)


def per_case_dice(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int | None = None
) -> torch.Tensor:
    """Dice of each case (batch item) and class, shape (N, C); NaN where a class is absent
    from both prediction and label (the Decathlon convention leaves those cases out)."""
    tp, predicted, labelled = class_counts(pred, target, num_classes, ignore_index)
    return ratio(2 * tp, predicted + labelled)


def per_case_overlap(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """IoU, precision and recall of each case and class, each (N, C); NaN where undefined
    (IoU: the class in neither; precision: never predicted; recall: not in the label)."""
    tp, predicted, labelled = class_counts(pred, target, num_classes, ignore_index)
    return ratio(tp, predicted + labelled - tp), ratio(tp, predicted), ratio(tp, labelled)


def per_case_surface(
    pred: torch.Tensor,
    target: torch.Tensor,
    num_classes: int,
    spacing: torch.Tensor,
    tolerance_mm: float,
    ignore_index: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """95th-percentile Hausdorff distance (mm) and normalised surface Dice at
    ``tolerance_mm`` of each case and foreground class, through MONAI's implementations,
    with each case's voxel spacing (``spacing``: (N, dims) in mm). Shapes (N, C); the
    background column is NaN.

    Empty classes follow MONAI: absent from both label and prediction gives NaN (the case
    is left out of that class's mean, as for Dice); present in only one gives NSD 0 and
    HD95 infinity (counted apart in the summary, since no finite distance exists).
    Voxels labelled ``ignore_index`` are background in both label and prediction: what is
    predicted there is neither right nor wrong.
    """
    import warnings

    from monai.metrics import compute_hausdorff_distance, compute_surface_dice
    from monai.networks.utils import one_hot

    n = pred.shape[0]
    if ignore_index is not None:
        ignored = target == ignore_index
        pred, target = pred.masked_fill(ignored, 0), target.masked_fill(ignored, 0)
    p = one_hot(pred.unsqueeze(1).cpu(), num_classes, dim=1).bool()
    t = one_hot(target.unsqueeze(1).cpu(), num_classes, dim=1).bool()
    hd = torch.full((n, num_classes), torch.nan, dtype=torch.float64)
    nsd = hd.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MONAI warns on every empty class
        for b in range(n):
            sp = [float(s) for s in spacing[b].tolist()]
            hd[b, 1:] = compute_hausdorff_distance(
                p[b : b + 1], t[b : b + 1], include_background=False, percentile=95, spacing=sp
            )[0].double()
            nsd[b, 1:] = compute_surface_dice(
                p[b : b + 1],
                t[b : b + 1],
                class_thresholds=[tolerance_mm] * (num_classes - 1),
                include_background=False,
                spacing=sp,
            )[0].double()
    dims = tuple(range(2, p.ndim))
    absent = ~p.any(dim=dims) & ~t.any(dim=dims)
    one_sided = p.any(dim=dims) ^ t.any(dim=dims)
    hd[absent], nsd[absent] = torch.nan, torch.nan
    hd[one_sided], nsd[one_sided] = torch.inf, 0.0
    hd[:, 0], nsd[:, 0] = torch.nan, torch.nan
    return hd.to(pred.device), nsd.to(pred.device)


def summarize_cases(
    per_case: dict[str, torch.Tensor], class_names: list[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """nnU-Net-style summary of per-case metrics: the mean of each metric per class over
    the cases where it is defined, and the foreground mean (of the per-class means).
    Infinite HD95 values (a class in only one of label and prediction) are left out of the
    mean and counted in ``<metric>_infinite``."""
    out: dict[str, dict[str, dict[str, float]]] = {"mean": {}, "foreground_mean": {}}
    for metric, values in per_case.items():
        finite = torch.where(torch.isinf(values), torch.nan, values.double())
        means = finite.nanmean(0)
        for c, name in enumerate(class_names):
            entry = out["mean"].setdefault(name, {})
            if c == 0 and metric in ("hd95", "nsd"):
                continue
            entry[metric] = float(means[c])
            if torch.isinf(values[:, c]).any():
                entry[f"{metric}_infinite"] = int(torch.isinf(values[:, c]).sum())
        out["foreground_mean"][metric] = float(means[1:].nanmean())
    return out
