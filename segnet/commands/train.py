"""``train(cfg)``: what train.py runs, as a plain function that returns ``(metrics,
objects)`` so tests call it directly; and what training and evaluation (segnet.commands.evaluate)
share: building the objects from the config, the checks made before any data is read, the
trainer, the test stage and the files a run writes."""

from __future__ import annotations

import difflib
import inspect
import json
import logging
import math
import os
import random
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from lightning.pytorch.accelerators import CUDAAccelerator
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf, open_dict

from segnet.data.base import SegmentationDataModule, check_shareable
from segnet.data.info import DataInfo
from segnet.files import write_text
from segnet.models import batchnorm_layers, init_only_settings
from segnet.runs.console import (
    log_config,
    log_summary,
    print_table,
    quiet_library_noise,
    raised_here,
    rank_zero_speaks,
)
from segnet.runs.folders import refuse_run_folder_in_use, refuse_untrained_resume, work_starts
from segnet.runs.resume import check_same_settings, this_config_folder, training_starts
from segnet.serving.checkpoints import (
    check_latest,
    check_not_finished,
    check_same_length,
    check_same_model,
    check_same_spacing,
    expected_model,
    load_weights,
    peek_checkpoint,
    read_checkpoint,
)
from segnet.shell import override
from segnet.training.callbacks.progress import EpochLog, progress_bar
from segnet.training.callbacks.trackers import record_file
from segnet.training.checkpoint_io import AtomicCheckpointIO, write_checkpoints_atomically
from segnet.training.metrics import summarize_cases
from segnet.training.module import SegmentationModule, check_monitor, enable_tf32

log = logging.getLogger(__name__)


def build(node: Any, **kwargs: Any) -> Any:
    """``instantiate`` with ``_convert_="all"``, where a setting the object refuses, or a
    failure this package explains (weights it cannot download), shows as its own message,
    not folded into one line of Hydra's."""
    try:
        return instantiate(node, _convert_="all", **kwargs)
    except InstantiationException as err:
        cause = err.__cause__
        if isinstance(cause, ValueError) or (cause is not None and raised_here(cause)):
            raise cause from None
        target = str(node.get("_target_")).rsplit(".", 1)[-1]
        unexpected = f"{target}.__init__() got an unexpected keyword argument"
        if isinstance(cause, TypeError) and str(cause).startswith(unexpected):
            # a setting added with + that the class does not take (often a typo); not a
            # TypeError from deeper inside its __init__
            raise ValueError(
                f"{cause}: a setting {node.get('_target_')} does not take. Check its "
                "spelling, or remove it."
            ) from None
        raise


def build_datamodule(cfg: DictConfig) -> SegmentationDataModule:
    return build(cfg.data)


def build_module(cfg: DictConfig, dm: SegmentationDataModule) -> SegmentationModule:
    """The model config holds the architecture and optimisation; everything about the data
    comes from the DataModule's ``info()`` (and its class weights, when training)."""
    module = module_for(cfg, dm.info(), class_weights=dm.class_weights)
    # Set after instantiation: the data config has a _target_, and passing it through
    # instantiate would build a DataModule into the checkpoint instead of plain data.
    # evaluate.py rebuilds the DataModule from it (a module argument, so it reloads).
    module.hparams["data_cfg"] = OmegaConf.to_container(cfg.data, resolve=True)
    return module


def module_for(cfg: DictConfig, info: DataInfo, class_weights=None) -> SegmentationModule:
    """``cfg.model`` built for data described by ``info``, its ``monitor`` (null: the
    dataset's own) checked against the scores validation reports."""
    monitor = cfg.get("monitor") or info.monitor
    module = build(cfg.model, data=info.to_dict(), class_weights=class_weights, monitor=monitor)
    check_monitor(module.monitor, module.validation_scores())
    return module


