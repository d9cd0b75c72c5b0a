"""Checkpoints, exports and predictions are written whole or not at all: a write that fails
part-way (a full disk) leaves the previous file intact, no partial file under the target's
name and no temporary file, and says where space ran out; ``$TMPDIR`` plays no part."""

from __future__ import annotations

import errno
import io
import shutil
from pathlib import Path

import pytest
import torch

import segnet.files
from segnet.files import OutOfSpaceError, write_bytes
from segnet.serving.checkpoints import read_checkpoint
from segnet.training.checkpoint_io import AtomicCheckpointIO, BackgroundCheckpointIO


class FillsUp(io.FileIO):
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    room = 1000

    def write(self, data):
        taken = self.tell()
        if taken + len(data) > self.room:
            super().write(bytes(data)[: max(0, self.room - taken)])
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


def filling_open(real_open=open):
    def fake(file, mode="r", *args, **kwargs):
        if "w" in mode and "b" in mode:
            return io.BufferedWriter(FillsUp(file, "w"))
        return real_open(file, mode, *args, **kwargs)

    return fake


def checkpoint(value: float) -> dict:
    return {"state_dict": {"net.w": torch.full((4000,), value)}, "epoch": int(value)}


def test_a_write_that_fills_the_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoints" / "last.ckpt"
    writer = AtomicCheckpointIO()
    writer.save_checkpoint(checkpoint(1.0), path)
    monkeypatch.setattr(segnet.files, "open", filling_open(), raising=False)
    with pytest.raises(OutOfSpaceError) as caught:
        writer.save_checkpoint(checkpoint(2.0), path)
    message = str(caught.value)
    assert f"no space left in {path.parent} to write last.ckpt" in message
    assert "previous last.ckpt is kept whole" in message
    monkeypatch.undo()
    # the previous checkpoint, whole and loadable; nothing else in the folder
    assert read_checkpoint(path)["epoch"] == 1
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]


def test_a_first_checkpoint_that_fails_names_the_last_complete_one(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    writer = AtomicCheckpointIO()
    writer.save_checkpoint(checkpoint(3.0), folder / "last.ckpt")
    monkeypatch.setattr(segnet.files, "open", filling_open(), raising=False)
    with pytest.raises(OutOfSpaceError, match=r"The last complete one is .*last\.ckpt"):
        writer.save_checkpoint(checkpoint(4.0), folder / "best.ckpt")
    assert sorted(p.name for p in folder.iterdir()) == ["last.ckpt"]


def test_too_little_free_space_is_found_before_a_byte_is_written(tmp_path, monkeypatch):
    target = tmp_path / "model.json"
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        segnet.files.shutil, "disk_usage", lambda _: usage._replace(free=10)
    )  # fmt: skip
    with pytest.raises(OutOfSpaceError, match=r"it needs 2\.0 kB, 10 bytes free"):
        write_bytes(target, b"x" * 2000)
    assert not any(tmp_path.iterdir())


def test_tmpdir_elsewhere_changes_nothing(tmp_path, monkeypatch):
    """The temporary file lies beside the checkpoint: a ``$TMPDIR`` on another (smaller)
    disk is never written to."""
    import tempfile

    other = tmp_path / "tmpdir"
    other.mkdir()
    monkeypatch.setenv("TMPDIR", str(other))
    monkeypatch.setattr(tempfile, "tempdir", str(other))
    path = tmp_path / "run" / "best.ckpt"
    AtomicCheckpointIO().save_checkpoint(checkpoint(5.0), path)
    assert read_checkpoint(path)["epoch"] == 5
    assert not any(other.iterdir())


class InlineExecutor:
    """An executor whose work is done before ``submit`` returns: the fastest thread."""

    def submit(self, fn, *args, **kwargs):
        fn(*args, **kwargs)

    def shutdown(self, wait=True):
        pass


@pytest.mark.parametrize("thread", ["background", "done before submit returns"])
def test_the_background_writer_raises_its_failure_on_the_main_thread_once(
    tmp_path, monkeypatch, thread
):
    """The thread's failure reaches the main thread exactly once: at the save itself when
    the thread failed before ``submit`` returned, else when the writer is torn down."""
    monkeypatch.setattr(segnet.files, "open", filling_open(), raising=False)
    writer = BackgroundCheckpointIO()
    if thread != "background":
        writer._executor = InlineExecutor()
    told = []
    for call in (
        lambda: writer.save_checkpoint(checkpoint(6.0), tmp_path / "last.ckpt"),
        writer.teardown,  # waits for the thread, then raises what it met, if not told yet
        writer.teardown,  # a trainer tearing down after the failure is not told again
    ):
        try:
            call()
        except OutOfSpaceError as err:
            told.append(str(err))
    assert len(told) == 1 and "no space left" in told[0]
    assert not any(tmp_path.iterdir())


def test_training_writes_through_the_atomic_writer_whatever_the_plugins(tiny_camvid, tmp_path):
    from segnet.runs.building import build_trainer
    from tests.conftest import TINY_CAMVID, compose

    for plugins in ([], ["trainer.plugins=null"]):
        cfg = compose("train", TINY_CAMVID + [f"data.root={tiny_camvid}", *plugins], tmp_path)
        io_plugin = build_trainer(cfg, progress=False).strategy.checkpoint_io
        inner = getattr(io_plugin, "checkpoint_io", io_plugin)
        assert isinstance(inner, AtomicCheckpointIO), (plugins, io_plugin)


def test_a_full_disk_stops_training_with_the_folder_named(tiny_camvid, tmp_path, monkeypatch):
    """A run whose disk fills at its first checkpoint stops there, saying where, and leaves
    no partial checkpoint."""
    from segnet.commands.train import train
    from tests.conftest import TINY_CAMVID, compose

    cfg = compose(
        "train", TINY_CAMVID + [f"data.root={tiny_camvid}", "trainer.max_epochs=1"], tmp_path
    )
    monkeypatch.setattr(segnet.files, "open", filling_open(), raising=False)
    with pytest.raises(OutOfSpaceError, match=f"no space left in {tmp_path / 'checkpoints'}"):
        train(cfg)
    assert not list((tmp_path / "checkpoints").glob("*"))


def test_a_failed_prediction_write_leaves_no_file(tmp_path, monkeypatch):
    """Writers that take a path (Pillow here) are staged the same way."""
    import numpy as np
    from PIL import Image

    from segnet.files import staged

    target = tmp_path / "masks" / "a.png"

    def fail_midway(tmp: Path) -> None:
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OutOfSpaceError, match="to write a.png"), staged(target) as tmp:
        fail_midway(tmp)
    assert not any(target.parent.iterdir())
