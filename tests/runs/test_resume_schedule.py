"""Resuming under a schedule planned for a length: exact continuation, or a clear stop;
init_from starts a new run (fresh schedule) from a checkpoint's weights."""

import pytest
import torch

from segnet.commands.train import train
from segnet.serving.checkpoints import CheckpointError
from tests.conftest import TINY_CAMVID, compose
from tests.helpers import stopping_after


def lrs(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    return {s.step: s.value for s in acc.Scalars("lr-AdamW")}


@pytest.mark.parametrize("scheduler", ["poly", "onecycle"])
def test_resume_continues_the_schedule_exactly(tiny_camvid, tmp_path, scheduler):
    base = TINY_CAMVID + [
        f"data.root={tiny_camvid}",
        "test=false",
        f"model/scheduler={scheduler}",
        "trainer.max_epochs=4",
    ]
    train(compose("train", base, tmp_path / "whole"))
    with stopping_after(2):
        train(compose("train", base, tmp_path / "run"))
    assert torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)["global_step"] == 6
    ckpt = f"ckpt_path={tmp_path}/run/checkpoints/last.ckpt"
    train(compose("train", base + [ckpt], tmp_path / "elsewhere"))
    whole, resumed = lrs(tmp_path / "whole"), lrs(tmp_path / "run")
    assert sorted(resumed) == sorted(whole) and len(whole) == 12  # 4 epochs x 3 steps
    for step, lr in whole.items():
        assert resumed[step] == pytest.approx(lr, rel=1e-6), step
    assert min(lr for step, lr in whole.items() if step < 11) > 0


def test_resume_with_another_length_stops_before_training_and_says_what_to_do(
    tiny_camvid, tmp_path
):
    base = TINY_CAMVID + [f"data.root={tiny_camvid}", "test=false", "model/scheduler=poly"]
    train(compose("train", base + ["trainer.max_epochs=1"], tmp_path / "run"))
    longer = base + ["trainer.max_epochs=3", f"ckpt_path={tmp_path}/run/checkpoints/last.ckpt"]
    with pytest.raises(CheckpointError, match=r"(?s)trainer.max_epochs=1.*init_from="):
        train(compose("train", longer, tmp_path / "x"))
    # init_from: a new run over 3 epochs, its schedule starting afresh from the weights
    new = base + ["trainer.max_epochs=3", f"init_from={tmp_path}/run/checkpoints/last.ckpt"]
    _, objects = train(compose("train", new, tmp_path / "new"))
    assert objects["trainer"].global_step == 9
    values = lrs(tmp_path / "new")
    assert values[0] == pytest.approx(0.01)  # the configured lr, not the end of the old one
    assert all(v > 0 for step, v in values.items() if step < 8)


def test_resume_with_other_steps_per_epoch_stops_before_the_first_step(tiny_camvid, tmp_path):
    """A copy of the data with fewer training images (data.root may change on a resume:
    a copy elsewhere) would end the one-cycle schedule early: refused."""
    from tests.helpers import camvid_like

    base = TINY_CAMVID + [f"data.root={tiny_camvid}", "test=false", "model/scheduler=onecycle"]
    with stopping_after(1):
        train(compose("train", base, tmp_path / "run"))  # 6 images: 3 steps per epoch
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    smaller = camvid_like(tmp_path / "CamVid", {"train": 4, "val": 3, "test": 3})
    other = [*base, f"data.root={smaller}", f"ckpt_path={last}"]  # 2 steps per epoch
    with pytest.raises(CheckpointError, match=r"planned for 6 steps and this resume has 4"):
        train(compose("train", other, tmp_path / "x"))
    assert last.read_bytes() == before
    # the same settings resume
    _, objects = train(compose("train", base + [f"ckpt_path={last}"], tmp_path / "y"))
    assert objects["trainer"].global_step == 6


def test_a_truncated_checkpoint_is_named_with_its_neighbours(tiny_camvid, tmp_path):
    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "last.ckpt").write_bytes(b"PK\x03\x04 truncated")
    (folder / "best.ckpt").write_bytes(b"")
    cfg = compose(
        "train",
        TINY_CAMVID + [f"data.root={tiny_camvid}", f"ckpt_path={folder}/last.ckpt"],
        tmp_path,
    )
    with pytest.raises(CheckpointError, match=r"last\.ckpt.*not a readable checkpoint.*best\.ckpt"):
        train(cfg)


