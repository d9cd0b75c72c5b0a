"""Dimension-generic op lookup: one table maps (op, spatial_dims) to a torch op.

Every network in :mod:`segnet.models` asks this module for its convolutions, norms and
pooling, so the same code builds a 2D or a 3D network.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SUPPORTED_DIMS = (2, 3)

_OPS: dict[str, dict[int, type[nn.Module]]] = {
    "conv": {2: nn.Conv2d, 3: nn.Conv3d},
    "conv_transpose": {2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d},
    "batch": {2: nn.BatchNorm2d, 3: nn.BatchNorm3d},
    "instance": {2: nn.InstanceNorm2d, 3: nn.InstanceNorm3d},
    "dropout": {2: nn.Dropout2d, 3: nn.Dropout3d},
}

_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "leakyrelu": nn.LeakyReLU,
    "prelu": nn.PReLU,
    "gelu": nn.GELU,
    "elu": nn.ELU,
}

NORMS = ("batch", "instance", "none")


def check_spatial_dims(spatial_dims: int) -> int:
    if spatial_dims not in SUPPORTED_DIMS:
        raise ValueError(
            f"spatial_dims={spatial_dims!r} is not supported; use 2 (images) or 3 (volumes)."
        )
    return spatial_dims


def get_op(name: str, spatial_dims: int) -> type[nn.Module]:
    """The torch module class for ``name`` ("conv", "batch", ...) in ``spatial_dims``."""
    check_spatial_dims(spatial_dims)
    return _OPS[name][spatial_dims]


def make_norm(norm: str, spatial_dims: int, channels: int) -> nn.Module:
    if norm == "none":
        return nn.Identity()
    if norm not in _OPS:
        raise ValueError(f"norm={norm!r} is not supported; choose one of {NORMS}.")
    if norm == "instance":
        # affine so that instance norm has learnable scale/shift like batch norm
        return get_op(norm, spatial_dims)(channels, affine=True)
    return get_op(norm, spatial_dims)(channels)


def make_act(act: str) -> nn.Module:
    try:
        cls = _ACTIVATIONS[act]
    except KeyError:
        raise ValueError(
            f"act={act!r} is not supported; choose one of {sorted(_ACTIVATIONS)}."
        ) from None
    return cls(inplace=True) if cls in (nn.ReLU, nn.LeakyReLU, nn.ELU) else cls()


def max_pool(
    x: torch.Tensor, spatial_dims: int, kernel: int | tuple[int, ...] = 2
) -> tuple[torch.Tensor, torch.Tensor]:
    """Max pooling by ``kernel`` (2: halve every axis; ``(1, 2, 2)``: keep the first) that
    keeps the indices; ``ceil_mode`` so odd sizes lose nothing."""
    pool = F.max_pool2d if spatial_dims == 2 else F.max_pool3d
    return pool(x, kernel_size=kernel, stride=kernel, ceil_mode=True, return_indices=True)


def max_unpool(
    x: torch.Tensor,
    indices: torch.Tensor,
    size: torch.Size | tuple[int, ...],
    spatial_dims: int,
    kernel: int | tuple[int, ...] = 2,
) -> torch.Tensor:
    """Inverse of :func:`max_pool` back to ``size`` (the spatial size before pooling).

    The functional form with an explicit ``output_size`` is used on purpose: it exports to
    ONNX and ``torch.export``, and without the size a 45-row map would come back as 44 rows.
    """
    unpool = F.max_unpool2d if spatial_dims == 2 else F.max_unpool3d
    return unpool(x, indices, kernel_size=kernel, stride=kernel, output_size=size)


def check_pools(pools, spatial_dims: int, levels: int) -> tuple[tuple[int, ...], ...]:
    """Per-axis pooling of each level (``pools[i][axis]``: 2 halves that axis at level
    ``i``, 1 keeps it, as nnU-Net pools a thick-slice axis fewer times); None: every axis
    halved at every level."""
    if pools is None:
        return ((2,) * spatial_dims,) * levels
    out = tuple(tuple(int(k) for k in level) for level in pools)
    if len(out) != levels or any(
        len(level) != spatial_dims or not set(level) <= {1, 2} for level in out
    ):
        raise ValueError(
            f"pools={[list(level) for level in out]}: give {levels} level(s) of "
            f"{spatial_dims} factors each, 2 (halve that axis) or 1 (keep it), or null "
            "(halve every axis)."
        )
    return out
