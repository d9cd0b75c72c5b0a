"""The model card (``model.json``) written beside exported models, and loading an
exported model back as a module that evaluates like a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

CARD_NAME = "model.json"
CARD_VERSION = 1
# SegmentationModule arguments a card carries (everything but optimisation)
MODULE_KEYS = (
    "num_classes",
    "in_channels",
    "spatial_dims",
    "ignore_index",
    "class_names",
    "inferer",
    "per_case_dice",
    "monitor",
    "loss",
    "class_weights",
)


def make_card(module, metrics: dict[str, float] | None = None) -> dict[str, Any]:
    hp = dict(module.hparams)
    data = hp.get("data_info") or {}
    dims = hp["spatial_dims"]
    layout = "NCHW" if dims == 2 else "NCDHW (D, H, W = the RAS x, y, z axes)"
    return {
        "card_version": CARD_VERSION,
        "net": module.net.spec(),
        "module": {k: hp.get(k) for k in MODULE_KEYS},
        "data": data,
        "input": {
            "layout": layout,
            "dtype": "float32",
            "channels": hp["in_channels"],
            "normalization": data.get("normalization"),
            "trained_input_size": data.get("input_size"),
        },
        "output": {
            "layout": "logits, N x num_classes x spatial",
            "classes": hp.get("class_names"),
            "palette": data.get("palette"),
        },
        "metrics": metrics or {},
    }


def read_card(model_path: str | Path) -> dict[str, Any]:
    path = Path(model_path).with_name(CARD_NAME)
    if not path.is_file():
        raise FileNotFoundError(
            f"{model_path} has no model card: expected {path} beside it (python -m "
            "segnet.export writes both)."
        )
    return json.loads(path.read_text())


class ExportedNet(nn.Module):
    """An exported ONNX or torch.export program behind the network interface."""

    def __init__(self, run, spec: dict[str, Any]):
        super().__init__()
        self.run = run
        self.spatial_dims, self.in_channels = spec["spatial_dims"], spec["in_channels"]
        self.out_channels = spec["out_channels"]
        self._spec = spec

    def spec(self) -> dict[str, Any]:
        return dict(self._spec)

    def train(self, mode: bool = True) -> ExportedNet:
        # An exported program has one fixed mode (inference) and refuses train()/eval().
        self.training = mode
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(x).to(x.device)


def load_exported_module(model_path: str | Path):
    """A SegmentationModule whose network is the exported file (.safetensors, .onnx, .pt2)."""
    from segnet import export
    from segnet.module import SegmentationModule

    path = Path(model_path)
    fmt = {v: k for k, v in export.SUFFIX.items()}.get(path.suffix)
    if fmt is None:
        raise ValueError(f"{path}: unknown model format; use .ckpt, .safetensors, .onnx or .pt2.")
    card = read_card(path)
    spec = dict(card["net"])
    module = SegmentationModule(
        net={
            k: v
            for k, v in spec.items()
            if k not in ("spatial_dims", "in_channels", "out_channels")
        },
        data_info=card["data"],
        **card["module"],
    )
    if fmt == "safetensors":
        module.net = export.load_safetensors(path)
    else:
        module.net = ExportedNet(export.LOADERS[fmt](path), spec)
    return module.eval()