def test_a_checkpoint_of_another_model_is_refused_before_training(tiny_camvid, tmp_path):
    train(
        compose("train", TINY_CAMVID + [f"data.root={tiny_camvid}", "test=false"], tmp_path / "a")
    )
    other = TINY_CAMVID + [
        f"data.root={tiny_camvid}",
        "model.net.features=[16,16,16,16]",
        f"ckpt_path={tmp_path}/a/checkpoints/last.ckpt",
    ]
    events = sorted((tmp_path / "a" / "tensorboard").iterdir())
    with pytest.raises(CheckpointError, match=r"(?s)other settings.*model.net.features"):
        train(compose("train", other, tmp_path / "b"))
    # a checkpoint from before checkpoints stored their settings: its network is compared
    last = tmp_path / "a" / "checkpoints" / "last.ckpt"
    ckpt = torch.load(last, weights_only=False)
    del ckpt["segnet"]["settings"]
    torch.save(ckpt, last)
    with pytest.raises(CheckpointError, match=r"(?s)another model.*features"):
        train(compose("train", other, tmp_path / "c"))
    # the refused resumes wrote nothing into the source run
    assert sorted((tmp_path / "a" / "tensorboard").iterdir()) == events


def test_evaluate_names_an_unreadable_checkpoint(tmp_path):
    from segnet.commands.evaluate import evaluate

    (tmp_path / "best.ckpt").write_bytes(b"")
    cfg = compose("evaluate", [f"ckpt_path={tmp_path}/best.ckpt"], tmp_path / "ev")
    with pytest.raises(CheckpointError, match=r"best\.ckpt.*0 bytes.*empty or truncated"):
        evaluate(cfg)


def test_a_resume_from_an_earlier_checkpoint_of_a_run_is_refused(tmp_path):
    """Resuming from best.ckpt would train on from its step and replace the later
    last.ckpt beside it: refused, with the two ways on."""
    from segnet.runs.resume import check_latest

    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    torch.save({"global_step": 12}, folder / "last.ckpt")
    with pytest.raises(
        CheckpointError, match=r"(?s)step 6 .*step 12.*ckpt_path=.*last\.ckpt.*init_from=.*best"
    ):
        check_latest({"global_step": 6}, folder / "best.ckpt")
    # best saved at the last step, during validation: last.ckpt, saved after it, holds the
    # run's state (a finished run's best.ckpt would otherwise pass for unfinished, train
    # nothing and write the run's last.ckpt and metrics over)
    with pytest.raises(CheckpointError, match=r"(?s)at step 12, as .*last\.ckpt.*ckpt_path="):
        check_latest({"global_step": 12}, folder / "best.ckpt")
    check_latest({"global_step": 12}, folder / "last.ckpt")
    check_latest({"global_step": 6}, tmp_path / "loose.ckpt")  # no run beside it


def test_init_from_loads_every_weight_or_refuses_naming_the_checkpoint():
    """A compiled or DDP-wrapped run's keys load as plain ones; weights that do not fit the
    network are refused rather than leaving part of it at its random start."""
    from segnet.serving.checkpoints import load_weights
    from segnet.training.module import SegmentationModule
    from tests.helpers import data_info

    net = {"name": "unet", "features": [4, 8]}
    torch.manual_seed(0)
    source = SegmentationModule(net, data_info(3))
    wrapped = {f"module.net._orig_mod.{k}": v for k, v in source.net.state_dict().items()}
    torch.manual_seed(1)
    target = SegmentationModule(net, data_info(3))
    load_weights(target, {"state_dict": wrapped}, "a.ckpt")
    for key, value in source.net.state_dict().items():
        assert torch.equal(target.net.state_dict()[key], value), key
    renamed = {k.replace("net.", "net.old_"): v for k, v in source.state_dict().items()}
    with pytest.raises(ValueError, match=r"init_from=b\.ckpt: its network weights do not fit"):
        load_weights(target, {"state_dict": renamed}, "b.ckpt")
