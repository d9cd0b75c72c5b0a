"""Spend at most a fixed share of a run's wall time on optional work (pictures, figures).

A fixed interval ("every 5 epochs") is wrong both ways: too often when epochs take a second
on a GPU, too rarely when they take ten minutes on a CPU. ``CostBudget`` instead measures
what the work costs and runs it only while the total stays under ``fraction`` of the time
elapsed since training started, plus always at the first and the last epoch, so the pictures
of the start and of the final model are never missing.
"""

from __future__ import annotations

import time

import lightning as L

from segnet.training.callbacks.time_budget import time_budget


def is_last_epoch(trainer: L.Trainer) -> bool:
    """Whether the epoch now running is the last one training will run (as far as the
    trainer can know: early stopping decides later)."""
    if trainer.should_stop or trainer.fast_dev_run:
        return True
    budget = time_budget(trainer)
    if budget is not None:  # train_minutes: the budget knows
        return budget.last_epoch
    max_epochs = trainer.max_epochs
    if max_epochs is not None and max_epochs >= 0 and trainer.current_epoch + 1 >= max_epochs:
        return True
    max_steps = trainer.max_steps
    steps_per_epoch = trainer.num_training_batches
    if max_steps is not None and max_steps > 0 and steps_per_epoch not in (None, float("inf")):
        return trainer.global_step + steps_per_epoch >= max_steps
    return False


class CostBudget:
    """Decides per epoch whether optional work runs; ``spend`` records what it cost.

    Example:
        >>> b = CostBudget(fraction=0.01)
        >>> b.start(now=0.0); b.spend(0.5)
        >>> b.due(first=False, last=False, now=10.0)  # 0.5 s already spent of 0.1 s allowed
        False
        >>> b.due(first=False, last=False, now=100.0)  # 1.0 s allowed by now, 0.5 + 0.5 fits
        True
    """

    def __init__(self, fraction: float = 0.01):
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction={fraction}: a share of the run's time, 0..1.")
        self.fraction = fraction
        self.spent = 0.0
        self.last_cost = 0.0
        self._t0: float | None = None

    def start(self, now: float | None = None) -> None:
        self._t0 = time.monotonic() if now is None else now
        self.spent = self.last_cost = 0.0

    def due(self, first: bool, last: bool, now: float | None = None) -> bool:
        if first or last or self._t0 is None:
            return True
        elapsed = (time.monotonic() if now is None else now) - self._t0
        return self.spent + self.last_cost <= self.fraction * elapsed

    def spend(self, seconds: float) -> None:
        self.spent += seconds
        self.last_cost = seconds
