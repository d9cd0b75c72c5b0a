"""Resume, interruption by signals, atomic checkpoints, reproducibility."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from omegaconf import OmegaConf

from segnet.commands.train import train
from tests.conftest import REPO, TINY_CAMVID, compose
from tests.helpers import stopping_after


def scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    return acc.Scalars(tag)


def test_resume_continues_the_same_run(tiny_camvid, tmp_path):
    run = tmp_path / "run"
    base = TINY_CAMVID + [
        f"data.root={tiny_camvid}",
        "test=false",
        "model/scheduler=cosine",
        "trainer.max_epochs=4",
    ]
    # a 4-epoch run stopped after 2 epochs (as by a pre-emption at an epoch boundary)
    first = compose("train", base, run)
    composed = OmegaConf.to_container(first, resolve=False)
    with stopping_after(2):
        train(first)
    # the run's config as composed (monitor still null) is in every checkpoint: what a
    # resume from a copy of it is compared with
    stored = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["segnet"]
    assert stored["settings"] == composed
    assert stored["settings"]["monitor"] is None
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 6  # 2 epochs x 3 steps
    best_before = ckpt["state_dict"]["best.max_value"]

    # the resumed run is told to write elsewhere, but continues in the checkpoint's run
    second = compose(
        "train", base + [f"ckpt_path={run}/checkpoints/last.ckpt"], tmp_path / "elsewhere"
    )
    train(second)
    assert not (tmp_path / "elsewhere" / "checkpoints").exists()
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["epoch"] == 3 and ckpt["global_step"] == 12
    assert ckpt["state_dict"]["best.max_value"] >= best_before  # the best survives resume
    # the cosine schedule continued rather than restarting
    assert ckpt["lr_schedulers"][0]["last_epoch"] == 12
    # one curve, four epochs, no step twice (event files are read in name order, which
    # need not be the order they were written in: compare as a sorted list)
    steps = sorted(s.step for s in scalars(run, "val/miou"))
    assert steps == [2, 5, 8, 11]  # logged at the last step of each epoch (0-based)


def test_same_seed_same_metrics(tiny_camvid, tmp_path):
    runs = []
    for name in ("a", "b"):
        cfg = compose("train", TINY_CAMVID + [f"data.root={tiny_camvid}"], tmp_path / name)
        metrics, _ = train(cfg)
        runs.append({k: v for k, v in metrics.items() if k.startswith(("val/", "test/"))})
    assert runs[0] == runs[1]


def start_training(tiny_camvid, run_dir):
    args = [
        sys.executable,
        "train.py",
        *TINY_CAMVID,
        f"data.root={tiny_camvid}",
        "trainer.max_epochs=1000",
        f"hydra.run.dir={run_dir}",
    ]
    log = run_dir.parent / f"{run_dir.name}.log"
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    return proc, log


# SIGINT (Ctrl-C) takes the same path as SIGTERM, once more: in the slow suite
@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)]
)
def test_signal_saves_a_checkpoint_that_resumes(tiny_camvid, tmp_path, signum):
    run = tmp_path / "run"
    proc, log = start_training(tiny_camvid, run)
    deadline = time.time() + 240
    while "epoch 1 " not in log.read_text():  # well into training
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.time() < deadline, "training did not start"
        time.sleep(0.5)
    proc.send_signal(signum)
    proc.wait(timeout=120)
    text = log.read_text()
    assert proc.returncode != 0  # stopped, not finished
    assert "resume with python train.py ckpt_path=" in text, text[-3000:]
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] >= 6  # at least the two epochs the log showed
    # not marked as a stop on purpose: an ensemble with this member warns that it is short
    assert ckpt["segnet"]["stopping"] is False

    resumed = compose(
        "train",
        TINY_CAMVID
        + [
            f"data.root={tiny_camvid}",
            "test=false",
            f"trainer.max_epochs={ckpt['epoch'] + 2}",
            f"ckpt_path={run}/checkpoints/last.ckpt",
        ],
        tmp_path / "x",
    )
    metrics, objects = train(resumed)
    assert objects["trainer"].global_step > ckpt["global_step"]


ATOMIC_WRITER = """
import sys, torch
from lightning.fabric.utilities.cloud_io import _atomic_save
i = 0
while True:  # what trainer.save_checkpoint does for last.ckpt, as fast as possible
    _atomic_save({"i": i, "w": torch.full((4_000_000,), float(i))}, sys.argv[1])
    i += 1
