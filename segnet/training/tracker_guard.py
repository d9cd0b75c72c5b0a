"""A tracker that goes away (an MLflow server restarting, its network gone, its disk full)
never stops the training it only watches.

Every logger other than the run's own local records (TensorBoard, CSV) is *guarded*
(:func:`guard_loggers`):

- each call to it is caught; the first failure is named once, in the console and
  ``train.log``: which tracker, where, that training goes on, where the records are kept;
- a tracker on a server (MLflow over HTTP) is called from a thread of its own, so a slow or
  unreachable server never holds up a training step. While it fails, calls are not tried
  for ``RETRY_AFTER_S`` seconds, then tried again: a server that comes back gets the later
  records without a restart;
- what a tracker can be sent again (metrics, settings, files, pictures, the run's end) is
  written to a journal, ``<run>/trackers/<tracker>.jsonl``, with whether it was delivered,
  so that ``segnet-replay <run>`` sends what the tracker missed (:mod:`segnet.runs.replay`).

The journal's lines: ``{"seq": n, "call": "metrics" | "params" | "file" | "image" |
"finalize", ...}`` when a call is made, then ``{"sent": n}`` once the tracker took it, or
``{"missed": n, "error": "..."}`` (with ``"png"``, a picture's file kept for the replay);
``{"address": {...}}`` lines say where the tracker is (its run's id once it is opened).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from lightning.pytorch.utilities import rank_zero_only

log = logging.getLogger(__name__)

# how long a failing tracker is left alone before the next call tries it again
RETRY_AFTER_S = 30.0
# how long the end of a run waits for a tracker on a server to take what is queued
CLOSE_WAIT_S = 30.0
# MLflow's own HTTP retries: 7 tries over minutes by default, here a few seconds, as the
# guard retries later itself; a user's own setting of these variables wins
MLFLOW_HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
}
JOURNALS = "trackers"
# the loggers whose files are in the run folder itself: the run's own records
LOCAL_LOGGERS = ("TensorBoardLogger", "CSVLogger")
# Lightning's logger methods a guard catches (each is a no-op on ranks other than 0)
GUARDED = ("log_metrics", "log_hyperparams", "log_graph", "save", "finalize",
           "after_save_checkpoint")  # fmt: skip


def class_names(obj: Any) -> set[str]:
    return {c.__name__ for c in type(obj).__mro__}


def is_guarded(logger: Any) -> bool:
    return isinstance(getattr(logger, "_delivery", None), Delivery)


def mlflow_server(logger: Any) -> str | None:
    """The MLflow logger's server address, or None where it keeps a local store."""
    if "MLFlowLogger" not in class_names(logger):
        return None
    uri = str(getattr(logger, "_tracking_uri", "") or "")
    return uri if uri.split(":", 1)[0] in ("http", "https", "databricks") else None


def describe(logger: Any) -> tuple[str, str, dict[str, Any]]:
    """The tracker's short name (the journal's), how the console names it, and where it
    is as far as that is known before its run opens."""
    names = class_names(logger)
    if "MLFlowLogger" in names:
        uri = logger._tracking_uri
        address = {"tracker": "mlflow", "tracking_uri": uri,
                   "experiment_name": logger._experiment_name}  # fmt: skip
        return "mlflow", f"MLflow ({uri or 'the local store'})", address
    if "WandbLogger" in names:
        offline = bool(getattr(logger, "_offline", False))
        project = getattr(logger, "_project", None)
        address = {"tracker": "wandb", "project": project, "dir": str(logger.save_dir),
                   "offline": offline}  # fmt: skip
        mode = "offline" if offline else "online"
        return "wandb", f"W&B ({mode}, project {project})", address
    name = type(logger).__name__
    return name.lower(), name, {"tracker": name}


def open_mlflow_run(logger: Any) -> None:
    """The MLflow run opened (a call to the server), its id noted in the journal."""
    _ = logger.experiment
    logger._delivery.journal.note(address={"run_id": logger._run_id})


