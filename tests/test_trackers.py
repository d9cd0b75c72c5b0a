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

import lightning as L
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


def test_mlflow_without_a_server_keeps_a_local_store(tiny_camvid, tmp_path, monkeypatch):
    """logger=mlflow alone (the docs' first form): the local folder store, which MLflow 3
    refuses by default, takes the run."""
    pytest.importorskip("mlflow")
    from segnet.commands.train import train

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    cfg = compose(
        "train", [*TINY, f"data.root={tiny_camvid}", "logger=mlflow",
                  f"paths.log_dir={tmp_path / 'outputs'}"], tmp_path / "run",
    )  # fmt: skip
    train(cfg)
    (record,) = json.loads((tmp_path / "run" / "trackers.json").read_text())
    assert record["delivery"]["complete"] and record["run_id"]
    assert list((tmp_path / "outputs" / "mlruns").glob(f"*/{record['run_id']}/metrics/val"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mlflow_run_config(root, run, uri: str, loggers: str, experiment: str, *extra: str):
    """A tiny CamVid run logging to the MLflow server at ``uri``."""
    return compose(
        "train",
        [*TINY, f"data.root={root}", f"logger={loggers}", f"logger.mlflow.tracking_uri={uri}",
         f"logger.mlflow.experiment_name={experiment}", *extra],
        run,
    )  # fmt: skip


class MlflowServer:
    """A real ``mlflow server`` on 127.0.0.1 that a test can stop and start again (same
    port, same store)."""

    def __init__(self, store: Path, port: int | None = None):
        exe = shutil.which("mlflow") or str(Path(sys.executable).with_name("mlflow"))
        if not Path(exe).exists():
            pytest.skip("the mlflow command is not installed")
        self.exe, self.store, self.port = exe, store, port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self) -> MlflowServer:
        self.proc = subprocess.Popen(
            [self.exe, "server", "--host", "127.0.0.1", "--port", str(self.port),
             "--backend-store-uri", f"sqlite:///{self.store}/mlflow.db",
             "--artifacts-destination", str(self.store / "artifacts"), "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.store,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    pytest.fail("mlflow server exited at start")
                time.sleep(0.5)
        self.stop()
        pytest.fail("mlflow server did not start in 120 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    pytest.importorskip("mlflow")
    server = MlflowServer(tmp_path_factory.mktemp("mlflow")).start()
    yield server.uri
    server.stop()


@pytest.mark.slow
def test_mlflow_server_gets_metrics_params_pictures_and_metrics_json(
    tiny_camvid, tmp_path, mlflow_server, monkeypatch
):
    from mlflow.tracking import MlflowClient

    from segnet.commands.train import train

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = mlflow_run_config(tiny_camvid, tmp_path, mlflow_server, "mlflow", "tests")
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


@pytest.mark.slow
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
    cfg = mlflow_run_config(tiny_camvid, run, mlflow_server, "[tensorboard,mlflow]", "export")
    train(cfg)
    (record,) = json.loads((run / "trackers.json").read_text())
    assert record["tracker"] == "mlflow" and record["tracking_uri"] == mlflow_server
    assert record["delivery"]["complete"], record
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


@pytest.mark.slow
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
    assert record["delivery"]["complete"] and record["delivery"]["calls"] > 0, record
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


class Outage(L.Callback):
    """Runs ``ACTIONS[epoch]`` as that training epoch ends (a test's server stop or start)."""

    ACTIONS: dict = {}

    def on_train_epoch_end(self, trainer, pl_module):
        action = self.ACTIONS.get(trainer.current_epoch)
        if action is not None:
            action()


def metric_steps(client, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


@pytest.mark.slow
def test_an_mlflow_server_that_goes_away_and_comes_back_never_stops_training(
    tiny_camvid, tmp_path, monkeypatch, caplog
):
    """The server stops after the first epoch and starts again after the third: all five
    epochs train and test, the run's own records are whole, the outage is named once,
    records after the return reach the server, trackers.json says what was missed, and
    ``segnet-replay`` sends it, once."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from segnet.commands.train import train
    from segnet.runs.console import delivery_line
    from segnet.runs.replay import replay
    from segnet.training import tracker_guard

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(tracker_guard, "RETRY_AFTER_S", 0.5)
    (tmp_path / "store").mkdir()
    server = MlflowServer(tmp_path / "store").start()
    monkeypatch.setattr(Outage, "ACTIONS", {0: server.stop, 2: server.start})
    run = tmp_path / "run"
    cfg = mlflow_run_config(
        tiny_camvid, run, server.uri, "[csv,mlflow]", "outage",
        "trainer.max_epochs=5", "+callbacks.outage._target_=tests.test_trackers.Outage",
    )  # fmt: skip
    try:
        metrics, _ = train(cfg)
        assert "test/miou" in metrics
        assert (run / "checkpoints" / "last.ckpt").is_file()
        assert json.loads((run / "metrics.json").read_text())["epochs_trained"] == 5
        csv_rows = (run / "csv" / "metrics.csv").read_text()
        assert csv_rows.count("\n") > 5  # the local record has every epoch's line
        failed = [r for r in caplog.records if "Training goes on" in r.getMessage()]
        assert len(failed) == 1 and server.uri in failed[0].getMessage()
        assert "answers again" in caplog.text
        record = next(r for r in json.loads((run / "trackers.json").read_text()))
        delivery = record["delivery"]
        assert 0 < delivery["delivered"] < delivery["calls"] and not delivery["complete"]
        summary = delivery_line({"label": "MLflow", **delivery}, run)  # the summary's line
        assert "missed" in summary and f"segnet-replay {run}" in summary

        client = MlflowClient(server.uri)
        steps_before = metric_steps(client, record["run_id"], "val/loss")
        assert len(steps_before) < 5  # the outage's epochs are missing ...
        assert max(steps_before) == max(metric_steps(client, record["run_id"], "train/loss_epoch"))
        assert client.get_run(record["run_id"]).info.status == "FINISHED"  # ... not the end

        said = replay(run)
        assert any("sent" in line for line in said), said
        assert len(metric_steps(client, record["run_id"], "val/loss")) == 5
        assert json.loads((run / "trackers.json").read_text())[0]["delivery"]["complete"]
        assert all("every record" in line for line in replay(run))  # nothing sent twice
        assert len(metric_steps(client, record["run_id"], "val/loss")) == 5
    finally:
        server.stop()


@pytest.mark.slow
def test_a_tracker_down_from_the_start_is_replayed_into_a_new_run(
    tiny_camvid, tmp_path, monkeypatch
):
    """No server answers during the run: it trains and tests; ``segnet-replay`` (the
    console script) later opens the run in the named experiment and sends everything."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from segnet.commands.train import train
    from tests.conftest import run_cli

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "store").mkdir()
    server = MlflowServer(tmp_path / "store")  # not started yet
    run = tmp_path / "run"
    cfg = mlflow_run_config(tiny_camvid, run, server.uri, "mlflow", "late")
    metrics, _ = train(cfg)
    assert "test/miou" in metrics and (run / "metrics.json").is_file()
    (record,) = json.loads((run / "trackers.json").read_text())
    assert record["run_id"] is None and record["delivery"]["delivered"] == 0
    replay_cli = str(Path(sys.executable).with_name("segnet-replay"))
    refused = subprocess.run([replay_cli, str(run)], capture_output=True, text=True)
    assert refused.returncode != 0 and "Run the same command again" in refused.stderr
    server.start()
    try:
        out = run_cli(["-m", "segnet.commands.replay", str(run)], cwd=tmp_path)
        assert "sent" in out.stdout
        client = MlflowClient(server.uri)
        (mlrun,) = client.search_runs([client.get_experiment_by_name("late").experiment_id])
        assert "test/miou" in mlrun.data.metrics and mlrun.info.status == "FINISHED"
        assert "metrics.json" in {a.path for a in client.list_artifacts(mlrun.info.run_id)}
    finally:
        server.stop()


def test_a_delivery_names_its_first_failure_once_and_tries_again_later(tmp_path, caplog):
    from segnet.training.tracker_guard import Delivery, Journal, read_journal

    delivery = Delivery("T (somewhere)", Journal(tmp_path / "t.jsonl"), tmp_path, threaded=False)
    up = {"now": False}
    got = []

    def send(i):
        if not up["now"]:
            raise ConnectionError("refused")
        got.append(i)

    clock = [100.0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("segnet.training.tracker_guard.time.monotonic", lambda: clock[0])
        for i in range(3):  # the first fails, the next two wait out the retry interval
            delivery.submit(lambda i=i: send(i), {"call": "metrics", "metrics": {"a": i}})
        up["now"] = True
        delivery.submit(lambda: send(3), {"call": "metrics", "metrics": {"a": 3}})
        clock[0] += 31  # past the retry interval: tried again, and taken
        delivery.submit(lambda: send(4), {"call": "metrics", "metrics": {"a": 4}})
    assert got == [4]
    assert caplog.text.count("Training goes on") == 1 and "answers again" in caplog.text
    assert delivery.summary()["calls"] == 5 and delivery.summary()["delivered"] == 1
    lines = read_journal(tmp_path / "t.jsonl")
    assert sorted(e["missed"] for e in lines if "missed" in e) == [1, 2, 3, 4]


def test_a_journal_resumed_goes_on_counting_in_a_new_session(tmp_path):
    from segnet.runs.replay import sessions
    from segnet.training.tracker_guard import Journal, read_journal

    first = Journal(tmp_path / "t.jsonl")
    first.outcome(first.add({"call": "metrics", "metrics": {"a": 1}}), "sent")
    first.add({"call": "metrics", "metrics": {"a": 2}})
    with (tmp_path / "t.jsonl").open("a") as f:
        f.write('{"session": 1, "seq": 3, "ca')  # a line cut short by a kill
    second = Journal(tmp_path / "t.jsonl")
    assert second.session == 2 and second.add({"call": "finalize", "status": "success"}) == 3
    parts = sessions(read_journal(tmp_path / "t.jsonl"))
    assert [e["seq"] for e in parts[1]["pending"]] == [2]
    assert [e["seq"] for e in parts[2]["pending"]] == [3]


def test_a_server_that_never_answers_does_not_hold_up_training(tiny_camvid, tmp_path, monkeypatch):
    """A tracker whose server accepts connections and never answers (a network black hole):
    its calls wait out MLflow's timeout on the tracker's own thread, not the training's;
    the run trains, tests and records that the tracker got nothing."""
    pytest.importorskip("mlflow")
    from segnet.commands.train import train
    from segnet.training import tracker_guard

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setattr(tracker_guard, "CLOSE_WAIT_S", 2.0)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # accepts (the kernel does), never reads nor answers
    uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
    run = tmp_path / "run"
    cfg = mlflow_run_config(tiny_camvid, run, uri, "[csv,mlflow]", "segnet", "trainer.max_epochs=3")
    try:
        metrics, _ = train(cfg)
    finally:
        silent.close()
    assert "test/miou" in metrics and (run / "checkpoints" / "last.ckpt").is_file()
    (record,) = json.loads((run / "trackers.json").read_text())
    delivery = record["delivery"]
    assert delivery["delivered"] == 0 and record["run_id"] is None
    assert delivery["calls"] >= 10 and "timed out" in delivery["last_error"].lower(), delivery
