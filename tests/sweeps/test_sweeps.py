"""Multirun sweeps with a summary, Optuna search, SLURM launcher config."""

import csv
import json

import pytest

from tests.conftest import REPO, TINY_CAMVID, compose, run_cli


def test_multirun_grid_writes_a_summary(tiny_camvid, tmp_path):
    proc = run_cli(
        [
            "train.py",
            "-m",
            *TINY_CAMVID,
            f"data.root={tiny_camvid}",
            "trainer.max_epochs=1",
            "model.optimizer.lr=0.01,0.001",
            f"hydra.sweep.dir={tmp_path}/sweep",
        ],
        cwd=REPO,
    )
    # two jobs (a grid of several keys is summarised the same way: the fake sweeps below)
    rows = list(csv.DictReader((tmp_path / "sweep" / "summary.csv").open()))
    assert len(rows) == 2
    assert {r["overrides"] for r in rows} == {"model.optimizer.lr=0.01", "model.optimizer.lr=0.001"}
    assert all(0 <= float(r["val/miou_best"]) <= 1 for r in rows)
    assert len({r["dir"] for r in rows}) == 2
    assert "summary written to" in proc.stdout and "val/miou_best" in proc.stdout
    # every run logged its hparams, so TensorBoard shows them side by side
    for r in rows:
        assert list((tmp_path / "sweep" / r["job"] / "tensorboard").glob("events.*"))


@pytest.mark.slow
def test_a_sweep_that_stops_at_a_failed_job_keeps_the_finished_jobs_summary(tiny_camvid, tmp_path):
    """Hydra skips the end of a multirun whose job failed: the summary is written after
    each job, so the finished jobs' results are in summary.csv all the same. (A split the
    data does not have is found when the job reads its data: the checks before the sweep
    starts read none.)"""
    with pytest.raises(AssertionError, match="data.split='nope': this data has no such split"):
        run_cli(
            ["train.py", "-m", *TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=1",
             "data.split=test,nope", f"hydra.sweep.dir={tmp_path}/sweep"],
            cwd=REPO,
        )  # fmt: skip
    rows = {r["job"]: r for r in csv.DictReader((tmp_path / "sweep" / "summary.csv").open())}
    assert 0 <= float(rows["0"]["val/miou_best"]) <= 1
    assert rows["1"]["val/miou_best"] == ""  # failed before training


@pytest.mark.slow  # a multirun from the command line (about 25 s); the check's logic is below
def test_a_value_only_a_later_job_has_stops_the_sweep_before_the_first_job(tiny_camvid, tmp_path):
    """Every job's config is checked before the first job starts: a bad value in the last
    job is named, with its job, and nothing trains or is written."""
    sweep = tmp_path / "sweep"
    with pytest.raises(AssertionError) as failed:
        run_cli(
            ["train.py", "-m", *TINY_CAMVID, f"data.root={tiny_camvid}", "trainer.max_epochs=1",
             "model.optimizer.lr=0.01,0.001", "data.image_size=[24,32],[0,32]",
             f"hydra.sweep.dir={sweep}"],
            cwd=REPO,
        )  # fmt: skip
    message = str(failed.value)
    assert (
        "sweep job 1 (model.optimizer.lr=0.01 data.image_size=[0,32]): data.image_size" in message
    )
    assert "No job was started" in message and "Traceback" not in message
    assert not sweep.exists()


