"""Summary of a Hydra multirun: one row per job with its overrides and best metric."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


def jobs_of(sweep_dir: Path) -> list[Path]:
    return sorted(
        (p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
        key=lambda p: int(p.name),
    )


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
    overrides = {}
    for job in jobs:
        path = job / ".hydra" / "overrides.yaml"
        overrides[job] = yaml.safe_load(path.read_text()) if path.is_file() else []
    common = set.intersection(*(set(o) for o in overrides.values())) if overrides else set()
    rows = []
    for job in jobs:
        row: dict[str, Any] = {
            "job": int(job.name),
            "overrides": " ".join(o for o in overrides[job] if o not in common),
        }
        metrics_file = job / "metrics.json"
        metrics = json.loads(metrics_file.read_text())["metrics"] if metrics_file.is_file() else {}
        row[f"{monitor}_best"] = metrics.get(f"{monitor}_best")  # None: failed or unfinished
        for key in sorted(metrics):
            if key.startswith("test/") and key.count("/") == 1:
                row[key] = metrics[key]
        row["dir"] = str(job)
        rows.append(row)
    return rows


def write_summary(sweep_dir: Path, monitor: str | None) -> Path | None:
    monitor = monitor or recorded_monitor(sweep_dir)
    rows = collect(sweep_dir, monitor)
    if not rows:
        return None
    columns = list(dict.fromkeys(k for row in rows for k in row))
    path = sweep_dir / "summary.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"sweep {sweep_dir} (best {monitor} first)")
    shown = [c for c in columns if c != "dir"]
    for c in shown:
        table.add_column(c)
    key = f"{monitor}_best"
    for row in sorted(rows, key=lambda r: -(r.get(key) if r.get(key) is not None else -1e9)):
        table.add_row(
            *(
                f"{row[c]:.4f}" if isinstance(row.get(c), float) else str(row.get(c, ""))
                for c in shown
            )
        )
    Console(width=200).print(table)
    print(f"summary written to {path}")
    return path


class SweepSummary(Callback):
    """Hydra callback: after a multirun, write ``summary.csv`` in the sweep folder and print it."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        write_summary(Path(config.hydra.sweep.dir), config.get("monitor"))
