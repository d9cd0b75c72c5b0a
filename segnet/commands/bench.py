"""Benchmark what users live with: the training pipeline against a bare PyTorch loop.

``python -m segnet.bench [trainer=gpu]`` prints, per recipe:

- steady-state training steps/s of the pipeline as train.py runs it, of a hand-written
  loop over the same network, loader, optimizer, device, precision (autocast), compile and
  memory format, and of the network alone (the same network, loss and optimizer on one
  batch already on the device, synchronised once per window): where time goes between
  data, copies, Python and the network itself. The three windows are interleaved and
  repeated, and each line gives its min and max beside the median;
- whole epochs: wall time of train.py's epochs (validation, callbacks, pictures and
  checkpoints included) against bare epochs doing the same work (training plus one
  validation pass), after a first epoch that pays for compilation and is reported apart;
- the data pipeline per worker, and how many workers a target rate needs;
- the cost of one weight-EMA update, per tensor (Lightning's) and fused (the GPU recipes');
- inference throughput, peak memory, and achieved FLOP/s (MFU against the device's bf16
  peak where it is known);
- with ``profile=N``, PyTorch's profiler over N steps of the network alone: a table of the
  operators and kernels by their own device time, ``profile_<recipe>.txt`` in the output
  folder, as evidence of where a step's time goes.

The figures are also written to ``bench.json`` in the output folder.

Figures are medians; nothing here asserts a time.
"""

from __future__ import annotations

import copy
import json
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from omegaconf import DictConfig, open_dict

if TYPE_CHECKING:
    import lightning as L

# Dense bf16 tensor-core peaks, FLOP/s, for devices we can name.
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
DEFAULT_RUN = ("camvid", "hippocampus", "images")
GPU_ONLY = ("camvid_full",)


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


def step_flops(module, batch: dict, amp) -> float:
    """FLOPs of one training step (forward + backward), counted by PyTorch on the eager
    network (``net.forward`` bypasses the compiled call, which the counter cannot see)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        with amp:
            logits = module.net.forward(batch["image"])
        module.compute_loss(logits, batch["label"]).backward()
    module.net.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def step_timer(device: torch.device):
    """A :class:`StepTimer` for ``device``: a Lightning callback, made where a recipe is
    built, so that the command line (``--help``) does not wait for Lightning to import."""
    import lightning as L

    class StepTimer(L.Callback):
        """Wall time of each training step as Lightning runs it (data loading included), and
        of each whole epoch (from one epoch's end to the next: validation, callbacks and
        checkpoints included)."""

        def __init__(self, device: torch.device):
            self.device, self.times, self.epochs = device, [], []
            self._last = self._epoch_end = None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            _sync(self.device)
            now = time.perf_counter()
            if self._last is not None:
                self.times.append(now - self._last)
            self._last = now

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            if self._epoch_end is None:
                self._epoch_end = time.perf_counter()
            self._last = None  # the step after an epoch boundary includes validation

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            _sync(self.device)
            now = time.perf_counter()
            self.epochs.append(now - self._epoch_end)
            self._epoch_end = now

    return StepTimer(device)


def spread(values: list[float]) -> tuple[float, float, float]:
    """min, median, max"""
    return min(values), statistics.median(values), max(values)


def span(values: list[float]) -> str:
    lo, _, hi = spread(values)
    return f"(min {lo:.2f}, max {hi:.2f})"


def steady(times: list[float], skip: int) -> float:
    return statistics.median(times[skip:] or times)


def build(cfg: DictConfig, **trainer_overrides: Any):
    from segnet.runs.building import build_datamodule, build_module, build_trainer, prepare
    from segnet.runs.console import quiet_library_noise

    quiet_library_noise()
    dm = build_datamodule(cfg)
    prepare(cfg, dm)
    dm.setup("fit")
    module = build_module(cfg, dm)
    trainer = build_trainer(cfg, progress=False, **trainer_overrides)
    timer = step_timer(trainer.strategy.root_device)
    trainer.callbacks.append(timer)
    return dm, module, trainer, timer


def pipeline_steps(cfg: DictConfig, steps: int, warmup: int):
    """Training steps only: no validation, callbacks or loggers."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.trainer.max_steps = steps + warmup + 1
        cfg.trainer.max_epochs = -1
        cfg.trainer.limit_val_batches = 0
        cfg.trainer.num_sanity_val_steps = 0
        cfg.trainer.enable_model_summary = False
        cfg.callbacks = {}
        cfg.logger = {}
    dm, module, trainer, timer = build(cfg, enable_checkpointing=False)
    trainer.fit(module, datamodule=dm)
    return dm, module, trainer, timer.times


