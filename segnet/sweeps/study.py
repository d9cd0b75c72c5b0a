"""Hyperparameter search with Optuna, run from ``train.py hparams_search=<name>``.

Why not hydra-optuna-sweeper: its newest release (1.3.0) pins ``optuna<3`` (2.10.1, from
2021), whose SQLite storage fails with SQLAlchemy 2 (checked here; see README). This
drives a maintained Optuna directly: each trial sets the sampled values on the composed
config and calls :func:`segnet.commands.train.train`, in its own ``trial_<n>`` folder.

A search config (``configs/hparams_search/*.yaml``) holds::

    optuna:
      direction: maximize
      n_trials: 20
      storage: null            # or sqlite:///path/study.db (resumable, shareable)
      study_name: camvid
      seed: 0
      params:                  # dotted config key -> distribution
        model.optimizer.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}
        data.batch_size: {type: categorical, choices: [4, 8]}
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


def suggest(trial, name: str, spec: dict[str, Any]) -> Any:
    kind = spec.get("type", "float")
    if kind == "float":
        return trial.suggest_float(name, spec["low"], spec["high"], log=spec.get("log", False))
    if kind == "int":
        return trial.suggest_int(name, spec["low"], spec["high"], log=spec.get("log", False))
    if kind == "categorical":
        return trial.suggest_categorical(name, list(spec["choices"]))
    raise ValueError(f"optuna.params.{name}: type {kind!r} unknown; use float, int or categorical.")


_ABSENT = object()


def trials_so_far(optuna: Any, study_name: str | None, storage: str) -> int:
    """How many trials the stored study holds; 0 for a study not created yet."""
    try:
        return len(optuna.load_study(study_name=study_name, storage=storage).trials)
    except KeyError:  # Optuna's "no such study"
        return 0


def run_study(cfg: DictConfig):
    """Run the study described by ``cfg.optuna``; returns the Optuna study."""
    try:
        import optuna
    except ImportError as err:
        raise ImportError("hparams_search needs optuna: pip install -e '.[tune]'") from err
    from segnet.commands.train import train

    opt = cfg.optuna
    for key in opt.params:  # a misspelt key would be added as a new setting, then fail
        if OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT:
            raise ValueError(
                f"optuna.params.{key}: this config has no such setting; name an existing one "
                "(as train.py overrides it, e.g. model.optimizer.lr)."
            )
    seed = opt.get("seed")
    if seed is not None and opt.get("storage"):
        # a study continued from storage: a sampler seeded as before would draw its first
        # trials' values again, so the seed is derived from the trials it already holds
        # (a seed + n would replay the first run's stream, shifted)
        held = trials_so_far(optuna, opt.get("study_name"), opt.storage)
        if held:
            seed = int(np.random.SeedSequence([seed, held]).generate_state(1)[0])
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(
        direction=opt.get("direction", "maximize"),
        storage=opt.get("storage"),
        study_name=opt.get("study_name"),
        sampler=sampler,
        load_if_exists=True,
    )
    base_dir = Path(cfg.paths.output_dir)
    # monitor: null is the dataset's own (val/miou, val/dice), which training resolves
    metric = f"{cfg.monitor}_best" if cfg.get("monitor") else None

    def objective(trial) -> float:
        trial_cfg = copy.deepcopy(cfg)
        with open_dict(trial_cfg):
            del trial_cfg["optuna"]
            for key, spec in opt.params.items():
                OmegaConf.update(trial_cfg, key, suggest(trial, key, spec), merge=False)
            trial_cfg.paths.output_dir = str(base_dir / f"trial_{trial.number}")
        metrics, _ = train(trial_cfg)
        nonlocal metric
        metric = metric or f"{trial_cfg.monitor}_best"
        if metric not in metrics:
            raise RuntimeError(f"trial {trial.number} reported no {metric}")
        return metrics[metric]

    study.optimize(objective, n_trials=opt.get("n_trials", 10))
    best = study.best_trial
    log.info("best trial %d: %s = %.4f with %s", best.number, metric, best.value, best.params)
    print(f"best trial {best.number}: {metric} = {best.value:.4f} with {best.params}")
    return study
