"""Progress output: Rich bars on a terminal, plain log lines anywhere else."""

from __future__ import annotations

import sys
import time

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar


class PlainProgress(ProgressBar):
    """One line every ``every_n_steps`` training steps and one per epoch: readable in log
    files and on clusters, where carriage-return bars turn into noise."""

    def __init__(self, every_n_steps: int = 50):
        super().__init__()
        self.every_n_steps = every_n_steps
        self._enabled = True
        self._t0 = time.monotonic()

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _print(self, trainer: L.Trainer, text: str) -> None:
        if self._enabled and trainer.is_global_zero:
            print(f"[{time.monotonic() - self._t0:7.0f}s] {text}", flush=True)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if (batch_idx + 1) % self.every_n_steps == 0:
            loss = trainer.callback_metrics.get("train/loss_step")
            self._print(
                trainer,
                f"epoch {trainer.current_epoch} step {batch_idx + 1}/"
                f"{self.total_train_batches} loss {float(loss) if loss is not None else float('nan'):.4f}",
            )

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        shown = {
            k: float(v)
            for k, v in trainer.callback_metrics.items()
            if k.count("/") == 1 and (k.startswith("val/") or k == "train/loss_epoch")
        }
        self._print(
            trainer,
            f"epoch {trainer.current_epoch} "
            + " ".join(f"{k} {v:.4f}" for k, v in sorted(shown.items())),
        )

    def on_test_end(self, trainer, pl_module) -> None:
        self._print(trainer, "test done")


def progress_bar() -> ProgressBar:
    return RichProgressBar() if sys.stdout.isatty() else PlainProgress()
