"""What a run refuses before any work: a run folder that holds another run's outputs (and
what a user names as the output folder holds the whole run), a split the data lacks,
optimizer settings torch would reject only later."""

import re

import pytest

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from segnet.runs.folders import output_dir_as_run_dir, refuse_existing_run_dir
from segnet.runs.resume import resume_into_its_run
from tests.conftest import TINY_CAMVID, compose, compose_config


def test_output_dir_names_the_run_folder():
    argv = ["experiment=camvid_quick", "paths.output_dir=runs/a", "seed=1"]
    assert output_dir_as_run_dir(argv) == [
        "experiment=camvid_quick",
        "seed=1",
        "hydra.run.dir=runs/a",
    ]
    # given both, naming the same folder: one run folder, nothing added
    both = ["paths.output_dir=runs/a", "hydra.run.dir=runs/a"]
    assert output_dir_as_run_dir(both) == ["hydra.run.dir=runs/a"]
    assert output_dir_as_run_dir(["seed=1"]) == ["seed=1"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["paths.output_dir=runs/a", "hydra.run.dir=runs/b"], "different run folders"),
        (["-m", "seed=1,2", "paths.output_dir=runs/a"], "hydra.sweep.dir"),
        (["--multirun", "++paths.output_dir=runs/a"], "hydra.sweep.dir"),
    ],
)
def test_output_dir_that_cannot_be_the_run_folder_is_refused(argv, message):
    with pytest.raises(SystemExit, match=message):
        output_dir_as_run_dir(argv)


def test_new_run_refuses_a_folder_holding_a_run_before_any_work(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"a user's checkpoint")
    # the data root does not exist: the refusal must come before the data is looked at
    cfg = compose("train", [*TINY_CAMVID, f"data.root={tmp_path}/missing"], run)
    with pytest.raises(FileExistsError, match="already holds a run's outputs"):
        train(cfg)
    assert (run / "checkpoints" / "last.ckpt").read_bytes() == b"a user's checkpoint"


def test_a_sweep_into_a_folder_holding_an_earlier_sweep_is_refused_before_hydra(tmp_path):
    sweep = tmp_path / "sweep"
    argv = ["-m", f"hydra.sweep.dir={sweep}", "model.optimizer.lr=0.01,0.003"]
    refuse_existing_run_dir(argv)  # a new folder
    (sweep / "0").mkdir(parents=True)
    refuse_existing_run_dir(argv)  # an empty job folder holds nothing to lose
    (sweep / "0" / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"already holds a sweep \(runs in 0\)"):
        refuse_existing_run_dir(argv)
    refuse_existing_run_dir(argv[1:])  # without -m, Hydra ignores the sweep folder


def test_torchrun_without_a_named_run_folder_is_refused_on_every_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        with pytest.raises(SystemExit, match="give every node the same one"):
            refuse_existing_run_dir(["trainer=ddp"])
        refuse_existing_run_dir(["trainer=ddp", f"hydra.run.dir={tmp_path}/run"])
    monkeypatch.setenv("WORLD_SIZE", "1")  # one process: one folder
    refuse_existing_run_dir(["trainer=ddp"])


def test_a_resume_that_does_not_train_points_to_evaluate(tmp_path):
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"a user's checkpoint")
    (run / ".hydra").mkdir()
    match = rf"train=false: .* python evaluate.py ckpt_path={ckpt}"
    # on the command line, before the run's config is moved aside for a resume
    with pytest.raises(SystemExit, match=match):
        resume_into_its_run([f"ckpt_path={ckpt}", "train=False"])
    assert (run / ".hydra").is_dir() and not (run / ".hydra.1").exists()
    # and for a caller of train()
    cfg = compose("train", [*TINY_CAMVID, f"ckpt_path={ckpt}", "train=false"], tmp_path / "new")
    with pytest.raises(ValueError, match=match):
        train(cfg)


