"""Optional work per epoch (pictures, figures, last.ckpt) is bounded by time, not epochs."""

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from segnet.commands.train import train
from segnet.training.callbacks.budget import CostBudget
from tests.conftest import TINY_CAMVID, compose


def test_budget_runs_first_and_last_and_keeps_the_share():
    b = CostBudget(fraction=0.1)
    b.start(now=0.0)
    assert b.due(first=True, last=False, now=0.0)
    b.spend(1.0)
    assert not b.due(first=False, last=False, now=5.0)  # 0.5 s allowed, 2 s would be spent
    assert b.due(first=False, last=True, now=5.0)  # the final model is always pictured
    assert b.due(first=False, last=False, now=20.0)  # 2 s allowed: 1 + 1 fits


def _run(tiny_camvid, tmp_path, *extra):
    cfg = compose(
        "train",
        [*TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=4", "test=false", *extra],
        tmp_path,
    )
    return train(cfg)


def test_pictures_at_first_and_last_epoch_under_a_zero_budget(tiny_camvid, tmp_path):
    _, objects = _run(
        tiny_camvid,
        tmp_path,
        "callbacks.prediction_images.budget=0",
        "callbacks.confusion_matrix.budget=0",
    )
    steps_per_epoch = objects["trainer"].num_training_batches
    acc = EventAccumulator(
        str(tmp_path / "tensorboard"), size_guidance={"images": 0, "scalars": 0}
    ).Reload()
    images = acc.Images("val/predictions")
    figures = acc.Images("val/confusion_matrix")
    assert len(images) == 2 and len(figures) == 2
    assert images[0].step == steps_per_epoch  # after the first epoch
    assert images[1].step == 4 * steps_per_epoch  # after the last, not the second


def test_pictures_every_epoch_under_a_full_budget(tiny_camvid, tmp_path):
    _run(tiny_camvid, tmp_path, "callbacks.prediction_images.budget=1")
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"images": 0}).Reload()
    assert len(acc.Images("val/predictions")) == 4


def test_last_checkpoint_is_written_after_the_final_epoch(tiny_camvid, tmp_path):
    # an hour between interval saves: only the end-of-training save can have written it
    _run(tiny_camvid, tmp_path, "callbacks.last_checkpoint.every_minutes=60")
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["epoch"] == 3
    assert (tmp_path / "checkpoints" / "best.ckpt").is_file()


def test_epoch_time_is_logged_with_startup_apart(tiny_camvid, tmp_path):
    metrics, _ = _run(tiny_camvid, tmp_path)
    assert metrics["time/epoch_s"] > 0
    assert metrics["time/startup_s"] >= 0
