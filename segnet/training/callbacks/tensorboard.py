"""Pictures for the experiment trackers (TensorBoard, CSV, MLflow, W&B: see
:mod:`segnet.training.callbacks.trackers`): prediction panels and the confusion-matrix figure.

Both are optional pictures, so both run under a :class:`CostBudget`: at the first and the
last epoch, and in between only while their measured cost stays under a small share of the
run's wall time. The panels reuse the predictions validation has already made, so they
cost no extra forward pass.
"""

from __future__ import annotations

import time

import lightning as L
import numpy as np
import torch

from segnet.data.palette import with_void_colour
from segnet.training.callbacks.budget import CostBudget, is_last_epoch
from segnet.training.callbacks.render import prediction_grid, sample_panels, volume_panels
from segnet.training.callbacks.trackers import trackers


class _Budgeted(L.Callback):
    """Shared bookkeeping: a budget started with training, and "first epoch of this fit"."""

    def __init__(self, budget: float):
        self.budget = CostBudget(budget)
        self._first = True

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.budget.start()
        self._first = True

    def _due(self, trainer: L.Trainer) -> bool:
        if trainer.sanity_checking or not trainer.is_global_zero or not trackers(trainer):
            return False
        return self.budget.due(first=self._first, last=is_last_epoch(trainer))


class PredictionImages(_Budgeted):
    """Logs input | ground truth | prediction for a fixed set of validation samples (middle
    axial/coronal/sagittal slices for volumes), from the predictions validation made.

    Args:
        num_samples: how many validation samples, spread evenly over the split (under DDP,
            those that rank 0 evaluates).
        budget: the largest share of the run's wall time the panels may take.
    """

    def __init__(self, num_samples: int = 4, budget: float = 0.005):
        super().__init__(budget)
        self.num_samples = num_samples
        self._wanted: set[int] = set()
        self._rows: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._active = False
        self._cost = 0.0

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._active = self._due(trainer)
        self._rows, self._cost = {}, 0.0
        if self._active:
            n = len(trainer.datamodule.datasets["val"])
            k = min(self.num_samples, n)
            self._wanted = set(np.linspace(0, n - 1, k).round().astype(int).tolist())

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ) -> None:
        if not self._active or not isinstance(outputs, dict) or "pred" not in outputs:
            return
        start = time.perf_counter()
        for j, i in enumerate(batch["index"].tolist()):
            if i in self._wanted:
                self._rows[i] = (
                    batch["image"][j].float().cpu(),
                    batch["label"][j].cpu(),
                    outputs["pred"][j].cpu(),
                )
        self._cost += time.perf_counter() - start

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._active or not self._rows:
            return
        start = time.perf_counter()
        info = pl_module.data_info
        names, palette = list(info.class_names), info.palette
        if info.ignore_index is not None and info.ignore_index == len(names):
            names.append("void (not scored)")  # its colour in the truth column
            palette = with_void_colour(palette[: len(info.class_names)])
        rows = []
        for i in sorted(self._rows):
            image, label, pred = self._rows[i]
            if label.ndim == 2:
                rows.append(sample_panels(image, label, pred, palette))
            else:
                rows.extend(volume_panels(image, label, pred, palette))
        picture = prediction_grid(rows, names, palette)
        for tracker in trackers(trainer):
            tracker.image("val/predictions", picture, trainer.global_step)
        self._rows = {}
        self.budget.spend(self._cost + time.perf_counter() - start)
        self._first = False


def confusion_figure(cm: torch.Tensor, class_names):
    """Row-normalised confusion matrix (rows: truth) as a matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cm = cm.double()
    norm = cm / cm.sum(1, keepdim=True).clamp(min=1)
    k = len(class_names)
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * k, 1.0 + 0.5 * k), dpi=100)
    ax.imshow(norm.numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(k), class_names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(k), class_names, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title("confusion, row-normalised (each true class sums to 1)", fontsize=9)
    for r in range(k):
        for c in range(k):
            v = float(norm[r, c])
            if v >= 0.01:
                ax.text(
                    c,
                    r,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if v > 0.5 else "black",
                )
    fig.tight_layout()
    return fig


class ConfusionMatrixFigure(_Budgeted):
    """Logs the row-normalised confusion matrix after validation epochs (under a cost
    budget, first and last epoch always) and after every test."""

    def __init__(self, budget: float = 0.005):
        super().__init__(budget)

    def _log(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        start = time.perf_counter()
        for tracker in trackers(trainer):  # a figure each: a tracker may close its own
            figure = confusion_figure(pl_module.last_confusion[stage], pl_module.class_names)
            tracker.figure(f"{stage}/confusion_matrix", figure, trainer.global_step)
        return time.perf_counter() - start

    # *_end rather than *_epoch_end: Lightning runs callbacks' epoch-end hooks before the
    # module's, which is where this epoch's matrix is computed.
    def on_validation_end(self, trainer, pl_module) -> None:
        if "val" in pl_module.last_confusion and self._due(trainer):
            self.budget.spend(self._log(trainer, pl_module, "val"))
            self._first = False

    def on_test_end(self, trainer, pl_module) -> None:
        if "test" in pl_module.last_confusion and trainer.is_global_zero and trackers(trainer):
            self._log(trainer, pl_module, "test")