def test_the_checks_before_a_sweep_expand_its_jobs_and_leave_the_random_state(
    tiny_camvid, tmp_path
):
    """Jobs are the command line's lists crossed with hydra.sweeper.params' (a search's
    continuous ranges left at the configured value); checking a job's config draws no
    random number the jobs would otherwise draw."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf

    from segnet.runs.checks import check_job_config
    from segnet.sweeps.preflight import job_override_lists

    config = OmegaConf.create(
        {
            "hydra": {
                "overrides": {"task": ["a=1,2", "b=x", "~c"]},
                "sweeper": {"params": {"d": "choice(3,4)", "e": "interval(0.1,1.0)"}},
            }
        }
    )
    jobs = job_override_lists(config)
    assert sorted(map(tuple, jobs)) == sorted(
        ("d=" + d, "a=" + a, "b=x", "~c") for d in "34" for a in "12"
    )
    cfg = compose("train", [*TINY_CAMVID, f"data.root={tiny_camvid}"], tmp_path / "run")
    torch.manual_seed(0)
    np.random.seed(0)
    check_job_config(cfg)  # builds the network, with random weights
    after = torch.rand(3), np.random.rand(3)
    torch.manual_seed(0)
    np.random.seed(0)
    assert torch.equal(after[0], torch.rand(3)) and np.array_equal(after[1], np.random.rand(3))
    bad = compose("train", [*TINY_CAMVID, f"data.root={tiny_camvid}", "model.loss.ce=-1"], tmp_path)
    with pytest.raises(ValueError, match="model.loss="):
        check_job_config(bad)
    # a monitor validation does not report (per-case Dice on CamVid): found before any job
    bad = compose("train", [*TINY_CAMVID, f"data.root={tiny_camvid}", "monitor=val/dice"], tmp_path)
    with pytest.raises(ValueError, match="monitor=val/dice: validation does not report it"):
        check_job_config(bad)


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_optuna_search_in_memory_and_sqlite(tiny_camvid, tmp_path, storage):
    optuna = pytest.importorskip("optuna")
    from segnet.sweeps.study import run_study

    url = f"sqlite:///{tmp_path}/study.db" if storage == "sqlite" else "null"
    cfg = compose(
        "train",
        TINY_CAMVID
        + [
            f"data.root={tiny_camvid}",
            "trainer.max_epochs=1",
            "hparams_search=camvid_optuna",
            "optuna.n_trials=2",
            f"optuna.storage={url}",
            # and the dataset's own monitor (val/miou), which training resolves
            *(["monitor=null"] if storage == "memory" else []),
        ],
        tmp_path / "run",
    )
    study = run_study(cfg)
    assert len(study.trials) == 2
    assert all(0 <= t.value <= 1 for t in study.trials)
    assert (tmp_path / "run" / "trial_0" / "checkpoints" / "best.ckpt").is_file()
    if storage == "sqlite":  # the study persists and can be reopened elsewhere
        again = optuna.load_study(study_name="camvid", storage=url)
        assert len(again.trials) == 2 and again.best_value == study.best_value
        # continued, it draws new values, not its first trial's again (same seed)
        first = [t.params for t in again.trials]
        more = compose(
            "train",
            TINY_CAMVID + [f"data.root={tiny_camvid}", "trainer.max_epochs=1",
                           "hparams_search=camvid_optuna", "optuna.n_trials=1",
                           f"optuna.storage={url}"],
            tmp_path / "more",
        )  # fmt: skip
        continued = run_study(more)
        assert len(continued.trials) == 3
        assert continued.trials[2].params not in first


def test_a_misspelt_search_parameter_is_refused_before_any_trial(tiny_camvid, tmp_path):
    pytest.importorskip("optuna")
    from omegaconf import open_dict

    from segnet.sweeps.study import run_study

    cfg = compose(
        "train",
        TINY_CAMVID + [f"data.root={tiny_camvid}", "hparams_search=camvid_optuna"],
        tmp_path / "run",
    )  # fmt: skip
    with open_dict(cfg):  # as a search config's line would read
        cfg.optuna.params["model.optimiser.lr"] = {"type": "float", "low": 1e-3, "high": 1e-2}
    with pytest.raises(ValueError, match=r"optuna.params.model.optimiser.lr: this config has no"):
        run_study(cfg)
    assert not (tmp_path / "run" / "trial_0").exists()


def test_slurm_launcher_config_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from tests.conftest import compose_config

    cfg = compose_config("train", ["hydra/launcher=slurm_gpu", "trainer=ddp"], hydra=True)
    assert "SlurmLauncher" in cfg.hydra.launcher._target_
    assert cfg.hydra.launcher.tasks_per_node == cfg.hydra.launcher.gpus_per_node
    assert cfg.trainer.sync_batchnorm is True


def _fake_job(sweep, job, overrides, best, test_dice):
    """A finished job's files as train.py leaves them (overrides and metrics.json)."""
    folder = sweep / str(job)
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    metrics = {} if best is None else {"val/dice_best": best, "test/dice": test_dice}
    (folder / "metrics.json").write_text(json.dumps({"monitor": "val/dice", "metrics": metrics}))


