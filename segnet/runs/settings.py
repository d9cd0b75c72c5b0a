"""The table of settings: for every key the commands' configs compose (``train``,
``evaluate``, ``export``, ``bench``), what kind of value it takes, whether a resume may set
it differently from its run, whether it only shapes training (an evaluation refuses it) or
is part of the model (nobody changes it after training). The checks are derived from it:
:func:`check_values` (the kinds and bounds), :func:`resume_may_change`,
:data:`TRAINING_ONLY` and :data:`PART_OF_MODEL`. ``tests/runs/test_settings.py`` composes
every recipe and fails on a key the table does not hold, so a new setting cannot go
unclassified.

A row names a key (``trainer.max_epochs``) or a group (``logger``: the key and everything
under it); a key takes its most specific row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf


@dataclass(frozen=True)
class Setting:
    # "switch": true/false (null where allowed); "count": a whole number >= minimum;
    # "fraction": a count or a fraction >= 0; "number": a number >= minimum (> where
    # above); "any": checked where it is used
    kind: str = "any"
    minimum: float | None = None
    above: bool = False
    resume: bool = False  # a resume may set it differently from the run it continues
    training_only: bool = False  # shapes training alone: an evaluation refuses it
    part_of_model: bool = False  # the network's input normalisation: never changed


ANY = Setting()
RESUMABLE = Setting(resume=True)
SWITCH = Setting("switch")
TRAINING = Setting(training_only=True)

SETTINGS: dict[str, Setting] = {
    # what a command does, where it writes and with what it starts
    "train": Setting("switch", resume=True),
    "test": Setting("switch", resume=True),
    "recompute_bn": Setting("switch", resume=True),
    "save_predictions": SWITCH,
    "tta": SWITCH,
    "ckpt_path": RESUMABLE,
    "init_from": RESUMABLE,
    "task_name": RESUMABLE,
    "tags": RESUMABLE,
    "seed": RESUMABLE,
    # a time budget decides the epochs and the schedule's length: a resume keeps it
    "train_minutes": Setting("number", minimum=0, above=True),
    "paths": RESUMABLE,
    "hydra": RESUMABLE,
    "logger": RESUMABLE,
    "monitor": ANY,  # which checkpoint is best: part of the run
    "optuna": ANY,  # hparams_search=...: the study's own settings
    # callbacks: what a run shows and keeps may change; what shapes the weights may not
    "callbacks": RESUMABLE,
    "callbacks.ema": ANY,
    "callbacks.model_checkpoint": ANY,
    # export
    "formats": ANY,
    "example_size": ANY,
    # bench
    "recipes": ANY,
    "run": ANY,
    "steps": ANY,
    "warmup": ANY,
    "repeats": ANY,
    "epochs": ANY,
    "data_samples": ANY,
    "target_rate": ANY,
    "extra_overrides": ANY,
    # the model: its network, loss and optimisation shape the training
    "model": ANY,
    "model.tta": Setting("switch", resume=True),
    "model.compile": RESUMABLE,
    "model.channels_last": RESUMABLE,
    "model.surface_tolerance_mm": RESUMABLE,
    "model.optimizer.lr": Setting("number", minimum=0, above=True),
    "model.optimizer.weight_decay": Setting("number", minimum=0),
    "model.optimizer.momentum": Setting("number", minimum=0),
    # the trainer: where and how fast it runs may change on a resume, what it trains may not
    "trainer": ANY,
    "trainer.accelerator": RESUMABLE,
    "trainer.devices": RESUMABLE,
    "trainer.num_nodes": Setting("count", minimum=1, resume=True),
    "trainer.strategy": RESUMABLE,
    "trainer.precision": RESUMABLE,
    "trainer.plugins": RESUMABLE,
    "trainer.sync_batchnorm": RESUMABLE,
    "trainer.benchmark": Setting("switch", resume=True),
    "trainer.use_distributed_sampler": RESUMABLE,
    "trainer.deterministic": RESUMABLE,
    "trainer.enable_model_summary": RESUMABLE,
    "trainer.enable_progress_bar": RESUMABLE,
    "trainer.log_every_n_steps": Setting("count", minimum=0, resume=True),
    "trainer.limit_test_batches": Setting("fraction", resume=True),
    "trainer.num_sanity_val_steps": RESUMABLE,
    "trainer.default_root_dir": RESUMABLE,
    "trainer.max_time": RESUMABLE,
    "trainer.check_val_every_n_epoch": Setting("count", minimum=1, resume=True),
    # checked on its own: a schedule planned for another length is refused there
    "trainer.max_epochs": Setting("count", minimum=-1, resume=True),
    "trainer.min_epochs": Setting("count", minimum=0),
    "trainer.max_steps": Setting("count", minimum=-1),
    "trainer.accumulate_grad_batches": Setting("count", minimum=1),
    "trainer.limit_train_batches": Setting("fraction"),
    "trainer.limit_val_batches": Setting("fraction"),
    "trainer.gradient_clip_val": Setting("fraction"),
    # (val_check_interval is left to Lightning: it also takes a time, "00:00:30:00")
    # the data: where it is and how fast it is read may change; what is read may not
    "data": ANY,
    "data.root": RESUMABLE,
    "data.csv": RESUMABLE,
    "data.download": Setting("switch", resume=True),
    "data.url": RESUMABLE,
    "data.sha256": RESUMABLE,
    "data.num_workers": RESUMABLE,
    "data.pin_memory": Setting("switch", resume=True),
    "data.cache_max_gb": RESUMABLE,
    "data.eval_batch_size": RESUMABLE,
    "data.sw_batch_size": RESUMABLE,
    "data.split": RESUMABLE,
    # the network's input as it was trained: part of the model
    "data.mean": Setting(part_of_model=True),
    "data.std": Setting(part_of_model=True),
    "data.clip": Setting(part_of_model=True),
    # augmentation, patch sampling and the loss's class weights
    "data.hflip": Setting("switch", training_only=True),
    "data.rotate90": Setting("switch", training_only=True),
    "data.flip": TRAINING,
    "data.rotate": TRAINING,
    "data.zoom": TRAINING,
    "data.scale": TRAINING,
    "data.affine_prob": TRAINING,
    "data.intensity": TRAINING,
    "data.intensity_scale": TRAINING,
    "data.intensity_shift": TRAINING,
    "data.color_jitter": TRAINING,
    "data.crop_size": TRAINING,
    "data.label_resize": TRAINING,
    "data.foreground_ratio": TRAINING,
    "data.samples_per_volume": TRAINING,
    "data.patches_per_epoch": TRAINING,
    "data.steps_per_epoch": TRAINING,
    "data.batch_pixels": TRAINING,
    "data.patch_size": TRAINING,
    "data.max_patch": TRAINING,
    "data.class_weights": TRAINING,
    "data.class_weights_power": TRAINING,
}


def setting(key: str) -> Setting | None:
    """The most specific row for a dotted key; None for a key no row covers."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        row = SETTINGS.get(".".join(parts[:n]))
        if row is not None:
            return row
    return None