def pipeline_epochs(cfg: DictConfig, epochs: int, out_dir: str) -> list[float]:
    """Whole epochs exactly as train.py runs them (all callbacks, logger, checkpoints)."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.trainer.max_epochs = epochs
        # every epoch validates, as the bare epochs do (a recipe may validate less often)
        cfg.trainer.check_val_every_n_epoch = 1
        cfg.trainer.num_sanity_val_steps = 0
        cfg.trainer.enable_model_summary = False
        cfg.paths.output_dir = out_dir  # checkpoints and TensorBoard follow it
    dm, module, trainer, timer = build(cfg)
    trainer.fit(module, datamodule=dm)
    return timer.epochs


class BareLoop:
    """A hand-written loop: same network, loader, optimizer, device, precision."""

    def __init__(self, dm, module, trainer: L.Trainer):
        self.device = trainer.strategy.root_device
        self.module = module.to(self.device)
        if not module._accelerated:
            module.accelerate(self.device)
        from segnet.runs.batch_plan import autocast_for

        self.amp = autocast_for(trainer.precision, self.device.type)
        self.dm, self.net = dm, module.net
        self.optimizer = module.optimizer_factory(params=self.net.parameters())
        self.memory = torch.channels_last if module.channels_last else torch.contiguous_format

    def _to(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        x = batch["image"].to(self.device, non_blocking=True).contiguous(memory_format=self.memory)
        return x, batch["label"].to(self.device, non_blocking=True)

    def train_step(self, batch: dict) -> None:
        self._update(*self._to(batch))

    def _update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self.amp:
            logits = self.net(x)
        self.module.compute_loss(logits, y).backward()
        self.optimizer.step()

    def synthetic_rate(self, batch: dict, steps: int, warmup: int) -> float:
        """Samples/s of the network alone: the recipe's network, loss and optimizer on one
        batch already on the device, stepped ``steps`` times with one synchronisation at
        the end (no loader, no copies, no per-step sync): what the network itself can do,
        the ceiling for the bare loop and the pipeline."""
        self.net.train()
        x, y = self._to(batch)
        for _ in range(warmup):
            self._update(x, y)
        _sync(self.device)
        start = time.perf_counter()
        for _ in range(steps):
            self._update(x, y)
        _sync(self.device)
        return len(x) * steps / (time.perf_counter() - start)

    def profile(self, batch: dict, steps: int, path: Path) -> Path:
        """PyTorch's profiler over ``steps`` steps of the network alone (after
        :meth:`synthetic_rate` warmed it up): operators and kernels by their own time on
        the device (on the CPU, by their own CPU time), written to ``path``."""
        from torch.profiler import ProfilerActivity, profile

        self.net.train()
        x, y = self._to(batch)
        activities = [ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        with profile(activities=activities) as prof:
            for _ in range(steps):
                self._update(x, y)
            _sync(self.device)
        key = "self_device_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=key, row_limit=40, max_name_column_width=70)
        path.write_text(f"{steps} steps of the network alone, batch {len(x)}\n{table}\n")
        return path

    @torch.no_grad()
    def eval_step(self, batch: dict, with_loss: bool = False) -> None:
        """Prediction at the label's size; ``with_loss`` also the validation loss, as a
        hand-written loop that reports it computes it (the bare epochs do)."""
        x, y = self._to(batch)
        with self.amp:
            # single-pass, as validation predicts: a recipe's mirroring TTA (up to 8 passes per
            # volume) belongs to its test stage only
            logits = self.module.predict_logits(x, y.shape[1:], tta=False)
            logits.argmax(1)
            if with_loss:
                self.module.compute_loss(logits, y, lovasz=False)  # as validation does

    def step_times(self, steps: int) -> list[float]:
        self.net.train()
        loader: Iterator = iter(self.dm.train_dataloader())
        times, last = [], None
        for _ in range(steps + 1):
            try:
                batch = next(loader)
            except StopIteration:
                loader = iter(self.dm.train_dataloader())
                batch = next(loader)
            self.train_step(batch)
            _sync(self.device)
            now = time.perf_counter()
            if last is not None:
                times.append(now - last)
            last = now
        return times

    def epoch_times(self, epochs: int) -> list[float]:
        out = []
        for _ in range(epochs):
            start = time.perf_counter()
            self.net.train()
            for batch in self.dm.train_dataloader():
                self.train_step(batch)
            self.net.eval()
            for batch in self.dm.val_dataloader():
                self.eval_step(batch, with_loss=True)
            _sync(self.device)
            out.append(time.perf_counter() - start)
        return out

    def inference_rate(self) -> tuple[float, float]:
        """Validation-set samples (and voxels) per second, as validation batches them."""
        self.net.eval()
        batches = list(self.dm.val_dataloader())
        self.eval_step(batches[0])  # warm-up (compilation for eval shapes)
        _sync(self.device)
        start = time.perf_counter()
        samples = voxels = 0
        for batch in batches:
            self.eval_step(batch)
            samples += len(batch["label"])
            voxels += batch["label"].numel()
        _sync(self.device)
        elapsed = time.perf_counter() - start
        return samples / elapsed, voxels / elapsed


def ema_update_ms(module, device: torch.device, repeats: int = 20) -> dict[str, float]:
    """Milliseconds per weight-EMA update of this module (what the GPU recipes' EMA callback
    adds to every step): Lightning's per-tensor update against the fused one
    (``segnet.training.callbacks.ema``), both on ``AveragedModel`` as the callbacks build it."""
    from torch.optim.swa_utils import AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn

    kinds = {
        "per_tensor": {"avg_fn": get_ema_avg_fn(0.999)},
        "fused": {"multi_avg_fn": get_ema_multi_avg_fn(0.999)},
    }
    result = {}
    for kind, fn in kinds.items():
        average = AveragedModel(module, use_buffers=True, **fn)
        average.update_parameters(module)  # the first update copies the weights
        times = []
        for _ in range(repeats):
            _sync(device)
            start = time.perf_counter()
            average.update_parameters(module)
            _sync(device)
            times.append(time.perf_counter() - start)
        result[kind] = 1e3 * statistics.median(times)
    return result


def data_rate_per_worker(dm, samples: int) -> float:
    """Training samples per second that one loader worker (one thread) produces."""
    dataset = dm.datasets["train"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a DataLoader worker
    try:
        dataset[0]
        start = time.perf_counter()
        for i in range(samples):
            dataset[i % len(dataset)]
        return samples / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)


def bench_recipe(name: str, cfg: DictConfig, b: DictConfig, out: Callable[[str], None]) -> dict:
    # the three timed windows interleaved, each repeated: a machine's drift (another
    # process, clock changes) falls on all three alike, and the spread says how far a
    # ratio can be read
    pipe, bare, alone = [], [], []
    for _ in range(b.repeats):
        dm, module, trainer, times = pipeline_steps(cfg, b.steps, b.warmup)
        pipe.append(dm.batch_size / steady(times, b.warmup))
        loop = BareLoop(dm, module, trainer)
        bare.append(dm.batch_size / steady(loop.step_times(b.steps + b.warmup), b.warmup))
        alone.append(loop.synthetic_rate(next(iter(dm.train_dataloader())), b.steps, b.warmup))
    device = loop.device
    profile = None
    if b.profile:
        path = Path(cfg.paths.output_dir) / f"profile_{name}.txt"
        profile = loop.profile(next(iter(dm.train_dataloader())), b.profile, path)
    with tempfile.TemporaryDirectory() as tmp:
        pipe_epochs = pipeline_epochs(cfg, b.epochs, tmp)
    bare_epochs = loop.epoch_times(b.epochs)
    infer, infer_voxels = loop.inference_rate()
    per_worker = data_rate_per_worker(dm, b.data_samples)
    ema = ema_update_ms(module, device)
    batch = next(iter(dm.train_dataloader()))
    batch = {k: v.to(device) for k, v in batch.items() if torch.is_tensor(v)}
    flops_per_sample = step_flops(module, batch, loop.amp) / len(batch["image"])
    r = {
        "device": str(device),
        "precision": str(trainer.precision),
        "compiled": module.compiled,
        "channels_last": module.channels_last,
        "pipeline_samples_s": statistics.median(pipe),
        "bare_samples_s": statistics.median(bare),
        "network_samples_s": statistics.median(alone),
        "windows": {"pipeline": pipe, "bare": bare, "network": alone},
        "pipeline_first_epoch_s": pipe_epochs[0],
        "pipeline_epoch_s": steady(pipe_epochs, 1),
        "bare_first_epoch_s": bare_epochs[0],
        "bare_epoch_s": steady(bare_epochs, 1),
        "data_samples_s_per_worker": per_worker,
        "num_workers": dm.num_workers,
        "inference_samples_s": infer,
        "inference_voxels_s": infer_voxels,
        "peak_memory_gb": peak_memory_gb(device),
        "flops_per_sample": flops_per_sample,
        "ema_update_ms": ema,
        "profile": str(profile) if profile else None,
    }
    r["ratio"] = r["pipeline_samples_s"] / r["bare_samples_s"]
    r["ratio_spread"] = spread([p / q for p, q in zip(pipe, bare, strict=True)])
    r["network_ratio"] = r["pipeline_samples_s"] / r["network_samples_s"]
    r["epoch_ratio"] = r["pipeline_epoch_s"] / r["bare_epoch_s"]
    r["achieved_flops"] = flops_per_sample * r["pipeline_samples_s"]
    peak = peak_flops(device)
    r["mfu"] = r["achieved_flops"] / peak if peak else None
    shape = tuple(batch["image"].shape[2:])
    report(name, r, dm, b, out, shape)
    return r


def report(
    name: str, r: dict, dm: Any, b: DictConfig, out: Callable[[str], None], shape: tuple
) -> None:
    """A recipe's figures as the bench prints them, one per line."""
    pipe, bare, alone = (r["windows"][k] for k in ("pipeline", "bare", "network"))
    device, per_worker, ema = r["device"], r["data_samples_s_per_worker"], r["ema_update_ms"]
    infer, infer_voxels = r["inference_samples_s"], r["inference_voxels_s"]
    flops_per_sample = r["flops_per_sample"]
    unit, one = ("images", "image") if dm.info().spatial_dims == 2 else ("patches", "patch")
    workers_needed = -(-b.target_rate // per_worker)
    out(
        f"\n== {name} on {device} ({torch.get_num_threads()} threads), {r['precision']}, "
        f"compile {'on' if r['compiled'] else 'off'}, channels_last "
        f"{'on' if r['channels_last'] else 'off'}, batch {dm.batch_size} of "
        f"{shape} =="
    )
    n = f"over {b.repeats} interleaved window(s)"
    out(f"training steps, pipeline  : {r['pipeline_samples_s']:9.2f} {unit}/s {span(pipe)}")
    out(f"training steps, bare loop : {r['bare_samples_s']:9.2f} {unit}/s {span(bare)}")
    out(f"network alone (synthetic) : {r['network_samples_s']:9.2f} {unit}/s {span(alone)}")
    lo, med, hi = r["ratio_spread"]
    out(
        f"pipeline / bare           : {r['ratio']:9.3f} (per window min {lo:.3f}, max {hi:.3f}, {n})"
    )
    out(
        f"pipeline / network alone  : {r['network_ratio']:9.3f} (what data, copies and Python "
        "around the step cost)"
    )
    out(
        f"epoch, train.py          : {r['pipeline_epoch_s']:9.2f} s "
        f"(first epoch {r['pipeline_first_epoch_s']:.2f} s, with start-up)"
    )
    out(f"epoch, bare loop         : {r['bare_epoch_s']:9.2f} s (training + one validation pass)")
    out(f"epoch train.py / bare    : {r['epoch_ratio']:9.3f}")
    out(
        f"data pipeline            : {per_worker:9.1f} {unit}/s per worker; "
        f"{workers_needed:.0f} workers for {b.target_rate}/s (configured: {dm.num_workers})"
    )
    out(f"inference                : {infer:9.2f} samples/s ({infer_voxels / 1e6:.2f} Mvoxel/s)")
    out(
        f"weight EMA update        : {ema['per_tensor']:9.2f} ms per step per tensor (Lightning), "
        f"{ema['fused']:.2f} ms fused (the GPU recipes')"
    )
    out(f"peak memory              : {r['peak_memory_gb']:9.2f} GB")
    mfu = f", {100 * r['mfu']:.1f}% of bf16 peak" if r["mfu"] else " (device peak unknown)"
    out(
        f"achieved                 : {r['achieved_flops'] / 1e9:9.1f} GFLOP/s "
        f"({flops_per_sample / 1e9:.0f} GFLOP per training {one}){mfu}"
    )
    if r["profile"]:
        out(f"profile                  : {r['profile']}")


def hydra_of(cfg: DictConfig) -> DictConfig:
    """The Hydra part of the bench's config: in it (composed with it, as in tests) or the
    running app's."""
    if "hydra" in cfg:
        return cfg.hydra
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get()


def trainer_choice(cfg: DictConfig) -> str:
    """The trainer option the bench was given (``trainer=gpu``), passed on to each recipe."""
    return hydra_of(cfg).runtime.choices.trainer


def trainer_settings(cfg: DictConfig) -> list[str]:
    """The trainer settings the bench was given (``trainer.precision=bf16-mixed``), passed
    on to each recipe after its own, as train.py takes them: the recipes are composed
    anew, so without this they would be measured at their own settings in silence."""
    task = hydra_of(cfg).overrides.task
    return [o for o in task if o.lstrip("+~").startswith("trainer.")]


def recipes_to_run(cfg: DictConfig) -> list[str]:
    if cfg.run is not None:
        unknown = [r for r in cfg.run if r not in cfg.recipes]
        if unknown:
            raise ValueError(f"run={list(cfg.run)}: unknown {unknown}; known: {list(cfg.recipes)}")
        return list(cfg.run)
    gpu = torch.cuda.is_available() and cfg.trainer.accelerator != "cpu"
    return [*DEFAULT_RUN, *(GPU_ONLY if gpu else ())]


def recipe_overrides(cfg: DictConfig, name: str) -> list[str]:
    return [
        *cfg.recipes[name],
        f"trainer={trainer_choice(cfg)}",
        *trainer_settings(cfg),
        *cfg.extra_overrides,
    ]


def run(cfg: DictConfig, out: Callable[[str], None] = print) -> dict[str, dict]:
    from hydra import compose

    from segnet.runs.checks import check_accelerator

    names = recipes_to_run(cfg)
    recipes = {name: compose("train", overrides=recipe_overrides(cfg, name)) for name in names}
    for recipe_cfg in recipes.values():  # extra_overrides included, before any recipe runs
        check_accelerator(recipe_cfg, "without trainer=gpu (it benchmarks the CPU recipes)")
    skipped = [n for n in GPU_ONLY if n not in names]
    if skipped:
        out(f"skipped {skipped}: full size, hours on a CPU; run=[{','.join(skipped)}] runs it")
    results = {}
    for name, recipe_cfg in recipes.items():
        with open_dict(recipe_cfg):
            recipe_cfg.paths.output_dir = cfg.paths.output_dir
        results[name] = bench_recipe(name, recipe_cfg, cfg, out)
        record = Path(cfg.paths.output_dir) / "bench.json"
        record.write_text(json.dumps(results, indent=1, default=str) + "\n")
    if results:
        out(f"\nfigures: {record}")
    return results


def main() -> None:
    """``segnet-bench`` and ``python -m segnet.bench``: the command line read by Hydra."""
    import sys

    import hydra

    from segnet.runs.config_files import CONFIGS
    from segnet.runs.folders import output_dir_as_run_dir

    sys.argv[1:] = output_dir_as_run_dir(sys.argv[1:])

    @hydra.main(version_base="1.3", config_path=str(CONFIGS), config_name="bench")
    def bench(cfg: DictConfig) -> None:
        run(cfg)

    bench()


if __name__ == "__main__":
    main()
