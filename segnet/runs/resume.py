"""Resume, in one place: ``train.py ckpt_path=<run>/checkpoints/last.ckpt`` continues
that run as it was configured, so that its checkpoints, curves and metrics describe one
training.

- The command line (:func:`resume_into_its_run`): the run's recorded overrides come first,
  the run's folder is Hydra's, and this part's config is recorded beside the earlier ones.
- The settings (:func:`check_same_settings`): a change to one that shapes the training
  (the table in ``segnet.runs.settings`` says which) is refused, each named.
- The checkpoint (:func:`check_start_checkpoints`): of this model and data, planned for
  this many epochs, not finished, the run's latest; and once restored, the learning-rate
  schedule planned for this many steps (:func:`resumed_schedule_check`).
- A resume refused before it trains removes its config record again
  (:func:`forget_config_of_refused_resume`).

All before any data is read. The command line's part runs before Hydra, so that
``--help`` answers at once: torch, Lightning and the checkpoint readers are imported in
the functions that need them."""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from segnet.data.settings import AS_BEFORE_THEY_EXISTED
from segnet.runs.earlier_names import current_name
from segnet.runs.folders import Work, launched_rank, refuse_existing_run_dir
from segnet.runs.settings import data_format, resume_may_change, table
from segnet.shell import hydra_value, override

log = logging.getLogger(__name__)

# -- the command line: a resume goes on in its run, with the run's overrides ----------


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
    folder of the run), else in the newest; and for each setting of
    ``AS_BEFORE_THEY_EXISTED`` its run's data took and did not record, the value it had."""
    import yaml

    record = record or latest_config(run)
    path = record / "overrides.yaml" if record else None
    if path is None or not path.is_file():
        return []
    recorded = [o for o in yaml.safe_load(path.read_text()) or [] if not o.startswith(NOT_CARRIED)]
    config_file = record / "config.yaml"
    config = yaml.safe_load(config_file.read_text()) if config_file.is_file() else None
    data = (config or {}).get("data") or {}
    earlier = [
        f"data.{key}={str(value).lower()}"
        for key, value in AS_BEFORE_THEY_EXISTED.items()
        if "_target_" in data and key not in data and takes(data["_target_"], key)
    ]
    return [*earlier, *recorded]


def takes(target: str, key: str) -> bool:
    """Whether the DataModule class ``target`` names takes the setting ``key``."""
    from hydra.utils import get_class

    try:
        return default_of(get_class(current_name(target)), key) is not UNSET
    except (ImportError, ValueError, AttributeError):
        return False


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
        in_a_run = run_folder_of(path) is not None
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


def resume_dir(ckpt_path: str | None) -> Path | None:
    """The run directory a checkpoint belongs to (``<run>/checkpoints/x.ckpt``), if any."""
    if not ckpt_path:
        return None
    ckpt = Path(ckpt_path).expanduser().resolve()
    if not ckpt.is_file():
        raise FileNotFoundError(f"ckpt_path={ckpt_path!r}: no such file.")
    return run_folder_of(ckpt)


def run_folder_of(ckpt: Path) -> Path | None:
    """The run folder a checkpoint file belongs to, ``<run>/checkpoints/<name>.ckpt`` in a
    folder train.py made: one holding its config records (``.hydra/``, ``.hydra.<n>/``) or,
    where the config was not recorded (``hydra.output_subdir=null``), its TensorBoard
    logs. None for a checkpoint anywhere else (a copy, an Optuna trial's)."""
    run = ckpt.parent.parent
    made_by_train = bool(config_records(run)) or (run / "tensorboard").is_dir()
    return run if ckpt.is_file() and ckpt.parent.name == "checkpoints" and made_by_train else None


# -- the settings: what shapes the training stays as the run had it -------------------


UNSET = object()  # a setting one of the two configs does not have


