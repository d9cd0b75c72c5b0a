"""The checks a command makes before any data is read, from its config alone: values of
the right kind (derived from the table of settings), a trainer this machine can run, a
run that will validate, a DataModule that provides what the run will call on."""

from __future__ import annotations

import difflib
import inspect
import logging
import random
from typing import Any

import numpy as np
import torch
from hydra.utils import get_class
from omegaconf import DictConfig, open_dict

from segnet.data.base import SegmentationDataModule
from segnet.models import batchnorm_layers, init_only_settings
from segnet.runs.building import build_datamodule, module_for
from segnet.runs.settings import check_values
from segnet.training.module import SegmentationModule

log = logging.getLogger(__name__)


def check_accelerator(cfg: DictConfig, instead: str) -> None:
    """A GPU trainer on a machine torch finds no GPU on is refused before any data is read,
    with ``instead``: what to run here. Lightning's own error would come after the data and
    name no setting."""
    accelerator = str(cfg.trainer.get("accelerator", "auto"))
    # Lightning's "gpu" is CUDA or, on Apple silicon, MPS
    mps = accelerator == "gpu" and torch.backends.mps.is_available()
    if accelerator in ("gpu", "cuda") and not (torch.cuda.is_available() or mps):
        # a setting this machine cannot take: refused (ValueError), shown without a traceback
        raise ValueError(
            f"trainer.accelerator={accelerator} (set by trainer=gpu, trainer=ddp or a *_gpu "
            f"recipe), but torch {torch.__version__} finds no GPU here. Run it on a GPU "
            f"machine, or here {instead}."
        )


def check_trainer_names(cfg: DictConfig) -> None:
    """A trainer setting the Trainer does not take (a typo given with +, as Hydra suggests
    for a key it does not know), named with the closest it does take."""
    trainer = cfg.get("trainer") or {}
    target = trainer.get("_target_")
    takes = inspect.signature(get_class(target)).parameters if target else {}
    for key in trainer:
        if takes and key != "_target_" and key not in takes:
            close = difflib.get_close_matches(key, list(takes), n=1)
            hint = f"; did you mean trainer.{close[0]}?" if close else "."
            raise ValueError(f"trainer.{key}: {target} has no such setting{hint}")


def check_config_values(cfg: DictConfig) -> None:
    """The values a command checks from its config alone: each by the kind and bound its
    row in the table of settings gives, and the trainer's setting names (also run by a
    sweep's check, for every job)."""
    check_values(cfg)
    check_trainer_names(cfg)


def never_validates(trainer: Any) -> str | None:
    """Why a training run with these trainer settings would end before its first validation
    (no val metrics, no best.ckpt), or None: known before any data is read."""
    if trainer.get("fast_dev_run"):  # Lightning validates its one batch anyway
        return None
    if trainer.get("limit_val_batches") == 0:
        return "trainer.limit_val_batches=0 turns validation off"
    epochs, every = trainer.get("max_epochs"), trainer.get("check_val_every_n_epoch")
    if epochs == 0:
        return "trainer.max_epochs=0 trains no epoch"
    if isinstance(epochs, int) and isinstance(every, int) and 0 <= epochs < every:
        return (
            f"trainer.max_epochs={epochs} ends before the first validation "
            f"(trainer.check_val_every_n_epoch={every}; add trainer.check_val_every_n_epoch=1 "
            "to validate every epoch)"
        )
    return None


def check_job_config(cfg: DictConfig) -> None:
    """What ``train`` refuses from its config alone, for a multirun to check every job's
    before the first one starts: the switches, the optimizer, the data settings the
    DataModule checks when it is built and, where the data can be described without
    fetching it, the model settings (the network built once with random weights, without
    downloading any). Reads no images, writes nothing, and leaves the random generators
    as they were, so the jobs train as they would without it."""
    check_config_values(cfg)
    cfg = cfg.copy()
    with open_dict(cfg):
        for key in init_only_settings(cfg.model.net):  # e.g. encoder_weights: no download
            cfg.model.net[key] = None
    dm = build_datamodule(cfg)
    try:
        info = dm.describe()
    except Exception:  # noqa: BLE001 - data not there yet, or unreadable: the job says so
        return
    state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        module_for(cfg, info)
    np.random.set_state(state[0])
    random.setstate(state[1])


def check_datamodule_provides(
    cfg: DictConfig, dm: SegmentationDataModule, module: SegmentationModule
) -> None:
    """The optional parts of the DataModule contract this run will call on, checked before
    any data is read: a DataModule without them would otherwise fail after training."""
    name = type(dm).__name__
    recomputes = cfg.get("recompute_bn") and cfg.get("test", True) and not module.bn_recomputed
    if recomputes and batchnorm_layers(module.net) and not dm.provides("bn_dataloader"):
        raise ValueError(
            f"recompute_bn=true: {name} has no bn_dataloader() (its training split, "
            "unaugmented, at the network's input size) to recompute the BatchNorm "
            "statistics over before testing. Implement it, or set recompute_bn=false to "
            "test with the statistics training kept."
        )
    saves = cfg.get("save_predictions") or cfg.get("save_probabilities")
    if saves and not dm.provides("save_prediction"):
        setting = "save_predictions" if cfg.get("save_predictions") else "save_probabilities"
        raise ValueError(
            f"{setting}=true: {name} has no save_prediction() to write a mask in "
            f"its data's format. Implement it, or leave {setting} out."
        )
    if cfg.get("save_probabilities") and not dm.provides("save_probabilities"):
        raise ValueError(
            f"save_probabilities=true: {name} has no save_probabilities() to write them in "
            "its data's format. Implement it, or leave save_probabilities out."
        )
