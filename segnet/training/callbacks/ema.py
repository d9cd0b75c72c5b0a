"""A weight EMA that updates all parameters with one fused kernel per dtype.

Lightning's ``EMAWeightAveraging`` hands ``AveragedModel`` a per-tensor ``avg_fn``, so every
optimizer step runs a Python loop of about four small kernels per parameter and buffer
(hundreds of launches for SegNet). On a GPU whose step takes a few milliseconds that loop is
a visible share of the step. ``AveragedModel`` already knows a batched path: given a
``multi_avg_fn`` it groups the tensors by device and dtype and calls it once per group, and
torch's ``get_ema_multi_avg_fn`` does the update with ``torch._foreach_lerp_``. This class
is ``EMAWeightAveraging`` (same arguments, same schedule, same checkpoints) on that path.

The result is the same average up to float rounding: ``lerp`` computes
``ema + (1 - decay) * (w - ema)`` where the per-tensor function computes
``decay * ema + (1 - decay) * w``.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import EMAWeightAveraging
from torch.optim.swa_utils import get_ema_multi_avg_fn


class FusedEMAWeightAveraging(EMAWeightAveraging):
    """``EMAWeightAveraging`` whose update is one ``_foreach_lerp_`` per device and dtype."""

    def __init__(self, decay: float = 0.999, **kwargs: Any):
        if "avg_fn" in kwargs or "multi_avg_fn" in kwargs:
            raise ValueError(
                "FusedEMAWeightAveraging sets its own averaging function from `decay`; "
                "drop avg_fn/multi_avg_fn, or use lightning's WeightAveraging for a custom one"
            )
        super().__init__(decay=decay, **kwargs)
        # AveragedModel takes one of the two functions; swap the parent's per-tensor one for
        # the batched one (pop fails loudly should Lightning rename where it keeps them).
        self._kwargs.pop("avg_fn")
        self._kwargs["multi_avg_fn"] = get_ema_multi_avg_fn(decay)
