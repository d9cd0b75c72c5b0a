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


def collect(sweep_dir: Path, monitor: str) -> list[dict[str, Any]]:
    rows = []
    jobs = [p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    for job in sorted(jobs, key=lambda p: int(p.name)):
        overrides_file = job / ".hydra" / "overrides.yaml"
        overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.is_file() else []
        row: dict[str, Any] = {"job": int(job.name), "overrides": " ".join(overrides)}
        metrics_file = job / "metrics.json"
        if metrics_file.is_file():
            metrics = json.loads(metrics_file.read_text())["metrics"]
            row[f"{monitor}_best"] = metrics.get(f"{monitor}_best")
            for key in sorted(metrics):
                if key.startswith("test/") and key.count("/") == 1:
                    row[key] = metrics[key]
        else:
            row[f"{monitor}_best"] = None  # failed or still running
        row["dir"] = str(job)
        rows.append(row)
    return rows


def write_summary(sweep_dir: Path, monitor: str) -> Path | None:
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
        write_summary(Path(config.hydra.sweep.dir), config.get("monitor", "val/miou"))