def resume_may_change(key: str) -> bool:
    row = setting(key)
    return row is not None and row.resume


def data_keys(flag: str) -> tuple[str, ...]:
    """The ``data.*`` settings (without ``data.``) whose row has ``flag`` set."""
    return tuple(
        key.removeprefix("data.")
        for key, row in SETTINGS.items()
        if key.startswith("data.") and getattr(row, flag)
    )


TRAINING_ONLY = data_keys("training_only")
PART_OF_MODEL = data_keys("part_of_model")


def check_values(cfg: DictConfig) -> None:
    """Every set value of a switch, count, fraction or number, by the kind and bound its
    row gives, before any data is read: a word where a number belongs, or ``tta=off`` that
    Python would take for true, is refused naming the setting, not by a comparison inside
    Lightning or torch later."""
    for key, row in SETTINGS.items():
        if row.kind == "any":
            continue
        value = OmegaConf.select(cfg, key, default=None)
        if value is not None:
            check_value(key, value, row)


def check_value(key: str, value: Any, row: Setting) -> None:
    if row.kind == "switch":
        if not isinstance(value, bool):
            raise ValueError(f"{key}={value!r}: use true or false.")
        return
    if row.kind == "count":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key}={value!r}: expected a whole number.")
        if value < row.minimum:
            raise ValueError(f"{key}={value}: use a whole number >= {row.minimum}.")
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        what = " (a count or a fraction)" if row.kind == "fraction" else " " + bound(row)
        raise ValueError(f"{key}={value!r}: expected a number{what}.")
    minimum = row.minimum or 0
    if value < minimum or (row.above and value == minimum):
        use = "0 or a positive number" if row.kind == "fraction" else f"a number {bound(row)}"
        raise ValueError(f"{key}={value}: use {use}.")


def bound(row: Setting) -> str:
    minimum = row.minimum or 0
    return f"above {minimum}" if row.above else f"{minimum} or above"
