"""``last.ckpt`` on a time interval and at the end of training, for resuming.

Writing 30M parameters plus optimizer state after every epoch costs more than a whole epoch
of a small recipe on a GPU. What resuming needs is a bound on the work a crash can lose,
which is a time, not an epoch count: this callback saves when ``every_minutes`` have passed
since the last save, and always after the final epoch. ``CheckpointOnInterrupt`` covers
SIGTERM and Ctrl+C, and ``best.ckpt`` is ``ModelCheckpoint``'s job.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import lightning as L

from segnet.training.callbacks.budget import is_last_epoch

log = logging.getLogger(__name__)


class LastCheckpoint(L.Callback):
    """Saves ``<dirpath>/<filename>`` at the end of a training epoch when ``every_minutes``
    have passed since the previous save (0: every epoch), and after the last epoch.

    The trainer's writer (:mod:`segnet.training.checkpoint_io`) writes a temporary file beside it
    and renames it, so the file on disk is always a complete checkpoint, however the
    process ends.
    """

    def __init__(self, dirpath: str, filename: str = "last.ckpt", every_minutes: float = 5.0):
        if every_minutes < 0:
            raise ValueError(f"every_minutes={every_minutes}: use 0 (every epoch) or more.")
        self.path = Path(dirpath) / filename
        self.every_s = 60.0 * every_minutes
        self._last_save = time.monotonic()
        self._saved_step = -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last_save = time.monotonic()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if is_last_epoch(trainer) or time.monotonic() - self._last_save >= self.every_s:
            self._save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # a stop the epoch-end check could not foresee (max_time, a callback's should_stop)
        if self._saved_step != trainer.global_step:
            self._save(trainer)

    def _save(self, trainer: L.Trainer) -> None:
        # full state (optimizer, loops, callbacks) for resuming; saying so also keeps
        # Lightning from logging that it chose this default
        trainer.save_checkpoint(self.path, weights_only=False)
        self._last_save, self._saved_step = time.monotonic(), trainer.global_step
