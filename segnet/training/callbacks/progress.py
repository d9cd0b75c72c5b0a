"""Progress output: Rich bars on a terminal, plain log lines anywhere else."""

from __future__ import annotations

import sys
import time
import weakref
from collections.abc import Callable

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, RichProgressBar

from segnet.logs import to_log_file
from segnet.training.callbacks.time_budget import time_budget


class EpochLines:
    """One line per epoch, after its validation: this epoch's mean training loss (the epoch
    aggregate is computed by now), its validation metrics if it validated, and the time
    left at the mean epoch time so far. Written by ``emit`` on rank 0."""

    def __init__(self, emit: Callable[[str], None]):
        self.emit = emit

    def on_train_start(self, trainer, pl_module) -> None:
        self._fit_start, self._first_epoch = time.monotonic(), trainer.current_epoch
        self._validated = -1

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self._validated = trainer.current_epoch

    # the latest epoch's line and the trainer and epoch it is of: the console's and the log
    # file's callbacks show one text (each timing it would round the time left apart)
    _latest: tuple[weakref.ref, tuple[int, int], str] | None = None

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            when = (trainer.current_epoch, trainer.global_step)
            latest = EpochLines._latest
            if latest is None or latest[0]() is not trainer or latest[1] != when:
                latest = EpochLines._latest = (weakref.ref(trainer), when, self.line(trainer))
            self.emit(latest[2])

    def line(self, trainer: L.Trainer) -> str:
        metrics = trainer.callback_metrics
        shown = {}
        if "train/loss_epoch" in metrics:
            shown["train/loss"] = float(metrics["train/loss_epoch"])
        if self._validated == trainer.current_epoch:
            shown.update(
                {
                    k: float(v)
                    for k, v in metrics.items()
                    if k.startswith("val/") and k.count("/") == 1
                }
            )
        done = trainer.current_epoch + 1 - self._first_epoch
        per_epoch = (time.monotonic() - self._fit_start) / max(done, 1)
        left = max(trainer.max_epochs - trainer.current_epoch - 1, 0) if trainer.max_epochs else 0
        budget = time_budget(trainer)
        eta = budget.remaining() if budget is not None else per_epoch * left
        return (
            f"epoch {trainer.current_epoch} "
            + " ".join(f"{k} {v:.4f}" for k, v in sorted(shown.items()))
            + f" | {'budget left' if budget is not None else 'eta'} {format_duration(eta)}"
        )


class EpochLog(EpochLines, L.Callback):
    """The epoch lines in the run's log file (``train.log``), whichever progress display
    the console has: the file is the record of a run that outlives its terminal."""

    def __init__(self):
        super().__init__(to_log_file)


class PlainProgress(EpochLines, ProgressBar):
    """One line every ``every_n_steps`` training steps and one per epoch: readable in log
    files and on clusters, where carriage-return bars turn into noise."""

    def __init__(self, every_n_steps: int = 50):
        ProgressBar.__init__(self)
        EpochLines.__init__(self, self._print)
        self.every_n_steps = every_n_steps
        self._enabled = True
        self._t0 = time.monotonic()

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _print(self, text: str) -> None:
        if self._enabled:
            print(f"[{time.monotonic() - self._t0:7.0f}s] {text}", flush=True)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if (batch_idx + 1) % self.every_n_steps == 0 and trainer.is_global_zero:
            loss = trainer.callback_metrics.get("train/loss_step")
            self._print(
                f"epoch {trainer.current_epoch} step {batch_idx + 1}/"
                f"{self.total_train_batches} loss {float(loss) if loss is not None else float('nan'):.4f}",
            )

    def on_test_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            self._print("test done")


def format_duration(seconds: float) -> str:
    """``3h05m``, ``12m04s`` or ``9s``.

    Example:
        >>> format_duration(3725), format_duration(724), format_duration(9.4)
        ('1h02m', '12m04s', '9s')
    """
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def progress_bar() -> ProgressBar:
    return RichProgressBar() if sys.stdout.isatty() else PlainProgress()
