"""Multirun sweeps with a summary, Optuna search, SLURM launcher config."""

import csv

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
            "data.batch_size=2,3",
            f"hydra.sweep.dir={tmp_path}/sweep",
        ],
        cwd=REPO,
    )
    rows = list(csv.DictReader((tmp_path / "sweep" / "summary.csv").open()))
    assert len(rows) == 4
    assert {r["overrides"] for r in rows} == {
        f"model.optimizer.lr={lr} data.batch_size={bs}" for lr in ("0.01", "0.001") for bs in (2, 3)
    }
    assert all(0 <= float(r["val/miou_best"]) <= 1 for r in rows)
    assert len({r["dir"] for r in rows}) == 4
    assert "summary written to" in proc.stdout and "val/miou_best" in proc.stdout
    # every run logged its hparams, so TensorBoard shows them side by side
    for r in rows:
        assert list((tmp_path / "sweep" / r["job"] / "tensorboard").glob("events.*"))


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_optuna_search_in_memory_and_sqlite(tiny_camvid, tmp_path, storage):
    optuna = pytest.importorskip("optuna")
    from segnet.tune import run_study

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


def test_slurm_launcher_config_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from tests.conftest import compose_config

    cfg = compose_config("train", ["hydra/launcher=slurm_gpu", "trainer=ddp"], hydra=True)
    assert "SlurmLauncher" in cfg.hydra.launcher._target_
    assert cfg.hydra.launcher.tasks_per_node == cfg.hydra.launcher.gpus_per_node
    assert cfg.trainer.sync_batchnorm is True