def test_a_process_a_launcher_starts_resumes_in_the_run_rank_0_writes_to(tmp_path, monkeypatch):
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"a user's checkpoint")
    (run / ".hydra").mkdir()
    monkeypatch.setenv("RANK", "1")  # torchrun's second process
    argv = resume_into_its_run([f"ckpt_path={ckpt}"])
    assert argv == [f"ckpt_path={ckpt}", f"hydra.run.dir={run}", "hydra.output_subdir=null"]
    assert (run / ".hydra").is_dir()
    # Lightning's own processes: the folder quoted, their config subfolder named already
    lightning = [f"ckpt_path={ckpt}", f'hydra.run.dir="{run}"', "hydra.output_subdir=.pl_1"]
    assert resume_into_its_run(lightning) == lightning
    # ... after rank 0's own, whose argv they start with
    ranks = [f"ckpt_path={ckpt}", "hydra.output_subdir=.hydra.1", f'hydra.run.dir="{run}"']
    subdirs = [a for a in resume_into_its_run(ranks) if a.startswith("hydra.output_subdir=")]
    assert subdirs == ["hydra.output_subdir=null"]
    # a checkpoint outside a run: nothing added, as for rank 0
    loose = tmp_path / "x.ckpt"
    loose.write_bytes(b"weights")
    assert resume_into_its_run([f"ckpt_path={loose}"]) == [f"ckpt_path={loose}"]


def test_every_rank_of_a_resume_composes_the_settings_that_trained_the_checkpoint(
    tmp_path, monkeypatch
):
    """Under torchrun every rank starts at once, and rank 0 writes this part's record
    (.hydra.<n>) while the others read the run's: they take the record the checkpoint names,
    complete since that part ran, not the newest, which may be half written."""
    import torch

    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    torch.save({"segnet": {"config": ".hydra"}}, ckpt)
    for record, overrides in ((".hydra", "- model.optimizer.lr=0.5\n"), (".hydra.1", "")):
        (run / record).mkdir()
        (run / record / "config.yaml").write_text("{}")
        (run / record / "overrides.yaml").write_text(overrides)  # .hydra.1: being written
    monkeypatch.setenv("RANK", "1")
    argv = resume_into_its_run([f"ckpt_path={ckpt}"])
    assert "model.optimizer.lr=0.5" in argv
    monkeypatch.delenv("RANK")  # rank 0 too: the checkpoint's record, .hydra.2 for its own
    argv = resume_into_its_run([f"ckpt_path={ckpt}"])
    assert "model.optimizer.lr=0.5" in argv and "hydra.output_subdir=.hydra.2" in argv


@pytest.mark.parametrize(
    "monitor, why", [("val/loss", "lower is better"), ("val/mIoU", "does not report it")]
)
def test_a_monitor_that_cannot_pick_the_best_checkpoint_is_refused_before_training(
    tiny_camvid, tmp_path, monkeypatch, monitor, why
):
    from segnet.data.base import SegmentationDataModule
    from segnet.training.module import SegmentationModule

    def no_training(*args):
        raise AssertionError("a training step ran before the refusal")

    def no_data(*args):
        raise AssertionError("the data was read before the refusal")

    monkeypatch.setattr(SegmentationModule, "training_step", no_training)
    monkeypatch.setattr(SegmentationDataModule, "setup", no_data)
    cfg = compose(
        "train", [*TINY_CAMVID, f"data.root={tiny_camvid}", f"monitor={monitor}"], tmp_path
    )
    with pytest.raises(ValueError, match=rf"monitor={monitor}: .*{why}.*Choose one of: .*val/miou"):
        train(cfg)  # once the module is built, before the data is read


