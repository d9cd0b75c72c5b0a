"""What a resumed run may change: it continues the run as it was configured, so that its
checkpoints, curves and metrics describe one training. Where it changed a setting that
shapes the training (the learning rate, the loss, the class weights, the augmentation,
the monitored metric), the resume stops and names each change, before any data is read;
settings of where and how fast it runs (devices, workers, data location, logging) may
change."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from segnet.runs.folders import checkpoint_record, is_resume_record, latest_config, work_starts
from segnet.serving.checkpoints import CheckpointError
from segnet.shell import override

# Settings (and groups, by prefix) a resume may set differently from the run's record.
MAY_CHANGE = (
    "ckpt_path", "init_from", "train", "test", "task_name", "tags", "seed", "recompute_bn",
    "paths.", "logger", "hydra.",
    "trainer.accelerator", "trainer.devices", "trainer.num_nodes", "trainer.strategy",
    "trainer.precision", "trainer.plugins", "trainer.sync_batchnorm", "trainer.benchmark",
    "trainer.use_distributed_sampler",
    "trainer.deterministic", "trainer.enable_model_summary", "trainer.enable_progress_bar",
    "trainer.log_every_n_steps", "trainer.limit_test_batches", "trainer.num_sanity_val_steps",
    "trainer.default_root_dir", "trainer.max_time", "trainer.check_val_every_n_epoch",
    # checked on its own: a schedule planned for another length is refused there
    "trainer.max_epochs",
    "data.root", "data.csv", "data.download", "data.url", "data.sha256", "data.num_workers",
    "data.pin_memory", "data.cache_max_gb", "data.eval_batch_size", "data.sw_batch_size",
    "data.split",
    "model.tta", "model.compile", "model.channels_last", "model.surface_tolerance_mm",
    "callbacks.last_checkpoint", "callbacks.checkpoint_on_interrupt", "callbacks.early_stopping",
    "callbacks.model_summary", "callbacks.prediction_images", "callbacks.confusion_matrix",
    "callbacks.epoch_timer", "callbacks.lr_monitor",
)  # fmt: skip


UNSET = object()  # a setting one of the two configs does not have


def may_change(key: str) -> bool:
    return any(key == p or key.startswith(p if p.endswith(".") else p + ".") for p in MAY_CHANGE)


def flat(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` for every leaf of a nested config (a dict or list value of
    a leaf kind, such as ``features: [16, 32]``, is one leaf)."""
    if isinstance(config, dict) and config:
        for key, value in config.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], config


def meaning(key: str, value: Any) -> Any:
    """A setting's value as training takes it, where several spellings mean the same
    (``data.flip``: true, [0,1,2] and [2,1,0] alike)."""
    if key == "data.flip":
        from segnet.data.nifti_datamodule import check_flip

        try:
            return check_flip(value)
        except ValueError:  # the DataModule says what is wrong with it
            return value
    return value


def changed_settings(recorded: dict, now: dict) -> list[tuple[str, Any, Any]]:
    """``(key, recorded value, value now)`` for each setting a resume may not change."""
    before, after = dict(flat(recorded)), dict(flat(now))
    return [
        (key, before.get(key, UNSET), after.get(key, UNSET))
        for key in sorted(before.keys() | after.keys())
        if not may_change(key)
        and meaning(key, before.get(key, UNSET)) != meaning(key, after.get(key, UNSET))
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

    from segnet.serving.checkpoints import peek_checkpoint

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


TRAINING = {"started": False}


def training_starts() -> None:
    """Called as ``trainer.fit`` begins: from here on, this part of the run is a record."""
    TRAINING["started"] = True
    work_starts()


@contextmanager
def forget_config_of_refused_resume() -> Iterator[None]:
    """A resume that stops before it trains (refused, or any error on the way) leaves the
    run as it was: the config folder Hydra wrote for it (``.hydra.<n>``, this process's
    own) is removed again, so that the run's records are of the parts that trained, and
    the next resume does not take over the settings that stopped this one. (Its log
    lines stay in the run's log.)"""
    TRAINING["started"] = False
    try:
        yield
    except BaseException:
        from hydra.core.hydra_config import HydraConfig

        subdir = this_config_folder()
        if not TRAINING["started"] and is_resume_record(subdir):
            output_dir = HydraConfig.get().runtime.output_dir
            shutil.rmtree(Path(output_dir) / subdir, ignore_errors=True)
        raise


def this_config_folder() -> str | None:
    """The folder Hydra wrote this run's config into (``.hydra.<n>`` for a resume from the
    command line); None outside a Hydra app (tests, the Python API)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().output_subdir if HydraConfig.initialized() else None


def describe(value: Any) -> str:
    return "unset" if value is UNSET else repr(value)
