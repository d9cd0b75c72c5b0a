"""What a user reads: the console of a run, its log file after a crash, early stopping."""

import subprocess
import sys

import pytest

from segnet.commands.train import train
from tests.conftest import REPO, TINY_CAMVID, compose, run_cli


@pytest.fixture(scope="module")
def cli_run(tiny_camvid, tmp_path_factory):
    run = tmp_path_factory.mktemp("console") / "run"
    args = [*TINY_CAMVID, f"data.root={tiny_camvid}", f"hydra.run.dir={run}"]
    proc = run_cli([str(REPO / "train.py"), *args], cwd=run.parent)
    return run, proc.stdout + proc.stderr


def test_console_has_config_progress_and_summary_without_library_noise(cli_run):
    run, out = cli_run
    # the overrides and where the config is, not a page of YAML
    assert (
        f"overrides: {' '.join(TINY_CAMVID)}" in out and f"config: {run}/.hydra/config.yaml" in out
    )
    assert "_target_: segnet.training.module.SegmentationModule" not in out
    # the monitor the run uses (the dataset's), not the config's placeholder
    assert "monitor: val/miou" in out and "monitor: null" not in out
    # one line per epoch: that epoch's training loss, its validation, the time left
    epoch_lines = [line for line in out.splitlines() if "] epoch " in line and " eta " in line]
    assert len(epoch_lines) == 2, out
    assert all("train/loss" in line and "val/miou" in line for line in epoch_lines)
    assert epoch_lines[-1].endswith("| eta 0s")
    assert "summary" in out and f"run folder: {run}" in out and "best.ckpt" in out
    for noise in ("Tip:", "LeafSpec", "on_after_batch_transfer", "| FLOPs", "already configured"):
        assert noise not in out, noise
    # Lightning's own lines once each, in its plain form (imported after Hydra set logging up)
    assert out.count("Seed set to 42") == 1 and out.count("`Trainer.fit` stopped") == 1, out
    # the log file has it too
    log = (run / "train.log").read_text()
    assert (
        "resolved config:" in log and "_target_: segnet.training.module.SegmentationModule" in log
    )
    assert "tested on 'test'" in log
    # and the epoch lines and the test table, which the console printed and did not log
    logged = [line.split(" - ", 1)[1] for line in log.splitlines() if " eta " in line]
    assert logged == [line.split("] ", 1)[1] for line in epoch_lines]
    assert "best.ckpt on test" in log and "  test/miou " in log


@pytest.mark.slow
def test_a_crash_leaves_its_traceback_in_the_run_log(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), f"data.root={tmp_path}/nowhere",
         f"hydra.run.dir={run}", "model.net.encoder_weights=null"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    log = (run / "train.log").read_text()
    assert "training failed" in log and "Traceback" in log and "CamVid not found" in log
    # a refusal on the console: its message, and where the traceback is, not the frames
    assert "training refused: CamVid not found" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and str(run / "train.log") in proc.stderr
    # a new timestamped run folder holding only the refusal is not kept: refused commands
    # leave nothing that looks like a run (the folder named above was the user's, and stays)
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), f"data.root={tmp_path}/nowhere",
         "model.net.encoder_weights=null"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "training refused: CamVid not found" in proc.stderr, proc.stderr
    assert not [p for p in (tmp_path / "outputs").rglob("*") if p.is_file()]


def test_early_stopping_ends_a_run_that_stops_improving(tiny_camvid, tmp_path):
    overrides = [
        *TINY_CAMVID,
        f"data.root={tiny_camvid}",
        "trainer.max_epochs=6",
        "callbacks=early_stopping",
        "callbacks.early_stopping.patience=1",
        "callbacks.early_stopping.min_delta=1.0",  # no mIoU can improve by 1
    ]
    cfg = compose("train", overrides, tmp_path)
    _, objects = train(cfg)
    trainer = objects["trainer"]
    assert trainer.current_epoch == 2 and trainer.max_epochs == 6  # 2 validations, stopped
    assert (tmp_path / "metrics.json").is_file()  # tested as usual


@pytest.mark.parametrize("experiment", ["camvid_gpu", "hippocampus_gpu"])
def test_a_gpu_recipe_without_a_gpu_is_refused_before_the_data(experiment, monkeypatch, tmp_path):
    """The data root does not exist: the accelerator is checked first, and the error says
    what to run instead."""
    import torch

    from segnet.commands.evaluate import evaluate
    from segnet.runs.console import is_refusal

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    cfg = compose("train", [f"experiment={experiment}", f"data.root={tmp_path}/none"], tmp_path)
    with pytest.raises(ValueError, match="accelerator=gpu.*no GPU.*with trainer=cpu") as refused:
        train(cfg)
    assert is_refusal(refused.value)  # its message alone on the console, no traceback
    cfg = compose("evaluate", [f"ckpt_path={tmp_path}/none.ckpt", "trainer=gpu"], tmp_path / "e")
    with pytest.raises(ValueError, match="no GPU.*without trainer="):
        evaluate(cfg)
    assert not any(tmp_path.rglob("*.json"))


def test_only_rank_0_warns_in_a_run_of_several_processes(monkeypatch):
    """Every rank reads the same data: its warnings once, not once per process."""
    import logging

    from lightning.pytorch.utilities import rank_zero_only

    from segnet.runs.console import rank_zero_speaks

    logger, data = logging.getLogger("segnet"), logging.getLogger("segnet.data.nifti_datamodule")
    level = logger.level
    try:
        rank_zero_speaks()
        assert data.isEnabledFor(logging.WARNING)
        monkeypatch.setattr(rank_zero_only, "rank", 1)
        rank_zero_speaks()
        assert not data.isEnabledFor(logging.WARNING) and data.isEnabledFor(logging.ERROR)
    finally:
        logger.setLevel(level)  # (setLevel also clears the loggers' cached answers)


def test_only_this_packages_own_checks_count_as_refusals():
    """A refusal shows as its message alone; a ValueError from inside torch (a failure mid
    epoch) keeps its traceback on the console."""
    import torch

    from segnet.data.checks import check_flip
    from segnet.runs.console import is_refusal

    with pytest.raises(ValueError) as ours:
        check_flip("no", ("up-down", "left-right"))
    with pytest.raises(ValueError) as torchs:
        torch.nn.functional.batch_norm(torch.zeros(1, 2), None, None, training=True)
    assert is_refusal(ours.value) and not is_refusal(torchs.value)