def test_a_test_split_smaller_than_the_processes_is_refused_before_training(tmp_path):
    """Three test images cannot be shared by four processes: said before the first step,
    not after hours of training when the test stage starts."""
    from tests.helpers import camvid_like

    root = camvid_like(tmp_path / "CamVid", counts={"train": 8, "val": 4, "test": 3})
    cfg = compose(
        "train",
        [*TINY_CAMVID, f"data.root={root}", "trainer=ddp_cpu", "trainer.devices=4"],
        tmp_path / "run",
    )
    with pytest.raises(ValueError, match=r"3 'test' item\(s\) cannot be shared by 4 processes"):
        train(cfg)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_training_refuses_a_split_it_cannot_test_on_before_training(tiny_camvid, tmp_path):
    cfg = compose("train", [*TINY_CAMVID, f"data.root={tiny_camvid}", "data.split=tset"], tmp_path)
    with pytest.raises(ValueError, match="data.split='tset'"):
        train(cfg)
    assert not (tmp_path / "checkpoints").exists()  # stopped before any training


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.optimizer.lr=-1", r"model.optimizer.lr=-1: use a number above 0"),
        ("model.optimizer.lr=0", r"model.optimizer.lr=0: use a number above 0"),
        ("model.optimizer.weight_decay=-0.1", r"weight_decay=-0.1: use a number 0 or above"),
        ("model.optimizer.lr=fast", r"model.optimizer.lr='fast': expected a number"),
        # a word is a string, which Python takes for true
        ("model.tta=off", r"model.tta='off': use true or false"),
        ("data.hflip=no", r"data.hflip='no': use true or false"),
        # a word or a single number where Lightning or torch would fail later, naming nothing
        ("trainer.max_epochs=two", r"trainer.max_epochs='two': expected a whole number"),
        ("trainer.limit_train_batches=all", r"limit_train_batches='all': expected a number"),
        # a typo given with +, as Hydra advises for a key it does not know
        (
            "+trainer.max_epoch=1",
            r"trainer.max_epoch: .*Trainer has no such setting; did you mean "
            r"trainer.max_epochs\?",
        ),
        ("+data.img_size=[24,32]", r"unexpected keyword argument 'img_size': a setting .*Cam"),
        ("data.image_size=48", r"data.image_size=48: give a list, e.g. data.image_size=\["),
        ("data.scale=1.5", r"data.scale=1.5: give a list"),
    ],
)
def test_optimizer_settings_are_checked_before_the_data(tmp_path, override, message):
    # the data root does not exist: the refusal must come before the data is looked at
    cfg = compose("train", [*TINY_CAMVID, f"data.root={tmp_path}/missing", override], tmp_path)
    with pytest.raises(ValueError, match=message):
        train(cfg)


@pytest.mark.parametrize(
    "override, message",
    [
        ("+model.loss.focal=1.0", r"model.loss has unknown term\(s\) \['focal'\]"),
        ("model.ce_top_k=2", r"model.ce_top_k=2"),
        ("model.loss.ce=-1", r"model.loss=.*'ce': -1.*must be 0 or above"),
        ("model.loss.ce=0", r"model.loss=.*at least one term above 0"),
        ("model.compile=sometimes", r"model.compile='sometimes': use true, false or auto"),
        ("model.net.deep_supervision=9", r"deep_supervision"),
    ],
)
def test_model_settings_are_checked_before_the_data_is_read(
    tiny_camvid, tmp_path, monkeypatch, override, message
):
    """The module is built, and so refuses a setting, before setup reads every image."""
    from segnet.data.camvid_datamodule import CamVidDataModule

    def read(*_):
        raise AssertionError("the data was read before the model settings were checked")

    monkeypatch.setattr(CamVidDataModule, "setup", read)
    cfg = compose("train", [*TINY_CAMVID, f"data.root={tiny_camvid}", override], tmp_path)
    with pytest.raises(ValueError, match=message):
        train(cfg)