def flat(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` for every leaf of a nested config (a dict or list value of
    a leaf kind, such as ``features: [16, 32]``, is one leaf)."""
    if isinstance(config, dict) and config:
        for key, value in config.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], config


def default_of(data: Any, name: str) -> Any:
    """The default of a DataModule's argument ``name`` (UNSET: none, or no such one)."""
    import inspect

    try:
        parameter = inspect.signature(data).parameters.get(name)
    except (TypeError, ValueError):
        return UNSET
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return UNSET
    return parameter.default


def meaning(key: str, value: Any, data: Any = None) -> Any:
    """A setting's value as training takes it, where several spellings mean the same
    (``data.flip``: true, [0,1,2] and [2,1,0] alike, as the run's data format reads it:
    ``data`` is its DataModule class)."""
    if key.endswith("_target_") and isinstance(value, str):
        # a class named by an earlier version's module (segnet.module.SegmentationModule)
        return current_name(value)
    if value is UNSET and key == "model.net.pools":
        return None  # a network recorded before pools existed halved every axis
    if value is UNSET and key.startswith("data.") and key[5:] in AS_BEFORE_THEY_EXISTED:
        return AS_BEFORE_THEY_EXISTED[key[5:]]  # what the run did
    if value is UNSET and key.startswith("data.") and key.count(".") == 1 and data is not None:
        # a data setting added after the run was recorded: its default is what the run had
        default = default_of(data, key.removeprefix("data."))
        return value if default is UNSET else default
    if key == "data.flip" and data is not None:
        try:
            axes = data.axes_of_flip(value)
        except ValueError:  # the DataModule says what is wrong with it
            return value
        return value if axes is None else axes
    return value


def changed_settings(recorded: dict, now: dict) -> list[tuple[str, Any, Any]]:
    """``(key, recorded value, value now)`` for each setting a resume may not change."""
    before, after = dict(flat(recorded)), dict(flat(now))
    data = data_format(now)
    rows = table(data)
    return [
        (key, before.get(key, UNSET), after.get(key, UNSET))
        for key in sorted(before.keys() | after.keys())
        if not resume_may_change(key, rows)
        and meaning(key, before.get(key, UNSET), data) != meaning(key, after.get(key, UNSET), data)
    ]


def check_same_settings(
    cfg: DictConfig, run: Path | None, ckpt_path: str, this_part: str | None
) -> None:
    """Refuse a resume from ``ckpt_path`` whose config differs from the one its run last
    trained with in a setting that shapes the training: the run folder's record, or where
    there is none (a checkpoint copied out of its run, an Optuna trial's folder) the
    settings the checkpoint stores. ``run``: the checkpoint's run folder, None outside one;
    ``this_part``: the config folder Hydra wrote for this resume (``.hydra.<n>``), not a
    record to compare with."""
    import yaml

    from segnet.serving.checkpoints import CheckpointError, peek_checkpoint

    ckpt = Path(ckpt_path).expanduser().resolve()
    record = None
    if run is not None:
        # the record of the part that wrote the checkpoint (not one another rank is
        # writing), never this resume's own (a checkpoint naming a record the run no
        # longer had)
        record = checkpoint_record(ckpt, run)
        if record is None or record.name == this_part:
            record = latest_config(run, leave_out=this_part)
    if record is not None:
        recorded = yaml.safe_load((record / "config.yaml").read_text()) or {}
        source = str(record / "config.yaml")
        advice = "leave these out (the run's own overrides are applied for you)"
    else:
        recorded = ((peek_checkpoint(ckpt) or {}).get("segnet") or {}).get("settings")
        if recorded is None:
            return  # written before checkpoints stored their settings: nothing to compare
        source = "the settings stored in the checkpoint; no run record beside it"
        advice = "give the settings it was trained with"
    now = OmegaConf.to_container(cfg, resolve=False)
    changes = changed_settings(recorded, now)
    if not changes:
        return
    shown = "\n  ".join(
        f"{key}: {describe(before)} in the run, {describe(after)} now"
        for key, before, after in changes[:10]
    )
    more = f"\n  ... and {len(changes) - 10} more" if len(changes) > 10 else ""
    raise CheckpointError(
        f"ckpt_path={ckpt_path} resumes a run that trained with other settings "
        f"({source}):\n  {shown}{more}\n"
        f"A resume goes on as its run was configured: {advice}. To train with them, start "
        f"a new run from these weights: {override('init_from', ckpt_path)} instead of "
        "ckpt_path (a fresh optimizer and schedule)."
    )


def describe(value: Any) -> str:
    return "unset" if value is UNSET else repr(value)


# -- the checkpoint: of this model, planned for this length, the run's latest ---------


def check_start_checkpoints(cfg: DictConfig, dm: Any) -> dict[str, Any] | None:
    """``ckpt_path`` (resume) and ``init_from`` (a new run from a checkpoint's weights):
    readable, of this model and dataset, and for a resume of the same planned length.
    Runs before any data is read. Returns the ``init_from`` checkpoint, if any."""
    from segnet.serving.checkpoints import (
        check_same_model,
        check_same_spacing,
        expected_model,
        read_checkpoint,
    )

    ckpt_path, init_from = cfg.get("ckpt_path"), cfg.get("init_from")
    if ckpt_path and init_from:
        raise ValueError(
            "ckpt_path= resumes a run and init_from= starts a new one from a checkpoint's "
            "weights: give one of them."
        )
    from segnet.runs.building import planned_net

    net = planned_net(OmegaConf.to_container(cfg.model.net, resolve=True), dm.info())
    expected = expected_model(net, dm.info())
    if ckpt_path:
        ckpt = read_checkpoint(ckpt_path, "ckpt_path")
        expected = keep_unplanned_network(cfg, ckpt, expected, dm.info())
        check_same_model(ckpt, expected, ckpt_path, "ckpt_path")
        check_same_spacing(ckpt, dm.info(), ckpt_path)
        check_same_length(ckpt, cfg.trainer.get("max_epochs"), ckpt_path)
        check_not_finished(ckpt, cfg.trainer.get("max_epochs"), ckpt_path)
        check_latest(ckpt, ckpt_path)
        return None
    if init_from:
        ckpt = read_checkpoint(init_from, "init_from")
        check_same_model(ckpt, expected, init_from, "init_from")
        return ckpt
    return None


def keep_unplanned_network(
    cfg: DictConfig, ckpt: dict[str, Any], expected: dict[str, Any], info: Any
) -> dict[str, Any]:
    """A resume of a run whose network was built as configured, before this version
    planned its poolings from the training patch (a volume UNet on thick slices, or on a
    small patch): it goes on with that network, pinned in ``cfg`` (every axis halved at
    every level) so that the module is built so, said in the log. Returns what the run
    builds."""
    from segnet.serving.checkpoints import expected_model, model_differences

    configured = OmegaConf.to_container(cfg.model.net, resolve=True)
    unplanned = expected_model(configured, info)
    if not model_differences(ckpt, expected) or model_differences(ckpt, unplanned):
        return expected
    levels = len(configured["features"]) - 1
    with open_dict(cfg):
        cfg.model.net.pools = [[2] * info.spatial_dims] * levels
    log.info(
        "resuming a network built as configured (model.net.features=%s, every axis halved "
        "at every level), as its run was: this version would plan %s",
        configured["features"],
        expected["net"],
    )
    return unplanned


# Scheduler state keys that fix the length of the schedule at creation time.
def check_same_length(ckpt: dict[str, Any], max_epochs: int | None, path: str | Path) -> None:
    """Resuming under a learning-rate schedule planned for another length would run past
    its end (a zero or undefined learning rate): stop and say what to do instead."""
    from segnet.serving.checkpoints import CheckpointError
    from segnet.training.module import SCHEDULE_LENGTH_ARGS

    planned = (ckpt.get("segnet") or {}).get("max_epochs")
    schedules = ckpt.get("lr_schedulers") or []
    fixed = any(any(k in s for k in SCHEDULE_LENGTH_ARGS) for s in schedules)
    if not fixed or planned is None or planned == max_epochs:
        return
    raise CheckpointError(
        f"ckpt_path={str(path)!r} belongs to a run planned for trainer.max_epochs={planned}, "
        f"and its learning-rate schedule ends there; this resume asks for {max_epochs}.\n"
        f"  To finish that run: resume with trainer.max_epochs={planned}.\n"
        f"  To train on with a new schedule over {max_epochs} epochs: start a new run from its "
        f"weights with init_from={path} (instead of ckpt_path)."
    )


def check_not_finished(ckpt: dict[str, Any], max_epochs: int | None, path: str | Path) -> None:
    """A resume of a run that has trained all its epochs would train nothing, then test
    again and write its metrics over the run's: say how to test it, or train it on."""
    from segnet.serving.checkpoints import CheckpointError

    progress = ((ckpt.get("loops") or {}).get("fit_loop") or {}).get("epoch_progress") or {}
    done = (progress.get("current") or {}).get("processed")
    if max_epochs is None or max_epochs < 0 or done is None or done < max_epochs:
        return
    best = Path(path).expanduser().parent / "best.ckpt"
    raise CheckpointError(
        f"ckpt_path={str(path)!r} is the end of its run: all {done} epochs of "
        f"trainer.max_epochs={max_epochs} are trained, so a resume has nothing to train.\n"
        f"  To test it: python evaluate.py {override('ckpt_path', best)}\n"
        f"  To train it on: a new run from its weights, {override('init_from', path)} "
        "instead of ckpt_path (or, where the run has no learning-rate schedule, resume with "
        "a larger trainer.max_epochs)."
    )


def check_latest(ckpt: dict[str, Any], path: str | Path) -> None:
    """A resume from an earlier checkpoint of a run (``best.ckpt``) would train that run on
    from an earlier step and write its ``last.ckpt`` over the later one beside it: stop and
    say how to continue the run, or how to start a new one from these weights."""
    from segnet.serving.checkpoints import CheckpointError, peek_checkpoint

    path = Path(path).expanduser()
    last = path.parent / "last.ckpt"
    if path.name == last.name or not last.is_file():
        return
    later = peek_checkpoint(last)
    if later is None:  # an unreadable last.ckpt holds nothing to lose
        return
    step, last_step = ckpt.get("global_step", 0), later.get("global_step", 0)
    if last_step > step:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is at step {step} of its run, and {last} beside it at "
            f"step {last_step}: resuming from it would train the run on from step {step} "
            "and replace last.ckpt.\n"
            f"  To continue the run: {override('ckpt_path', last)}\n"
            f"  To train a new run from these weights: {override('init_from', path)} (instead "
            "of ckpt_path)."
        )
    if last_step == step:
        # the same step, saved at validation: last.ckpt, saved after it, is the run's state
        # (a finished run's is refused as such; this one would pass for unfinished)
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is at step {step}, as {last} beside it, which holds the "
            "run's state from after that step.\n"
            f"  To continue the run: {override('ckpt_path', last)}\n"
            f"  To train a new run from these weights: {override('init_from', path)} (instead "
            "of ckpt_path)."
        )


# -- a resume refused before it trains leaves the run's records as they were ----------


@contextmanager
def forget_config_of_refused_resume(work: Work) -> Iterator[None]:
    """A resume that stops before it trains (refused, or any error on the way; ``work``
    says whether training began) leaves the run as it was: the config folder Hydra wrote
    for it (``.hydra.<n>``, this process's own) is removed again, so that the run's
    records are of the parts that trained, and the next resume does not take over the
    settings that stopped this one. (Its log lines stay in the run's log.)"""
    try:
        yield
    except BaseException:
        from hydra.core.hydra_config import HydraConfig

        subdir = this_config_folder()
        if not work.started and is_resume_record(subdir):
            output_dir = HydraConfig.get().runtime.output_dir
            shutil.rmtree(Path(output_dir) / subdir, ignore_errors=True)
        raise


def this_config_folder() -> str | None:
    """The folder Hydra wrote this run's config into (``.hydra.<n>`` for a resume from the
    command line); None outside a Hydra app (tests, the Python API)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().output_subdir if HydraConfig.initialized() else None


# -- once restored: the learning-rate schedule is planned for this run's steps ---------


def check_resumed_schedule(module: Any) -> None:
    """A resume restores the schedule's planned length from the checkpoint. Where this
    run has another number of steps (another batch size, number of devices or training
    set), the schedule would end early (OneCycle stops the run, a polynomial decay holds
    the rate at 0) or late: stop before the first step instead."""
    from segnet.serving.checkpoints import CheckpointError

    scheduler = module.lr_schedulers()
    for arg, length in module.planned_schedule.items():
        restored = getattr(scheduler, arg, length)
        if restored != length:
            raise CheckpointError(
                f"the checkpoint's learning-rate schedule was planned for {restored} "
                f"{module.scheduler_interval}s and this resume has {length}: its batch size, "
                "number of devices or training set differ from the run's. Resume with "
                "the run's settings (its .hydra/overrides.yaml), or start a new run from "
                "its weights with init_from= instead of ckpt_path=."
            )


def resumed_schedule_check() -> Any:
    """A Lightning callback that runs :func:`check_resumed_schedule` as training starts,
    after the checkpoint is restored and before the first step."""
    from lightning.pytorch.callbacks import Callback

    class ResumedScheduleCheck(Callback):
        def on_train_start(self, trainer: Any, module: Any) -> None:
            check_resumed_schedule(module)

    return ResumedScheduleCheck()
