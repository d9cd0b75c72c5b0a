"""A checkpoint is read without running code from it, at every entry point that takes one:
a crafted file whose unpickling would create a marker file is refused, and no marker
appears."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.serving.checkpoints import CheckpointError, peek_checkpoint, read_checkpoint
from tests.conftest import REPO, TINY_CAMVID, compose


class Payload:
    """Unpickled, it opens (creates) ``marker``: the stand-in for any code a file runs."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def trained(tiny_camvid, tmp_path_factory):
    from segnet.commands.train import train

    run = tmp_path_factory.mktemp("safety") / "run"
    cfg = compose(
        "train",
        TINY_CAMVID
        + [f"data.root={tiny_camvid}", "data.image_size=[24,32]", "trainer.max_epochs=1"],
        run,
    )
    train(cfg)
    return run / "checkpoints" / "best.ckpt"


def crafted(good: Path, folder: Path, name: str = "best.ckpt", where: str = "hparams") -> tuple:
    """A copy of a real checkpoint with the payload in it, and the marker it would make."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "MARKER"
    ckpt = torch.load(good, map_location="cpu", weights_only=True)
    if where == "hparams":
        ckpt["hyper_parameters"]["note"] = Payload(marker)
    else:  # the run's own record, which resume and ensembles peek at
        ckpt["segnet"]["config"] = Payload(marker)
    path = folder / name
    torch.save(ckpt, path)
    return path, marker


def test_the_reader_and_the_peek_refuse_without_running_it(trained, tmp_path):
    path, marker = crafted(trained, tmp_path)
    with pytest.raises(CheckpointError, match=r"unpickling can run any code.*not loaded"):
        read_checkpoint(path)
    assert peek_checkpoint(path) is None
    assert not marker.exists()
    # a checkpoint of this project reads as before
    assert read_checkpoint(trained)["state_dict"]


@pytest.mark.slow
def test_train_resume_from_the_command_line(trained, tiny_camvid, tmp_path):
    """``python train.py ckpt_path=...`` peeks at the file before Hydra starts (to resume
    into its run folder): that peek, too, runs nothing."""
    run = tmp_path / "run"
    path, marker = crafted(trained, run / "checkpoints", "last.ckpt", where="record")
    (run / ".hydra").mkdir()
    proc = subprocess.run(
        [sys.executable, "train.py", *TINY_CAMVID, f"data.root={tiny_camvid}",
         f"ckpt_path={path}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "unpickling can run any code" in proc.stderr, proc.stderr[-3000:]
    assert not marker.exists()


@pytest.mark.parametrize("setting", ["ckpt_path", "init_from"])
def test_train_resume_and_init_from(trained, tiny_camvid, tmp_path, setting):
    from segnet.commands.train import train

    path, marker = crafted(trained, tmp_path / "given")
    cfg = compose(
        "train", TINY_CAMVID + [f"data.root={tiny_camvid}", f"+{setting}={path}"], tmp_path / "r"
    )
    with pytest.raises(CheckpointError, match=f"{setting}=.*unpickling can run any code"):
        train(cfg)
    assert not marker.exists()


def test_evaluate_and_an_ensemble(trained, tiny_camvid, tmp_path):
    from segnet.commands.evaluate import evaluate

    path, marker = crafted(trained, tmp_path / "given")
    for given in (str(path), f"[{trained},{path}]"):
        cfg = compose("evaluate", [f"ckpt_path={given}", f"data.root={tiny_camvid}"], tmp_path)
        with pytest.raises(CheckpointError, match="unpickling can run any code"):
            evaluate(cfg)
    assert not marker.exists()


def test_an_ensemble_member_whose_last_checkpoint_is_crafted(trained, tiny_camvid, tmp_path):
    """Ensembles read the ``last.ckpt`` beside each member to tell whether it finished."""
    import shutil

    from segnet.serving.ensemble import unfinished

    member = tmp_path / "member" / "checkpoints"
    member.mkdir(parents=True)
    shutil.copy(trained, member / "best.ckpt")
    _, marker = crafted(trained, member, "last.ckpt", where="record")
    assert unfinished(member / "best.ckpt") is None
    assert not marker.exists()


def test_export(trained, tmp_path):
    from segnet.serving.export import export_checkpoint

    path, marker = crafted(trained, tmp_path / "given")
    with pytest.raises(CheckpointError, match="unpickling can run any code"):
        export_checkpoint(path, tmp_path / "out", ("safetensors",))
    assert not marker.exists()
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_predict(trained, tmp_path):
    from segnet.commands.predict import main as predict_main

    path, marker = crafted(trained, tmp_path / "given")
    image = tmp_path / "photo.png"
    Image.fromarray(np.zeros((24, 32, 3), np.uint8)).save(image)
    with pytest.raises(SystemExit, match="unpickling can run any code"):
        predict_main([str(path), str(image), "--out", str(tmp_path / "masks")])
    assert not marker.exists()