def test_mirroring_a_network_trained_without_flips_is_refused_before_training(
    tiny_camvid, tmp_path
):
    cfg = compose(
        "train",
        [*TINY_CAMVID, f"data.root={tiny_camvid}", "model.tta=true", "data.hflip=false"],
        tmp_path,
    )
    with pytest.raises(ValueError, match="trained without flips"):
        train(cfg)
    assert not (tmp_path / "checkpoints").exists()


def test_a_flip_setting_that_names_no_axes_is_refused_before_the_data(tmp_path):
    for flip in ("no", "[0,3]"):
        overrides = ["experiment=hippocampus_unet3d", f"data.root={tmp_path}/missing"]
        cfg = compose("train", [*overrides, f"data.flip={flip}"], tmp_path)
        with pytest.raises(
            ValueError,
            match=r"data.flip=.*a list of axes \(0 left-right, 1 back-front, 2 down-up\)",
        ):
            train(cfg)


def test_evaluate_refuses_a_switch_given_as_a_word(tmp_path):
    cfg = compose("evaluate", [f"ckpt_path={tmp_path}/missing.ckpt", "tta=off"], tmp_path)
    with pytest.raises(ValueError, match=r"tta='off': use true or false"):
        evaluate(cfg)  # before the checkpoint is looked for


def test_overrides_given_twice_compose_once():
    """A resume puts the run's recorded overrides before those given now: each setting is
    then given once, deletions and additions included, and composes."""
    from segnet.runs.resume import one_per_key

    assert one_per_key(["~callbacks.ema", "a=1", "-m", "~callbacks.ema", "a=2"]) == [
        "~callbacks.ema",
        "a=2",
        "-m",
    ]
    assert one_per_key(["+x=1", "x=2"]) == ["++x=2"]  # x exists only through the +
    assert one_per_key(["++x=1", "+x=1"]) == ["++x=1"]
    assert one_per_key(["+x=1", "+x=1"]) == ["+x=1"]
    recorded = ["experiment=hippocampus_gpu", "~callbacks.ema", "+callbacks.stop.epochs=2"]
    again = [*recorded, "+callbacks.stop.epochs=3"]  # the command repeated, one value changed
    cfg = compose_config("train", one_per_key([*recorded, *again]))
    assert "ema" not in cfg.callbacks and cfg.callbacks.stop.epochs == 3


def test_a_resume_command_as_printed_is_recognised_whatever_the_folder_name(tmp_path):
    from segnet.shell import override

    run = tmp_path / "sweep,lr=(0.1) x" / "0"
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"a user's checkpoint")
    (run / ".hydra").mkdir()
    (run / ".hydra" / "overrides.yaml").write_text("- data.fold=0\n")
    (run / ".hydra" / "config.yaml").write_text("data:\n  fold: 0\n")
    import shlex

    (pasted,) = shlex.split(override("ckpt_path", ckpt))
    argv = resume_into_its_run([pasted])
    assert argv[0] == "data.fold=0"  # the run's own overrides, first
    from hydra.core.override_parser.overrides_parser import OverridesParser

    run_dirs = [a for a in argv if a.startswith("hydra.run.dir=")]
    assert OverridesParser.create().parse_override(run_dirs[0]).value() == str(run)
    assert "hydra.output_subdir=.hydra.1" in argv