def pasted_ckpt_paths(printed: str, which: str) -> list[str]:
    """The checkpoints of the ``evaluate.py`` command printed for ``which``, as a shell and
    Hydra's override parser read it once pasted."""
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser

    (line,) = [x for x in printed.splitlines() if x.startswith(f"{which} as one model")]
    (word,) = shlex.split(line.split("python evaluate.py ", 1)[1])
    return OverridesParser.create().parse_override(word).value()


def test_k_fold_sweep_is_summarised_per_setting(tmp_path, capsys):
    from segnet.sweeps.summary import write_summary

    sweep = tmp_path / "sweep,x=(1) y"  # the printed commands must survive , = ( ) and a space
    jobs = [  # two settings x three folds; one job of the second setting did not finish
        (["data.fold=0", "model.optimizer.lr=0.01"], 0.80, 0.70),
        (["data.fold=1", "model.optimizer.lr=0.01"], 0.84, 0.74),
        (["data.fold=2", "model.optimizer.lr=0.01"], 0.88, 0.78),
        (["data.fold=0", "model.optimizer.lr=0.001"], 0.90, 0.80),
        (["data.fold=1", "model.optimizer.lr=0.001"], None, None),
        (["data.fold=2", "model.optimizer.lr=0.001"], 0.86, 0.76),
    ]
    for job, (overrides, best, test) in enumerate(jobs):
        _fake_job(sweep, job, ["experiment=hippocampus_unet3d", *overrides], best, test)
        if best is not None:
            (sweep / str(job) / "checkpoints").mkdir()
            (sweep / str(job) / "checkpoints" / "best.ckpt").touch()
    write_summary(sweep, None)
    printed = capsys.readouterr().out
    assert "cross-validation" in printed
    # each setting's finished folds, as one ensemble command that a shell and Hydra read
    # back as the list of checkpoints
    ckpts = lambda *jobs: [f"{sweep}/{j}/checkpoints/best.ckpt" for j in jobs]  # noqa: E731
    assert pasted_ckpt_paths(printed, "the model.optimizer.lr=0.01 folds") == ckpts(0, 1, 2)
    assert pasted_ckpt_paths(printed, "the model.optimizer.lr=0.001 folds") == ckpts(3, 5)
    rows = {r["setting"]: r for r in csv.DictReader((sweep / "cross_validation.csv").open())}
    assert set(rows) == {"model.optimizer.lr=0.01", "model.optimizer.lr=0.001"}
    high, low = rows["model.optimizer.lr=0.01"], rows["model.optimizer.lr=0.001"]
    assert high["folds"] == "0 1 2" and low["folds"] == "0 2"
    assert float(high["val/dice_best_mean"]) == pytest.approx(0.84)
    assert float(high["val/dice_best_std"]) == pytest.approx(0.04)  # sample std of .80 .84 .88
    assert float(high["test/dice_mean"]) == pytest.approx(0.74)
    assert float(low["val/dice_best_mean"]) == pytest.approx(0.88)
    # the per-job table still lists every job, with its fold
    per_job = list(csv.DictReader((sweep / "summary.csv").open()))
    assert len(per_job) == 6 and {r["fold"] for r in per_job} == {"0", "1", "2"}
    # the job without a result says so in the printed table (blank in the CSV)
    assert printed.count("none: failed, unfinished or never validated") == 1
    assert sum(r["val/dice_best"] == "" for r in per_job) == 1


