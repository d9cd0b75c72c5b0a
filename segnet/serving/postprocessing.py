"""The clean-up applied to a label map after the network: keeping only the largest
connected component of the foreground and/or of single classes, each step kept only where
validation showed it raises Dice (as nnU-Net chooses its post-processing).

A :class:`Postprocessing` is plain data (``{"foreground": bool, "classes": [...]}``) kept
in the checkpoint's hyperparameters and the model card, so that training's test, evaluate,
``segnet.predict`` and a deployed model apply the same steps. Components are labelled by
SciPy (``scipy.ndimage.label``), touching along faces, edges or corners (8-connected in 2D,
26-connected in 3D, as MONAI's ``KeepLargestConnectedComponent`` does by default).

Example:
    >>> plan = Postprocessing(foreground=True)
    >>> pred = torch.tensor([[1, 1, 0, 0, 2]])
    >>> plan.apply(pred).tolist()  # the lone 2 is not connected to the largest part
    [[1, 1, 0, 0, 0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# the candidates scored per case: the label map as predicted, with the foreground's
# largest component kept, and each class's largest component kept on top of either
AS_PREDICTED, FOREGROUND, CLASS_ON_PREDICTED, CLASS_ON_FOREGROUND = range(4)


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest connected part of a boolean mask (the first of equal largest ones),
    all of it where it has one part or none."""
    from scipy import ndimage

    structure = ndimage.generate_binary_structure(mask.ndim, mask.ndim)
    labels, count = ndimage.label(mask, structure=structure)
    if count <= 1:
        return mask
    sizes = np.bincount(labels.ravel())[1:]
    return labels == 1 + int(sizes.argmax())


def keep_largest(pred: np.ndarray, where: np.ndarray) -> np.ndarray:
    """``pred`` with every voxel of ``where`` outside its largest part set to background."""
    out = pred.copy()
    out[where & ~largest_component(where)] = 0
    return out


@dataclass(frozen=True)
class Postprocessing:
    """Which steps to apply: the foreground's largest component (every class but the
    background together), then each listed class's own largest component."""

    foreground: bool = False
    classes: tuple[int, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return self.foreground or bool(self.classes)

    def to_dict(self) -> dict[str, Any]:
        return {"foreground": self.foreground, "classes": list(self.classes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Postprocessing:
        """From a checkpoint's or model card's record (None: nothing to apply)."""
        if not d:
            return cls()
        return cls(bool(d.get("foreground")), tuple(int(c) for c in d.get("classes") or ()))

    def apply_one(self, pred: np.ndarray) -> np.ndarray:
        """One label map (spatial axes only) with the steps applied."""
        if self.foreground:
            pred = keep_largest(pred, pred > 0)
        for c in self.classes:
            pred = keep_largest(pred, pred == c)
        return pred

    def apply(self, pred: torch.Tensor) -> torch.Tensor:
        """A batch of label maps (N, *spatial) with the steps applied to each."""
        if not self:
            return pred
        done = [torch.from_numpy(self.apply_one(p.cpu().numpy())) for p in pred]
        return torch.stack(done).to(pred.device)

    def describe(self, class_names: Sequence[str]) -> str:
        steps = (["the foreground's"] if self.foreground else []) + [
            f"{class_names[c]}'s" for c in self.classes
        ]
        return "largest connected component of " + ", then ".join(steps) if steps else "none"


def class_dice(pred: np.ndarray, target: np.ndarray, c: int, valid: np.ndarray | None) -> float:
    """Dice of class ``c`` in one case (NaN: in neither), voxels outside ``valid`` left out."""
    p, t = pred == c, target == c
    if valid is not None:
        p, t = p & valid, t & valid
    total = int(p.sum()) + int(t.sum())
    return 2 * int((p & t).sum()) / total if total else float("nan")


def candidate_dice(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int | None
) -> torch.Tensor:
    """Per case, the Dice of every class under each candidate (N, 4, num_classes; NaN where
    a class is in neither label nor prediction): as predicted, the foreground's largest
    component kept, and each class's largest component kept on the prediction or on the
    foreground step (entry c of those two: class c's step alone, which changes no other
    foreground class's Dice). Entries for the background are NaN: it is never chosen on."""
    rows = torch.full((len(pred), 4, num_classes), float("nan"), dtype=torch.float64)
    for i, (p, t) in enumerate(zip(pred.cpu().numpy(), target.cpu().numpy(), strict=True)):
        valid = None if ignore_index is None else t != ignore_index
        fg = keep_largest(p, p > 0)
        for c in range(1, num_classes):
            rows[i, AS_PREDICTED, c] = class_dice(p, t, c, valid)
            rows[i, FOREGROUND, c] = class_dice(fg, t, c, valid)
            for k, base in ((CLASS_ON_PREDICTED, p), (CLASS_ON_FOREGROUND, fg)):
                rows[i, k, c] = class_dice(keep_largest(base, base == c), t, c, valid)
    return rows.to(pred.device)


def mean_over_cases(dice: torch.Tensor) -> torch.Tensor:
    """Per class, the mean over the cases where it is defined (NaN: in none)."""
    return dice.nanmean(0)


def choose(rows: torch.Tensor, class_names: Sequence[str]) -> tuple[Postprocessing, dict]:
    """The steps that raise validation Dice, from :func:`candidate_dice`'s rows of every
    validation case: the foreground step where it raises the mean foreground Dice, then
    each class's step where it raises that class's mean Dice. Returns the steps and what
    was measured (the mean foreground Dice without and with them, per class and step)."""
    means = mean_over_cases(rows.double())  # (4, C)
    fg = slice(1, None)
    without = float(means[AS_PREDICTED, fg].nanmean())
    use_fg = bool(means[FOREGROUND, fg].nanmean() > means[AS_PREDICTED, fg].nanmean())
    base = means[FOREGROUND] if use_fg else means[AS_PREDICTED]
    on_top = means[CLASS_ON_FOREGROUND] if use_fg else means[CLASS_ON_PREDICTED]
    classes = tuple(c for c in range(1, len(class_names)) if bool(on_top[c] > base[c]))
    chosen = base.clone()
    for c in classes:
        chosen[c] = on_top[c]
    plan = Postprocessing(use_fg, classes)
    record = {
        "foreground": use_fg,
        "classes": [class_names[c] for c in classes],
        "chosen_on": f"{len(rows)} validation case(s)",
        "val_dice_without": without,
        "val_dice_with": float(chosen[fg].nanmean()),
        "val_dice_foreground_step": float(means[FOREGROUND, fg].nanmean()),
        "val_dice_per_class": {
            name: {
                "without": float(means[AS_PREDICTED, c]),
                "largest_component": float(on_top[c]),  # its step, on the foreground's if kept
                "with": float(chosen[c]),
            }
            for c, name in enumerate(class_names)
            if c
        },
    }
    return plan, record
