"""Experiment trackers: logger=csv and logger=mlflow (against a real MLflow server on
127.0.0.1, started here) receive the scalars, the hyperparameters, the pictures and the
run's metrics.json, each in its own form; several loggers at once."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY_CAMVID, compose

TINY = [*TINY_CAMVID, "data.image_size=[24,32]", "trainer.max_epochs=1"]


def test_csv_logger_gets_scalars_hyperparameters_and_pictures(tiny_camvid, tmp_path):
    from segnet.commands.train import train

    cfg = compose(
        "train", [*TINY, f"data.root={tiny_camvid}", "logger=[csv,tensorboard]"], tmp_path
    )
    train(cfg)
    metrics = (tmp_path / "csv" / "metrics.csv").read_text()
    assert "val/miou" in metrics.splitlines()[0] and "test/miou" in metrics
    assert "model" in (tmp_path / "csv" / "hparams.yaml").read_text()
    pictures = sorted(p.name for p in (tmp_path / "csv" / "images").iterdir())
    assert any(p.startswith("val_predictions_step") for p in pictures), pictures
    assert any(p.startswith("test_confusion_matrix") for p in pictures), pictures
    assert (tmp_path / "tensorboard").is_dir()  # and the other logger alongside


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    pytest.importorskip("mlflow")
    exe = shutil.which("mlflow") or str(Path(sys.executable).with_name("mlflow"))
    if not Path(exe).exists():
        pytest.skip("the mlflow command is not installed")
    store = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{store}/mlflow.db",
         "--artifacts-destination", str(store / "artifacts"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=store,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("mlflow server exited at start")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow server did not start in 120 s")
    yield uri
    proc.terminate()
    proc.wait(timeout=30)


def test_mlflow_server_gets_metrics_params_pictures_and_metrics_json(
    tiny_camvid, tmp_path, mlflow_server, monkeypatch
):
    from mlflow.tracking import MlflowClient

    from segnet.commands.train import train

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = compose(
        "train",
        [*TINY, f"data.root={tiny_camvid}", "logger=mlflow",
         f"logger.mlflow.tracking_uri={mlflow_server}", "logger.mlflow.experiment_name=tests"],
        tmp_path,
    )  # fmt: skip
    train(cfg)
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("tests")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert "test/miou" in run.data.metrics and "val/miou" in run.data.metrics
    assert any(k.startswith("model") for k in run.data.params)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"metrics.json", "val", "test"} <= artifacts, artifacts
    local = client.download_artifacts(run.info.run_id, "metrics.json", str(tmp_path / "dl"))
    assert json.loads(Path(local).read_text())["split"] == "test"
    pictures = [a.path for a in client.list_artifacts(run.info.run_id, "val/predictions")]
    assert pictures and all(p.endswith(".png") for p in pictures)


def test_an_export_of_a_run_reaches_the_run_s_mlflow_run(
    tiny_camvid, tmp_path, mlflow_server, monkeypatch
):
    """The run records where its MLflow run is (trackers.json); exporting its checkpoint
    adds the exported model and its card to that run, under export/."""
    from mlflow.tracking import MlflowClient

    from segnet.commands.train import train
    from tests.conftest import REPO, run_cli

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "run"
    cfg = compose(
        "train",
        [*TINY, f"data.root={tiny_camvid}", "logger=[tensorboard,mlflow]",
         f"logger.mlflow.tracking_uri={mlflow_server}", "logger.mlflow.experiment_name=export"],
        run,
    )  # fmt: skip
    train(cfg)
    (record,) = json.loads((run / "trackers.json").read_text())
    assert record["tracker"] == "mlflow" and record["tracking_uri"] == mlflow_server
    out = run_cli(
        ["-m", "segnet.export", f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}",
         "formats=[safetensors]", f"hydra.run.dir={tmp_path / 'export'}"],
        cwd=REPO,
    )  # fmt: skip
    assert f"MLflow run {record['run_id']}" in out.stdout
    client = MlflowClient(mlflow_server)
    sent = {a.path for a in client.list_artifacts(record["run_id"], "export")}
    assert sent == {"export/model.json", "export/model.safetensors"}, sent


def test_an_unreachable_tracker_leaves_the_export_whole(tmp_path, caplog, monkeypatch):
    from segnet.runs.records import send_to_run_trackers, write_tracker_record

    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    address = {
        "tracker": "mlflow",
        "tracking_uri": f"http://127.0.0.1:{free_port()}",
        "run_id": "x",
    }
    write_tracker_record(tmp_path, [address])
    (tmp_path / "model.json").write_text("{}")
    assert send_to_run_trackers(tmp_path, [tmp_path / "model.json"], "export") == []
    assert "the mlflow run of" in caplog.text and "did not take the export" in caplog.text


def test_wandb_offline_gets_the_run_and_its_export(tiny_camvid, tmp_path, monkeypatch):
    """logger=wandb, offline as configured: the run's files are kept for ``wandb sync``,
    and an export of its checkpoint is saved with the same W&B run."""
    wandb = pytest.importorskip("wandb")
    from segnet.commands.train import train
    from tests.conftest import REPO, run_cli

    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    cfg = compose("train", [*TINY, f"data.root={tiny_camvid}", "logger=[tensorboard,wandb]"], run)
    train(cfg)
    wandb.finish()  # as the end of train.py's process does; this test goes on in it
    (record,) = json.loads((run / "trackers.json").read_text())
    assert record["tracker"] == "wandb" and record["offline"] is True
    (offline,) = (run / "wandb").glob(f"offline-run-*-{record['id']}")
    assert (offline / "files" / "metrics.json").is_file()
    out = run_cli(
        ["-m", "segnet.export", f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}",
         "formats=[safetensors]", f"hydra.run.dir={tmp_path / 'export'}"],
        cwd=REPO, env={"WANDB_SILENT": "true"},
    )  # fmt: skip
    assert f"W&B run {record['id']} (offline)" in out.stdout
    saved = {p.name for p in (run / "wandb").glob(f"offline-run-*-{record['id']}/files/*")}
    assert {"metrics.json", "model.json", "model.safetensors"} <= saved, saved


def test_a_tracker_that_fails_to_take_a_file_does_not_fail_the_run(caplog, monkeypatch):
    from segnet.training.callbacks import trackers as t

    class Broken(t.Tracker):
        def file(self, path):
            raise ConnectionError("server gone")

    monkeypatch.setattr(t, "trackers", lambda trainer: [Broken(object())])
    t.record_file(object(), Path("metrics.json"))  # returns: the run goes on
    assert "did not take metrics.json: server gone" in caplog.text
