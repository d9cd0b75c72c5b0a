"""train_minutes: a run given minutes spends them, with its learning-rate schedule and its
validations following the clock, and stops within about half an epoch of its budget."""

from __future__ import annotations

import functools
import json
from types import SimpleNamespace

import pytest
import torch

from segnet.training.callbacks.time_budget import TimeBudget
from segnet.training.clock_schedule import check_clock_schedule, clock_schedule
from tests.conftest import TINY_CAMVID, compose

SCHEDULES = [
    functools.partial(torch.optim.lr_scheduler.PolynomialLR, power=0.9),
    functools.partial(torch.optim.lr_scheduler.CosineAnnealingLR, eta_min=1e-4),
    functools.partial(torch.optim.lr_scheduler.OneCycleLR, max_lr=0.01, pct_start=0.15),
]


@pytest.mark.parametrize("factory", SCHEDULES, ids=lambda f: f.func.__name__)
def test_the_clock_schedule_has_the_shape_of_the_step_schedule(factory):
    """At progress k/N the clock's rate is the step-counted schedule's after k of N steps
    (one-cycle to within 1% of its peak: torch ends its warm-up one step early)."""
    onecycle = factory.func.__name__ == "OneCycleLR"
    n = 1000 if onecycle else 40
    length = {"OneCycleLR": "total_steps", "PolynomialLR": "total_iters"}.get(
        factory.func.__name__, "T_max"
    )
    stepped = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    reference = factory(optimizer=stepped, **{length: n})
    progress = [0.0]
    clocked = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    schedule = clock_schedule(clocked, factory, lambda: progress[0])
    for k in range(n - 1):
        assert clocked.param_groups[0]["lr"] == pytest.approx(
            stepped.param_groups[0]["lr"], rel=1e-6, abs=1e-4 if onecycle else 1e-9
        ), k
        stepped.step(), clocked.step()
        reference.step()
        progress[0] = (k + 1) / n
        schedule.step()


def test_a_step_counted_schedule_is_refused_with_the_ones_that_follow_the_clock():
    with pytest.raises(ValueError, match="StepLR counts steps.*poly, cosine, onecycle or none"):
        check_clock_schedule("torch.optim.lr_scheduler.StepLR")
    check_clock_schedule(None)  # no schedule: a constant rate


def simulate(budget: TimeBudget, epoch_s: float, val_s: float, monkeypatch) -> dict:
    """Run the budget's hooks over epochs of known length on a fake clock."""
    clock = [1000.0]
    monkeypatch.setattr("segnet.training.callbacks.time_budget.time.monotonic", lambda: clock[0])
    trainer = SimpleNamespace(is_global_zero=False, current_epoch=0, sanity_checking=False,
                              should_stop=False, check_val_every_n_epoch=4,
                              num_training_batches=10)  # fmt: skip
    budget.on_fit_start(trainer, None)
    validated = []
    while not trainer.should_stop and trainer.current_epoch < 10_000:
        budget.on_train_epoch_start(trainer, None)
        clock[0] += epoch_s
        if (trainer.current_epoch + 1) % trainer.check_val_every_n_epoch == 0:
            budget.on_validation_start(trainer, None)
            clock[0] += val_s
            budget.on_validation_end(trainer, None)
            validated.append(trainer.current_epoch)
        budget.on_train_epoch_end(trainer, None)
        trainer.current_epoch += 1
    return {"spent": clock[0] - 1000.0, "epochs": trainer.current_epoch, "validated": validated}


@pytest.mark.parametrize("epoch_s", [3.0, 10.0, 41.0])
def test_a_budget_is_spent_whatever_an_epoch_costs(epoch_s, monkeypatch):
    budget = TimeBudget(minutes=10, validations=15)
    out = simulate(budget, epoch_s, val_s=epoch_s / 5, monkeypatch=monkeypatch)
    epoch = epoch_s * 1.2
    assert 600 - epoch <= out["spent"] <= 600 + epoch / 2, out
    assert out["validated"][-1] == out["epochs"] - 1  # the last epoch is validated
    # 15, or fewer where validations would take more than a tenth of the budget
    expected = min(15, out["epochs"], int(0.1 * 600 / (epoch_s / 5)))
    assert expected - 3 <= len(out["validated"]) <= expected + 2, out
    assert budget.progress() == pytest.approx(1.0, abs=0.1)


def test_slow_validation_is_kept_to_its_share_of_the_budget(monkeypatch):
    """A validation of three epochs' time (whole large images): fewer validations, about a
    tenth of the budget, the last epoch's among them."""
    budget = TimeBudget(minutes=15, validations=15)
    out = simulate(budget, 10.0, val_s=30.0, monkeypatch=monkeypatch)
    spent_validating = 30.0 * len(out["validated"])
    assert spent_validating <= 0.1 * 900 + 30.0, out
    assert out["validated"][-1] == out["epochs"] - 1 and len(out["validated"]) >= 2
    assert 900 - 40 <= out["spent"] <= 900 + 20, out


def test_a_resumed_budget_goes_on_from_the_time_spent(monkeypatch):
    first = TimeBudget(minutes=10)
    simulate(first, 10.0, 2.0, monkeypatch)
    state = first.state_dict()
    state["elapsed_s"] = 300.0  # as if stopped half way
    second = TimeBudget(minutes=10)
    second.load_state_dict(state)
    out = simulate(second, 10.0, 2.0, monkeypatch)
    assert 300 - 12 <= out["spent"] <= 300 + 6, out


@pytest.mark.slow
def test_a_run_given_minutes_trains_to_its_budget(tiny_camvid, tmp_path):
    """End to end: the epochs come from the budget, the learning rate anneals to its end,
    validation and the last checkpoint are there."""
    from segnet.commands.train import train

    run = tmp_path / "run"
    cfg = compose(
        "train",
        [*TINY_CAMVID, f"data.root={tiny_camvid}", "data.image_size=[24,32]",
         "model/scheduler=poly", "train_minutes=0.25", "trainer.max_epochs=null",
         "logger=csv"],
        run,
    )  # fmt: skip
    metrics, objects = train(cfg)
    trainer = objects["trainer"]
    record = json.loads((run / "metrics.json").read_text())
    assert record["epochs_trained"] > 1  # trainer.max_epochs=1 did not end it
    final_lr = trainer.optimizers[0].param_groups[0]["lr"]
    assert final_lr < 0.25 * 0.01, final_lr  # annealed (poly from 0.01)
    assert (run / "checkpoints" / "last.ckpt").is_file() and "val/miou" in metrics


def test_epochs_given_beside_a_budget_count_and_neither_is_refused(tmp_path):
    from segnet.commands.train import time_budget_of
    from tests.conftest import compose_config

    cfg = compose_config("train", ["experiment=images_quick", "trainer.max_epochs=3"])
    assert cfg.train_minutes == 15 and time_budget_of(cfg) is None  # epochs win
    cfg = compose_config("train", ["experiment=images_quick"])
    assert time_budget_of(cfg).budget_s == 900 and cfg.trainer.max_epochs == -1
    cfg = compose_config("train", ["experiment=images_quick", "train_minutes=null"])
    with pytest.raises(ValueError, match="give the length of the run"):
        time_budget_of(cfg)
    cfg = compose_config(
        "train",
        ["experiment=images_quick", "model.scheduler._target_=torch.optim.lr_scheduler.StepLR"],
    )
    with pytest.raises(ValueError, match="StepLR counts steps"):
        time_budget_of(cfg)
