"""Training given minutes, not epochs (``train_minutes``): a recipe spends its budget
whatever the machine, and a faster machine buys more steps rather than an earlier stop.

What follows the clock:

- the learning-rate schedule (:mod:`segnet.training.clock_schedule`) reads
  :meth:`TimeBudget.progress`, the share of the budget spent;
- validation runs about ``validations`` times, evenly over the budget, and always in the
  last epoch, whose weights are the run's end; fewer times where it is slow, so that it
  takes at most ``validation_share`` of the budget (whole large images, windows, mirroring:
  validating some folders costs three epochs of training);
- the last epoch is the one after which less than half an epoch (with its validation) of
  the budget would remain: the run ends within about half an epoch of its budget.

Time counts from the start of fit (data loaded, the sanity check included) and goes on
across a resume (``state_dict``). A run counted in epochs (``train_minutes=null``) is the
form for exact, step-for-step reproduction.
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import lightning as L

log = logging.getLogger(__name__)


class TimeBudget(L.Callback):
    def __init__(self, minutes: float, validations: int = 15, validation_share: float = 0.1):
        if minutes <= 0:
            raise ValueError(f"train_minutes={minutes}: a number of minutes above 0.")
        self.budget_s = 60.0 * minutes
        self.validations = max(1, int(validations))
        self.validation_share = validation_share
        self.spent_before = 0.0  # by the run this one resumes
        self.epoch_s: list[float] = []  # training alone, per epoch
        self.val_s: list[float] = []
        self.last_val_at = 0.0
        self.last_epoch = False
        self._start: float | None = None
        self._epoch_start: float | None = None
        self._val_start: float | None = None
        self._val_this_epoch = 0.0

    # -- the clock ------------------------------------------------------------------------
    def elapsed(self) -> float:
        now = time.monotonic() - self._start if self._start is not None else 0.0
        return self.spent_before + now

    def progress(self) -> float:
        """The share of the budget spent, 0 to 1: what the learning-rate schedule reads."""
        return min(1.0, self.elapsed() / self.budget_s)

    def remaining(self) -> float:
        return max(0.0, self.budget_s - self.elapsed())

    def epoch_estimate(self) -> tuple[float, float] | None:
        """A training epoch's and a validation's typical seconds (recent epochs: the first
        pays for start-up), or None before an epoch has been timed."""
        if not self.epoch_s:
            return None
        recent = self.epoch_s[1:][-5:] or self.epoch_s
        return statistics.median(recent), self.validation_s()

    def validation_s(self) -> float:
        """A validation's typical seconds (the recent ones), 0 before one is timed."""
        return statistics.median(self.val_s[-3:]) if self.val_s else 0.0

    def validation_interval(self) -> float:
        """Seconds between validations: the budget over ``validations``, or longer where a
        validation costs more than ``validation_share`` of that."""
        return max(self.budget_s / self.validations, self.validation_s() / self.validation_share)

    # -- Lightning's hooks --------------------------------------------------------------
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.monotonic()
        if trainer.is_global_zero:
            spent = (
                f", {self.spent_before / 60:.1f} spent before this resume"
                if (self.spent_before)
                else ""
            )
            log.info(
                "time budget: %.1f minutes of training%s; the learning rate follows the "
                "clock, validation runs about %d times (at most a tenth of the budget), and "
                "the last epoch is the one that fits (trainer.max_epochs=N counts epochs "
                "instead, reproducibly)",
                self.budget_s / 60, spent, self.validations,
            )  # fmt: skip

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._epoch_start = time.monotonic()
        self._val_this_epoch = 0.0
        estimate = self.epoch_estimate()
        if estimate is not None:
            epoch, val = estimate
            # after this epoch (and a validation), would half of another still fit?
            self.last_epoch = self.remaining() - (epoch + val) < 0.5 * (epoch + val)
        due = self.last_epoch or (
            self.elapsed() + (estimate[0] if estimate else 0.0) - self.last_val_at
            >= self.validation_interval()
        )
        # Lightning validates at an epoch's end when (epoch + 1) % this == 0: read then
        trainer.check_val_every_n_epoch = 1 if due else trainer.current_epoch + 2

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._val_start = time.monotonic()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or self._val_start is None:
            return
        took = time.monotonic() - self._val_start
        self.val_s.append(took)
        self._val_this_epoch += took
        self.last_val_at = self.elapsed()
        self._val_start = None

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._epoch_start is None:
            return
        self.epoch_s.append(time.monotonic() - self._epoch_start - self._val_this_epoch)
        if len(self.epoch_s) == 2 and trainer.is_global_zero:
            self._say_plan(trainer)
        estimate = self.epoch_estimate()
        room = self.remaining()
        if self.last_epoch or (estimate and room < 0.5 * sum(estimate)) or room == 0:
            trainer.should_stop = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # an epoch longer than what is left of the budget ends where the budget does
        if self.elapsed() > self.budget_s * 1.05:
            self.last_epoch = True
            trainer.should_stop = True

    def _say_plan(self, trainer: L.Trainer) -> None:
        epoch, val = self.epoch_estimate()
        steps = trainer.num_training_batches
        epochs = trainer.current_epoch + 1 + self.remaining() / (epoch + val / 2 or 1e-9)
        validation = f"a validation {val:.1f} s" if self.val_s else "validation not timed yet"
        log.info(
            "time budget: an epoch takes %.1f s (%s steps), %s: about %d epochs (%s steps) "
            "fit in %.1f minutes",
            epoch, steps, validation, epochs,
            f"{int(epochs * steps):,}" if isinstance(steps, int) else "?",
            self.budget_s / 60,
        )  # fmt: skip

    # -- resume ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "elapsed_s": self.elapsed(),
            "epoch_s": self.epoch_s,
            "val_s": self.val_s,
            "last_val_at": self.last_val_at,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.spent_before = float(state.get("elapsed_s", 0.0))
        self.epoch_s = list(state.get("epoch_s", []))
        self.val_s = list(state.get("val_s", []))
        self.last_val_at = float(state.get("last_val_at", 0.0))


def time_budget(trainer: L.Trainer) -> TimeBudget | None:
    """The trainer's time budget, where it trains to one."""
    return next((c for c in trainer.callbacks if isinstance(c, TimeBudget)), None)