def test_a_mistyped_setting_is_given_the_one_meant():
    """Hydra refuses trainer.max_epoch=1 and advises +trainer.max_epoch=1; the hint names
    trainer.max_epochs. Settings a group or a + override adds are no typos."""
    from segnet.runs.typos import setting_hints

    argv = ["experiment=camvid_quick", "trainer.max_epoch=1", "model.optimizer.lr=0.1",
            "+callbacks.ema._target_=x", "callbacks.ema.decay=0.5"]  # fmt: skip
    assert setting_hints("train", argv) == [
        "trainer.max_epoch is not a setting; did you mean trainer.max_epochs?"
    ]
    assert setting_hints("evaluate", ["ckpt_path=x", "data.splt=val", "tta=true"]) == [
        "data.splt is not a setting; did you mean data.split?"
    ]
    assert setting_hints("train", ["trainer.max_epochs=1", "experiment=nope"]) == []
    # a recipe or group choice mistyped: the one meant, beside Hydra's list of all
    assert setting_hints("train", ["experiment=imagse_quick", "data.root=x"]) == [
        "experiment=imagse_quick: no such choice; did you mean experiment=images_quick?"
    ]
    assert setting_hints("train", ["logger=[tensorboard,mlfow]", "model/net=unte"]) == [
        "logger=mlfow: no such choice; did you mean logger=mlflow?",
        "model/net=unte: no such choice; did you mean model/net=unet?",
    ]
    quoted = ["experiment='images_quick'", "experiment=choice(images_quick,camvid_quick)"]
    assert setting_hints("train", quoted) == []


def test_evaluate_help_lists_no_setting_it_refuses_and_says_why_when_given(tmp_path):
    """data.patch_size and data.spacing are no settings of evaluate (--help does not list
    them); given anyway, Hydra's advice to add them with + comes with why they are not."""
    import subprocess
    import sys

    from tests.conftest import REPO

    shown = subprocess.run(
        [sys.executable, "evaluate.py", "--help"], cwd=REPO, capture_output=True, text=True
    ).stdout
    assert "sw_roi_size" in shown and "patch_size" not in shown
    assert not re.search(r"^\s*spacing:", shown, re.M)  # (stack_spacing is one)
    given = subprocess.run(
        [sys.executable, "evaluate.py", "ckpt_path=x.ckpt", "data.spacing=[1,1,1]",
         f"hydra.run.dir={tmp_path / 'ev'}"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert given.returncode == 1
    assert "hint: data.spacing is not a setting of evaluate: a network is applied at the " in (
        given.stderr
    )


def test_only_a_new_run_folder_of_a_refusal_before_any_work_is_removed(tmp_path, monkeypatch):
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from segnet.runs.folders import Work, discard_refused_run
    from tests.conftest import compose_config

    def refused_run(name: str, run_dir_given: bool = False, extra: str | None = None):
        folder = tmp_path / name
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "config.yaml").write_text("{}")
        (folder / "train.log").write_text("training refused")
        if extra:
            (folder / extra).write_text("a user's file")
        cfg = compose_config("train", [], hydra=True)
        with open_dict(cfg):
            cfg.hydra.runtime.output_dir = str(folder)
            cfg.hydra.overrides.hydra = [f"hydra.run.dir={folder}"] if run_dir_given else []
        HydraConfig.instance().set_config(cfg)
        return folder, [folder / "train.log"]

    work = Work()
    try:
        folder, logs = refused_run("new")
        assert discard_refused_run(logs, work) == folder and not folder.exists()
        for folder, logs in (refused_run("named", run_dir_given=True),
                             refused_run("more", extra="notes.txt")):  # fmt: skip
            assert discard_refused_run(logs, work) is None and (folder / "train.log").is_file()
        folder, logs = refused_run("worked")
        work.starts()  # e.g. an export that failed its reload check: its log stays
        assert discard_refused_run(logs, work) is None and (folder / "train.log").is_file()
    finally:
        HydraConfig.instance().cfg = None


def test_the_hint_comes_when_hydra_raises_its_error_itself(tmp_path):
    """With HYDRA_FULL_ERROR=1, or under a debugger or coverage.py, Hydra raises its error
    instead of printing it and exiting 1: the hint is printed all the same."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    given = subprocess.run(
        [sys.executable, "evaluate.py", "ckpt_path=x.ckpt", "data.spacing=[1,1,1]",
         f"hydra.run.dir={tmp_path / 'ev'}"],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )  # fmt: skip
    assert given.returncode == 1 and "ConfigCompositionException" in given.stderr
    assert "hint: data.spacing is not a setting of evaluate" in given.stderr
