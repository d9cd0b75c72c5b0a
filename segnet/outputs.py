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


def resume_into_its_run(argv: list[str]) -> list[str]:
    """``train.py ckpt_path=<run>/checkpoints/x.ckpt``: a resume continues in the run the
    checkpoint belongs to. Return argv with ``hydra.run.dir=<run>`` added, so Hydra writes
    its log and config there rather than into a new, nearly empty folder; the run's
    previous ``.hydra/`` is kept as ``.hydra.<n>/`` (the config each part was run with).
    Any other argv is checked by :func:`refuse_existing_run_dir` and returned as is."""
    ckpt = next((a.split("=", 1)[1] for a in argv if a.startswith("ckpt_path=")), None)
    explicit = any(a.startswith("hydra.run.dir=") for a in argv)
    if ckpt and ckpt not in ("null", "None") and not explicit:
        path = Path(ckpt).expanduser().resolve()
        run = path.parent.parent
        if path.is_file() and path.parent.name == "checkpoints" and (run / ".hydra").is_dir():
            n = 1
            while (run / f".hydra.{n}").exists():
                n += 1
            (run / ".hydra").rename(run / f".hydra.{n}")
            return [*argv, f"hydra.run.dir={run}"]
    refuse_existing_run_dir(argv)
    return argv
