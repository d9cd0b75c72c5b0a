"""A multirun folder as Hydra lays it out: one numbered folder per job, each with the
overrides it ran with. Read by ensembles (a sweep of folds evaluated or exported as one)
and by the sweep's summary; light to import (no torch), as Hydra's sweep callbacks load
it at every start."""

from __future__ import annotations

from pathlib import Path

FOLD_OVERRIDE = "data.fold="


def jobs_of(sweep_dir: Path) -> list[Path]:
    return sorted(
        (p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
        key=lambda p: int(p.name),
    )


def job_overrides(job: Path) -> list[str]:
    """A multirun job's command-line overrides, as Hydra recorded them."""
    import yaml

    path = job / ".hydra" / "overrides.yaml"
    return (yaml.safe_load(path.read_text()) or []) if path.is_file() else []
