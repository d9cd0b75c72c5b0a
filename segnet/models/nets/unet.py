"""UNet with a choice of upsampler: learned transposed convolution or index unpooling."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segnet.models.blocks import Encoder, conv_stack
from segnet.models.layers import check_pools, get_op, max_unpool
from segnet.models.nets.base import SegmentationNet, register

UPSAMPLERS = ("transpose", "unpool")


def crop_to(x: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """Crop the trailing spatial axes of ``x`` to ``size`` (a 2x upsample of a ceil-pooled
    odd axis is one voxel too long).

    ``index_select`` rather than slicing on purpose: a slice that happens to cut nothing in
    the example input is traced by torch.export as "sizes equal", and the exported program
    then rejects inputs of other parity. The copy costs little next to the convolutions.
    """
    for axis, s in enumerate(size, start=x.ndim - len(size)):
        x = x.index_select(axis, torch.arange(s, device=x.device))
    return x


def per_stage(convs: int | Sequence[int], stages: int) -> tuple[int, ...]:
    """Convolutions per stage (encoder stages, then the bottleneck) from one count for all
    or one per stage, refusing counts that build no convolution."""
    counts = (convs,) * stages if isinstance(convs, int) else tuple(convs)
    if len(counts) != stages or min(counts) < 1:
        raise ValueError(
            f"UNet convs={convs if isinstance(convs, int) else list(convs)}: give one count "
            f"of at least 1 for every stage, or a list of {stages} (one per entry of "
            "features: the encoder stages, then the bottleneck)."
        )
    return counts


@register("unet")
class UNet(SegmentationNet):
    """UNet: max-pooling encoder, decoder that concatenates the encoder's features.

    ``upsample="transpose"`` doubles the resolution with a learned stride-2 transposed
    convolution; ``upsample="unpool"`` projects channels with a 1x1 convolution and puts
    values back where the encoder's max pooling found them (``MaxUnpool``), SegNet-style.

    ``convs`` is one count for every stage or one per entry of ``features`` (the encoder
    stages, then the bottleneck); each decoder stage has as many as the encoder stage it
    mirrors.

    ``pools`` says, per level, which axes its pooling halves (``[[1, 2, 2], [2, 2, 2]]``:
    the first axis kept at the first level, as nnU-Net plans thick-slice volumes); null
    halves every axis at every level. The decoder upsamples each level by the same factors.

    ``deep_supervision=k`` adds a 1x1 head to each of the ``k`` decoder stages before the
    last (nnU-Net's deep supervision): in training mode ``forward`` then returns a list of
    logits, full resolution first, then 1/2, 1/4, ..., for a loss at every scale (see
    :func:`segnet.training.losses.deep_supervision_weights`). In eval mode, and so in validation,
    export and prediction, it returns the full-resolution logits alone.

    Example:
        >>> net = UNet(spatial_dims=3, in_channels=1, out_channels=3, features=(8, 16, 32))
        >>> net(torch.zeros(1, 1, 35, 51, 35)).shape
        torch.Size([1, 3, 35, 51, 35])
    """

    def __init__(
        self,
        spatial_dims: int = 3,
        in_channels: int = 1,
        out_channels: int = 2,
        features: Sequence[int] = (32, 64, 128, 256, 320),
        convs: int | Sequence[int] = 2,
        kernel_size: int = 3,
        norm: str = "instance",
        act: str = "leakyrelu",
        dropout: float = 0.0,
        upsample: str = "transpose",
        deep_supervision: int = 0,
        pools: Sequence[Sequence[int]] | None = None,
    ):
        features = tuple(features)
        if len(features) < 2:
            raise ValueError(
                f"UNet features {list(features)} needs at least two entries "
                "(one encoder stage and the bottleneck)."
            )
        convs = per_stage(convs, len(features))
        if upsample not in UPSAMPLERS:
            raise ValueError(f"upsample={upsample!r} is not supported; choose one of {UPSAMPLERS}.")
        levels = check_pools(pools, spatial_dims, len(features) - 1)
        # the smallest input along each axis: set by how often it is halved
        halvings = tuple(sum(level[axis] == 2 for level in levels) for axis in range(spatial_dims))
        super().__init__(spatial_dims, in_channels, out_channels, num_pools=max(halvings))
        if pools is not None:
            self.axis_pools = halvings
        self.upsample = upsample
        skips = features[:-1]
        block = dict(kernel_size=kernel_size, norm=norm, act=act, dropout=dropout)
        self.encoder = Encoder(
            spatial_dims, in_channels, skips, convs[:-1], pools=pools, **block
        )  # fmt: skip
        self.bottleneck = conv_stack(
            spatial_dims, [skips[-1]] + [features[-1]] * convs[-1], **block
        )
        up_op = "conv_transpose" if upsample == "transpose" else "conv"
        self.upsamplers = nn.ModuleList(
            get_op(up_op, spatial_dims)(
                c_in,
                c_out,
                **(
                    dict(kernel_size=kernel, stride=kernel)
                    if upsample == "transpose"
                    else dict(kernel_size=1)
                ),
            )
            for c_in, c_out, kernel in zip(
                reversed(features[1:]), reversed(skips), reversed(self.encoder.kernels),
                strict=True,
            )
        )  # fmt: skip
        # decoder stage i mirrors encoder stage i, with as many convolutions
        self.decoder = nn.ModuleList(
            conv_stack(spatial_dims, [2 * c] + [c] * n, **block)
            for c, n in zip(reversed(skips), reversed(convs[:-1]), strict=True)
        )
        self.head = get_op("conv", spatial_dims)(features[0], out_channels, kernel_size=1)
        # decoder stage outputs have the channels of reversed(skips); the last feeds self.head
        self.init_deep_supervision(deep_supervision, skips[1:])

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        self.check_input(x)
        x, records = self.encoder(x)
        x = self.bottleneck(x)
        stage_outputs = []
        for up, stage, (skip, indices, size), kernel in zip(
            self.upsamplers, self.decoder, reversed(records), reversed(self.encoder.kernels),
            strict=True,
        ):  # fmt: skip
            if self.upsample == "transpose":
                x = crop_to(up(x), size)
            else:
                x = max_unpool(up(x), indices, size, self.spatial_dims, kernel)
            x = stage(torch.cat([skip, x], dim=1))
            if self.collects_stages:
                stage_outputs.append(x)
        return self.supervised(self.head(x), stage_outputs[-2::-1])