"""


@pytest.mark.slow  # each attempt starts Python with Lightning: about 12 s in all
def test_a_kill_during_a_checkpoint_write_leaves_a_loadable_checkpoint(tmp_path):
    path = tmp_path / "last.ckpt"
    for attempt in range(3):  # each attempt starts Python with torch: seconds each
        proc = subprocess.Popen([sys.executable, "-c", ATOMIC_WRITER, str(path)])
        while not path.exists():
            time.sleep(0.05)
        time.sleep(0.3 + 0.23 * attempt)  # kill at varying points of a write
        proc.kill()
        proc.wait()
        ckpt = torch.load(path, weights_only=True)
        assert torch.all(ckpt["w"] == ckpt["i"])  # a whole checkpoint, never a partial one


@pytest.mark.slow
def test_resume_from_the_command_line_continues_in_the_run_folder(tiny_camvid, tmp_path):
    """train.py ckpt_path=...: the run goes on as it was configured (its recorded overrides
    applied for it), in its own folder; each part's config is kept, none written over."""
    import yaml

    from tests.conftest import run_cli

    run = tmp_path / "run"
    args = [*TINY_CAMVID, f"data.root={tiny_camvid}", "test=false"]
    script = str(REPO / "train.py")
    last = f"{run}/checkpoints/last.ckpt"
    run_cli([script, *args, "trainer.max_epochs=1", f"hydra.run.dir={run}"], cwd=tmp_path)
    first = (run / ".hydra" / "overrides.yaml").read_text()
    # the checkpoint alone (as the interruption message says) and the one setting to change
    run_cli([script, f"ckpt_path={last}", "trainer.max_epochs=2"], cwd=tmp_path)
    assert torch.load(last, weights_only=False)["epoch"] == 1  # trained its second epoch
    assert not (tmp_path / "outputs").exists()  # nothing written to a new run folder
    assert (run / ".hydra" / "overrides.yaml").read_text() == first  # how it started, kept
    second = yaml.safe_load((run / ".hydra.1" / "overrides.yaml").read_text())
    assert set(yaml.safe_load(first)) - {"trainer.max_epochs=1"} <= set(second)
    assert len(second) == len({o.split("=")[0] for o in yaml.safe_load(first)}) + 1
    # one value per setting: the run's, then the resume's own
    assert second.count("trainer.max_epochs=2") == 1 and "trainer.max_epochs=1" not in second
    assert f"ckpt_path={last}" in second
    assert (run / "train.log").is_file()
    # naming the run folder explicitly as well resumes the same way
    run_cli(
        [script, *args, "trainer.max_epochs=3", f"ckpt_path={last}", f"hydra.run.dir={run}"],
        cwd=tmp_path,
    )
    assert (run / ".hydra.2").is_dir() and not (tmp_path / "outputs").exists()
    # each checkpoint names the part whose settings trained it
    assert torch.load(last, weights_only=False)["segnet"]["config"] == ".hydra.2"


