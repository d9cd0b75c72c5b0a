"""Networks and the registry that builds them by name.

Example:
    >>> net = create_model("segnet_basic", out_channels=11)
    >>> create_model(**net.spec()).spec() == net.spec()
    True
"""

from __future__ import annotations

from typing import Any

from torch import nn

from segnet.models.nets import MODELS, SegmentationNet, SegNet, SegNetBasic, UNet


def create_model(name: str, **kwargs: Any) -> SegmentationNet:
    """Build a registered network from its name and keyword arguments."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"Unknown model {name!r}; registered models: {sorted(MODELS)}.") from None
    return cls(**kwargs)


__all__ = ["MODELS", "SegNet", "SegNetBasic", "SegmentationNet", "UNet", "create_model"]


def batchnorm_layers(net: nn.Module) -> list[nn.Module]:
    """A network's BatchNorm layers: those whose running statistics can be recomputed."""
    return [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
