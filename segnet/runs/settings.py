"""The table of settings: for every key the commands' configs compose (``train``,
``evaluate``, ``export``, ``bench``), what kind of value it takes, whether a resume may set
it differently from its run, whether it only shapes training (an evaluation refuses it) or
is part of the model (nobody changes it after training). The ``data.*`` rows are the
data format's own: :func:`table` asks the DataModule class a run names
(``segnet.data.settings``). The checks are derived from it: :func:`check_values` (the
kinds and bounds), :func:`resume_may_change` and :func:`data_keys`.
``tests/runs/test_settings.py`` composes every recipe and fails on a key the table does not
hold, and on a DataModule setting without its row, so a new setting cannot go
unclassified.

A row names a key (``trainer.max_epochs``) or a group (``logger``: the key and everything
under it); a key takes its most specific row."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from segnet.data import settings
from segnet.data.settings import Setting
from segnet.runs.earlier_names import current_name

ANY, RESUMABLE, SWITCH = settings.ANY, settings.RESUMABLE, settings.SWITCH

SETTINGS: dict[str, Setting] = {
    # what a command does, where it writes and with what it starts
    "train": Setting("switch", resume=True),
    "test": Setting("switch", resume=True),
    "recompute_bn": Setting("switch", resume=True),
    "save_predictions": SWITCH,
    "save_probabilities": SWITCH,
    "tta": SWITCH,
    "postprocess": Setting("switch", resume=True),
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
    "profile": ANY,
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
    # the data: each format says how it treats its own settings (segnet.data.settings);
    # this row covers a key no format names (a DataModule of the user's own): kept as the
    # run had it
    "data": ANY,
}


def table(data_format: Any = None) -> dict[str, Setting]:
    """Every row: the commands' own, and those of the data format (its DataModule class)
    for its ``data.*`` settings, as it says (:meth:`setting_rows`)."""
    rows = getattr(data_format, "setting_rows", None)
    if rows is None:
        return SETTINGS
    return {**SETTINGS, **{f"data.{key}": row for key, row in rows().items()}}


def data_format(config: Any) -> Any:
    """The DataModule class a config's ``data._target_`` names (by its current name), which
    says how its own settings read; None where there is none or it cannot be imported."""
    data = config.get("data") if isinstance(config, dict | DictConfig) else None
    target = data.get("_target_") if isinstance(data, dict | DictConfig) else None
    if not isinstance(target, str):
        return None
    from hydra.utils import get_class

    try:
        return get_class(current_name(target))
    except (ImportError, ValueError):
        return None


def setting(key: str, rows: dict[str, Setting] = SETTINGS) -> Setting | None:
    """The most specific row for a dotted key; None for a key no row covers."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        row = rows.get(".".join(parts[:n]))
        if row is not None:
            return row
    return None


def resume_may_change(key: str, rows: dict[str, Setting] = SETTINGS) -> bool:
    row = setting(key, rows)
    return row is not None and row.resume


def data_keys(flag: str, data_format: Any) -> tuple[str, ...]:
    """The ``data.*`` settings (without ``data.``) of a format whose row has ``flag`` set:
    ``training_only`` (an evaluation refuses them), ``part_of_model``."""
    rows = getattr(data_format, "setting_rows", None)
    return settings.keys_with(rows(), flag) if rows else ()


def check_values(cfg: DictConfig) -> None:
    """Every set value of a switch, count, fraction or number, by the kind and bound its
    row gives, before any data is read: a word where a number belongs, or ``tta=off`` that
    Python would take for true, is refused naming the setting, not by a comparison inside
    Lightning or torch later."""
    for key, row in table(data_format(cfg)).items():
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
