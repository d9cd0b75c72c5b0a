"""Output folders that never overwrite what a user already has."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from segnet.commands import override

# What a finished train/evaluate/export run leaves in its folder.
RUN_PRODUCTS = ("metrics.json", "predictions", "checkpoints", "tensorboard", "model.json")


def existing_products(folder: str | Path) -> list[str]:
    folder = Path(folder)
    return [name for name in RUN_PRODUCTS if (folder / name).exists()]


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


def refuse_untrained_resume(ckpt_path: str | None, train: bool) -> None:
    """A resume that does not train would test the untrained network and write its scores
    over the checkpoint's run: testing a checkpoint is evaluate.py's job."""
    if ckpt_path and not train:
        raise ValueError(
            f"ckpt_path={ckpt_path} with train=false: to test a checkpoint, run "
            f"python evaluate.py {override('ckpt_path', ckpt_path)}"
        )


def resume_into_its_run(argv: list[str]) -> list[str]:
    """``train.py ckpt_path=<run>/checkpoints/x.ckpt``: a resume continues in the run the
    checkpoint belongs to. Return argv with ``hydra.run.dir=<run>`` added (unless it names
    that run already), so Hydra writes its log and config there rather than into a new,
    nearly empty folder; the run's previous ``.hydra/`` is kept as ``.hydra.<n>/`` (the
    config each part was run with). Any other argv is checked by
    :func:`refuse_existing_run_dir` and returned as is."""
    ckpt = next((a.split("=", 1)[1] for a in argv if a.startswith("ckpt_path=")), None)
    explicit = [run_dir_value(a) for a in argv if a.startswith("hydra.run.dir=")]
    if ckpt and ckpt not in ("null", "None"):
        train = next((a.split("=", 1)[1] for a in reversed(argv) if a.startswith("train=")), "")
        try:  # before the run's config is moved aside
            refuse_untrained_resume(ckpt, train.lower() not in ("false", "0", "no", "off"))
        except ValueError as refusal:
            raise SystemExit(str(refusal)) from None
        path = Path(ckpt).expanduser().resolve()
        run = path.parent.parent
        names_run = not explicit or Path(explicit[-1]).expanduser().resolve() == run
        in_a_run = names_run and path.is_file() and path.parent.name == "checkpoints"
        launched = launched_rank()
        if in_a_run and launched and any(run.glob(".hydra*")):
            # rank 0 moves the config aside; this process writes none (torchrun and SLURM
            # start every rank at once, and Lightning names its own subfolder for its ranks)
            subdir = (
                []
                if any(a.startswith("hydra.output_subdir=") for a in argv)
                else ["hydra.output_subdir=null"]
            )
            return [*argv, *([] if explicit else [f"hydra.run.dir={run}"]), *subdir]
        if in_a_run and not launched and (run / ".hydra").is_dir():
            n = 1
            while (run / f".hydra.{n}").exists():
                n += 1
            (run / ".hydra").rename(run / f".hydra.{n}")
            return argv if explicit else [*argv, f"hydra.run.dir={run}"]
    refuse_existing_run_dir(argv)
    return argv
