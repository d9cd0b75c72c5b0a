"""Building blocks shared by SegNet and UNet, for 2D and 3D alike."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segnet.models.layers import check_pools, get_op, make_act, make_norm, max_pool


class ConvNormAct(nn.Sequential):
    """Convolution -> normalisation -> activation (-> dropout), padded to keep the size."""

    def __init__(
        self,
        spatial_dims: int,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        norm: str = "batch",
        act: str = "relu",
        dropout: float = 0.0,
    ):
        layers: list[nn.Module] = [
            get_op("conv", spatial_dims)(
                in_channels, out_channels, kernel_size, padding=kernel_size // 2
            ),
            make_norm(norm, spatial_dims, out_channels),
            make_act(act),
        ]
        if dropout > 0:
            layers.append(get_op("dropout", spatial_dims)(dropout))
        super().__init__(*layers)


def conv_stack(
    spatial_dims: int,
    channels: Sequence[int],
    kernel_size: int,
    norm: str,
    act: str,
    dropout: float = 0.0,
) -> nn.Sequential:
    """ConvNormAct layers taking ``channels[0]`` through each following channel count."""
    return nn.Sequential(
        *(
            ConvNormAct(spatial_dims, c_in, c_out, kernel_size, norm, act, dropout)
            for c_in, c_out in zip(channels[:-1], channels[1:], strict=True)
        )
    )


class Encoder(nn.Module):
    """Stages of convolutions, each followed by 2x max pooling that records its indices
    (``pools``: per level, which axes it halves; every axis unless given).

    ``forward`` returns the pooled bottom feature map and, per stage, the features before
    pooling, the pooling indices and the size before pooling, which is everything a
    SegNet (indices) or UNet (skips) decoder needs to mirror it exactly.
    """

    def __init__(
        self,
        spatial_dims: int,
        in_channels: int,
        features: Sequence[int],
        convs: Sequence[int],
        kernel_size: int,
        norm: str,
        act: str,
        dropout: float = 0.0,
        pools: Sequence[Sequence[int]] | None = None,
    ):
        super().__init__()
        self.spatial_dims = spatial_dims
        self.features = tuple(features)
        # a plain 2 where every axis halves: the same call as before per-axis pooling
        self.kernels = [
            2 if set(level) == {2} else tuple(level)
            for level in check_pools(pools, spatial_dims, len(self.features))
        ]
        stages = []
        c_in = in_channels
        for c_out, n in zip(features, convs, strict=True):
            stages.append(
                conv_stack(spatial_dims, [c_in] + [c_out] * n, kernel_size, norm, act, dropout)
            )
            c_in = c_out
        self.stages = nn.ModuleList(stages)

    def forward(
        self, x: torch.Tensor
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor, torch.Size]]]:
        records = []
        for stage, kernel in zip(self.stages, self.kernels, strict=True):
            x = stage(x)
            size = x.shape[2:]
            pooled, indices = max_pool(x, self.spatial_dims, kernel)
            records.append((x, indices, size))
            x = pooled
        return x, records
