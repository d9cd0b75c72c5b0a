"""Output folders that never overwrite what a user already has."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from segnet.shell import hydra_value, override

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


# Whether this command has begun its work (training, a test, writing an export): a refusal
# after that keeps its run folder, whose log tells what was done
WORK = {"started": False}


def work_starts() -> None:
    WORK["started"] = True


def discard_refused_run(log_files: Sequence[Path]) -> Path | None:
    """After a refusal before any work (:func:`work_starts`): remove the new timestamped run
    folder when it holds
    nothing but Hydra's config record and the log of the refusal (``log_files``), so that
    refused commands leave no folders that look like runs. A folder the user named
    (``hydra.run.dir``, ``paths.output_dir``, a resume's run) is kept, as is one with
    anything else in it. Returns the folder removed, or None."""
    import shutil

    from hydra.core.hydra_config import HydraConfig

    if WORK["started"] or not HydraConfig.initialized() or launched_rank():
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


def refuse_untrained_resume(ckpt_path: str | None, train: bool) -> None:
    """A resume that does not train would test the untrained network and write its scores
    over the checkpoint's run: testing a checkpoint is evaluate.py's job."""
    if ckpt_path and not train:
        raise ValueError(
            f"ckpt_path={ckpt_path} with train=false: to test a checkpoint, run "
            f"python evaluate.py {override('ckpt_path', ckpt_path)}"
        )


def is_resume_record(name: str | None) -> bool:
    """Whether ``name`` is the config folder of a resumed part of a run (``.hydra.<n>``)."""
    return bool(name and re.fullmatch(r"\.hydra\.\d+", name))


def config_records(run: Path) -> list[Path]:
    """A run's config folders, oldest first: ``.hydra/`` (how it started), then
    ``.hydra.1/``, ``.hydra.2/``, ... (each resume's)."""
    numbered = [p for p in run.glob(".hydra.*") if is_resume_record(p.name) and p.is_dir()]
    first = [run / ".hydra"] if (run / ".hydra").is_dir() else []
    return first + sorted(numbered, key=lambda p: int(p.suffix[1:]))


def latest_config(run: Path, leave_out: str | None = None) -> Path | None:
    """The folder holding the config a run last trained with: the highest-numbered record
    (by name, not by file time, which a copy of the run changes), else ``.hydra/``.
    ``leave_out``: a record not to count (the one this process writes)."""
    found = [
        p for p in config_records(run) if (p / "config.yaml").is_file() and p.name != leave_out
    ]
    return found[-1] if found else None


# Overrides of a run's record that a resume does not take over: it names its checkpoint
# itself, and its weights come from that checkpoint
NOT_CARRIED = ("ckpt_path=", "init_from=", "+init_from=", "train=")


def checkpoint_record(ckpt: Path, run: Path) -> Path | None:
    """The config folder of the part of ``run`` that wrote ``ckpt`` (training records its
    name in the checkpoint), while it is there: the settings that checkpoint was trained
    with. Read in preference to the newest record, which another process of the same resume
    (rank 0, under torchrun) may be writing at this very moment. None for a checkpoint that
    does not say (written before it did, or outside a Hydra run)."""
    from segnet.serving.checkpoints import peek_checkpoint

    # unreadable: training says so, with the file named
    name = ((peek_checkpoint(ckpt) or {}).get("segnet") or {}).get("config")
    if name != ".hydra" and not is_resume_record(name):
        return None
    return run / name if (run / name / "config.yaml").is_file() else None


def recorded_overrides(run: Path, record: Path | None = None) -> list[str]:
    """The overrides the run trained with, as Hydra recorded them: in ``record`` (a config
    folder of the run), else in the newest."""
    import yaml

    record = record or latest_config(run)
    path = record / "overrides.yaml" if record else None
    if path is None or not path.is_file():
        return []
    return [o for o in yaml.safe_load(path.read_text()) or [] if not o.startswith(NOT_CARRIED)]


def one_per_key(argv: list[str]) -> list[str]:
    """Overrides given more than once (the run's record, then the resume's own) reduced to
    one per setting, where the first stood: the last value given, as Hydra would compose
    it, which then stays as short in the next part's record. A deletion (``~key``) is kept
    once; a value that an earlier ``+key=`` had added is written ``++key=`` (add or
    replace), as the plain form would need the key to exist already. Flags (``-m``,
    ``--config-path x``) stay as they are."""

    def key(arg: str) -> str | None:
        if arg.startswith("-") or not (arg.startswith("~") or "=" in arg):
            return None
        return arg.lstrip("+~").split("=", 1)[0]

    given: dict[str, list[str]] = {}
    for arg in argv:
        if key(arg) is not None:
            given.setdefault(key(arg), []).append(arg)
    out, seen = [], set()
    for arg in argv:
        k = key(arg)
        if k is None:
            out.append(arg)
            continue
        if k in seen:
            continue
        seen.add(k)
        last = given[k][-1]
        added = any(a.startswith("+") for a in given[k])
        if added and not last.startswith("~") and len(set(given[k])) > 1:
            last = "++" + last.lstrip("+")
        out.append(last)
    return out


def override_value(arg: str) -> str:
    """The value of a ``key=value`` argument as Hydra reads it: quotes, as in the commands
    this package prints (``'ckpt_path="/runs/lr 0.1/last.ckpt"'``) or Lightning's
    ``hydra.run.dir="<folder>"``, removed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        value = OverridesParser.create().parse_override(arg.lstrip("+")).value()
    except Exception:  # not Hydra's grammar: leave it to Hydra to say so
        value = arg.split("=", 1)[1]
    return str(value)


def resume_into_its_run(argv: list[str]) -> list[str]:
    """``train.py ckpt_path=<run>/checkpoints/x.ckpt``: a resume continues the run the
    checkpoint belongs to, as it was configured. Return argv with the run's recorded
    overrides put first (so ``ckpt_path=`` alone resumes a run of any experiment and
    overrides; those given now come after them and win), ``hydra.run.dir=<run>`` (so
    Hydra's log goes there rather than into a new, nearly empty folder) and
    ``hydra.output_subdir=.hydra.<n>`` (this part's config beside the earlier parts', none
    of them moved or written over). Any other argv is checked by
    :func:`refuse_existing_run_dir` and returned as is."""
    # the last of each, as Hydra takes it
    ckpt = next((override_value(a) for a in reversed(argv) if a.startswith("ckpt_path=")), None)
    explicit = [override_value(a) for a in argv if a.startswith("hydra.run.dir=")]
    if ckpt and ckpt not in ("null", "None"):
        train = next((a.split("=", 1)[1] for a in reversed(argv) if a.startswith("train=")), "")
        try:  # before anything is written into the run
            refuse_untrained_resume(ckpt, train.lower() not in ("false", "0", "no", "off"))
        except ValueError as refusal:
            raise SystemExit(str(refusal)) from None
        path = Path(ckpt).expanduser().resolve()
        run = path.parent.parent
        in_a_run = (
            path.is_file() and path.parent.name == "checkpoints" and bool(config_records(run))
        )
        if in_a_run and explicit and Path(explicit[-1]).expanduser().resolve() != run:
            raise SystemExit(
                f"ckpt_path={ckpt} resumes the run in {run}, and a resume goes on in its own "
                f"folder (its checkpoints, logs and metrics are there); leave out "
                f"hydra.run.dir={explicit[-1]}, or start a new run in that folder from these "
                "weights with init_from= instead of ckpt_path=."
            )
        run_dir = [] if explicit else [f"hydra.run.dir={hydra_value(run)}"]
        record = checkpoint_record(path, run) if in_a_run else None
        if in_a_run and launched_rank():
            # rank 0 writes this part's config, this process none; it composes the same
            # config as rank 0 (torchrun and SLURM start every rank with the user's argv)
            subdirs = [a.split("=", 1)[1] for a in argv if a.startswith("hydra.output_subdir=")]
            # Lightning's processes name theirs, after rank 0's .hydra.<n> in its argv
            own = subdirs and not is_resume_record(subdirs[-1])
            subdir = [] if own else ["hydra.output_subdir=null"]
            return one_per_key([*recorded_overrides(run, record), *argv, *run_dir, *subdir])
        if in_a_run:
            n = 1
            while (run / f".hydra.{n}").exists():
                n += 1
            this_part = f"hydra.output_subdir=.hydra.{n}"
            return one_per_key([*recorded_overrides(run, record), *argv, *run_dir, this_part])
    refuse_existing_run_dir(argv)
    return argv