def prepare(cfg: DictConfig, dm: SegmentationDataModule) -> None:
    """Fetch and describe the data (no images read yet); a ``monitor: null`` becomes the
    dataset's own (val/miou for scenes, val/dice for volumes)."""
    dm.prepare_data()
    if cfg.get("monitor") is None:
        with open_dict(cfg):
            cfg.monitor = dm.info().monitor


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


# On/off settings: a word such as tta=off or data.hflip=no arrives as a string, which
# Python takes for true; it is refused instead (null where the setting allows it).
SWITCHES = (
    "train", "test", "recompute_bn", "save_predictions", "tta", "model.tta",
    "data.download", "data.hflip", "data.rotate90", "data.pin_memory",
    "trainer.benchmark",
)  # fmt: skip


def check_switches(cfg: DictConfig) -> None:
    for key in SWITCHES:
        value = OmegaConf.select(cfg, key, default=None)
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{key}={value!r}: use true or false.")


def check_optimizer(cfg: DictConfig) -> None:
    """The optimizer's learning rate and weight decay, before any data is read: torch's own
    check comes later and names no setting."""
    opt = cfg.model.get("optimizer") or {}
    for key, bound in (("lr", "above 0"), ("weight_decay", "0 or above")):
        value = opt.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"model.optimizer.{key}={value!r}: expected a number {bound}.")
        if value < 0 or (key == "lr" and value == 0):
            raise ValueError(f"model.optimizer.{key}={value}: use a number {bound}.")


# Trainer settings that are whole numbers, with their smallest value (-1: no limit), and
# those that are a count or a fraction: a word (trainer.max_epochs=two) is refused here, not
# by a comparison inside Lightning after the data is read
TRAINER_COUNTS = {
    "max_epochs": -1, "min_epochs": 0, "max_steps": -1, "check_val_every_n_epoch": 1,
    "accumulate_grad_batches": 1, "num_nodes": 1, "log_every_n_steps": 0,
}  # fmt: skip
# (val_check_interval is left to Lightning: it also takes a time, "00:00:30:00")
TRAINER_FRACTIONS = (
    "limit_train_batches", "limit_val_batches", "limit_test_batches", "gradient_clip_val",
)  # fmt: skip


def check_trainer(cfg: DictConfig) -> None:
    """The trainer settings, before any data is read: a name the Trainer does not take (a
    typo given with +, as Hydra suggests for a key it does not know) and values of the
    wrong kind, each named."""
    trainer = cfg.get("trainer") or {}
    target = trainer.get("_target_")
    takes = inspect.signature(get_class(target)).parameters if target else {}
    for key in trainer:
        if takes and key != "_target_" and key not in takes:
            close = difflib.get_close_matches(key, list(takes), n=1)
            hint = f"; did you mean trainer.{close[0]}?" if close else "."
            raise ValueError(f"trainer.{key}: {target} has no such setting{hint}")
    for key, minimum in TRAINER_COUNTS.items():
        value = trainer.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"trainer.{key}={value!r}: expected a whole number.")
        if value is not None and value < minimum:
            raise ValueError(f"trainer.{key}={value}: use a whole number >= {minimum}.")
    for key in TRAINER_FRACTIONS:
        value = trainer.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"trainer.{key}={value!r}: expected a number (a count or a fraction).")
        if value is not None and value < 0:
            raise ValueError(f"trainer.{key}={value}: use 0 or a positive number.")


def check_training_values(cfg: DictConfig) -> None:
    """The values train.py checks from its config alone: the optimizer, the on/off switches
    and the trainer settings (also run by a sweep's check, for every job)."""
    check_optimizer(cfg)
    check_switches(cfg)
    check_trainer(cfg)


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
    check_training_values(cfg)
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
    if cfg.get("save_predictions") and not dm.provides("save_prediction"):
        raise ValueError(
            f"save_predictions=true: {name} has no save_prediction() to write a mask in "
            "its data's format. Implement it, or leave save_predictions out."
        )


