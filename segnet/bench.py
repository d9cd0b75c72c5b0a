"""Benchmark: the full training pipeline against a bare PyTorch loop, and more.

``python -m segnet.bench`` prints, per recipe: training throughput of the pipeline as
train.py runs it, of a hand-written loop over the same network, loader and optimizer, their
ratio, the data pipeline alone, inference throughput and peak memory, and achieved FLOP/s
(against the device's peak where it is known). Figures are medians over repeats after a
warm-up; nothing here asserts a time.
"""

from __future__ import annotations

import copy
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig, open_dict

# Dense bf16 tensor-core peaks, FLOP/s, for devices we can name.
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None  # no reliable figure for CPUs
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)


def peak_memory_gb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB -> GB (Linux)


def step_flops(module, batch: dict) -> float:
    """FLOPs of one training step (forward + backward), counted by PyTorch."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        module.compute_loss(module.net(batch["image"]), batch["label"]).backward()
    module.net.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


class StepTimer(L.Callback):
    """Wall time of each training step as Lightning runs it (data loading included)."""

    def __init__(self, device: torch.device):
        self.device, self.times, self._last = device, [], None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        _sync(self.device)
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now


def median_rate(times: list[float], per_step: float, warmup: int) -> float:
    timed = times[warmup:] or times
    return per_step / statistics.median(timed)


def pipeline_rate(cfg: DictConfig, steps: int, warmup: int) -> tuple[float, list[float], Any, Any]:
    from segnet.pipeline import build_datamodule, build_module, build_trainer

    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.trainer.max_steps = steps + warmup + 1
        cfg.trainer.limit_val_batches = 0
        cfg.trainer.num_sanity_val_steps = 0
        cfg.trainer.enable_model_summary = False
        cfg.callbacks = {}
        cfg.logger = {}
    dm = build_datamodule(cfg)
    module = build_module(cfg, dm)
    trainer = build_trainer(cfg, progress=False, enable_checkpointing=False)
    timer = StepTimer(trainer.strategy.root_device)
    trainer.callbacks.append(timer)
    trainer.fit(module, datamodule=dm)
    return median_rate(timer.times, dm.batch_size, warmup), timer.times, dm, module


def bare_rate(dm, module, steps: int, warmup: int, device: torch.device) -> float:
    """A hand-written loop: same network, loader and optimizer, no Lightning."""
    net, loss_fn = module.net.to(device).train(), module.compute_loss
    optimizer = module.optimizer_factory(params=net.parameters())
    loader: Iterator = iter(dm.train_dataloader())
    times, last = [], None
    for _ in range(steps + warmup + 1):
        try:
            batch = next(loader)
        except StopIteration:
            loader = iter(dm.train_dataloader())
            batch = next(loader)
        x, y = (
            batch["image"].to(device, non_blocking=True),
            batch["label"].to(device, non_blocking=True),
        )
        optimizer.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        optimizer.step()
        _sync(device)
        now = time.perf_counter()
        if last is not None:
            times.append(now - last)
        last = now
    return median_rate(times, dm.batch_size, warmup)


def data_rate(dm, batches: int) -> float:
    loader = dm.train_dataloader()
    it = iter(loader)
    next(it)  # workers started
    n, start = 0, time.perf_counter()
    while n < batches:
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        n += 1
    return n * len(batch["image"]) / (time.perf_counter() - start)


@torch.no_grad()
def inference_rate(dm, module, samples: int, device: torch.device) -> tuple[float, float]:
    module = module.to(device).eval()
    dataset = dm.datasets["val"]
    n = min(samples, len(dataset))
    items = [dataset[i] for i in range(n)]
    module.predict_logits(items[0]["image"][None].to(device))  # warm-up
    _sync(device)
    start = time.perf_counter()
    voxels = 0
    for item in items:
        x = item["image"][None].to(device)
        module.predict_logits(x, item["label"].shape).argmax(1)
        voxels += item["label"].numel()
    _sync(device)
    elapsed = time.perf_counter() - start
    return n / elapsed, voxels / elapsed


def bench_recipe(name: str, cfg: DictConfig, b: DictConfig, out: Callable[[str], None]) -> dict:
    pipe, bare, data = [], [], []
    dm = module = None
    for _ in range(b.repeats):
        rate, _, dm, module = pipeline_rate(cfg, b.steps, b.warmup)
        pipe.append(rate)
        device = next(module.parameters()).device
        bare.append(bare_rate(dm, module, b.steps, b.warmup, device))
        data.append(data_rate(dm, b.data_batches))
    device = next(module.parameters()).device
    unit_size = dm.datasets["train"][0]["label"].numel()
    infer, infer_voxels = inference_rate(dm, module, b.inference_samples, device)
    batch = next(iter(dm.train_dataloader()))
    batch = {k: v.to(device) for k, v in batch.items() if torch.is_tensor(v)}
    flops_per_sample = step_flops(module, batch) / len(batch["image"])
    result = {
        "pipeline_samples_s": statistics.median(pipe),
        "bare_samples_s": statistics.median(bare),
        "data_samples_s": statistics.median(data),
        "inference_samples_s": infer,
        "inference_voxels_s": infer_voxels,
        "peak_memory_gb": peak_memory_gb(device),
        "train_voxels_per_sample": unit_size,
    }
    result["ratio"] = result["pipeline_samples_s"] / result["bare_samples_s"]
    result["data_over_training"] = result["data_samples_s"] / result["pipeline_samples_s"]
    result["achieved_flops"] = flops_per_sample * result["pipeline_samples_s"]
    peak = peak_flops(device)
    result["mfu"] = result["achieved_flops"] / peak if peak else None
    unit = "images" if dm.spatial_dims == 2 else "patches"
    out(f"\n== {name} on {device} ({torch.get_num_threads()} threads) ==")
    out(
        f"training, full pipeline : {result['pipeline_samples_s']:8.2f} {unit}/s "
        f"({result['pipeline_samples_s'] * unit_size / 1e6:.2f} Mvoxel/s)"
    )
    out(f"training, bare loop     : {result['bare_samples_s']:8.2f} {unit}/s")
    out(f"pipeline / bare         : {result['ratio']:8.3f}")
    out(
        f"data pipeline alone     : {result['data_samples_s']:8.1f} {unit}/s "
        f"({result['data_over_training']:.1f}x what training consumes)"
    )
    out(f"inference               : {infer:8.2f} samples/s ({infer_voxels / 1e6:.2f} Mvoxel/s)")
    out(f"peak memory             : {result['peak_memory_gb']:8.2f} GB")
    mfu = f", {100 * result['mfu']:.1f}% of peak" if result["mfu"] else " (device peak unknown)"
    out(f"achieved                : {result['achieved_flops'] / 1e9:8.1f} GFLOP/s{mfu}")
    return result


def run(cfg: DictConfig) -> dict[str, dict]:
    from hydra import compose

    results = {}
    for name in cfg.run:
        overrides = [*cfg.recipes[name], *cfg.extra_overrides]
        recipe_cfg = compose("train", overrides=overrides)
        with open_dict(recipe_cfg):
            recipe_cfg.paths.output_dir = cfg.paths.output_dir
        results[name] = bench_recipe(name, recipe_cfg, cfg, print)
    return results


def _main() -> None:
    import hydra

    @hydra.main(version_base="1.3", config_path="../configs", config_name="bench")
    def main(cfg: DictConfig) -> None:
        run(cfg)

    main()


if __name__ == "__main__":
    _main()
