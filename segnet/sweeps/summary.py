"""Summary of a Hydra multirun: one row per job with its overrides and best metric, and
for a k-fold sweep (``data.fold=0,1,...``) one row per setting with its mean over folds."""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from segnet.serving.sweep_folders import FOLD_OVERRIDE, job_overrides, jobs_of
from segnet.shell import override

log = logging.getLogger(__name__)


def recorded_monitor(sweep_dir: Path) -> str:
    """The metric the jobs picked checkpoints by (``monitor: null`` means the dataset's
    own, which each job records in its metrics.json)."""
    for job in jobs_of(sweep_dir):
        path = job / "metrics.json"
        if path.is_file() and json.loads(path.read_text()).get("monitor"):
            return json.loads(path.read_text())["monitor"]
    return "val/miou"


def collect(sweep_dir: Path, monitor: str) -> list[dict[str, Any]]:
    """One row per job: the overrides that vary across the sweep, the best validation
    metric and the test metrics (overrides common to every job are left out)."""
    jobs = jobs_of(sweep_dir)
    overrides = {job: job_overrides(job) for job in jobs}
    common = set.intersection(*(set(o) for o in overrides.values())) if overrides else set()
    rows = []
    for job in jobs:
        row: dict[str, Any] = {
            "job": int(job.name),
            "overrides": " ".join(o for o in overrides[job] if o not in common),
        }
        fold = next((o for o in overrides[job] if o.startswith(FOLD_OVERRIDE)), "")
        number = fold[len(FOLD_OVERRIDE) :]
        if number.isdigit():
            row["fold"] = int(number)
            others = [o for o in overrides[job] if o not in common and o != fold]
            row["setting"] = " ".join(others) or "(the one)"
        metrics_file = job / "metrics.json"
        metrics = json.loads(metrics_file.read_text())["metrics"] if metrics_file.is_file() else {}
        row[f"{monitor}_best"] = metrics.get(f"{monitor}_best")  # None: failed or unfinished
        for key in sorted(metrics):
            if key.startswith("test/") and key.count("/") == 1:
                row[key] = metrics[key]
        row["dir"] = str(job)
        rows.append(row)
    return rows


def cross_validation(rows: list[dict[str, Any]], monitor: str) -> list[dict[str, Any]]:
    """One row per setting of a k-fold sweep (``data.fold=0,1,...`` with other overrides):
    how many folds finished, and the mean and sample standard deviation over those folds of
    the best validation metric and of each test metric. Settings are compared by the mean
    of held-out folds, not by one split."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if "fold" in row:
            groups.setdefault(row["setting"], []).append(row)
    summary = []
    for setting, members in groups.items():
        finished = [r for r in members if r.get(f"{monitor}_best") is not None]
        out: dict[str, Any] = {
            "setting": setting,
            "folds": " ".join(str(r["fold"]) for r in sorted(finished, key=lambda r: r["fold"])),
        }
        keys = [f"{monitor}_best"] + sorted(
            {k for r in finished for k in r if k.startswith("test/")}
        )
        for key in keys:
            values = np.array([r[key] for r in finished if r.get(key) is not None], dtype=float)
            out[f"{key}_mean"] = float(values.mean()) if len(values) else None
            out[f"{key}_std"] = float(values.std(ddof=1)) if len(values) > 1 else None
        summary.append(out)
    return summary


def plain_cells(row: dict[str, Any]) -> dict[str, str]:
    """A row for printing: numbers to four places, the job folder left out; a job without
    a best score (failed, or stopped before it validated) says so in that cell, the other
    cells it has no value for left blank."""
    cells = {
        c: "" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)
        for c, v in row.items()
        if c != "dir"
    }
    for column, value in row.items():
        if column.endswith("_best") and value is None:
            cells[column] = "none: failed, unfinished or never validated"
    return cells


def mean_and_spread(row: dict[str, Any]) -> dict[str, str]:
    """A cross-validation row for printing: one "mean ± std" cell per metric."""
    cells = {"setting": row["setting"], "folds": row["folds"]}
    for key in row:
        if key.endswith("_mean"):
            name = key[: -len("_mean")]
            mean, std = row[key], row[f"{name}_std"]
            cells[name] = (
                "" if mean is None else f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else "")
            )
    return cells


def write_table(
    rows: list[dict[str, Any]],
    path: Path,
    title: str,
    key: str,
    cells: Callable[[dict[str, Any]], dict[str, str]] = plain_cells,
    show: bool = True,
) -> None:
    """``rows`` as a CSV at ``path`` and, through ``cells``, as a printed table, best
    ``key`` first (rows without it last)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    if not show:
        return
    from rich.console import Console
    from rich.table import Table

    ranked = sorted(rows, key=lambda r: -(r.get(key) if r.get(key) is not None else -1e9))
    shown = [cells(row) for row in ranked]
    names = list(dict.fromkeys(c for row in shown for c in row))
    table = Table(title=title)
    for c in names:
        table.add_column(c)
    for row in shown:
        table.add_row(*(row.get(c, "") for c in names))
    Console(width=200).print(table)
    print(f"summary written to {path}")


def write_summary(sweep_dir: Path, monitor: str | None, show: bool = True) -> Path | None:
    """``summary.csv`` (and ``cross_validation.csv`` for folds) in the sweep folder, printed
    with the ensemble commands where ``show``."""
    monitor = monitor or recorded_monitor(sweep_dir)
    rows = collect(sweep_dir, monitor)
    if not rows:
        return None
    path = sweep_dir / "summary.csv"
    key = f"{monitor}_best"
    write_table(rows, path, f"sweep {sweep_dir} (best {monitor} first)", key, show=show)
    folds = cross_validation(rows, monitor)
    if folds:
        write_table(
            folds,
            sweep_dir / "cross_validation.csv",
            f"cross-validation: mean over folds of the best {monitor}, best first",
            f"{key}_mean",
            cells=mean_and_spread,
            show=show,
        )
        for setting, ckpts in fold_checkpoints(rows, monitor).items() if show else ():
            which = "the folds" if setting == "(the one)" else f"the {setting} folds"
            print(
                f"{which} as one model (segnet.serving.ensemble): python evaluate.py "
                f"{override('ckpt_path', ckpts)}"
            )
    return path


def fold_checkpoints(rows: list[dict[str, Any]], monitor: str) -> dict[str, list[str]]:
    """Per setting of a k-fold sweep, the best checkpoints of its finished folds, in fold
    order, where there are two or more: what an ensemble of that setting averages."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for row in rows:
        ckpt = Path(row["dir"]) / "checkpoints" / "best.ckpt"
        if "fold" in row and row.get(f"{monitor}_best") is not None and ckpt.is_file():
            groups.setdefault(row["setting"], []).append((row["fold"], str(ckpt)))
    return {s: [c for _, c in sorted(g)] for s, g in groups.items() if len(g) > 1}


class SweepSummary(Callback):
    """Hydra callback: after a multirun, write ``summary.csv`` in the sweep folder and print
    it; after each job of a multirun, write it without printing, so that a sweep that
    stops at a failed job (Hydra then skips the end) still has its finished jobs' results."""

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if str(config.hydra.mode) == "RunMode.MULTIRUN":
            write_summary(Path(config.hydra.sweep.dir), config.get("monitor"), show=False)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        write_summary(Path(config.hydra.sweep.dir), config.get("monitor"))
