"""ImageNet VGG16-BN weights for the SegNet encoder."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import torch
from torch import nn

# torchvision's VGG16_BN_Weights.IMAGENET1K_V1; a module constant so tests can point it at
# a local server.
VGG16_BN_URL = "https://download.pytorch.org/models/vgg16_bn-6c64b313.pth"


def _hub_file() -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(VGG16_BN_URL).name


def _fetch_imagenet_state() -> dict[str, torch.Tensor]:
    target = _hub_file()
    try:
        return torch.hub.load_state_dict_from_url(
            VGG16_BN_URL, model_dir=str(target.parent), map_location="cpu", progress=True
        )
    except (urllib.error.URLError, OSError, RuntimeError) as err:
        raise RuntimeError(
            f"Could not get the ImageNet VGG16-BN weights from {VGG16_BN_URL} ({err}).\n"
            f"Without network access, download that file elsewhere and put it at\n  {target}\n"
            "(set TORCH_HOME to move that folder), or give its path as encoder_weights\n"
            "(train.py: model.net.encoder_weights=/path/to/vgg16_bn.pth; null trains from\n"
            "random weights)."
        ) from err


def _conv_bn_pairs(module: nn.Module) -> list[tuple[nn.Module, nn.Module]]:
    convs = [m for m in module.modules() if isinstance(m, nn.Conv2d | nn.Conv3d)]
    norms = [m for m in module.modules() if isinstance(m, nn.BatchNorm2d | nn.BatchNorm3d)]
    return list(zip(convs, norms, strict=True))


def load_vgg16_bn_encoder(net: nn.Module, source: str) -> int:
    """Copy VGG16-BN's 13 conv+BN layers into ``net.encoder``; return how many were copied.

    ``source`` is ``"imagenet"`` (torchvision's weights, downloaded once to the torch hub
    cache) or a path to a ``vgg16_bn`` state dict (whole model or ``features`` only).
    """
    if source == "imagenet":
        state = _fetch_imagenet_state()
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"encoder_weights={source!r} (model.net.encoder_weights in train.py): no such "
                "file. Use 'imagenet' or the path of a "
                "torchvision vgg16_bn state dict."
            )
        state = torch.load(path, map_location="cpu", weights_only=True)
    state = {
        k.removeprefix("features."): v for k, v in state.items() if not k.startswith("classifier.")
    }

    from torchvision.models import vgg16_bn

    vgg = vgg16_bn(weights=None).features
    missing, unexpected = vgg.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(
            f"{source} is not a VGG16-BN state dict (missing {missing[:3]}..., unexpected "
            f"{unexpected[:3]}...)."
        )
    src_pairs = _conv_bn_pairs(vgg)
    dst_pairs = _conv_bn_pairs(net.encoder)
    if getattr(net, "spatial_dims", 2) != 2 or len(dst_pairs) != len(src_pairs):
        raise ValueError(
            "encoder_weights needs the 2D VGG16-BN encoder (spatial_dims=2, in_channels=3, "
            f"features (64,128,256,512,512), convs (2,2,3,3,3)); this net has {len(dst_pairs)} "
            "conv layers in its encoder."
        )
    with torch.no_grad():
        for (s_conv, s_bn), (d_conv, d_bn) in zip(src_pairs, dst_pairs, strict=True):
            if s_conv.weight.shape != d_conv.weight.shape:
                raise ValueError(
                    f"encoder_weights: VGG16-BN conv of shape {tuple(s_conv.weight.shape)} does "
                    f"not fit encoder conv of shape {tuple(d_conv.weight.shape)}."
                )
            d_conv.load_state_dict(s_conv.state_dict())
            d_bn.load_state_dict(s_bn.state_dict())
    return len(src_pairs)