@pytest.mark.slow  # nine runs of train.py; each refusal's logic is also tested in-process
def test_command_line_resumes_that_cannot_go_on_are_refused_leaving_the_run_as_it_was(
    tiny_camvid, tmp_path
):
    from tests.conftest import run_cli

    run = tmp_path / "run"
    args = [*TINY_CAMVID, f"data.root={tiny_camvid}", "test=false"]
    script = str(REPO / "train.py")
    last = f"{run}/checkpoints/last.ckpt"
    run_cli([script, *args, "trainer.max_epochs=1", f"hydra.run.dir={run}"], cwd=tmp_path)
    # refused before any work, leaving the run's records as they were: a setting that
    # shapes training, another folder, a run with nothing left to train
    refusals = [
        (["model.optimizer.lr=0.5", "data.class_weights=none", "trainer.max_epochs=2"],
         r"data.class_weights: 'median_frequency' in the run, 'none' now\n"
         r"  model.optimizer.lr: 0.01 in the run, 0.5 now"),
        ([f"hydra.run.dir={tmp_path / 'elsewhere'}", "trainer.max_epochs=2"],
         "a resume goes on in its own folder"),
        ([], r"(?s)of trainer.max_epochs=1 are trained.*python evaluate.py"),
        # a setting a resume may change, which then fails before training
        ([f"data.root={tmp_path / 'moved'}", "trainer.max_epochs=2"], "CamVid not found"),
    ]  # fmt: skip
    for extra, message in refusals:
        with pytest.raises(AssertionError, match=message):
            run_cli([script, f"ckpt_path={last}", *extra], cwd=tmp_path)
    assert not (run / ".hydra.1").exists() and not (tmp_path / "elsewhere").exists()
    assert torch.load(last, weights_only=False)["epoch"] == 0
    # none of them became the run's record: the next resume takes the run's own settings
    run_cli([script, f"ckpt_path={last}", "trainer.max_epochs=2"], cwd=tmp_path)
    assert torch.load(last, weights_only=False)["epoch"] == 1
    resumed = (run / ".hydra.1" / "overrides.yaml").read_text()
    assert "model.optimizer.lr=0.01" in resumed and "0.5" not in resumed
    # pointing a new run at a folder that holds a run's outputs is refused before any work,
    # however the folder is named
    for name in ("hydra.run.dir", "paths.output_dir"):
        with pytest.raises(AssertionError, match="already holds a run's outputs"):
            run_cli([script, *args, f"{name}={run}"], cwd=tmp_path)
    # paths.output_dir names the whole run folder: log and config beside the checkpoints
    other = tmp_path / "other"
    run_cli([script, *args, "trainer.max_epochs=1", f"paths.output_dir={other}"], cwd=tmp_path)
    assert (other / "checkpoints" / "last.ckpt").is_file() and (other / "train.log").is_file()
    assert "paths.output_dir" not in (other / ".hydra" / "overrides.yaml").read_text()
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow  # two runs of train.py (about 25 s); resumes are tested in-process too
def test_a_run_without_a_logger_trains_and_resumes_in_its_folder(tiny_camvid, tmp_path):
    """logger=none: no learning-rate monitor to stop the run, and a resume still finds the
    run by its config, without TensorBoard logs to go by."""
    from tests.conftest import run_cli

    run = tmp_path / "run"
    args = [*TINY_CAMVID, f"data.root={tiny_camvid}", "test=false", "logger=none"]
    script = str(REPO / "train.py")
    run_cli([script, *args, "trainer.max_epochs=1", f"hydra.run.dir={run}"], cwd=tmp_path)
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert not (run / "tensorboard").exists()
    run_cli(
        [script, *args, "trainer.max_epochs=2", f"ckpt_path={run}/checkpoints/last.ckpt"],
        cwd=tmp_path,
    )
    assert (run / ".hydra.1").is_dir() and "ckpt_path" in (
        run / ".hydra.1" / "overrides.yaml"
    ).read_text()
    assert not (tmp_path / "outputs").exists()  # continued in the run's folder


def test_a_stop_during_validation_saves_the_training_weights_not_the_average(tiny_camvid, tmp_path):
    """With a weight EMA (the GPU recipes), validation runs on the averaged weights; a
    SIGTERM mid-validation still saves the training weights as the model and the average as
    the average, so a resume trains on from where training was."""
    from tests.helpers import SIGTERM_RECORD

    run = tmp_path / "run"
    overrides = TINY_CAMVID + [
        f"data.root={tiny_camvid}",
        "data.eval_batch_size=1",  # three validation batches: the stop comes after the first
        "+callbacks.ema._target_=segnet.training.callbacks.ema.FusedEMAWeightAveraging",
        "+callbacks.ema.decay=0.5",
        "+callbacks.halt._target_=tests.helpers.SigtermDuringValidation",
    ]
    with pytest.raises(SystemExit, match="resume with python train.py ckpt_path="):
        train(compose("train", overrides, run))
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)

    def net(state):
        return {k.removeprefix("net."): v for k, v in state.items() if k.startswith("net.")}

    training, average = net(ckpt["current_model_state"]), net(ckpt["state_dict"])
    want_training, want_average = SIGTERM_RECORD["training"], SIGTERM_RECORD["average"]
    differs = [k for k in want_training if not torch.equal(want_training[k], want_average[k])]
    assert differs  # decay 0.5: the two sets of weights are told apart
    for k in differs:
        assert torch.equal(training[k], want_training[k]), k
        assert torch.equal(average[k], want_average[k]), k


