"""Scores of a region network, region by region: each region scored as a class of its own
against its voxels in the label (the same per-case Dice, IoU, HD95 and NSD as classes get),
so that ``metrics.json`` and ``per_case.csv`` hold them beside the per-label scores of the
label map the regions turn back into."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from segnet.data.regions import region_targets
from segnet.training.metrics import per_case_dice, per_case_overlap, per_case_surface


def region_metric_names(stage: str, spatial_dims: int) -> tuple[str, ...]:
    """What each stage measures per region: Dice at validation; at test IoU too, and the
    surface distances for volumes."""
    if stage != "test":
        return ("dice",)
    return ("dice", "iou", "hd95", "nsd") if spatial_dims == 3 else ("dice", "iou")


def region_case_scores(
    inside: torch.Tensor,
    label: torch.Tensor,
    regions: Sequence[Sequence[int]],
    ignore_index: int | None,
    names: Sequence[str],
    spacing: torch.Tensor | None = None,
    tolerance_mm: float = 1.0,
) -> list[torch.Tensor]:
    """Per case and region (N, R) for each metric of ``names``; NaN where a region is in
    neither label nor prediction (HD95: inf where in only one)."""
    truth = region_targets(label, regions).long()
    if ignore_index is not None:  # voxels the label leaves out: 2, a value no region has
        truth = truth.masked_fill((label == ignore_index).unsqueeze(1), 2)
    scores: dict[str, list[torch.Tensor]] = {m: [] for m in names}
    for r in range(len(regions)):
        pred, target = inside[:, r].long(), truth[:, r]
        ignore = 2 if ignore_index is not None else None
        scores["dice"].append(per_case_dice(pred, target, 2, ignore)[:, 1])
        if "iou" in scores:
            scores["iou"].append(per_case_overlap(pred, target, 2, ignore)[0][:, 1])
        if "hd95" in scores:
            hd, nsd = per_case_surface(pred, target, 2, spacing, tolerance_mm, ignore)
            scores["hd95"].append(hd[:, 1])
            scores["nsd"].append(nsd[:, 1])
    return [torch.stack(scores[m], 1).to(inside.device) for m in names]


def summarize_regions(per_region: dict[str, torch.Tensor], names: list[str]) -> dict[str, dict]:
    """The mean over cases of each region's scores, and over the regions (HD95: the
    finite ones, with a count of those left out)."""
    out: dict[str, dict] = {"mean": {n: {} for n in names}, "region_mean": {}}
    for metric, values in per_region.items():
        finite = torch.where(torch.isinf(values), torch.nan, values.double())
        means = finite.nanmean(0)
        for r, name in enumerate(names):
            out["mean"][name][metric] = float(means[r])
            if torch.isinf(values[:, r]).any():
                out["mean"][name][f"{metric}_infinite"] = int(torch.isinf(values[:, r]).sum())
        out["region_mean"][metric] = float(means.nanmean())
    return out