class Journal:
    """The append-only record of one tracker's calls, written as they are made. A resumed
    run appends to its run's journal as a new ``session`` (its tracker run may be another)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        earlier = read_journal(path)
        self._seq = max((e.get("seq", 0) for e in earlier), default=0)
        self.session = max((e.get("session", 0) for e in earlier), default=0) + 1
        if path.is_file() and not path.read_bytes().endswith(b"\n"):
            with path.open("a", encoding="utf-8") as f:  # after a line cut short by a kill
                f.write("\n")

    def add(self, entry: dict[str, Any]) -> int:
        with self._lock:
            self._seq += 1
            self._write({"seq": self._seq, "time_ms": int(time.time() * 1000), **entry})
            return self._seq

    def note(self, **fields: Any) -> None:
        """A line that is no call: where the tracker is (``address``), for the replay."""
        with self._lock:
            self._write(fields)

    def outcome(self, seq: int, status: str, **fields: Any) -> None:
        """``status``: "sent" or "missed"."""
        with self._lock:
            self._write({status: seq, **fields})

    def _write(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"session": self.session, **entry}, default=str) + "\n")


def read_journal(path: Path) -> list[dict[str, Any]]:
    """A journal's lines; a last line cut short (a run killed mid-write) is left out."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def short_error(err: BaseException) -> str:
    """The failure in a line: an HTTP client's nested message cut down to its cause
    (``[Errno 111] Connection refused``, ``ReadTimeoutError: Read timed out``)."""
    text = str(err).strip()
    errno = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    cause = re.search(r"Caused by (\w+)\((.*)", text)
    if errno:
        detail = errno.group(0)
    elif cause:
        # what follows the last "(host...): ", less the quote and brackets that close it
        reason = re.sub(r"[\"']\)+$", "", re.sub(r".*\): ", "", cause.group(2)))
        detail = f"{cause.group(1)}: {reason}"
    else:
        detail = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {detail[:200]}"


