"""Networks and the registry that builds them by name.

Plain torch; imports nothing else of the package, and anything may import it.

Example:
    >>> net = create_model("segnet_basic", out_channels=11)
    >>> create_model(**net.spec()).spec() == net.spec()
    True
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn

from segnet.models.nets import MODELS, SegmentationNet, SegNet, SegNetBasic, UNet


def create_model(name: str, **kwargs: Any) -> SegmentationNet:
    """Build a registered network from its name and keyword arguments."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"Unknown model {name!r}; registered models: {sorted(MODELS)}.") from None
    takes = accepted_settings(cls)
    if takes is not None:
        # a setting of another network left in the config (model.net.name changed alone)
        unknown = sorted(set(kwargs) - set(takes))
        if unknown:
            raise ValueError(
                f"model.net: the network {name!r} takes no {', '.join(unknown)} (it takes "
                f"{', '.join(k for k in takes if k not in ('spatial_dims', 'in_channels', 'out_channels'))}"
                "): choose a network by its config (model/net=<a file of configs/model/net>), "
                f"which sets only its own settings, or remove them: "
                f"{' '.join('~model.net.' + k for k in unknown)}."
            )
    return cls(**kwargs)


def accepted_settings(cls: type) -> list[str] | None:
    """The keyword arguments a network class takes: those of the first ``__init__`` in its
    MRO that names them all (SegNet-Basic passes ``**kwargs`` on to SegNet's); None when
    every ``__init__`` takes any."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return [k for k in params if k != "self"]
    return None


def init_only_settings(net: Mapping[str, Any]) -> tuple[str, ...]:
    """The settings of a network config that only initialise it (pretrained weights, which
    a network declares in ``init_only``): a checkpoint leaves them out, so that reloading
    it never fetches them, and a sweep's check sets them to null so that it downloads
    nothing."""
    cls = MODELS.get(net.get("name"))
    return cls.init_only if cls is not None else ()


def without_init_only(net: Mapping[str, Any]) -> dict[str, Any]:
    """A network config as a checkpoint keeps it: without :func:`init_only_settings`."""
    drop = init_only_settings(net)
    return {k: v for k, v in dict(net).items() if k not in drop}


__all__ = [
    "MODELS",
    "SegNet",
    "SegNetBasic",
    "SegmentationNet",
    "UNet",
    "create_model",
    "init_only_settings",
    "without_init_only",
]


def batchnorm_layers(net: nn.Module) -> list[nn.Module]:
    """A network's BatchNorm layers: those whose running statistics can be recomputed."""
    return [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
