"""TensorBoard callbacks: prediction panels and the confusion-matrix figure."""

from __future__ import annotations

import lightning as L
import numpy as np
import torch

from segnet.callbacks.render import triptych, volume_triptych, vstack


def _tensorboard(trainer: L.Trainer):
    for logger in trainer.loggers:
        if hasattr(logger.experiment, "add_image"):
            return logger.experiment
    return None


class PredictionImages(L.Callback):
    """Logs input | ground truth | prediction for a fixed set of validation samples each
    validation epoch (middle axial/coronal/sagittal slices for volumes)."""

    def __init__(self, num_samples: int = 4, every_n_epochs: int = 1):
        self.num_samples, self.every_n_epochs = num_samples, every_n_epochs

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        writer = _tensorboard(trainer)
        if writer is None or trainer.sanity_checking or not trainer.is_global_zero:
            return
        if trainer.current_epoch % self.every_n_epochs:
            return
        dataset = trainer.datamodule.datasets["val"]
        n = min(self.num_samples, len(dataset))
        indices = np.linspace(0, len(dataset) - 1, n).round().astype(int)  # fixed, spread out
        palette = trainer.datamodule.palette
        panels = []
        was_training = pl_module.training
        pl_module.eval()
        with torch.no_grad():
            for i in indices:
                sample = dataset[int(i)]
                x = sample["image"].unsqueeze(0).to(pl_module.device)
                label = sample["label"]
                pred = pl_module.predict_logits(x, label.shape).argmax(1)[0].cpu()
                render = triptych if label.ndim == 2 else volume_triptych
                panels.append(render(sample["image"], label, pred, palette))
        pl_module.train(was_training)
        writer.add_image("val/predictions", vstack(panels), trainer.global_step, dataformats="HWC")


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


class ConfusionMatrixFigure(L.Callback):
    """Logs the row-normalised confusion matrix after each validation and test epoch."""

    def _log(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        writer = _tensorboard(trainer)
        cm = pl_module.last_confusion.get(stage)
        if writer is None or cm is None or trainer.sanity_checking or not trainer.is_global_zero:
            return
        writer.add_figure(
            f"{stage}/confusion_matrix",
            confusion_figure(cm, pl_module.class_names),
            trainer.global_step,
            close=True,
        )

    # *_end rather than *_epoch_end: Lightning runs callbacks' epoch-end hooks before the
    # module's, which is where this epoch's matrix is computed.
    def on_validation_end(self, trainer, pl_module) -> None:
        self._log(trainer, pl_module, "val")

    def on_test_end(self, trainer, pl_module) -> None:
        self._log(trainer, pl_module, "test")