class Delivery:
    """Delivers one tracker's calls, from a thread of its own (``threaded``) or in place,
    never letting a failure out; counts what it was given and what arrived."""

    def __init__(self, label: str, journal: Journal, run_dir: Path, threaded: bool):
        self.label = label
        self.journal = journal
        self.run_dir = run_dir
        self.calls = self.sent = 0
        self.failures = 0
        self.last_error: str | None = None
        self._retry_at: float | None = None
        self._sending = threading.local()  # set while a call is on its way
        self._queue: queue.Queue | None = None
        self.thread: threading.Thread | None = None
        if threaded:
            self._queue = queue.Queue()
            self.thread = threading.Thread(target=self._work, name=f"tracker {label}", daemon=True)
            self.thread.start()

    def submit(self, send: Callable[[], Any], entry: dict[str, Any] | None = None,
               picture: np.ndarray | None = None) -> None:  # fmt: skip
        """``send`` the tracker something; ``entry`` (its journal line) makes it countable and
        replayable, ``picture`` is kept as a PNG file should it not arrive."""
        seq = self.journal.add(entry) if entry is not None else None
        if seq is not None:
            self.calls += 1
        item = (send, seq, picture, entry)
        if self._queue is not None:
            self._queue.put(item)
        else:
            self._deliver(item)

    def sending(self) -> bool:
        """Whether this thread is inside one of this tracker's calls (W&B's ``log_image``
        calls its own ``log_metrics``: that is part of the same call)."""
        return getattr(self._sending, "now", False)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._deliver(item)

    def _deliver(self, item: tuple) -> None:
        send, seq, picture, entry = item
        if self._retry_at is not None and time.monotonic() < self._retry_at:
            return self._missed(seq, picture, entry, self.last_error or "unreachable")
        self._sending.now = True
        try:
            send()
        except Exception as err:  # noqa: BLE001 - nothing a tracker raises may stop training
            self._failed(err)
            return self._missed(seq, picture, entry, self.last_error)
        finally:
            self._sending.now = False
        if self._retry_at is not None:
            log.warning("%s answers again: later records reach it", self.label)
            self._retry_at = None
        if seq is not None:
            self.sent += 1
            self.journal.outcome(seq, "sent")

    def _failed(self, err: Exception) -> None:
        self.failures += 1
        self.last_error = short_error(err)
        self._retry_at = time.monotonic() + RETRY_AFTER_S
        if self.failures == 1:
            log.warning(
                "%s failed (%s). Training goes on: this tracker is tried again every %d s, "
                "the run's own records are whole in %s (checkpoints, metrics.json, the "
                "local logs), and what the tracker misses is kept in %s; send it later with "
                "`segnet-replay %s`",
                self.label, self.last_error, RETRY_AFTER_S, self.run_dir,
                self.journal.path, self.run_dir,
            )  # fmt: skip

    def _missed(self, seq: int | None, picture: np.ndarray | None, entry: dict | None,
                error: str | None) -> None:  # fmt: skip
        if seq is None:
            return
        fields: dict[str, Any] = {"error": error}
        if picture is not None and entry is not None:
            fields["png"] = str(self._keep_picture(seq, picture, entry))
        self.journal.outcome(seq, "missed", **fields)

    def _keep_picture(self, seq: int, picture: np.ndarray, entry: dict) -> Path:
        from PIL import Image

        folder = self.journal.path.with_suffix("") / "pictures"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{seq:06d}" / entry["name"]  # the name the tracker would have had
        path.parent.mkdir(exist_ok=True)
        Image.fromarray(picture).save(path)
        return path.relative_to(self.run_dir)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Wait up to ``wait_s`` for the queued calls; what is still queued then is kept in
        the journal as missed (pictures as files), not sent."""
        if self._queue is None or self.thread is None:
            return
        self._queue.put(None)
        self.thread.join(wait_s)
        if not self.thread.is_alive():
            return
        while True:  # the thread is stuck in a call: take what it has not reached
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                _, seq, picture, entry = item
                self._missed(seq, picture, entry, "not sent before the run ended")

    def summary(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "delivered": self.sent,
            "complete": self.sent == self.calls,
            "journal": str(self.journal.path.relative_to(self.run_dir)),
            **({"last_error": self.last_error} if self.last_error else {}),
        }


def flat_params(params: Any, prefix: str = "") -> dict[str, str]:
    """Settings as MLflow and W&B take them: nested keys joined by ``/``, values as text."""
    if hasattr(params, "__dict__") and not isinstance(params, Mapping):
        params = vars(params)
    if not isinstance(params, Mapping):
        return {prefix.rstrip("/"): str(params)}
    out: dict[str, str] = {}
    for key, value in params.items():
        if isinstance(value, Mapping):
            out.update(flat_params(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out


def scalar(value: Any) -> Any:
    """A one-element tensor as a float (read now, on the training thread); else as given."""
    if hasattr(value, "numel") and value.numel() == 1:
        return float(value)
    return value


def journal_entry(method: str, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The journal's line for a logger call that can be sent again (None for the rest)."""
    if method == "log_metrics":
        metrics = args[0] if args else kwargs.get("metrics", {})
        step = args[1] if len(args) > 1 else kwargs.get("step")
        values = {k: v for k, v in metrics.items() if isinstance(v, int | float)}
        return {"call": "metrics", "metrics": values, "step": step} if values else None
    if method == "log_hyperparams":
        return {"call": "params", "params": flat_params(args[0] if args else kwargs["params"])}
    if method == "finalize":
        return {"call": "finalize", "status": args[0] if args else kwargs.get("status", "success")}
    return None


