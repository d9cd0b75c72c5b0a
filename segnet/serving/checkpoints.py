"""Checks on a checkpoint before a run uses it: readable, the same network and data, and
(for resuming) the same planned length. Each runs before any data is loaded and fails
with a message that names the file and says what to do."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segnet.models import without_init_only


class CheckpointError(ValueError):
    """A checkpoint that cannot be used as asked; the message says why and what to do."""


def read_checkpoint(path: str | Path, setting: str = "ckpt_path") -> dict[str, Any]:
    """The checkpoint's contents, or an error naming the file (and the other checkpoints
    beside it) when it is missing, empty or truncated."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{setting}={str(path)!r}: no such file.")
    try:
        ckpt = safe_load(path)
    except CheckpointError as err:
        raise CheckpointError(f"{setting}={str(path)!r} {err}") from None
    except Exception as err:  # EOFError, zip "central directory" errors
        others = sorted(p.name for p in path.parent.glob("*.ckpt") if p.name != path.name)
        # torch's first sentence says what failed; what follows is advice of its own
        said = (str(err).strip().splitlines() or [""])[0].split(". ")[0].rstrip(".")
        said = said if len(said) <= 200 else said[:199] + "…"
        hint = f" Other checkpoints in {path.parent}: {', '.join(others)}." if others else ""
        raise CheckpointError(
            f"{setting}={str(path)!r} is not a readable checkpoint ({path.stat().st_size} "
            f"bytes; {type(err).__name__}: {said}). It may be empty or truncated "
            f"(a full disk, a copy that did not finish).{hint}"
        ) from None
    if isinstance(ckpt, dict) and "hyper_parameters" in ckpt:
        ckpt["hyper_parameters"] = upgrade_hparams(ckpt["hyper_parameters"])
    return ckpt


def safe_load(path: str | Path, mmap: bool = False) -> Any:
    """``torch.load`` restricted to tensors and plain containers (``weights_only``), the
    one way this project reads a checkpoint: a file whose unpickling would build any other
    object (and so could run code) is refused before anything in it runs, with
    :class:`CheckpointError` saying so. Other failures (a truncated file) are raised as
    torch raises them."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        said = str(err)
        if "weights_only" not in said.lower().replace(" ", "_"):
            raise
        found = re.search(r"GLOBAL ([\w.]+)|global '?([\w.]+)", said)
        what = f" ({next(g for g in found.groups() if g)})" if found else ""
        raise CheckpointError(
            f"holds a Python object{what} that only full unpickling could rebuild, and "
            "unpickling can run any code, so it was not loaded. The checkpoints this "
            "project writes hold only tensors and plain values: this one was altered or "
            "written by other code."
        ) from None


def peek_checkpoint(path: str | Path) -> dict[str, Any] | None:
    """A checkpoint's counters and records (epoch, step, ``segnet``), memory-mapped so that
    its weights are not read; None when it cannot be read, or would need full unpickling
    (a caller that needs the file reads it with :func:`read_checkpoint`, which says what is
    wrong). Never runs code from the file."""
    try:
        ckpt = safe_load(path, mmap=True)
    except Exception:
        return None
    return ckpt if isinstance(ckpt, dict) else None


def upgrade_hparams(hp: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters of a checkpoint written before the dataset description
    (``DataInfo``) existed, in today's terms, so earlier runs still evaluate, export and
    initialise new ones. Today's checkpoints are returned as they are."""
    if "data" in hp or "data_info" not in hp:
        return hp
    old = dict(hp)
    info = dict(old.pop("data_info") or {})
    norm = dict(info.get("normalization") or {})
    if "kind" not in norm:  # images: mean/std of [0, 1] RGB
        norm = {"kind": "rgb_mean_std", "channel_order": "RGB", "scale": 1 / 255, **norm}
    dims = old.pop("spatial_dims", info.get("spatial_dims", 2))
    window = old.pop("inferer", None)
    per_case = old.pop("per_case_dice", dims == 3)
    data = {
        "spatial_dims": dims,
        "in_channels": old.pop("in_channels", info.get("in_channels")),
        "class_names": old.pop("class_names", None) or info.get("class_names"),
        "palette": info.get("palette"),
        "ignore_index": old.pop("ignore_index", info.get("ignore_index")),
        "normalization": norm,
        "input_size": info.get("input_size") or (window or {}).get("roi_size"),
        "sliding_window": window,
        "monitor": old.get("monitor") or ("val/dice" if dims == 3 else "val/miou"),
        "per_case": per_case,
    }
    old.pop("num_classes", None)
    net = dict(old.get("net") or {})
    if "convs_per_stage" in net:  # UNet's former name for it
        net["convs"] = net.pop("convs_per_stage")
    return {**old, "net": net, "data": data, "data_cfg": info.get("data_cfg")}


