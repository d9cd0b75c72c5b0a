"""Wall time per epoch, with one-off start-up costs reported once and kept out of it.

The first training and validation steps of a run pay for ``torch.compile``, cuDNN
autotuning and data-worker start-up: on a GPU that can be a minute against a one-second
epoch. This callback logs that excess once (``time/startup_s``, and a line in the log) and
logs ``time/epoch_s`` (training + validation + callbacks + checkpoints) without it, so the
epoch figures show the steady state users live with.
"""

from __future__ import annotations

import logging
import statistics
import time

import lightning as L

log = logging.getLogger(__name__)


class _FirstStepExcess:
    """How much longer the first step of a loop took than the median of the others."""

    def __init__(self):
        self.times: list[float] = []
        self._start: float | None = None

    def begin(self) -> None:
        self._start = time.perf_counter()

    def end(self) -> None:
        if self._start is not None:
            self.times.append(time.perf_counter() - self._start)
            self._start = None

    def excess(self) -> float:
        if len(self.times) < 2:
            return 0.0
        return max(0.0, self.times[0] - statistics.median(self.times[1:]))


class EpochTimer(L.Callback):
    def __init__(self):
        self._train = _FirstStepExcess()
        self._val = _FirstStepExcess()
        self._epoch_start: float | None = None
        self._first_batch: int | None = None  # of this epoch in this process
        self._startup_reported = False

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._epoch_start = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._epoch_start is None:  # an epoch resumed part-way may skip the hook above
            self._epoch_start = time.perf_counter()
        if self._first_batch is None:
            self._first_batch = batch_idx
        if not self._startup_reported:
            self._train.begin()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self._startup_reported:
            self._train.end()

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dl_idx=0) -> None:
        if not self._startup_reported and not trainer.sanity_checking:
            self._val.begin()

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ) -> None:
        if not self._startup_reported and not trainer.sanity_checking:
            self._val.end()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        started, first_batch = self._epoch_start, self._first_batch
        self._epoch_start = self._first_batch = None
        if started is None:  # no training step ran in this epoch
            return
        elapsed = time.perf_counter() - started
        if not self._startup_reported:
            startup = self._train.excess() + self._val.excess()
            self._startup_reported = True
            elapsed -= startup
            pl_module.log(
                "time/startup_s", startup, on_epoch=True, on_step=False, rank_zero_only=True
            )
            if trainer.is_global_zero:
                log.info(
                    "start-up: %.1f s in the first steps (torch.compile, cuDNN autotuning, "
                    "data workers), left out of time/epoch_s",
                    startup,
                )
        if first_batch:
            # resumed part-way (from a checkpoint saved mid-epoch): the time of a part of an
            # epoch is not an epoch's time, and would read as a faster one
            if trainer.is_global_zero:
                log.info(
                    "epoch %d was resumed at its batch %d: its time is left out of time/epoch_s",
                    trainer.current_epoch,
                    first_batch,
                )
            return
        pl_module.log("time/epoch_s", elapsed, on_epoch=True, on_step=False, rank_zero_only=True)