def guarded_call(method: str) -> Callable:
    def call(self, *args: Any, **kwargs: Any) -> None:
        original = getattr(super(type(self), self), method)
        if rank_zero_only.rank != 0 or self._delivery.sending():
            return original(*args, **kwargs)  # Lightning's own no-op there; a call's own
        if method == "log_metrics" and args:  # the values now, not as a later step leaves them
            args = ({k: scalar(v) for k, v in args[0].items()}, *args[1:])
        self._delivery.submit(
            lambda: original(*args, **kwargs), journal_entry(method, args, kwargs)
        )

    call.__name__ = method
    return call


def guarded_experiment(self) -> Any:
    """``experiment`` without a network call on the training thread: Lightning touches it
    as training is set up, where a tracker that does not answer would stop the run."""
    delivery, original = self._delivery, super(type(self), self)
    if threading.current_thread() is delivery.thread:
        return original.experiment  # a failure here is the delivery's to catch
    if delivery.thread is None:
        try:
            return original.experiment
        except Exception as err:  # noqa: BLE001 - the tracker failed, not the training
            delivery._failed(err)
            return None
    return original.experiment if getattr(self, "_initialized", False) else None


# MLflow's run id and experiment id as known so far, never fetched on the calling thread
# (the progress bar reads ``version`` at every step)
MLFLOW_PROPERTIES = {
    "version": property(lambda self: self._run_id),
    "name": property(lambda self: self._experiment_id),
}

_CLASSES: dict[type, type] = {}


def guarded_class(cls: type) -> type:
    """``cls`` with its calls guarded: a subclass with the same name and layout (so that an
    instance's class can be swapped in place), still a ``cls`` to Lightning and to the
    tracker adapters."""
    if cls not in _CLASSES:
        body: dict[str, Any] = {m: guarded_call(m) for m in GUARDED}
        body["experiment"] = property(guarded_experiment)
        if "MLFlowLogger" in {c.__name__ for c in cls.__mro__}:
            body.update(MLFLOW_PROPERTIES)
        _CLASSES[cls] = type(cls.__name__, (cls,), body)
    return _CLASSES[cls]


def quick_mlflow_http() -> None:
    """MLflow's HTTP retries and timeout short (``MLFLOW_HTTP_DEFAULTS``), unless the user
    has set them."""
    for key, value in MLFLOW_HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)


def guard_loggers(loggers: list[Any], run_dir: Path) -> list[Any]:
    """Each logger but the run's own local ones guarded in place (see the module's text);
    returns ``loggers``."""
    taken: set[str] = set()
    for logger in loggers:
        if class_names(logger) & set(LOCAL_LOGGERS) or is_guarded(logger):
            continue
        short, label, address = describe(logger)
        while short in taken:
            short += "_"
        taken.add(short)
        server = mlflow_server(logger)
        if server:
            quick_mlflow_http()
            # each of MLflow's HTTP retries is a warning of urllib3's; the guard names the
            # outage once, and these would fill the console while it lasts
            logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        journal = Journal(Path(run_dir) / JOURNALS / f"{short}.jsonl")
        logger._delivery = Delivery(label, journal, Path(run_dir), threaded=server is not None)
        logger.__class__ = guarded_class(type(logger))
        if rank_zero_only.rank == 0:
            journal.note(address=address)
            if "MLFlowLogger" in class_names(logger):
                # opened now (on its own thread for a server), before the first record
                logger._delivery.submit(lambda lg=logger: open_mlflow_run(lg))
    return loggers


def close_guards(loggers: list[Any], wait_s: float = CLOSE_WAIT_S) -> list[dict[str, Any]]:
    """Wait for each guarded tracker to take what is queued (at most ``wait_s`` seconds in
    all); returns, per tracker, what it was given and what it got."""
    deadline = time.monotonic() + wait_s
    out = []
    for logger in loggers:
        if is_guarded(logger):
            logger._delivery.close(max(0.0, deadline - time.monotonic()))
            out.append({"label": logger._delivery.label, **logger._delivery.summary()})
    return out