def build_trainer(
    cfg: DictConfig, progress: bool = True, extra_callbacks: tuple = (), **overrides: Any
) -> L.Trainer:
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    callbacks += extra_callbacks
    if progress:
        callbacks += [progress_bar(), EpochLog()]
    else:
        overrides["enable_progress_bar"] = False
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    if not loggers:
        # the learning-rate monitor has nothing to write to (logger=none), and Lightning
        # would stop the run at its first epoch for it
        callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
    bf16 = "bf16" in str(cfg.trainer.get("precision"))
    if on_cpu(cfg) and bf16 and cpu_has_bf16_units() is False:
        # a GPU recipe's bf16 (trainer=gpu) tried on a CPU that would emulate it: 30x
        # slower than fp32 in a measured 3D step, so fp32 instead, said in one line
        log.warning(
            "trainer.precision=%s on a CPU without bf16 units (AVX512-BF16 or AMX), which "
            "would emulate it many times slower: training in fp32 (32-true) instead",
            cfg.trainer.precision,
        )
        overrides["precision"] = "32-true"
    trainer = instantiate(
        cfg.trainer, **{"callbacks": callbacks, "logger": loggers or False, **overrides}
    )
    write_checkpoints_atomically(trainer)
    if isinstance(trainer.accelerator, CUDAAccelerator):
        # before fit: Lightning checks the precision while setting up the device, and warns
        # that tensor cores go unused when it is still the default
        enable_tf32()
    return trainer


def on_cpu(cfg: DictConfig) -> bool:
    """Whether the trainer will run on the CPU: asked for, or ``auto`` where torch finds
    no GPU."""
    accelerator = str(cfg.trainer.get("accelerator", "auto"))
    if accelerator == "cpu":
        return True
    gpu = torch.cuda.is_available() or torch.backends.mps.is_available()
    return accelerator == "auto" and not gpu


def fit_workers_to_cpu(cfg: DictConfig) -> None:
    """A GPU recipe's loader workers (8, 12) on a machine without a GPU and with fewer
    cores would only contend with training: as many as there are cores, said in one line."""
    workers, cores = cfg.data.get("num_workers"), os.cpu_count() or 1
    if on_cpu(cfg) and isinstance(workers, int) and workers > cores:
        log.warning(
            "data.num_workers=%d on a CPU with %d core(s) and no GPU to feed: %d workers",
            workers,
            cores,
            cores,
        )
        with open_dict(cfg):
            cfg.data.num_workers = cores


