"""Load a trained (``.ckpt``) or exported (``.safetensors``, ``.onnx``, ``.pt2`` with its
``model.json``) model for inference, without the training stack: neither Lightning, Hydra
nor torchmetrics is imported here or by anything this module imports.

Example:
    >>> model = load_model("export/model.onnx")                       # doctest: +SKIP
    >>> model.logits(torch.zeros(1, 3, 360, 480)).shape               # doctest: +SKIP
    torch.Size([1, 11, 360, 480])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from segnet.data.info import DataInfo
from segnet.models import create_model, without_init_only
from segnet.serving.checkpoints import clean_state_dict, net_weights, read_checkpoint  # noqa: F401
from segnet.serving.inference import Inference
from segnet.serving.model_card import CARD_NAME, MODULE_KEYS, read_card

SPEC_KEY = "segnet_spec"  # the network spec in a safetensors file's metadata
SUFFIX = {"safetensors": ".safetensors", "onnx": ".onnx", "pt2": ".pt2"}
SIZE_KEYS = ("spatial_dims", "in_channels", "out_channels")
# an exported ensemble's folder: one export folder per member, and this file listing them
ENSEMBLE_NAME = "ensemble.json"
# the file a folder stands for when it holds several formats of one model: the network
# itself where it can be rebuilt (exact, any device), then the programs
FOLDER_PREFERENCE = ("safetensors", "pt2", "onnx")


# -- one loader per exported format ------------------------------------------------------
def read_safetensors_metadata(path: str | Path) -> dict[str, Any]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if SPEC_KEY not in meta:
        raise ValueError(
            f"{path} has no '{SPEC_KEY}' metadata: it was not written by segnet.serving.export, so the "
            "network it holds is unknown."
        )
    return {k: json.loads(v) for k, v in meta.items()}


def load_safetensors(path: str | Path, device: str | torch.device = "cpu") -> nn.Module:
    """Rebuild the network stored by :func:`segnet.serving.export.save_safetensors` (eval mode)."""
    from safetensors.torch import load_file

    spec = read_safetensors_metadata(path)[SPEC_KEY]
    net = create_model(**spec)
    net.load_state_dict(load_file(str(path), device=str(device)))
    return net.to(device).eval()


def load_pt2(path: str | Path) -> Callable[[torch.Tensor], torch.Tensor]:
    return torch.export.load(str(path)).module()


def load_onnx(path: str | Path) -> Callable[[torch.Tensor], torch.Tensor]:
    """An onnxruntime session wrapped to take and return torch tensors."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(x: torch.Tensor) -> torch.Tensor:
        (out,) = session.run(None, {name: x.detach().cpu().numpy().astype(np.float32)})
        return torch.from_numpy(out)

    return run


LOADERS = {"safetensors": load_safetensors, "onnx": load_onnx, "pt2": load_pt2}


class ExportedNet(nn.Module):
    """An exported ONNX or torch.export program behind the network interface."""

    def __init__(self, run: Callable[[torch.Tensor], torch.Tensor], spec: dict[str, Any]):
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


# -- a model ready for inference -------------------------------------------------------------
@dataclass
class LoadedModel:
    """A network with what inference needs to know about it.

    ``info`` describes the data (class names, palette, normalisation, input size),
    ``module_args`` the training module's arguments other than
    optimisation (for evaluation), ``metrics`` the validation score it was chosen by
    (from the checkpoint, or its model card).
    """

    net: nn.Module
    spec: dict[str, Any]
    info: DataInfo
    module_args: dict[str, Any]
    inference: Inference
    metrics: dict[str, float] = field(default_factory=dict)

    def to(self, device: str | torch.device) -> LoadedModel:
        self.net.to(device)
        return self

    @torch.no_grad()
    def logits(self, x: torch.Tensor, size: Sequence[int] | None = None) -> torch.Tensor:
        return self.inference.logits(self.net, x, size)