def test_sweep_without_folds_writes_no_cross_validation(tmp_path):
    from segnet.sweeps.summary import write_summary

    sweep = tmp_path / "sweep"
    _fake_job(sweep, 0, ["model.optimizer.lr=0.01"], 0.5, 0.4)
    _fake_job(sweep, 1, ["model.optimizer.lr=0.001"], 0.6, 0.5)
    write_summary(sweep, None)
    assert (sweep / "summary.csv").is_file()
    assert not (sweep / "cross_validation.csv").exists()


def test_k_fold_sweep_of_one_setting(tmp_path, capsys):
    from segnet.sweeps.summary import write_summary

    sweep = tmp_path / "sweep"
    for fold, best in enumerate((0.8, 0.9)):
        _fake_job(sweep, fold, ["experiment=hippocampus_unet3d", f"data.fold={fold}"], best, 0.7)
    (sweep / "1" / "checkpoints").mkdir()
    (sweep / "1" / "checkpoints" / "best.ckpt").touch()
    write_summary(sweep, "val/dice")
    # one fold has a checkpoint: no ensemble of one to suggest
    assert "as one model" not in capsys.readouterr().out
    (row,) = csv.DictReader((sweep / "cross_validation.csv").open())
    assert row["setting"] == "(the one)" and row["folds"] == "0 1"
    assert float(row["val/dice_best_mean"]) == pytest.approx(0.85)


def parallel_fold_sweep(root, sweep, folds: str, epochs: int = 2, *extra: str):
    return [
        "train.py", "-m", "hydra/launcher=parallel", "experiment=hippocampus_unet3d",
        f"data.root={root}", f"data.fold={folds}", "data.num_folds=2", *extra,
        "data.patch_size=[16,16,16]", "data.batch_size=2", "data.num_workers=0",
        "data.test_fraction=0.2", "model.net.features=[4,8,8]", f"trainer.max_epochs={epochs}",
        "trainer.accelerator=cpu", f"hydra.sweep.dir='{sweep}'",
    ]  # fmt: skip


@pytest.mark.slow
def test_parallel_launcher_runs_each_job_as_its_own_run(tmp_path):
    """hydra/launcher=parallel: every job is the run `train.py <its overrides>` would be, in
    its numbered folder, with the sweep's hydra.* overrides, and the sweep is summarised as
    with the basic launcher."""
    import yaml

    from tests.helpers import nifti_dataset

    root = nifti_dataset(tmp_path / "data", "msd", n=10)
    sweep = tmp_path / "sweep,a=(1)"  # characters Hydra would misread in an unquoted value
    proc = run_cli([*parallel_fold_sweep(root, sweep, "0,1"), "hydra.job.name=folds"], cwd=REPO)
    for job in ("0", "1"):
        folder = sweep / job
        assert (folder / "checkpoints" / "best.ckpt").is_file()
        assert f"data.fold={job}" in (folder / ".hydra" / "overrides.yaml").read_text()
        hydra_cfg = yaml.safe_load((folder / ".hydra" / "hydra.yaml").read_text())["hydra"]
        assert hydra_cfg["job"]["name"] == "folds" and hydra_cfg["mode"] == "RUN"
        assert "best checkpoint" in (folder / "console.log").read_text()
    assert len(list(csv.DictReader((sweep / "summary.csv").open()))) == 2
    assert "the folds as one model (segnet.serving.ensemble)" in proc.stdout