def cpu_has_bf16_units() -> bool | None:
    """Whether this CPU computes in bf16 natively (AVX512-BF16 or AMX tiles), where bf16
    autocast trains convolutions faster than fp32 (1.7x for the Hippocampus recipe's 3D
    UNet, README "Performance"); None where this torch cannot tell."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # private helpers: gone in some torch, say nothing then
        return None


def write_metrics(path: Path, metrics: dict[str, Any], **extra: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {**extra, "metrics": {k: float(v) for k, v in metrics.items()}}
    # strict JSON, which other tools parse: a class absent from both label and prediction
    # has no Dice (NaN, as MONAI and nnU-Net leave it), written as null
    write_text(path, json.dumps(finite_or_null(payload), indent=2, allow_nan=False))
    return path


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float, however deeply nested, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def saved_epoch(ckpt_path: str | Path | None) -> int | None:
    """The epoch a checkpoint was saved at, as the epoch lines count (from 0); None without
    one."""
    return (peek_checkpoint(ckpt_path) or {}).get("epoch") if ckpt_path else None


def record_split(out_dir: Path, dm: SegmentationDataModule, resumed: bool = False) -> None:
    """The cases of each split, where the split is drawn from the data (volumes): counted
    in the log and listed by name in ``splits.json``, which a paper's methods section and
    a later run on the same cases can read. A resumed run keeps the record of the run it
    continues; where its cases differ from it, it says so and lists its own beside it
    (``splits.<n>.json`` for the part whose config is in ``.hydra.<n>``), as its
    checkpoints record them."""
    names = dm.split_names()
    if not names:  # fixed split files (CamVid): the files are the record
        return
    path = out_dir / "splits.json"
    if resumed and path.is_file():
        if json.loads(path.read_text()) == names:
            return
        part = (this_config_folder() or "").removeprefix(".hydra").strip(".") or "resumed"
        first, path = path, out_dir / f"splits.{part}.json"
        log.warning(
            "the cases of each split differ from those this run started with (%s): cases "
            "were added, removed or renamed since; this part's are in %s",
            first,
            path,
        )
    counts = ", ".join(f"{len(cases)} {split}" for split, cases in names.items())
    log.info("cases: %s (by name in %s)", counts, path)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(names, indent=2) + "\n")


def write_outputs(
    out_dir: Path,
    module: SegmentationModule,
    dm: Any,
    metrics: dict,
    split: str,
    ckpt_path: str | list[str],
    cfg: DictConfig,
    **training: Any,
) -> None:
    """metrics.json (what was tested, on which split; for volumes an nnU-Net-style summary
    of the per-case metrics; ``training``: the run's epochs, when a training run tests),
    plus ``per_case.csv`` for volumes."""
    cases = module.last_case_metrics.get("test")
    extra = dict(training)
    if module.tested_batches:  # part of the split: said where the figures are read
        extra["tested_batches"] = module.tested_batches
    if len(module.ensemble_members):  # each member as it was applied
        extra["members"] = [
            {
                "ckpt_path": path,
                "sliding_window": m.sliding_window,
                "bn_recomputed": m.bn_recomputed,
            }
            for path, m in zip(ckpt_path, [module, *module.ensemble_members], strict=True)
        ]
    if cases is not None:
        per_case = {k: v for k, v in cases.items() if k != "index"}
        extra["cases"] = summarize_cases(per_case, module.class_names)
        extra["cases"]["surface_tolerance_mm"] = module.surface_tolerance_mm
    write_metrics(
        out_dir / "metrics.json",
        metrics,
        split=split,
        ckpt_path=ckpt_path if isinstance(ckpt_path, list) else str(ckpt_path),
        monitor=module.monitor,
        recompute_bn=cfg.get("recompute_bn", False),
        tta=module.tta,
        # the axes mirroring flipped (the first model's; each member flips its own)
        mirror_axes=module.mirror_axes if module.tta else None,
        sliding_window=module.sliding_window,
        # the size the network saw the images at (None: as stored; volumes: the window)
        image_size=dm.info().input_size if module.data_info.spatial_dims == 2 else None,
        bn_recomputed=module.bn_recomputed,
        **extra,
    )
    if cases is not None:
        dm.write_case_table(cases, out_dir / "per_case.csv")


def bn_batch_limit(trainer: L.Trainer) -> int | None:
    """A debug run (fast_dev_run, an integer limit_train_batches) recomputes BatchNorm over
    as many batches as it trains on, not the whole training set."""
    if trainer.fast_dev_run:
        return int(trainer.fast_dev_run)
    limit = trainer.limit_train_batches
    return limit if isinstance(limit, int) else None


def store_recomputed_bn(ckpt_path: str | Path, module: SegmentationModule) -> None:
    """Write the module's weights (recomputed BatchNorm statistics) into the checkpoint it
    was loaded from, marked ``bn_recomputed``, so that the checkpoint holds exactly what was
    tested. Written to a temporary file and renamed: never a half-written checkpoint."""
    path = Path(ckpt_path)
    ckpt = read_checkpoint(path, "best checkpoint")
    ckpt["state_dict"] = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    ckpt["bn_recomputed"] = module.bn_recomputed
    AtomicCheckpointIO().save_checkpoint(ckpt, path)


def partial_test_setting(trainer: L.Trainer) -> str:
    """The setting that left part of the test split untested, as the user gave it:
    fast_dev_run (``debug=fdr`` sets it), which sets Lightning's limit_test_batches itself,
    or limit_test_batches."""
    if trainer.fast_dev_run:
        return f"trainer.fast_dev_run={trainer.fast_dev_run}"
    return f"trainer.limit_test_batches={trainer.limit_test_batches}"


def run_test(
    trainer: L.Trainer,
    module: SegmentationModule,
    dm: L.LightningDataModule,
    cfg: DictConfig,
    store_in: str | None = None,
) -> tuple[dict[str, float], str]:
    """Test on the configured split; returns the metrics and the split actually used.

    With ``recompute_bn``, BatchNorm statistics are recomputed first over the unaugmented
    training images at the network's input size, unless the checkpoint's already were
    (training does it once and stores them in ``store_in``, its best checkpoint), so that
    evaluating a checkpoint gives the numbers its training run reported.
    """
    work_starts()  # a failure from here on keeps the run folder and its log
    split = dm.test_split()
    warning = dm.test_input_warning(module.data_info)
    if warning:
        log.warning(warning)
    if cfg.get("recompute_bn", False):
        if module.bn_recomputed:
            log.info(
                "BatchNorm statistics were recomputed by training (%s): used as stored",
                module.bn_recomputed,
            )
        elif not batchnorm_layers(module.net):
            # a network without BatchNorm has nothing to recompute: say so, not "0 batches"
            log.info("recompute_bn: this network has no BatchNorm statistics to recompute")
        else:
            dm.setup("test")
            module.to(trainer.strategy.root_device)
            n = module.recompute_batchnorm(dm.bn_dataloader(), bn_batch_limit(trainer))
            log.info(
                "recomputed BatchNorm statistics over %d training batches of %s",
                n,
                getattr(dm, "root", "the training data"),
            )
            if store_in and trainer.is_global_zero:
                store_recomputed_bn(store_in, module)
                log.info("stored them in %s", store_in)
    if module.tta:
        axes = module.mirror_axes
        log.info(
            "testing with mirroring over the axes training flipped (%s%s): the softmax "
            "averaged over %d passes per input (tta=false: one)",
            axes,
            "; each member of the ensemble its own" if len(module.ensemble_members) else "",
            2 ** len(axes),
        )
    results = trainer.test(module, datamodule=dm, verbose=False)
    ran, whole = sum(trainer.num_test_batches), len(dm.test_dataloader())
    # trainer.limit_test_batches (a debug setting) may leave part of the split untested
    module.tested_batches = (
        {"tested": ran, "of": whole, "by": partial_test_setting(trainer)} if ran < whole else None
    )
    if module.tested_batches:
        log.warning(
            "%s: the test metrics cover %d of the '%s' split's %d "
            "batches, not the whole split (metrics.json records it: tested_batches)",
            module.tested_batches["by"],
            ran,
            split,
            whole,
        )
    return (dict(results[0]) if results else {}), split


def resume_dir(ckpt_path: str | None) -> Path | None:
    """The run directory a checkpoint belongs to (``<run>/checkpoints/x.ckpt``), if any."""
    if not ckpt_path:
        return None
    ckpt = Path(ckpt_path).expanduser().resolve()
    if not ckpt.is_file():
        raise FileNotFoundError(f"ckpt_path={ckpt_path!r}: no such file.")
    run = ckpt.parent.parent
    # a run folder holds train.py's config (.hydra/) or its TensorBoard logs (logger=none
    # leaves the config alone)
    made_by_train = (run / ".hydra").is_dir() or (run / "tensorboard").is_dir()
    return run if ckpt.parent.name == "checkpoints" and made_by_train else None


def check_start_checkpoints(cfg: DictConfig, dm: Any) -> dict[str, Any] | None:
    """``ckpt_path`` (resume) and ``init_from`` (a new run from a checkpoint's weights):
    readable, of this model and dataset, and for a resume of the same planned length.
    Runs before any data is read. Returns the ``init_from`` checkpoint, if any."""
    ckpt_path, init_from = cfg.get("ckpt_path"), cfg.get("init_from")
    if ckpt_path and init_from:
        raise ValueError(
            "ckpt_path= resumes a run and init_from= starts a new one from a checkpoint's "
            "weights: give one of them."
        )
    expected = expected_model(OmegaConf.to_container(cfg.model.net, resolve=True), dm.info())
    if ckpt_path:
        ckpt = read_checkpoint(ckpt_path, "ckpt_path")
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


def train(cfg: DictConfig) -> tuple[dict[str, float], dict[str, Any]]:
    quiet_library_noise()
    rank_zero_speaks()
    refuse_untrained_resume(cfg.get("ckpt_path"), cfg.get("train", True))
    resumed = resume_dir(cfg.get("ckpt_path"))
    # as composed, before anything below fills in a default: what a checkpoint stores, and
    # what a resume from it compares with
    settings = OmegaConf.to_container(cfg, resolve=False)
    if cfg.get("ckpt_path"):
        # first: a resume that changes the run's settings is told which, whatever else
        check_same_settings(cfg, resumed, cfg.ckpt_path, this_config_folder())
    check_accelerator(
        cfg,
        "with trainer=cpu (the CPU recipes: experiment=camvid_quick, "
        "experiment=hippocampus_unet3d)",
    )
    check_training_values(cfg)
    unvalidated = never_validates(cfg.trainer) if cfg.get("train", True) else None
    if unvalidated:  # said now, not only after training when the test finds no best.ckpt
        log.warning(
            "%s: no val metrics and no best.ckpt; %s",
            unvalidated,
            "the test scores the last weights" if cfg.get("test", True) else "only last.ckpt",
        )
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    if resumed is not None:
        # continue the same run: checkpoints, TensorBoard curves and metrics.json go on there
        with open_dict(cfg):
            cfg.paths.output_dir = str(resumed)
        log.info("resuming %s in %s", cfg.ckpt_path, resumed)
    out_dir = Path(cfg.paths.output_dir)
    if resumed is None and rank_zero_only.rank == 0:
        # the other ranks start after rank 0 has begun writing here, so only it checks
        refuse_run_folder_in_use(
            out_dir,
            "a new training run",
            f", or resume: {override('ckpt_path', out_dir / 'checkpoints' / 'last.ckpt')}",
        )
    fit_workers_to_cpu(cfg)
    dm = build_datamodule(cfg)
    prepare(cfg, dm)
    # a split that is not there stops the run now, not after training
    test_split = dm.test_split() if cfg.get("test", True) else None
    if rank_zero_only.rank == 0:
        # after the monitor and a resumed run's folder are filled in: the config that runs
        log_config(cfg)
    init_ckpt = check_start_checkpoints(cfg, dm)
    # before any data is read: a model setting the module refuses stops the run now
    module = build_module(cfg, dm)
    check_datamodule_provides(cfg, dm, module)
    module.run_settings = settings
    if init_ckpt is not None:
        load_weights(module, init_ckpt, cfg.init_from)
        log.info("new run from the weights of %s (fresh optimizer and schedule)", cfg.init_from)
    test_items = None
    if cfg.get("train", True):
        dm.setup("fit")  # reads the data; the class weights come from the training labels
        module.set_class_weights(dm.class_weights)
        if test_split is not None:
            test_items = dm.read_split(test_split)  # a bad test file stops the run now
    trainer = build_trainer(cfg)
    if test_items is not None:  # a test split too small for the processes: now, not after training
        check_shareable(test_items, trainer.world_size, f"'{test_split}'")
    objects = {"cfg": cfg, "datamodule": dm, "module": module, "trainer": trainer}
    metrics: dict[str, float] = {}
    if cfg.get("train", True) and trainer.is_global_zero:
        record_split(out_dir, dm, resumed=resumed is not None)

    if cfg.get("train", True):
        try:
            training_starts()
            # weights_only: Lightning's own read of a resumed checkpoint cannot run code
            trainer.fit(module, datamodule=dm, ckpt_path=cfg.get("ckpt_path"), weights_only=True)
        except SIGTERMException:
            # CheckpointOnInterrupt has saved last.ckpt; a stopped run is not tested. The
            # command is said once (rank 0); the other ranks stop with the same failure code
            said = "training interrupted; resume with python train.py " + override(
                "ckpt_path", out_dir / "checkpoints" / "last.ckpt"
            )
            raise SystemExit(said if trainer.is_global_zero else 1) from None
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1})

    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    objects["best_ckpt"] = best
    # the train/* and val/* values in metrics.json are the last epoch's: it says which
    # epochs (rank 0, which writes it, has waited for its checkpoint writes when fit ends)
    epochs = {}
    if cfg.get("train", True) and trainer.is_global_zero:
        epochs = {"epochs_trained": trainer.current_epoch, "best_epoch": saved_epoch(best)}
    if cfg.get("test", True):
        # Rank 0 writes checkpoints in a background thread and waits for it when fit ends;
        # the other ranks must wait for rank 0 before they read the file.
        trainer.strategy.barrier("best checkpoint written")
        if best:
            ckpt = read_checkpoint(best, "best checkpoint")
            module.load_state_dict(ckpt["state_dict"])
            module.bn_recomputed = ckpt.get("bn_recomputed")
            log.info("testing the best checkpoint %s", best)
        else:
            why = (
                f" (no validation reported {module.monitor})"
                if cfg.get("train", True) and trainer.checkpoint_callback
                else ""
            )
            log.warning("no best checkpoint was saved%s: testing the weights as they are now", why)
        test_metrics, split = run_test(trainer, module, dm, cfg, store_in=best or None)
        metrics.update(test_metrics)
        if trainer.is_global_zero:
            print_table(test_metrics, f"{Path(best).name if best else 'final weights'} on {split}")
            write_outputs(out_dir, module, dm, metrics, split, best, cfg, **epochs)
    elif cfg.get("train", True) and trainer.is_global_zero:
        # untested (test=false, as in a search on val): the best validation score is still
        # what a sweep's summary, a search or the parallel launcher read from the run
        write_metrics(
            out_dir / "metrics.json",
            metrics,
            split=None,
            ckpt_path=best,
            monitor=module.monitor,
            **epochs,
        )

    if trainer.is_global_zero:
        log_summary(
            out_dir,
            objects.get("best_ckpt"),
            split if cfg.get("test", True) else None,
            metrics,
            epochs.get("best_epoch"),
            limited=(module.tested_batches or {}).get("by"),
            monitor=module.monitor,
        )
    if trainer.is_global_zero:  # the run's record, as each tracker keeps files
        for name in ("metrics.json", "per_case.csv", "splits.json"):
            if (out_dir / name).is_file():
                record_file(trainer, out_dir / name)
    for logger in trainer.loggers:
        # "hp/" names: the logger also writes these as scalars at step 0, which must not
        # add a stray point to the val/* and test/* curves.
        final = {f"hp/{k}": v for k, v in metrics.items() if k.count("/") == 1}
        params = OmegaConf.to_container(cfg, resolve=True)
        if "metrics" in inspect.signature(logger.log_hyperparams).parameters:
            logger.log_hyperparams(params, metrics=final)  # TensorBoard's HPARAMS tab
        else:  # CSV, MLflow, W&B: the settings, and the final scores beside them
            logger.log_hyperparams(params)
            logger.log_metrics(final)
        logger.finalize("success")
    return metrics, objects
