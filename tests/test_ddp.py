"""trainer=ddp_cpu: two gloo processes give the metrics one process gives."""

import json

import pytest
import torch.distributed as dist

from segnet.pipeline import train
from tests.conftest import REPO, TINY_CAMVID, compose, run_cli

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


def test_two_process_evaluation_equals_one_process(tiny_camvid, tmp_path):
    cfg = compose(
        "train", TINY_CAMVID + [f"data.root={tiny_camvid}", "test=false"], tmp_path / "run"
    )
    train(cfg)
    ckpt = tmp_path / "run" / "checkpoints" / "best.ckpt"
    results = {}
    # 3 test images over 2 ranks: one rank gets 2, the other 1, nothing is repeated
    for trainer in ("cpu", "ddp_cpu"):
        out = tmp_path / trainer
        run_cli(
            ["evaluate.py", f"ckpt_path={ckpt}", f"trainer={trainer}", f"hydra.run.dir={out}"],
            cwd=REPO,
        )
        results[trainer] = json.loads((out / "metrics.json").read_text())["metrics"]
    for key, value in results["cpu"].items():
        if key != "test/loss":  # the loss is a mean of per-batch means: batches differ
            assert results["ddp_cpu"][key] == pytest.approx(value, abs=1e-6), key


def test_two_process_training_runs(tiny_camvid, tmp_path):
    run_cli(
        [
            "train.py",
            *TINY_CAMVID,
            f"data.root={tiny_camvid}",
            "trainer=ddp_cpu",
            "trainer.max_epochs=1",
            f"hydra.run.dir={tmp_path}/run",
        ],
        cwd=REPO,
    )
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0 <= saved["metrics"]["test/miou"] <= 1