@pytest.mark.slow
def test_parallel_launcher_names_a_failed_job_and_finishes_the_others(tmp_path):
    import subprocess
    import sys

    from tests.helpers import nifti_dataset

    root = nifti_dataset(tmp_path / "data", "msd", n=10)
    sweep, missing = tmp_path / "sweep", tmp_path / "nope.ckpt"
    proc = subprocess.run(
        # a file only the job looks for (the sweep's check reads no files): job 1 fails
        [sys.executable, *parallel_fold_sweep(root, sweep, "0", 2, f"ckpt_path=null,{missing}")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"its output is in {sweep / '1' / 'console.log'}" in proc.stderr + proc.stdout
    assert f"ckpt_path='{missing}': no such file" in (sweep / "1" / "console.log").read_text()
    assert "Traceback" not in proc.stderr  # Hydra prints the message, not its own frames
    assert (sweep / "0" / "checkpoints" / "best.ckpt").is_file()
    (finished,) = [r for r in csv.DictReader((sweep / "summary.csv").open()) if r["job"] == "0"]
    assert 0 <= float(finished["val/dice_best"]) <= 1


@pytest.mark.slow  # a parallel sweep stopped mid-training (about 40 s)
def test_ctrl_c_reaches_each_parallel_job_once_and_each_saves(tmp_path):
    """Ctrl+C at the launcher: it passes the signal on to the running jobs, waits while
    each saves its last.ckpt, and says how to resume each with its own overrides."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import nifti_dataset

    root = nifti_dataset(tmp_path / "data", "msd", n=10)
    sweep = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, *parallel_fold_sweep(root, sweep, "0,1", epochs=500)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # as from a terminal: a test run started in the background (`cmd &` in a script)
        # ignores SIGINT, and a process inherits that, so Ctrl+C would never reach Python
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    consoles = [sweep / job / "console.log" for job in ("0", "1")]
    deadline = time.time() + 300
    while not all(c.is_file() and "epoch 1 " in c.read_text() for c in consoles):
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline, "the jobs did not start training"
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # to the launcher alone, as a terminal's Ctrl+C is
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    for job in ("0", "1"):
        saved = sweep / job / "checkpoints" / "last.ckpt"
        assert saved.is_file()
        assert f"data.fold={job}" in out and f"ckpt_path={saved}" in out, out[-3000:]
        # the job stopped once, saving, not at once on a second Ctrl+C
        assert "interrupted: saved" in (sweep / job / "console.log").read_text()
    # the sweep's table, of the jobs as they stopped
    assert len(list(csv.DictReader((sweep / "summary.csv").open()))) == 2


def test_an_interrupted_sweep_says_how_to_run_the_jobs_it_had_not_started(tmp_path):
    from hydra_plugins.segnet_parallel.launcher import interrupted_message

    waiting = [(2, ["experiment=hippocampus_unet3d", "data.fold=2"], tmp_path / "sweep" / "2")]
    message = interrupted_message({}, {}, waiting)
    line = message.splitlines()[1]
    assert line.startswith("  job 2 had not started; to run it: python ")
    assert "experiment=hippocampus_unet3d data.fold=2" in line
    assert f"hydra.run.dir={tmp_path / 'sweep' / '2'}" in line


def test_parallel_launcher_spreads_jobs_over_the_listed_gpus(monkeypatch):
    from hydra_plugins.segnet_parallel.launcher import ParallelLauncher, visible_device

    launcher = ParallelLauncher(n_jobs=3, gpus=[0, 1])
    assert launcher.gpu_for([]) == 0
    assert launcher.gpu_for([0]) == 1
    assert launcher.gpu_for([1]) == 0  # job on GPU 0 ended first: its GPU is free again
    assert launcher.gpu_for([0, 1]) == 0
    assert ParallelLauncher(n_jobs=2).gpu_for([None]) is None
    # indices count among the GPUs this process sees (a cluster's allocation)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_device(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert [visible_device(0), visible_device(1)] == ["2", "3"]
    with pytest.raises(Exception, match="leaves 2 visible"):
        visible_device(2)
    with pytest.raises(ValueError, match="n_jobs=0"):
        ParallelLauncher(n_jobs=0)
    # a listed GPU the machine does not have: refused, not run on the CPU in silence
    from hydra_plugins.segnet_parallel.launcher import check_gpus

    monkeypatch.setattr("torch.cuda.device_count", lambda: 1)
    check_gpus([0])
    check_gpus(None)
    with pytest.raises(Exception, match=r"gpus=\[0, 1\]: this machine has 1 GPU\(s\).*GPU 1 is"):
        check_gpus([0, 1])
    monkeypatch.setattr("torch.cuda.device_count", lambda: 0)
    with pytest.raises(Exception, match="this machine has no GPU"):
        check_gpus([0])
