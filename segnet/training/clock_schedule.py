"""Learning-rate schedules that follow the clock (``train_minutes``): the schedule's
progress is the share of the time budget spent, not of a number of steps fixed in advance,
so the same recipe anneals to its end in its minutes on a slow machine and a fast one.

The shapes are those of the step-counted schedules the recipes use, in closed form of the
progress ``p`` (0 at the start, 1 when the budget is spent): polynomial decay
``(1 - p) ** power``, cosine annealing to ``eta_min``, and the one-cycle policy (warm-up
to ``max_lr`` for ``pct_start`` of the budget, then annealing to ``max_lr / (div_factor *
final_div_factor)``; its momentum is not cycled under a budget)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

# the schedulers a budget can drive (by class name), and "none" (no scheduler)
CLOCK_SHAPES = ("PolynomialLR", "CosineAnnealingLR", "OneCycleLR")


def schedule_name(target: str | None) -> str | None:
    return None if not target else str(target).rsplit(".", 1)[-1]


def check_clock_schedule(target: str | None) -> None:
    """Refuse, before any data is read, a scheduler a time budget cannot drive."""
    name = schedule_name(target)
    if name is not None and name not in CLOCK_SHAPES:
        raise ValueError(
            f"train_minutes: the learning-rate schedule {name} counts steps and cannot "
            "follow the clock: use model/scheduler=poly, cosine, onecycle or none, or "
            "train_minutes=null to train for trainer.max_epochs epochs."
        )


def _cos(start: float, end: float, t: float) -> float:
    return end + (start - end) * (1 + math.cos(math.pi * t)) / 2


def learning_rate(name: str, settings: dict[str, Any], base: float, p: float) -> float:
    """The learning rate at progress ``p`` of the schedule ``name`` with ``settings``
    (its keyword arguments), for a group whose configured rate is ``base``."""
    p = min(max(p, 0.0), 1.0)
    if name == "PolynomialLR":
        return base * (1 - p) ** settings.get("power", 1.0)
    if name == "CosineAnnealingLR":
        return _cos(base, settings.get("eta_min", 0.0), p)
    if name == "OneCycleLR":
        peak = settings.get("max_lr", base)
        start = peak / settings.get("div_factor", 25.0)
        end = start / settings.get("final_div_factor", 1e4)
        warm = settings.get("pct_start", 0.3)
        linear = settings.get("anneal_strategy", "cos") == "linear"
        if p < warm:
            t = p / warm
            return start + (peak - start) * t if linear else _cos(start, peak, t)
        t = (p - warm) / max(1 - warm, 1e-12)
        return peak + (end - peak) * t if linear else _cos(peak, end, t)
    raise ValueError(f"no clock form for the schedule {name}")


def clock_schedule(
    optimizer: Optimizer, scheduler_factory: Any, progress: Callable[[], float]
) -> LambdaLR:
    """The schedule ``scheduler_factory`` (a partial of a torch scheduler) would make, with
    ``progress()`` in place of its step count."""
    func = getattr(scheduler_factory, "func", scheduler_factory)
    name = func.__name__
    check_clock_schedule(name)
    settings = dict(getattr(scheduler_factory, "keywords", {}))
    bases = [group["lr"] for group in optimizer.param_groups]
    return LambdaLR(
        optimizer,
        [lambda _, b=b: learning_rate(name, settings, b, progress()) / b for b in bases],
    )