def load_model(path: str | Path) -> LoadedModel:
    """A checkpoint (.ckpt) or an exported model (.safetensors/.onnx/.pt2 + model.json),
    on the CPU and in eval mode. An export folder stands for its model (an exported
    ensemble's folder is several: ``segnet.serving.predict.Predictor`` averages them)."""
    path = Path(path).expanduser()
    if path.is_dir():
        files = model_files(path)
        if len(files) > 1:
            raise ValueError(
                f"{path} holds an exported ensemble of {len(files)} models; predict with "
                "segnet.serving.predict.Predictor(folder), which averages them, or load one member."
            )
        path = files[0]
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r}: no such file. Point it at a .ckpt from a training run "
            "(outputs/train/runs/<date>/checkpoints/best.ckpt) or an exported model."
        )
    if path.suffix == ".ckpt":
        return _from_checkpoint(path)
    fmt = {v: k for k, v in SUFFIX.items()}.get(path.suffix)
    if fmt is None:
        raise ValueError(f"{path}: unknown model format; use .ckpt, .safetensors, .onnx or .pt2.")
    card = read_card(path)
    spec = dict(card["net"])
    # safetensors: a real network rebuilt from its spec; onnx/pt2: a forward-only program
    net = load_safetensors(path) if fmt == "safetensors" else ExportedNet(LOADERS[fmt](path), spec)
    info = DataInfo.from_dict(card["data"])
    return _loaded(net.eval(), spec, info, card["module"], card.get("metrics") or {})


def exported_models(folder: str | Path) -> list[Path] | None:
    """The model files an export folder stands for: each member's, in order, for an
    exported ensemble (``ensemble.json``), or its own model's (``model.json``); None for a
    folder that is neither."""
    folder = Path(folder).expanduser()
    listing = folder / ENSEMBLE_NAME
    if listing.is_file():
        members = json.loads(listing.read_text()).get("members") or []
        if not members:
            raise ValueError(f"{listing} lists no members; export the ensemble again.")
        return [_model_file(folder / member) for member in members]
    if (folder / CARD_NAME).is_file():
        return [_model_file(folder)]
    return None


def model_files(path: str | Path) -> list[Path]:
    """What a model path names: the file itself, or the model(s) of an export folder."""
    path = Path(path).expanduser()
    if not path.is_dir():
        return [path]  # load_model names a missing or unreadable file
    files = exported_models(path)
    if files is None:
        raise FileNotFoundError(
            f"{path}: a folder without {CARD_NAME} or {ENSEMBLE_NAME}; give an export folder "
            "(python -m segnet.export) or the model file."
        )
    return files


def _model_file(folder: Path) -> Path:
    """The one file of an export folder to load (see FOLDER_PREFERENCE)."""
    files = read_card(folder / CARD_NAME).get("files") or {}
    for fmt in FOLDER_PREFERENCE:
        if fmt in files and (folder / files[fmt]).is_file():
            return folder / files[fmt]
    raise FileNotFoundError(
        f"{folder}: its {CARD_NAME} lists {sorted(files) or 'no files'}, and none of them is "
        "there; copy the folder whole, or name the model file."
    )


def _from_checkpoint(path: Path) -> LoadedModel:
    ckpt = read_checkpoint(path)
    hp = ckpt.get("hyper_parameters") or {}
    if "net" not in hp or "state_dict" not in ckpt:
        raise ValueError(f"{path} holds no network spec or weights; it was not made by train.py.")
    info = DataInfo.from_dict(hp["data"])
    spec = {
        **without_init_only(hp["net"]),
        "spatial_dims": info.spatial_dims,
        "in_channels": info.in_channels,
        "out_channels": info.out_channels,
    }
    net = create_model(**spec)
    net.load_state_dict(net_weights(ckpt))
    module_args = {k: hp.get(k) for k in MODULE_KEYS}
    return _loaded(net.eval(), net.spec(), info, module_args, checkpoint_metrics(ckpt))


def checkpoint_metrics(ckpt: dict[str, Any]) -> dict[str, float]:
    """The monitored best validation score recorded in a Lightning checkpoint."""
    out = {}
    for key, state in (ckpt.get("callbacks") or {}).items():
        if key.startswith("ModelCheckpoint") and state.get("best_model_score") is not None:
            out[str(state.get("monitor"))] = float(state["best_model_score"])
    return out


def _loaded(net, spec, info: DataInfo, module_args, metrics) -> LoadedModel:
    inference = Inference.for_net(
        net, info.sliding_window, info.mirror_axes, sigmoid=bool(info.regions)
    )
    inference.tta = bool(module_args.get("tta"))  # predicts as the recipe tested
    if isinstance(net, ExportedNet):
        inference.min_input = 2 * _min_size(spec) - 1
    return LoadedModel(net, spec, info, module_args, inference, metrics)


def _min_size(spec: dict[str, Any]) -> int:
    """The smallest axis of an exported program's network (rebuilt from its spec, on the
    meta device: no weights are made)."""
    with torch.device("meta"):
        return create_model(**spec).min_size
