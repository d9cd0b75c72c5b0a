"""The objects of a run, built from its config: the DataModule, the LightningModule (its
data described by the DataModule) and the Trainer, fitted to the machine it runs on."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from lightning.pytorch.accelerators import CUDAAccelerator
from lightning.pytorch.callbacks import LearningRateMonitor
from omegaconf import DictConfig, OmegaConf, open_dict

from segnet.data.base import SegmentationDataModule
from segnet.data.info import DataInfo
from segnet.data.patch_plan import middle_spacing
from segnet.models.layers import check_pools
from segnet.runs.console import raised_here
from segnet.training.callbacks.progress import EpochLog, progress_bar
from segnet.training.checkpoint_io import write_checkpoints_atomically
from segnet.training.module import SegmentationModule, check_monitor, enable_tf32
from segnet.training.tracker_guard import guard_loggers

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
    data_cfg = OmegaConf.to_container(cfg.data, resolve=True)
    # what the data gave itself (a class list beside the images, its void added to any
    # given), as if it had been set
    data_cfg.update(dm.settings_found())
    module.hparams["data_cfg"] = data_cfg
    return module


def module_for(cfg: DictConfig, info: DataInfo, class_weights=None) -> SegmentationModule:
    """``cfg.model`` built for data described by ``info`` (a UNet's depth planned from the
    training patch, where the data plans one), its ``monitor`` (null: the dataset's own)
    checked against the scores validation reports."""
    monitor = cfg.get("monitor") or info.monitor
    net = OmegaConf.to_container(cfg.model.net, resolve=True)
    planned = planned_net(net, info)
    if info.patch_size is not None and planned.get("name") == "unet":
        say_net_plan(net, planned, info.patch_size)
    overrides = {"net": planned} if planned != net else {}
    module = build(
        cfg.model, data=info.to_dict(), class_weights=class_weights, monitor=monitor, **overrides
    )
    check_monitor(module.monitor, module.validation_scores())
    return module


def prepare(cfg: DictConfig, dm: SegmentationDataModule) -> None:
    """Fetch and describe the data (no images read yet); a ``monitor: null`` becomes the
    dataset's own (val/miou for scenes, val/dice for volumes)."""
    dm.prepare_data()
    if cfg.get("monitor") is None:
        with open_dict(cfg):
            cfg.monitor = dm.info().monitor


def build_trainer(
    cfg: DictConfig, progress: bool = True, extra_callbacks: tuple = (), **overrides: Any
) -> L.Trainer:
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    callbacks += extra_callbacks
    if progress:
        callbacks += [progress_bar(), EpochLog()]
    else:
        overrides["enable_progress_bar"] = False
    allow_mlflow_file_store(cfg)
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values() if c]
    # a tracker that fails or goes away never stops the run (segnet.training.tracker_guard)
    guard_loggers(loggers, Path(cfg.paths.output_dir))
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


def allow_mlflow_file_store(cfg: DictConfig) -> None:
    """``logger=mlflow`` with no server keeps a local store in ``outputs/mlruns``, a
    folder store that MLflow 3 refuses unless told otherwise (``MLFLOW_ALLOW_FILE_STORE``);
    a user's own setting of it wins."""
    for c in (cfg.get("logger") or {}).values():
        if c and str(c.get("_target_", "")).endswith("MLFlowLogger") and not c.get("tracking_uri"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


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


# the smallest side a planned UNet leaves its training patch at the bottom (nnU-Net's 4)
MIN_BOTTOM = 4
# an axis is halved only while its voxels are at most this many times the finest axis's
MAX_POOLED_RATIO = 2.0


def plan_pools(patch: Sequence[int], spacing: Sequence[float], max_levels: int) -> list[list[int]]:
    """Which axes each pooling level halves, as nnU-Net plans its poolings: those whose
    voxels are at most twice the finest axis's (a thick-slice axis waits until the others
    have caught up) and at least ``2 * MIN_BOTTOM`` long. A coarser axis too short to
    halve is kept while the finer ones go on; the levels end where an axis of the finest
    voxels is too short (square pixels: every axis at every level, as deep as the
    shortest side allows), or at ``max_levels``.

    Example:
        >>> plan_pools((32, 48, 32), (1.0, 1.0, 1.0), 4)
        [[2, 2, 2], [2, 2, 2], [2, 2, 2]]
        >>> plan_pools((32, 48, 12), (1.0, 1.0, 3.0), 4)
        [[2, 2, 1], [2, 2, 2], [2, 2, 1]]
    """
    size, mm, levels = [float(p) for p in patch], [float(s) for s in spacing], []
    while len(levels) < max_levels:
        finest = min(mm)
        if any(s < 2 * MIN_BOTTOM for s, m in zip(size, mm, strict=True) if m == finest):
            break
        level = [
            2 if m <= MAX_POOLED_RATIO * finest and s >= 2 * MIN_BOTTOM else 1
            for s, m in zip(size, mm, strict=True)
        ]
        levels.append(level)
        size = [s / k for s, k in zip(size, level, strict=True)]
        mm = [m * k for m, k in zip(mm, level, strict=True)]
    return levels


def patch_spacing(info: DataInfo) -> list[float]:
    """The voxel size of the training patch: the spacing volumes are resampled to, else
    the middle (geometric) of the training cases' own; 1 per axis for images."""
    spacing = info.normalization.get("spacing")
    if spacing:
        return [float(s) for s in spacing]
    if info.voxel_sizes:
        return list(middle_spacing(*info.voxel_sizes))
    return [1.0] * info.spatial_dims


def planned_net(net: dict[str, Any], info: DataInfo) -> dict[str, Any]:
    """A UNet's poolings planned from the training patch, where the data plans one (your
    own images, volumes, given or planned): :func:`plan_pools`, the deepest
    levels of ``features`` (and of a per-stage ``convs``) that would halve no axis
    dropped, and ``pools`` set where some level keeps an axis. Any other network, pools
    given, or data without a planned patch, as given."""
    features = net.get("features")
    if (
        net.get("name") != "unet"
        or info.patch_size is None
        or not isinstance(features, list)
        or net.get("pools") is not None
    ):
        return net
    pools = plan_pools(info.patch_size, patch_spacing(info), len(features) - 1)
    pools = pools or [[2] * info.spatial_dims]  # one level at least, as a UNet has
    levels = len(pools) + 1
    planned = {**net, "features": list(features[:levels])}
    if isinstance(net.get("convs"), list):
        planned["convs"] = list(net["convs"][:levels])
    if any(1 in level for level in pools):
        planned["pools"] = pools
    return planned


def say_net_plan(net: dict[str, Any], planned: dict[str, Any], patch: Sequence[int]) -> None:
    """One line: the planned network's depth, which axes each level halves where not
    every one, and what the training patch is at the bottom."""
    levels = len(planned["features"]) - 1
    # pools given are checked here first: the message names the setting
    pools = check_pools(planned.get("pools"), len(patch), levels)
    bottom = list(patch)
    for level in pools:
        bottom = [math.ceil(b / k) for b, k in zip(bottom, level, strict=True)]
    dropped = len(net["features"]) - len(planned["features"])
    log.info(
        "network plan: %s, %d poolings (features %s%s%s): the %s patch is %s at the bottom",
        planned["name"],
        levels,
        planned["features"],
        f", halving {' then '.join('x'.join(map(str, level)) for level in pools)}"
        if planned.get("pools")
        else "",
        f", the deepest {dropped} level(s) of model.net.features dropped" if dropped else "",
        "x".join(map(str, patch)),
        "x".join(map(str, bottom)),
    )
