"""Regions: classes that overlap or nest, each a set of label values (a tumour's "whole"
``[1,2,3]``, "core" ``[2,3]`` and "enhancing" ``[3]``; a whole hippocampus ``[1,2]`` and its
posterior part ``[2]``). A region network has one output per region, read with a sigmoid
(a voxel may be in several), as nnU-Net trains regions.

The label maps stay as they are; the training target of region r is "the label's value is
one of region r's". The regions a network predicts turn back into a label map either in
``regions_class_order`` (nnU-Net's: region i, where predicted, is painted with label
``regions_class_order[i]``, later regions over earlier ones) or, where none is given, by
each label value's membership: a voxel gets the label whose set of regions is the one
predicted there (where none is exactly, the one that agrees on the most regions, and among
those the one inside the most regions, which for nested regions is the painting order).
Either way a region run is scored on the same per-label figures as a softmax run.

Example:
    >>> regions = {"hippocampus": [1, 2], "posterior": [2]}
    >>> check_regions(regions, None, ["background", "anterior", "posterior"])
    {'hippocampus': [1, 2], 'posterior': [2]}
    >>> label = torch.tensor([[0, 1, 2]])
    >>> targets = region_targets(label, list(regions.values()))
    >>> targets.int().tolist()
    [[[0, 1, 1], [0, 0, 1]]]
    >>> to_label_map(targets, list(regions.values()), None, 3).tolist()
    [[0, 1, 2]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def check_regions(
    regions: Any, class_order: Sequence[int] | None, class_names: Sequence[str]
) -> dict[str, list[int]] | None:
    """``data.regions`` (name -> the label values it holds) and
    ``data.regions_class_order``, each refused naming the setting: values must be
    foreground labels of the data (``class_names`` has one name per label value)."""
    if regions is None:
        if class_order is not None:
            raise ValueError(
                "data.regions_class_order is set without data.regions: give the regions "
                "(e.g. 'data.regions={whole:[1,2],core:[2]}'), or leave it out."
            )
        return None
    if not hasattr(regions, "items") or not regions:
        raise ValueError(
            f"data.regions={regions!r}: give each region a name and the label values it "
            "holds, e.g. 'data.regions={hippocampus:[1,2],posterior:[2]}'."
        )
    labels = range(1, len(class_names))
    out: dict[str, list[int]] = {}
    for name, values in regions.items():
        values = [values] if isinstance(values, int) and not isinstance(values, bool) else values
        if (
            isinstance(values, str | bytes)
            or not isinstance(values, Sequence)
            or not values
            or any(isinstance(v, bool) or v not in labels for v in values)
        ):
            raise ValueError(
                f"data.regions: {name}={values!r}: a region is a list of the data's "
                f"foreground label values ({labels.start} to {labels.stop - 1}: "
                f"{', '.join(class_names[1:])}); the background (0) is in no region."
            )
        out[str(name)] = sorted({int(v) for v in values})
    if len({tuple(v) for v in out.values()}) < len(out):
        raise ValueError(f"data.regions={out}: two regions hold the same label values.")
    if class_order is not None:
        order = list(class_order)
        if len(order) != len(out) or any(
            isinstance(c, bool) or c not in labels or c not in v
            for c, v in zip(order, out.values(), strict=False)
        ):
            raise ValueError(
                f"data.regions_class_order={order}: one label value per region, in the "
                f"regions' order ({', '.join(out)}), each one of its region's values."
            )
    check_every_label_comes_back(out, class_order, class_names)
    return out


def check_every_label_comes_back(
    regions: dict[str, list[int]], class_order: Sequence[int] | None, class_names: Sequence[str]
) -> None:
    """Every label value must come back from the regions: painted by the class order, or
    (without one) told apart by the regions holding it. Otherwise it is never predicted,
    and its scores are silently 0."""
    if class_order is not None:
        lost = [c for c in range(1, len(class_names)) if c not in class_order]
    else:
        member = memberships(list(regions.values()), len(class_names)).tolist()
        lost = [c for c in range(1, len(class_names)) if member[c] in member[:c]]
    if lost:
        names = ", ".join(f"{class_names[c]} ({c})" for c in lost)
        why = (
            "data.regions_class_order paints none of them"
            if class_order is not None
            else "no region holds them apart from another label (background included)"
        )
        raise ValueError(
            f"data.regions={regions}: the label(s) {names} would never be predicted: {why}. "
            "Give every label a distinct set of regions (e.g. add a region for it), or "
            "leave it out of the masks."
        )


def region_targets(label: torch.Tensor, regions: Sequence[Sequence[int]]) -> torch.Tensor:
    """(N, *spatial) label values -> (N, R, *spatial) booleans: region r's voxels."""
    return torch.stack(
        [torch.isin(label, torch.tensor(v, device=label.device)) for v in regions], 1
    )


def memberships(regions: Sequence[Sequence[int]], num_classes: int) -> torch.Tensor:
    """(num_classes, R) booleans: which regions each label value is in."""
    return torch.tensor([[c in v for v in regions] for c in range(num_classes)], dtype=torch.bool)


def to_label_map(
    inside: torch.Tensor,
    regions: Sequence[Sequence[int]],
    class_order: Sequence[int] | None,
    num_classes: int,
) -> torch.Tensor:
    """(N, R, *spatial) region predictions (booleans) -> (N, *spatial) label values."""
    if class_order is not None:
        label = torch.zeros(
            inside.shape[:1] + inside.shape[2:], dtype=torch.long, device=inside.device
        )
        for r, c in enumerate(class_order):
            label[inside[:, r]] = int(c)
        return label
    member = memberships(regions, num_classes).to(inside.device)  # (C, R)
    # agreement of every label's membership with the prediction, counted over regions;
    # ties go to the label inside more regions (the innermost of nested ones)
    agree = torch.einsum("cr,nr...->nc...", member.float(), inside.float())
    agree = agree + torch.einsum("cr,nr...->nc...", (~member).float(), (~inside).float())
    depth = member.sum(1).float() / (len(regions) + 1)
    return (agree + depth.view(1, -1, *([1] * (inside.ndim - 2)))).argmax(1)


def describe(regions: dict[str, list[int]], class_names: Sequence[str]) -> str:
    return ", ".join(
        f"{n} ({'+'.join(class_names[v] for v in vals)})" for n, vals in regions.items()
    )