def _describe(hp: dict[str, Any]) -> dict[str, Any]:
    net = without_init_only(hp.get("net") or {})
    pools = net.get("pools")
    if pools is None or all(set(level) == {2} for level in pools):
        # every axis halved at every level: the network of one recorded before pools existed
        net.pop("pools", None)
    data = hp.get("data") or {}
    return {
        "net": net,
        "class_names": data.get("class_names"),
        "in_channels": data.get("in_channels"),
        "spatial_dims": data.get("spatial_dims"),
    }


def expected_model(net: dict[str, Any], info: Any) -> dict[str, Any]:
    """What a run builds (``info``: the DataModule's ``DataInfo``), in the terms a
    checkpoint records."""
    return _describe({"net": net, "data": info.to_dict()})


def model_differences(ckpt: dict[str, Any], expected: dict[str, Any]) -> dict[str, tuple]:
    """Where the checkpoint's network and data sizes differ from ``expected`` (what a run
    builds, :func:`expected_model`): key -> (the checkpoint's, the run's)."""
    theirs = _describe(ckpt.get("hyper_parameters") or {})
    return {k: (theirs.get(k), v) for k, v in expected.items() if theirs.get(k) != v}


def check_same_model(
    ckpt: dict[str, Any], expected: dict[str, Any], path: str | Path, setting: str
) -> None:
    """The checkpoint's network and data sizes must be the ones this run builds."""
    diff = model_differences(ckpt, expected)
    if diff:
        lines = [f"{k}: {a} in the checkpoint, {b} here" for k, (a, b) in diff.items()]
        raise CheckpointError(
            f"{setting}={str(path)!r} holds another model or dataset than this run builds:\n  "
            + "\n  ".join(lines)
            + "\nUse the experiment and overrides it was trained with (its run folder's "
            ".hydra/overrides.yaml)."
        )


def check_same_spacing(ckpt: dict[str, Any], info: Any, path: str | Path) -> None:
    """A resumed run goes on at the voxel spacing it started at: a changed ``data.spacing``
    (or ``median`` over other cases) would leave a model trained partly at each, and its
    checkpoints would record only the second."""
    data = (ckpt.get("hyper_parameters") or {}).get("data") or {}
    theirs = (data.get("normalization") or {}).get("spacing")
    ours = info.normalization.get("spacing")
    if theirs == ours or (theirs and ours and np.allclose(theirs, ours)):
        return
    raise CheckpointError(
        f"ckpt_path={str(path)!r} was trained on volumes resampled to "
        f"{f'{theirs} mm' if theirs else 'no common spacing (data.spacing=null)'}; this run "
        f"resamples to {f'{ours} mm' if ours else 'none'}. Resume with the data.spacing "
        "(and data) it started with, or start a new run from its weights with init_from=."
    )


def clean_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop the key segments that torch.compile (``_orig_mod``) and DDP (``module``) add,
    wherever they sit, and nothing else (a layer named ``submodule`` keeps its name).

    Example:
        >>> list(clean_state_dict({"net._orig_mod.submodule.w": 0, "module.net.b": 1}))
        ['net.submodule.w', 'net.b']
    """
    wrappers = {"_orig_mod", "module"}
    return {
        ".".join(part for part in key.split(".") if part not in wrappers): value
        for key, value in state.items()
    }


def net_weights(ckpt: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The network's own state dict from a Lightning checkpoint (its ``net.`` entries)."""
    state = clean_state_dict(ckpt["state_dict"])
    return {k.removeprefix("net."): v for k, v in state.items() if k.startswith("net.")}


def load_weights(module: torch.nn.Module, ckpt: dict[str, Any], source: str) -> None:
    """The network weights of a checkpoint, for a new run (``init_from``): no optimizer,
    schedule, epoch or best metric is carried over. Every weight must fit: a network left
    partly at its random start would train on silently."""
    try:
        module.net.load_state_dict(net_weights(ckpt))
    except RuntimeError as err:
        raise ValueError(
            f"init_from={source}: its network weights do not fit this run's network "
            f"({str(err).strip()}). Start from a checkpoint of the same model settings."
        ) from None
