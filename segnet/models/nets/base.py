"""What every network here shares: a registry by name, a plain-data spec and input
validation."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from segnet.models.layers import check_spatial_dims, get_op

MODELS: dict[str, type[SegmentationNet]] = {}


def register(name: str) -> Callable[[type[SegmentationNet]], type[SegmentationNet]]:
    """Class decorator: ``create_model(name, ...)`` builds the class, and its ``spec()``
    carries the same name."""

    def add(cls: type[SegmentationNet]) -> type[SegmentationNet]:
        if name in MODELS:
            raise ValueError(f"a network named {name!r} is already registered: {MODELS[name]}")
        cls.name = name
        MODELS[name] = cls
        return cls

    return add


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def smallest_input(halvings: int) -> int:
    """The shortest axis ``halvings`` 2x poolings (ceil mode) take: each needs at least 2
    voxels at its input."""
    return 2 ** max(halvings - 1, 0) + 1


class SegmentationNet(nn.Module):
    """Base class: records the arguments that rebuild a network and checks its inputs.

    ``spec()`` returns plain data (``{"name": ..., **arguments}``, defaults included) that
    :func:`segnet.models.create_model` turns back into the same architecture, so weights can
    be stored beside it without pickling any module. Subclasses need do nothing for it:
    every subclass ``__init__`` is wrapped to record its arguments.
    """

    name: str = ""
    # arguments that only initialise (pretrained weights), left out of the spec
    init_only: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        signature = inspect.signature(init)

        @functools.wraps(init)
        def recorded(self, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            bound = signature.bind(self, *args, **kw)
            bound.apply_defaults()
            given = {}
            for name, value in list(bound.arguments.items())[1:]:  # not self
                if name in self.init_only:
                    continue
                if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                    given.update({k: v for k, v in value.items() if k not in self.init_only})
                else:
                    given[name] = value
            # a subclass that passes its arguments on to its parent's __init__ runs this
            # after the parent's record: both merge, the caller's arguments last
            self._spec = {**self._spec, **{k: _plain(v) for k, v in given.items()}}

        cls.__init__ = recorded

    def __init__(self, spatial_dims: int, in_channels: int, out_channels: int, num_pools: int):
        super().__init__()
        self.spatial_dims = check_spatial_dims(spatial_dims)
        for arg, value in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{arg} must be a positive integer, got {value!r}.")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.min_size = smallest_input(num_pools)
        self.axis_pools: tuple[int, ...] | None = None  # halvings per axis, where they differ
        self._spec: dict[str, Any] = {}
        self.aux_heads = nn.ModuleList()  # none unless init_deep_supervision adds them

    def init_deep_supervision(self, k: int, coarser_channels: Sequence[int]) -> None:
        """1x1 heads on the first ``k`` of the decoder stages before the last
        (``coarser_channels``: those stages' output channels, finest first), as nnU-Net's deep
        supervision; :meth:`supervised` then returns their logits beside the full-resolution
        ones in training."""
        if not 0 <= k <= len(coarser_channels):
            raise ValueError(
                f"{self.name} deep_supervision={k}: use 0 (off) up to {len(coarser_channels)}, "
                "the number of decoder stages before the last in this network."
            )
        self.aux_heads = nn.ModuleList(
            get_op("conv", self.spatial_dims)(c, self.out_channels, kernel_size=1)
            for c in coarser_channels[:k]
        )

    @property
    def collects_stages(self) -> bool:
        """Whether ``forward`` should keep the decoder stages' outputs for :meth:`supervised`
        (only then: in eval mode they are freed as the decoder goes, as without the option)."""
        return self.training and len(self.aux_heads) > 0

    def supervised(
        self, logits: torch.Tensor, coarser: Sequence[torch.Tensor]
    ) -> torch.Tensor | list[torch.Tensor]:
        """The network's output: ``logits`` alone in eval mode or without deep supervision,
        else ``[logits, 1/2 scale, 1/4, ...]`` from the heads on ``coarser`` (the outputs of
        the decoder stages before the last, finest first)."""
        if not self.collects_stages:
            return logits
        return [logits] + [head(f) for head, f in zip(self.aux_heads, coarser, strict=False)]

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
        least = self.min_sizes()
        if any(s < m for s, m in zip(x.shape[2:], least, strict=True)):
            needs = (
                f"every axis needs at least {self.min_size}"
                if len(set(least)) == 1
                else f"its axes need at least {'x'.join(map(str, least))}"
            )
            raise ValueError(
                f"{self.name} cannot take spatial size {tuple(x.shape[2:])}: {needs} "
                "pixels/voxels for its pooling stages; pad the input or use a net with "
                "fewer stages."
            )

    def min_sizes(self) -> tuple[int, ...]:
        """The smallest input along each axis: ``min_size`` along every one, except where
        the network halves some axes fewer times (a UNet's ``pools``). Exporters and
        serving pad to ``min_size`` along every axis, which is never less."""
        if self.axis_pools is None:
            return (self.min_size,) * self.spatial_dims
        return tuple(smallest_input(n) for n in self.axis_pools)
