"""Output folders that never overwrite what a user already has."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# What a train/evaluate/export run leaves in its folder: a volume run's split record, a
# single model's export and an ensemble's (ensemble.json and a member_<i>/ folder per
# model) included.
RUN_PRODUCTS = (
    "metrics.json", "per_case.csv", "predictions", "checkpoints", "tensorboard",
    "splits.json", "model.json", "model.safetensors", "model.onnx", "model.pt2",
    "ensemble.json",
)  # fmt: skip


def existing_products(folder: str | Path) -> list[str]:
    folder = Path(folder)
    found = [name for name in RUN_PRODUCTS if (folder / name).exists()]
    if folder.is_dir():  # an ensemble export's members, also one stopped part-way
        found += sorted(p.name for p in folder.glob("member_*") if p.is_dir())[:1]
    return found


def refuse_run_folder_in_use(folder: str | Path, what: str, also: str = "") -> None:
    """Stop ``what`` (a new training run, an evaluation) before any work when ``folder``
    already holds a run's outputs; ``also`` adds another way out (a resume)."""
    found = existing_products(folder)
    if found:
        raise FileExistsError(
            f"{folder} already holds a run's outputs ({', '.join(found)}); {what} never "
            "overwrites them. Name a new run folder (hydra.run.dir= or paths.output_dir=), or "
            f"leave it out for a new timestamped one{also}."
        )


# Set by the launchers that start the processes of a multi-process run: Lightning's DDP
# (for the processes it starts besides rank 0), torchrun and SLURM.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")


def launched_rank() -> bool:
    """Whether this process is one a launcher started besides global rank 0. Its argv
    names rank 0's run folder (already checked, and filling up): it must neither refuse
    that folder nor move its config aside again."""
    return any(os.environ.get(name, "0") != "0" for name in RANK_VARIABLES)


def run_dir_value(arg: str) -> str:
    # Lightning hands its DDP processes hydra.run.dir="<folder>", quotes included
    return arg.split("=", 1)[1].strip("\"'")


def is_multirun(argv: Sequence[str]) -> bool:
    return any(a in ("-m", "--multirun", "hydra.mode=MULTIRUN") for a in argv)


def refuse_torchrun_without_run_dir(argv: Sequence[str]) -> None:
    """Under torchrun every process composes its own config: without a run folder named on
    the command line each would open its own timestamped folder (logs and configs spread
    over as many folders as processes, the checkpoints in rank 0's alone)."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
    if not under_torchrun or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    if any(a.startswith("hydra.run.dir=") for a in argv):
        return
    raise SystemExit(
        "under torchrun each process would open its own timestamped run folder: give every "
        "node the same one, e.g. hydra.run.dir=outputs/train/runs/<name> (or "
        "paths.output_dir=<folder>)."
    )


def refuse_existing_sweep_dir(argv: Sequence[str]) -> None:
    """A multirun into a ``hydra.sweep.dir`` that holds an earlier sweep: Hydra would write
    each job's config over that job's folder before the job could refuse it, relabelling
    the earlier runs' checkpoints and metrics with the new overrides."""
    if not is_multirun(argv):
        return
    for arg in argv:
        if not arg.startswith("hydra.sweep.dir="):
            continue
        folder = Path(run_dir_value(arg)).expanduser()
        if not folder.is_dir():
            continue
        jobs = sorted(d.name for d in folder.iterdir() if d.is_dir() and existing_products(d))
        if jobs or (folder / "multirun.yaml").exists():
            held = (
                f"runs in {', '.join(jobs[:3])}{'...' if len(jobs) > 3 else ''}"
                if jobs
                else "multirun.yaml"
            )
            raise SystemExit(
                f"hydra.sweep.dir={folder} already holds a sweep ({held}); a new sweep "
                "never overwrites it. Name a new folder, or leave hydra.sweep.dir out for a "
                "new timestamped one."
            )


def refuse_existing_run_dir(argv: Sequence[str]) -> None:
    """``hydra.run.dir=<folder>`` pointing at a folder that already holds a run's outputs:
    stop before Hydra writes its ``.hydra/`` and log there, and before any work. (Default
    run folders are new, timestamped to the microsecond.)"""
    refuse_torchrun_without_run_dir(argv)
    if launched_rank():
        return
    refuse_existing_sweep_dir(argv)
    for arg in argv:
        if arg.startswith("hydra.run.dir="):
            try:
                refuse_run_folder_in_use(Path(run_dir_value(arg)).expanduser(), "this run")
            except FileExistsError as refusal:  # a message, not a traceback, on the CLI
                raise SystemExit(str(refusal)) from None


def output_dir_as_run_dir(argv: Sequence[str]) -> list[str]:
    """``paths.output_dir=<folder>`` names the run folder: return argv with it given as
    ``hydra.run.dir=<folder>`` instead. ``paths.output_dir`` follows Hydra's run folder, so
    overriding it alone would put checkpoints and TensorBoard there but the log and the
    ``.hydra/`` config in a timestamped folder of their own; a multirun would put every
    job in the one folder, so there it is refused in favour of ``hydra.sweep.dir``."""
    key = "paths.output_dir="
    given = [a for a in argv if a.lstrip("+").startswith(key)]
    if not given:
        return list(argv)
    folder = given[-1].lstrip("+")[len(key) :]
    if is_multirun(argv):
        raise SystemExit(
            f"paths.output_dir={folder} would put every job of a multirun in one folder; set "
            "hydra.sweep.dir=<folder> instead (each job gets a numbered subfolder there)."
        )
    run_dirs = [a.split("=", 1)[1] for a in argv if a.startswith("hydra.run.dir=")]
    if run_dirs and Path(run_dirs[-1]).expanduser() != Path(folder).expanduser():
        raise SystemExit(
            f"paths.output_dir={folder} and hydra.run.dir={run_dirs[-1]} name different run "
            "folders; give one of them."
        )
    rest = [a for a in argv if a not in given]
    return rest if run_dirs else [*rest, f"hydra.run.dir={folder}"]


@dataclass
class Work:
    """Whether a command has begun its work (training, a test, writing an export): a
    refusal after that keeps its run folder, whose log tells what was done. Each command
    has its own, passed to what starts the work."""

    started: bool = False

    def starts(self) -> None:
        self.started = True


def discard_refused_run(log_files: Sequence[Path], work: Work) -> Path | None:
    """After a refusal before any work (``work`` not started): remove the new timestamped run
    folder when it holds
    nothing but Hydra's config record and the log of the refusal (``log_files``), so that
    refused commands leave no folders that look like runs. A folder the user named
    (``hydra.run.dir``, ``paths.output_dir``, a resume's run) is kept, as is one with
    anything else in it. Returns the folder removed, or None."""
    import shutil

    from hydra.core.hydra_config import HydraConfig

    if work.started or not HydraConfig.initialized() or launched_rank():
        return None
    hydra = HydraConfig.get()
    if any(o.split("=", 1)[0].lstrip("+~") == "hydra.run.dir" for o in hydra.overrides.hydra):
        return None
    folder = Path(hydra.runtime.output_dir)
    logs = {Path(f).name for f in log_files if Path(f).parent == folder}
    if not folder.is_dir() or {p.name for p in folder.iterdir()} - logs - {".hydra"}:
        return None
    shutil.rmtree(folder)
    return folder
