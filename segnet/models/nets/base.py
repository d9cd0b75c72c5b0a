"""What every network here shares: a plain-data spec and input validation."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from segnet.models.layers import check_spatial_dims


class SegmentationNet(nn.Module):
    """Base class: remembers the arguments that rebuild it and checks its inputs.

    ``spec()`` returns plain data (``{"name": ..., **kwargs}``) that
    :func:`segnet.models.create_model` turns back into the same architecture, so weights can
    be stored beside it without pickling any module.
    """

    name: str = ""

    def __init__(self, spatial_dims: int, in_channels: int, out_channels: int, num_pools: int):
        super().__init__()
        self.spatial_dims = check_spatial_dims(spatial_dims)
        for arg, value in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg} must be a positive integer, got {value!r}.")
        self.in_channels = in_channels
        self.out_channels = out_channels
        # Each 2x pool (ceil mode) needs at least 2 voxels along every axis at its input.
        self.min_size = 2 ** max(num_pools - 1, 0) + 1
        self._spec: dict[str, Any] = {}

    def _remember(self, **kwargs: Any) -> None:
        self._spec = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}

    def spec(self) -> dict[str, Any]:
        """Plain data that rebuilds this network with ``create_model(**spec)``."""
        return {"name": self.name, **self._spec}

    def check_input(self, x: torch.Tensor) -> None:
        # Shape checks are eager-only: under torch.compile/export they would become guards.
        if torch.compiler.is_compiling():
            return
        layout = "(N, C, H, W)" if self.spatial_dims == 2 else "(N, C, D, H, W)"
        if x.ndim != self.spatial_dims + 2:
            raise ValueError(
                f"{self.name} with spatial_dims={self.spatial_dims} expects a "
                f"{self.spatial_dims + 2}D input {layout}, got shape {tuple(x.shape)}."
            )
        if x.shape[1] != self.in_channels:
            raise ValueError(
                f"{self.name} expects {self.in_channels} input channel(s), got {x.shape[1]} "
                f"(input shape {tuple(x.shape)}); set in_channels to match the data."
            )
        small = [s for s in x.shape[2:] if s < self.min_size]
        if small:
            raise ValueError(
                f"{self.name} cannot take spatial size {tuple(x.shape[2:])}: every axis needs "
                f"at least {self.min_size} pixels/voxels for its pooling stages; "
                "pad the input or use a net with fewer stages."
            )