def test_a_resume_compares_settings_as_training_takes_them():
    from segnet.runs.resume import changed_settings

    volumes = {"_target_": "segnet.data.nifti_datamodule.NiftiDataModule", "batch_size": 4}
    run = {"data": {**volumes, "flip": [1, 2]}, "trainer": {"devices": 1}}
    same = {"data": {**volumes, "flip": [2, 1]}, "trainer": {"devices": 2}}
    assert changed_settings(run, same) == []  # the same axes; devices may change
    assert (
        changed_settings(
            {"data": {**volumes, "flip": True}}, {"data": {**volumes, "flip": [0, 1, 2]}}
        )
        == []
    )
    assert changed_settings(run, {**run, "data": {**volumes, "flip": True}}) == [
        ("data.flip", [1, 2], True)
    ]
    # a run recorded before a data setting existed had its default: not a change, unless
    # the resume sets another value
    newer = {**run, "data": {**run["data"], "regions": None, "regions_class_order": None}}
    assert changed_settings(run, newer) == []
    regions = {**run, "data": {**run["data"], "regions": {"whole": [1, 2]}}}
    assert [k for k, *_ in changed_settings(run, regions)] == ["data.regions.whole"]


def test_a_run_from_before_groups_resumes_drawing_case_by_case(tmp_path):
    """Its splits were drawn case by case (a CSV's group column was not read then): the
    resume keeps them so, where today's default keeps groups whole."""
    import yaml

    from segnet.runs.resume import changed_settings, recorded_overrides

    images = {"_target_": "segnet.data.images_datamodule.ImageFolderDataModule", "csv": "c.csv"}
    record = tmp_path / ".hydra"
    record.mkdir()
    (record / "config.yaml").write_text(yaml.safe_dump({"data": images}))
    (record / "overrides.yaml").write_text(yaml.safe_dump(["data=images", "data.csv=c.csv"]))
    # and its images at native size, where today's default reads large ones downscaled
    before = ["data.groups=false", "data.downscale=1"]
    assert recorded_overrides(tmp_path) == [*before, "data=images", "data.csv=c.csv"]
    now = {"data": {**images, "groups": False, "downscale": 1}}
    assert changed_settings({"data": images}, now) == []
    assert changed_settings({"data": images}, {"data": {**images, "groups": True}}) != []
    assert changed_settings({"data": images}, {"data": {**images, "downscale": "auto"}}) != []
    later = {**images, "groups": True, "downscale": "auto"}
    (record / "config.yaml").write_text(yaml.safe_dump({"data": later}))
    assert recorded_overrides(tmp_path) == ["data=images", "data.csv=c.csv"]


def test_a_resume_is_never_checked_against_its_own_record(tmp_path):
    """A checkpoint naming a record the run does not have (copied from another run): the
    resume's own record, which Hydra writes under that number, is no record to compare with."""
    from omegaconf import OmegaConf

    from segnet.runs.resume import check_same_settings
    from segnet.serving.checkpoints import CheckpointError

    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    torch.save({"segnet": {"config": ".hydra.1"}}, ckpt)
    for record, lr in ((".hydra", 0.1), (".hydra.1", 0.9)):  # .hydra.1: this resume's
        (run / record).mkdir()
        (run / record / "config.yaml").write_text(f"model: {{lr: {lr}}}\n")
    cfg = OmegaConf.create({"model": {"lr": 0.9}})
    with pytest.raises(CheckpointError, match=r"model.lr: 0.1 in the run, 0.9 now"):
        check_same_settings(cfg, run, str(ckpt), ".hydra.1")


