"""What a tracker missed, sent again from the run folder alone: ``segnet-replay <run>``.

A guarded tracker (:mod:`segnet.training.tracker_guard`) journals each record it is sent
in ``<run>/trackers/<tracker>.jsonl``, and whether it arrived. The replay sends, in their
order, the records that did not arrive (metrics at their own steps and times, settings,
files, pictures, the run's end) to the tracker run they were meant for, or to a new run in
the same experiment where that run was never opened, and journals each as sent: a replay
cut short by the tracker failing again goes on from there the next time.

MLflow is replayed; W&B keeps its own record of an offline or cut-off run, which
``wandb sync <run>/wandb`` uploads.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from segnet.files import write_text
from segnet.runs.records import TRACKERS_RECORD
from segnet.training.tracker_guard import JOURNALS, Journal, quick_mlflow_http, read_journal

log = logging.getLogger(__name__)

MLFLOW_STATUS = {"success": "FINISHED", "finished": "FINISHED", "failed": "FAILED"}


def sessions(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per session of a journal: where its tracker was (``address``) and its records not
    yet delivered (``pending``, in order)."""
    out: dict[int, dict[str, Any]] = {}
    delivered = {e["sent"] for e in lines if "sent" in e}
    for e in lines:
        part = out.setdefault(e.get("session", 1), {"address": {}, "pending": []})
        if "address" in e:
            part["address"].update(e["address"])
        elif "call" in e and e["seq"] not in delivered:
            part["pending"].append(e)
    # a missed picture's file, noted with its outcome
    pngs = {e["missed"]: e["png"] for e in lines if "missed" in e and e.get("png")}
    for part in out.values():
        for e in part["pending"]:
            if e["seq"] in pngs:
                e["png"] = pngs[e["seq"]]
    return out


def replay(run: Path) -> list[str]:
    """Send each tracker of ``run`` what it missed; returns a line per tracker session.
    Raises SystemExit naming the tracker where it fails again (what was sent stays sent)."""
    run = Path(run)
    journals = sorted((run / JOURNALS).glob("*.jsonl"))
    if not journals:
        raise SystemExit(
            f"{run}: no tracker journal ({JOURNALS}/*.jsonl): a run logs one for each "
            "tracker other than TensorBoard and CSV (logger=mlflow, wandb), so there is "
            "nothing to send from here"
        )
    quick_mlflow_http()  # a server still away is said in seconds, not after minutes of retries
    said = []
    for path in journals:
        journal = Journal(path)
        for session, part in sessions(read_journal(path)).items():
            said.append(replay_session(run, journal, session, part))
    update_tracker_record(run)
    return said


def replay_session(run: Path, journal: Journal, session: int, part: dict[str, Any]) -> str:
    address, pending = part["address"], part["pending"]
    name = f"{journal.path.name} (session {session})"
    if not pending:
        return f"{name}: the tracker has every record"
    kind = address.get("tracker")
    journal.session = session  # what the replay notes belongs to the session it sends
    if kind != "mlflow":
        hint = f"wandb sync {run / 'wandb'}" if kind == "wandb" else "its own tools"
        return f"{name}: {len(pending)} records missed; {kind} is not replayed here: use {hint}"
    sent = 0
    try:
        client, run_id = mlflow_run(address, run, journal)
        for entry in pending:
            replay_entry(client, run_id, entry, run)
            journal.outcome(entry["seq"], "sent", replayed=True)
            sent += 1
    except Exception as err:  # noqa: BLE001 - said with what is left, for a later replay
        raise SystemExit(
            f"{name}: {sent} of {len(pending)} records sent, then MLflow "
            f"({address.get('tracking_uri')}) failed: {type(err).__name__}: {err}. "
            "Run the same command again when it answers: it goes on from there."
        ) from None
    return f"{name}: sent {sent} records to MLflow run {run_id} ({address.get('tracking_uri')})"


def mlflow_run(address: dict[str, Any], run: Path, journal: Journal) -> tuple[Any, str]:
    """The MLflow client and the run the records were meant for; a new run in the same
    experiment where it was never opened (noted in the journal)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=address.get("tracking_uri"))
    run_id = address.get("run_id")
    if run_id:
        return client, run_id
    name = address.get("experiment_name") or "segnet"
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
    run_id = client.create_run(experiment_id, run_name=run.name).info.run_id
    address["run_id"] = run_id
    journal.note(address={"run_id": run_id}, opened_by="replay")
    return client, run_id


def replay_entry(client: Any, run_id: str, entry: dict[str, Any], run: Path) -> None:
    """One journalled record sent to the MLflow run ``run_id``, as the logger would have."""
    from mlflow.entities import Metric, Param

    call = entry["call"]
    if call == "metrics":
        step = entry.get("step") or 0
        # names as Lightning's MLflow logger cleans them
        metrics = [Metric(re.sub(r"[^a-zA-Z0-9_/. -]+", "", k), v, entry["time_ms"], step)
                   for k, v in entry["metrics"].items()]  # fmt: skip
        client.log_batch(run_id, metrics=metrics)
    elif call == "params":
        params = [Param(k, str(v)[:250]) for k, v in entry["params"].items()]
        for i in range(0, len(params), 100):  # MLflow's most per call
            client.log_batch(run_id, params=params[i : i + 100])
    elif call == "file":
        client.log_artifact(run_id, str(run / entry["path"]))
    elif call == "image" and entry.get("png"):
        client.log_artifact(run_id, str(run / entry["png"]), artifact_path=entry["tag"])
    elif call == "finalize":
        client.set_terminated(run_id, MLFLOW_STATUS.get(entry["status"], entry["status"]))
    # a picture still queued when its run was killed left no file: nothing to send


def update_tracker_record(run: Path) -> None:
    """``trackers.json`` brought up to date: each tracker's delivery as its journal has it
    now, and its run's id where the replay opened one."""
    path = run / TRACKERS_RECORD
    if not path.is_file():
        return
    record = json.loads(path.read_text())
    for address in record:
        delivery = address.get("delivery")
        if not delivery:
            continue
        lines = read_journal(run / delivery["journal"])
        last = max((e.get("session", 1) for e in lines), default=1)
        part = sessions(lines).get(last, {"address": {}, "pending": []})
        delivery["delivered"] = delivery["calls"] - len(part["pending"])
        delivery["complete"] = not part["pending"]
        if part["address"].get("run_id"):
            address["run_id"] = part["address"]["run_id"]
    write_text(path, json.dumps(record, indent=2) + "\n")
