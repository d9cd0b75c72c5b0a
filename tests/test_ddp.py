"""trainer=ddp_cpu: two gloo processes give the metrics one process gives."""

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from segnet.commands.train import train
from tests.conftest import REPO, TINY_CAMVID, compose, run_cli

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


@pytest.mark.slow
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
    for key, value in results["cpu"].items():  # the loss too: a mean over images
        assert results["ddp_cpu"][key] == pytest.approx(value, abs=1e-6), key


@pytest.mark.slow  # the two-node test below also trains and tests under DDP
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


@pytest.mark.slow  # two DDP runs from the command line (about 45 s)
def test_two_process_training_resumes_in_its_run_folder(tiny_camvid, tmp_path):
    """A resume under DDP: rank 0 moves the run's config aside and names the run folder;
    the rank Lightning starts gets that folder (quoted) and must neither refuse it nor move
    the config again."""
    run = tmp_path / "run"
    args = ["train.py", *TINY_CAMVID, f"data.root={tiny_camvid}", "trainer=ddp_cpu", "test=false"]
    last = run / "checkpoints" / "last.ckpt"
    run_cli([*args, "trainer.max_epochs=1", f"hydra.run.dir={run}"], cwd=REPO)
    first = torch.load(last, weights_only=False)["epoch"]
    run_cli([*args, "trainer.max_epochs=2", f"ckpt_path={last}"], cwd=REPO)
    assert torch.load(last, weights_only=False)["epoch"] == first + 1
    assert (run / ".hydra.1").is_dir() and not (run / ".hydra.2").exists()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_two_nodes(args: list[str], tmp_path, name: str) -> None:
    """Start ``args`` (a train.py/evaluate.py command line) as two one-process "nodes" on
    127.0.0.1 under torchrun, as two machines would, and wait for both."""
    import os
    import subprocess
    import sys

    port = _free_port()
    procs = []
    for node in (0, 1):
        log = (tmp_path / f"{name}_node{node}.log").open("w")
        cmd = [
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
            "--master-addr", "127.0.0.1", "--master-port", str(port),
            *args,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        procs.append(
            (subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env), log)
        )
    for proc, log in procs:
        code = proc.wait(timeout=600)
        log.close()
        assert code == 0, Path(log.name).read_text()[-4000:]


@pytest.mark.slow
def test_two_nodes_under_torchrun_train_and_evaluate_like_one_process(tiny_camvid, tmp_path):
    """The multi-node path: Lightning DDP under torchrun, two "nodes" of one process each
    (gloo on 127.0.0.1). Training runs; evaluation equals a single-process evaluation."""
    nodes = ["trainer=ddp_cpu", "trainer.devices=1", "trainer.num_nodes=2"]
    torchrun_two_nodes(
        ["train.py", *TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=1", *nodes,
         f"hydra.run.dir={tmp_path}/run"],
        tmp_path, "train",
    )  # fmt: skip
    trained = json.loads((tmp_path / "run" / "metrics.json").read_text())["metrics"]
    assert 0 <= trained["test/miou"] <= 1
    ckpt = tmp_path / "run" / "checkpoints" / "best.ckpt"
    torchrun_two_nodes(
        ["evaluate.py", f"ckpt_path={ckpt}", *nodes, f"hydra.run.dir={tmp_path}/ev2"],
        tmp_path, "evaluate",
    )  # fmt: skip
    run_cli(
        ["evaluate.py", f"ckpt_path={ckpt}", "trainer=cpu", f"hydra.run.dir={tmp_path}/ev1"],
        cwd=REPO,
    )
    two = json.loads((tmp_path / "ev2" / "metrics.json").read_text())["metrics"]
    one = json.loads((tmp_path / "ev1" / "metrics.json").read_text())["metrics"]
    for key, value in one.items():  # the loss too: a mean over images, however shared out
        assert two[key] == pytest.approx(value, abs=1e-6), key