def test_a_checkpoint_copied_out_of_its_run_resumes_only_with_its_settings(tmp_path):
    """No run record beside the checkpoint (a copy elsewhere, an Optuna trial's folder):
    the settings stored in the checkpoint are what a resume is compared with."""
    from omegaconf import OmegaConf

    from segnet.runs.resume import check_same_settings
    from segnet.serving.checkpoints import CheckpointError

    settings = {"model": {"optimizer": {"lr": 0.003}, "loss": {"lovasz": 1.0}}, "seed": 1}
    ckpt = tmp_path / "x.ckpt"
    torch.save({"segnet": {"config": ".hydra", "settings": settings}}, ckpt)
    changed = OmegaConf.create(
        {"model": {"optimizer": {"lr": 0.01}, "loss": {"lovasz": 0.0}}, "seed": 2}
    )
    with pytest.raises(CheckpointError) as refused:
        check_same_settings(changed, None, str(ckpt), None)
    message = str(refused.value)
    assert "the settings stored in the checkpoint" in message
    assert "model.optimizer.lr: 0.003 in the run, 0.01 now" in message
    assert "model.loss.lovasz: 1.0 in the run, 0.0 now" in message
    assert "seed" not in message.split("now")[-1]  # the seed may change
    check_same_settings(OmegaConf.create({**settings, "seed": 2}), None, str(ckpt), None)
    # a checkpoint from before checkpoints stored settings has nothing to compare with
    torch.save({"segnet": {"config": ".hydra"}}, ckpt)
    check_same_settings(changed, None, str(ckpt), None)


def test_a_run_of_the_flat_layout_resumes(tiny_camvid, tmp_path):
    """A run folder written before the package was arranged by role records its classes by
    the flat layout's modules (``segnet.module.SegmentationModule``): a resume takes them
    for the same classes, not for changed settings."""
    from segnet.runs.earlier_names import RENAMED

    run = tmp_path / "run"
    base = TINY_CAMVID + [f"data.root={tiny_camvid}", "test=false", "trainer.max_epochs=2"]
    with stopping_after(1):
        train(compose("train", base, run))
    last = run / "checkpoints" / "last.ckpt"
    ckpt = torch.load(last, weights_only=True)
    earlier = OmegaConf.to_yaml(ckpt["segnet"]["settings"])
    for old, new in RENAMED.items():  # as the flat layout wrote them
        earlier = earlier.replace(f"_target_: {new}.", f"_target_: {old}.")
    assert "_target_: segnet.module.SegmentationModule" in earlier
    ckpt["segnet"]["settings"] = OmegaConf.to_container(OmegaConf.create(earlier))
    torch.save(ckpt, last)
    metrics, _ = train(compose("train", base + [f"ckpt_path={last}"], tmp_path / "elsewhere"))
    assert torch.load(last, weights_only=True)["epoch"] == 1
    # a setting that did change is still named
    changed = base + [f"ckpt_path={last}", "model.optimizer.lr=0.5"]
    with pytest.raises(ValueError, match="model.optimizer.lr"):
        train(compose("train", changed, tmp_path / "again"))


def test_a_flip_spelt_otherwise_is_the_same_setting_as_its_format_reads_it():
    """``data.flip`` is compared as the run's data format reads it: for images ``true`` is
    both of their two axes, for volumes all three."""
    from segnet.runs.resume import changed_settings

    def data(target: str, flip) -> dict:
        return {"data": {"_target_": f"segnet.data.{target}", "flip": flip}}

    images = "images_datamodule.ImageFolderDataModule"
    volumes = "nifti_datamodule.NiftiDataModule"
    assert changed_settings(data(images, True), data(images, [1, 0])) == []
    assert changed_settings(data(images, True), data(images, [1])) == [("data.flip", True, [1])]
    assert changed_settings(data(volumes, True), data(volumes, [2, 1, 0])) == []
    assert changed_settings(data(volumes, True), data(volumes, [0, 1])) != []
