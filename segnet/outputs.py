"""Output folders that never overwrite what a user already has."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# What a finished train/evaluate/export run leaves in its folder.
RUN_PRODUCTS = ("metrics.json", "predictions", "checkpoints", "tensorboard", "model.json")


def existing_products(folder: str | Path) -> list[str]:
    folder = Path(folder)
    return [name for name in RUN_PRODUCTS if (folder / name).exists()]


def refuse_existing_run_dir(argv: Sequence[str]) -> None:
    """``hydra.run.dir=<folder>`` pointing at a folder that already holds a run's outputs:
    stop before Hydra writes its ``.hydra/`` and log there, and before any work. (Default
    run folders are new, timestamped to the microsecond.)"""
    for arg in argv:
        if arg.startswith("hydra.run.dir="):
            folder = Path(arg.split("=", 1)[1]).expanduser()
            found = existing_products(folder)
            if found:
                raise SystemExit(
                    f"hydra.run.dir={folder} already holds a run's outputs ({', '.join(found)}); "
                    "nothing there is overwritten. Choose a new folder, or leave hydra.run.dir "
                    "out for a new timestamped one."
                )
