"""The training batch planned from memory: the recipe's ``data.batch_size`` is the most a
run takes, and where one training step at that batch would not fit the memory of the
device it runs on (a 512x512 ``images_gpu`` batch on a small GPU, a large patch on a
laptop), the batch is lowered to what fits, said in the log, before anything trains: a
run that would stop at its first step with "out of memory" trains instead.

On a GPU the memory of a step is measured: a copy of the network takes a forward and
backward pass at batch 1 and 2 (at the training input's shape, in the run's precision),
and the difference of the peaks is the cost of one more sample. On the CPU it is
estimated from the outputs of every layer in one forward pass (what backward keeps),
twice over for their gradients: an allocator-level peak is not readable there."""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from segnet.data.memory import available_bytes

log = logging.getLogger(__name__)
GIB = 2**30
# shares of the free memory a training batch may plan on: the rest is for the optimizer's
# state, cuDNN's workspaces, the allocator's fragmentation; on the CPU, the loader
# workers, the decoded data and whatever else the machine runs
GPU_SHARE, CPU_SHARE = 0.8, 0.5


@dataclass
class StepMemory:
    """The memory of one training step: ``fixed`` bytes whatever the batch (weights,
    gradients, the optimizer's state) and ``per_sample`` more for each sample."""

    fixed: int
    per_sample: int
    measured: bool  # measured on the device (GPU), or estimated (CPU)

    def largest_batch(self, free: int) -> int:
        return int((free - self.fixed) // max(self.per_sample, 1))


def sum_outputs(out) -> torch.Tensor:
    """A scalar from a network's output (logits, or a list of them with deep supervision)."""
    if isinstance(out, (list, tuple)):
        return sum(sum_outputs(o) for o in out)
    return out.float().mean()


def autocast_for(precision: str, device_type: str):
    """The autocast context a Lightning precision (``bf16-mixed``, ``16-mixed``, ...)
    trains under; none for full or true-half precision."""
    precision = str(precision)
    if precision.startswith("bf16") and "mixed" in precision:
        return torch.autocast(device_type, dtype=torch.bfloat16)
    if precision.startswith("16") and "mixed" in precision:
        return torch.autocast(device_type, dtype=torch.float16)
    return contextlib.nullcontext()


def measured_on_gpu(
    net: nn.Module, shape: Sequence[int], device: torch.device, precision: str
) -> StepMemory:
    """Peak memory of a forward and backward pass of a copy of ``net`` at batch 1 and 2."""
    probe = copy.deepcopy(net).to(device).train()
    torch.cuda.synchronize(device)
    start = torch.cuda.memory_allocated(device)
    peaks = []
    try:
        for batch in (1, 2):
            torch.cuda.reset_peak_memory_stats(device)
            x = torch.zeros(batch, *shape, device=device)  # no random numbers drawn
            with autocast_for(precision, "cuda"):
                loss = sum_outputs(probe(x))
            loss.backward()
            torch.cuda.synchronize(device)
            peaks.append(torch.cuda.max_memory_allocated(device) - start)
            probe.zero_grad(set_to_none=True)
            del x, loss
    finally:
        del probe
        torch.cuda.empty_cache()
    per_sample = max(peaks[1] - peaks[0], 1)
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    # weights, their gradients and an Adam-like optimizer's two moments
    return StepMemory(max(peaks[0] - per_sample, 0) + 4 * params, per_sample, True)


def estimated_on_cpu(net: nn.Module, shape: Sequence[int], precision: str) -> StepMemory:
    """The outputs of every layer in one forward pass at batch 1 (what backward keeps),
    twice over for their gradients; the weights four times (gradients, optimizer state)."""
    kept = 0

    def count(module, inputs, output):
        nonlocal kept
        for t in output if isinstance(output, (list, tuple)) else (output,):
            if isinstance(t, torch.Tensor):
                kept += t.numel() * t.element_size()

    leaves = [m for m in net.modules() if not any(True for _ in m.children())]
    hooks = [m.register_forward_hook(count) for m in leaves]
    was_training = net.training
    try:
        net.eval()  # batch statistics untouched: the run's network is not to change
        with torch.no_grad(), autocast_for(precision, "cpu"):
            net(torch.zeros(1, *shape))
    finally:
        for h in hooks:
            h.remove()
        net.train(was_training)
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    return StepMemory(4 * params, 2 * kept, False)


def free_memory(device: torch.device) -> int | None:
    """Bytes a training batch may plan on: a share of the GPU's free memory, or of the
    memory Linux reports available; None where it cannot be read."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(GPU_SHARE * free)
    if device.type != "cpu":
        return None
    available = available_bytes()
    return None if available is None else int(CPU_SHARE * available)


def planned_batch(batch: int, memory: StepMemory, free: int, shape: Sequence[int]) -> int:
    """``batch``, or the largest that fits in ``free`` bytes; an input that does not fit
    even alone stops the run, saying what to lower."""
    fits = memory.largest_batch(free)
    size = "x".join(map(str, shape[1:]))
    if fits < 1:
        raise MemoryError(
            f"one training input of {size} ({shape[0]} channel(s)) needs about "
            f"{(memory.fixed + memory.per_sample) / GIB:.1f} GiB for a training step, and "
            f"{free / GIB:.1f} GiB can be planned on here: lower data.patch_size (or "
            "data.max_patch, data.crop_size), or train on a device with more memory."
        )
    how = "measured" if memory.measured else "estimated"
    if fits < batch:
        log.warning(
            "batch plan: data.batch_size=%d of %s inputs would need about %.1f GiB (%s), and "
            "%.1f GiB can be planned on here: training with batches of %d (more steps per "
            "epoch, the same inputs)",
            batch, size, (memory.fixed + batch * memory.per_sample) / GIB, how,
            free / GIB, fits,
        )  # fmt: skip
        return fits
    log.info(
        "batch plan: %d inputs of %s, about %.2f GiB per step (%s; up to %d would fit in the "
        "%.1f GiB planned on)",
        batch, size, (memory.fixed + batch * memory.per_sample) / GIB, how, fits,
        free / GIB,
    )  # fmt: skip
    return batch


def plan_batch(dm, net: nn.Module, device: torch.device, precision: str) -> None:
    """Fit ``dm.batch_size`` to the memory of ``device``, for the DataModule's training
    input (the patch, crop or frame the recipe trains on). Nothing changes where that
    input is not known, or the device's memory cannot be read."""
    batch = getattr(dm, "batch_size", None)
    shape = dm.train_input_shape()
    free = free_memory(device)
    if shape is None or not isinstance(batch, int) or free is None:
        return
    if device.type == "cuda":
        memory = measured_on_gpu(net, shape, device, precision)
    else:
        memory = estimated_on_cpu(net, shape, precision)
    dm.batch_size = planned_batch(batch, memory, free, shape)
