"""SegNet (Badrinarayanan et al., 2017) and SegNet-Basic, in 2D or 3D."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from segnet.models.blocks import Encoder, conv_stack
from segnet.models.layers import get_op, max_unpool
from segnet.models.nets.base import SegmentationNet, register

VGG16_FEATURES = (64, 128, 256, 512, 512)
VGG16_CONVS = (2, 2, 3, 3, 3)


@register("segnet")
class SegNet(SegmentationNet):
    """Encoder-decoder whose decoder upsamples with the encoder's max-pooling indices.

    The encoder is VGG16-BN's convolutional part by default. Each decoder stage unpools to
    the exact size its encoder stage had before pooling (odd sizes round-trip), then
    convolves. As in the authors' Caffe model, the decoder's last convolution is the
    classifier; ``head_kernel_size`` instead keeps a full decoder and adds a separate
    classifier convolution (SegNet-Basic uses a 1x1 one). ``deep_supervision=k`` adds 1x1
    heads on the ``k`` decoder stages before the last, as :class:`~segnet.models.nets.unet.UNet`
    does (training-mode outputs at 1/2, 1/4, ... scale; eval mode unchanged).

    ``space_to_depth=f`` (2D) folds each f x f block of input pixels into channels before
    the encoder (``pixel_unshuffle``) and the classifier's f*f logits per class back into
    pixels (``pixel_shuffle``): the network runs at 1/f of the input's resolution, at
    about the cost of an input that small, yet sees and predicts at full resolution, where
    a thin object (a pole a pixel or two wide) would otherwise be blurred away. Inputs whose
    size is not a multiple of f are padded by edge replication and the logits cropped back.

    Example:
        >>> net = SegNet(spatial_dims=2, in_channels=3, out_channels=11)
        >>> net(torch.zeros(1, 3, 45, 61)).shape
        torch.Size([1, 11, 45, 61])
    """

    # initial weights, not architecture: a rebuilt network gets its weights from a file
    init_only = ("encoder_weights",)

    def __init__(
        self,
        spatial_dims: int = 2,
        in_channels: int = 3,
        out_channels: int = 11,
        features: Sequence[int] = VGG16_FEATURES,
        convs: Sequence[int] = VGG16_CONVS,
        kernel_size: int = 3,
        norm: str = "batch",
        act: str = "relu",
        dropout: float = 0.0,
        head_kernel_size: int | None = None,
        encoder_weights: str | None = None,
        deep_supervision: int = 0,
        space_to_depth: int = 1,
    ):
        features, convs = tuple(features), tuple(convs)
        if len(features) != len(convs) or not features:
            raise ValueError(
                f"features {list(features)} and convs {list(convs)} must be non-empty and of "
                "the same length (one entry per encoder stage)."
            )
        if min(convs) < 1 or (head_kernel_size is None and convs[0] < 2):
            raise ValueError(
                f"convs {list(convs)}: every stage needs at least one convolution, and the "
                "first at least two unless head_kernel_size is set (its last decoder "
                "convolution is the classifier)."
            )
        if not isinstance(space_to_depth, int) or space_to_depth < 1:
            raise ValueError(f"space_to_depth={space_to_depth!r}: use a positive integer (1: off).")
        if space_to_depth > 1 and spatial_dims != 2:
            raise ValueError(
                f"space_to_depth={space_to_depth} folds pixels into channels in 2D only; "
                "use space_to_depth=1 for volumes."
            )
        if space_to_depth > 1 and encoder_weights:
            raise ValueError(
                f"space_to_depth={space_to_depth} gives the encoder {in_channels}x"
                f"{space_to_depth**2} input channels, so ImageNet's first convolution cannot "
                "be loaded: set encoder_weights=null or space_to_depth=1."
            )
        super().__init__(spatial_dims, in_channels, out_channels, num_pools=len(features))
        self.space_to_depth = space_to_depth
        self.min_size = (self.min_size - 1) * space_to_depth + 1
        folded = space_to_depth**2
        self.encoder = Encoder(
            spatial_dims, in_channels * folded, features, convs, kernel_size, norm, act, dropout
        )
        # Decoder stage i mirrors encoder stage i: unpool, then convs[i] convolutions ending
        # with the channel count of the stage above. In stage 0 without a separate head, the
        # head conv itself is the stage's last convolution.
        decoder = []
        for i in reversed(range(len(features))):
            if i == 0 and head_kernel_size is None:
                chans = [features[0]] * convs[0]
            else:
                chans = [features[i]] * convs[i] + [features[max(i - 1, 0)]]
            decoder.append(conv_stack(spatial_dims, chans, kernel_size, norm, act, dropout))
        self.decoder = nn.ModuleList(decoder)
        head_k = kernel_size if head_kernel_size is None else head_kernel_size
        self.head = get_op("conv", spatial_dims)(
            features[0], out_channels * folded, head_k, padding=head_k // 2
        )
        # decoder stage i (i >= 1) ends with features[i - 1] channels at 1/2**i scale
        self.init_deep_supervision(deep_supervision, features[:-1])
        if space_to_depth > 1:
            self._start_as_plain_net(space_to_depth)
        if encoder_weights:
            from segnet.models.pretrained import load_vgg16_bn_encoder

            load_vgg16_bn_encoder(self, encoder_weights)

    def _start_as_plain_net(self, f: int) -> None:
        """Initialise the folded network as the plain one on the image averaged over each
        f x f block, with one label per block: the first convolution weighs the f*f pixels of
        a block alike, and the classifier's f*f copies of a class start equal (ICNR, Aitken et
        al. 2017). Otherwise each pixel position of a block has its own random classifier to
        learn from 1/(f*f) of the pixels, and predictions start as a checkerboard."""
        n = f * f
        first = self.encoder.stages[0][0][0]
        with torch.no_grad():
            first.weight.copy_(first.weight[:, ::n].repeat_interleave(n, 1) / n)
            self.head.weight.copy_(self.head.weight[::n].repeat_interleave(n, 0))
            self.head.bias.copy_(self.head.bias[::n].repeat_interleave(n, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        self.check_input(x)
        f = self.space_to_depth
        if f > 1:
            height, width = x.shape[-2:]
            # padded unconditionally (often by 0): a branch on the size would make an
            # exported program specialise to odd or even sizes
            x = F.pixel_unshuffle(F.pad(x, (0, -width % f, 0, -height % f), mode="replicate"), f)
        x, records = self.encoder(x)
        stage_outputs = []
        for stage, (_, indices, size) in zip(self.decoder, reversed(records), strict=True):
            x = stage(max_unpool(x, indices, size, self.spatial_dims))
            if self.collects_stages:
                stage_outputs.append(x)
        logits = self.head(x)
        if f > 1:
            # cropped by negative padding: slicing makes torch.export specialise the program
            # to the example's parity
            logits = F.pad(F.pixel_shuffle(logits, f), (0, width % -f, 0, height % -f))
        return self.supervised(logits, stage_outputs[-2::-1])


@register("segnet_basic")
class SegNetBasic(SegNet):
    """The paper's small SegNet: 4 stages of 64 features, 7x7 kernels, a 1x1 classifier;
    any :class:`SegNet` argument may be given.

    Example:
        >>> SegNetBasic(out_channels=11)(torch.zeros(1, 3, 36, 48)).shape
        torch.Size([1, 11, 36, 48])
    """

    defaults = dict(
        features=(64, 64, 64, 64), convs=(1, 1, 1, 1), kernel_size=7, head_kernel_size=1
    )

    def __init__(self, **kwargs):
        super().__init__(**{**self.defaults, **kwargs})
