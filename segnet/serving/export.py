"""Export a trained network to files that load without this project's training stack.

Formats:
    * ``safetensors``: weights plus the network spec (plain JSON in the file's metadata);
      :func:`load_safetensors` rebuilds the net with only torch, safetensors and this
      package's ``segnet.models``.
    * ``onnx``: dynamo exporter, dynamic batch and spatial sizes; runs in onnxruntime.
    * ``pt2``: ``torch.export`` program, dynamic batch and spatial sizes.

Each writer is paired with a loader in :mod:`segnet.serving.loading`, and :func:`verify` compares
a reloaded file with the eager network. Exporting reads the checkpoint through
``segnet.serving.loading`` too: no Lightning, Hydra or torchmetrics.

Several checkpoints (one per cross-validation fold) export as one ensemble folder
(:func:`export_ensemble`): each member exported as above into ``member_<i>/``, and
``ensemble.json`` listing them; ``segnet.serving.predict`` and ``evaluate.py`` given the folder
average the members' softmax probabilities, as ``evaluate.py`` does with the checkpoints.

Example:
    >>> from segnet.models import create_model
    >>> from segnet.serving.loading import load_safetensors
    >>> net = create_model("segnet_basic", out_channels=4)
    >>> path = save_safetensors(net, "/tmp/segnet_basic.safetensors")
    >>> type(load_safetensors(path)).__name__
    'SegNetBasic'
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from segnet.files import staged, write_text
from segnet.logs import to_log_file
from segnet.serving.loading import (  # noqa: F401  (the loaders are part of this module's API)
    ENSEMBLE_NAME,
    LOADERS,
    SPEC_KEY,
    SUFFIX,
    LoadedModel,
    clean_state_dict,
    load_model,
    load_onnx,
    load_pt2,
    load_safetensors,
    read_safetensors_metadata,
)
from segnet.serving.model_card import CARD_NAME, make_card

FORMATS = ("safetensors", "onnx", "pt2")


def save_safetensors(
    net: nn.Module, path: str | Path, metadata: dict[str, Any] | None = None
) -> Path:
    from safetensors.torch import save_file

    path = Path(path)
    state = {
        k: v.detach().cpu().contiguous() for k, v in clean_state_dict(net.state_dict()).items()
    }
    meta = {SPEC_KEY: json.dumps(net.spec())}
    meta.update({k: json.dumps(v) for k, v in (metadata or {}).items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata=meta)
    return path


def _dynamic_shapes(spatial_dims: int) -> dict[str, dict[int, Any]]:
    # AUTO lets export derive the valid range per axis itself: ceil-mode pooling makes the
    # smallest size depend on the number of stages, and sizes of 1 are specialised away.
    auto = torch.export.Dim.AUTO
    return {"x": {axis: auto for axis in range(spatial_dims + 2) if axis != 1}}


def _example(net: nn.Module, example: torch.Tensor | None) -> torch.Tensor:
    if example is not None:
        return example
    # Odd and past the smallest size whose deepest pooled map is still 2 wide.
    size = 2 * getattr(net, "min_size", 17) + 1
    return torch.randn(2, net.in_channels, *([size] * net.spatial_dims))


def export_pt2(net: nn.Module, path: str | Path, example: torch.Tensor | None = None) -> Path:
    path = Path(path)
    net = net.eval()
    program = torch.export.export(
        net, (_example(net, example),), dynamic_shapes=_dynamic_shapes(net.spatial_dims)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.export.save(program, str(path))
    return path


@contextlib.contextmanager
def quiet_loggers(*names: str) -> Iterator[None]:
    """The ONNX exporter's optimiser logs every pass at INFO (about 80 lines per export)
    and its IR builder warns about its own attribute types: errors only, while exporting
    (a failed export raises anyway)."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.ERROR))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def export_onnx(net: nn.Module, path: str | Path, example: torch.Tensor | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    net = net.eval()
    with quiet_loggers("onnxscript", "onnx_ir", "torch.onnx"):
        program = torch.onnx.export(
            net,
            (_example(net, example),),
            dynamo=True,
            dynamic_shapes=_dynamic_shapes(net.spatial_dims),
            input_names=["x"],
            output_names=["logits"],
            verbose=False,
        )
    program.save(str(path))
    return path


WRITERS = {"safetensors": save_safetensors, "onnx": export_onnx, "pt2": export_pt2}


def verify(
    net: nn.Module, path: str | Path, fmt: str, example: torch.Tensor | None = None
) -> float:
    """Reload ``path`` and return the largest absolute difference from the eager ``net``.

    The check input has a different size from the export example so that dynamic shapes
    are exercised too.
    """
    return reload_difference(net, path, fmt, example)[0]


def reload_difference(
    net: nn.Module, path: str | Path, fmt: str, example: torch.Tensor | None = None
) -> tuple[float, float]:
    """The largest absolute difference of the reloaded ``path`` from the eager ``net``, and
    the largest absolute logit, its scale."""
    net = net.eval()
    x = _example(net, example)
    x = torch.randn(1, x.shape[1], *(s + 3 for s in x.shape[2:]))
    with torch.no_grad():
        expected = net(x)
        got = LOADERS[fmt](path)(x)
    return float((expected - got.to(expected)).abs().max()), float(expected.abs().max())


# A reloaded file may differ from the eager network by float rounding (another kernel order,
# fused operations): far below this share of the logits' scale. Beyond it the file computes
# something else, and is not written as verified.
RELOAD_TOLERANCE = 1e-3


def normal_permissions(path: Path) -> None:
    """What a new file gets under the user's umask (usually 0644): some writers (safetensors)
    create theirs 0600, which a serving account or a colleague then cannot read."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def export_checkpoint(
    ckpt_path: str | Path,
    out_dir: str | Path,
    formats: tuple[str, ...] = FORMATS,
    example_size: list[int] | None = None,
    on_write: Callable[[], Any] | None = None,
) -> dict[str, float]:
    """Write each format plus ``model.json``; return the largest reload difference per
    format. ``on_write`` is called once every check has passed, before the first file."""
    check_free(Path(out_dir), formats)  # before the checkpoint is even read
    check_rebuildable([Path(ckpt_path)])
    # reads the checkpoint once: weights, spec and best score
    return write_model(load_model(ckpt_path), out_dir, formats, example_size, on_write)


# exported programs: a traced graph, not the network's modules and weights to export again
PROGRAM_SUFFIXES = (SUFFIX["onnx"], SUFFIX["pt2"])


def check_rebuildable(paths: list[Path]) -> None:
    """Exports are made from what holds the network itself: a checkpoint, or an exported
    ``.safetensors`` (its weights and spec). A ``.onnx`` or ``.pt2`` is refused, naming
    those, before anything is read or written."""
    for path in paths:
        if path.name.endswith(PROGRAM_SUFFIXES):
            raise ValueError(
                f"ckpt_path={path}: an exported program, which holds a traced graph rather "
                "than the network to export again; export from the run's checkpoint (.ckpt) "
                f"or from the model.safetensors beside it ({path.with_name('model.safetensors')})."
            )


def check_formats(formats: tuple[str, ...]) -> None:
    if not formats:
        raise ValueError(f"formats=[]: name at least one of {list(FORMATS)}.")
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"formats {sorted(unknown)} unknown; choose from {list(FORMATS)}.")


def check_example_size(size: Any, spatial_dims: int, min_input: int) -> None:
    """``example_size``: one whole number per spatial axis, none below the smallest input
    the network takes (the card's ``min_size``). Refused before anything is written:
    torch.export would fail deep inside its trace instead."""
    if size is None:
        return
    example = f"example_size=[{','.join([str(max(min_input, 64))] * spatial_dims)}]"
    fits = (
        isinstance(size, list | tuple)
        and len(size) == spatial_dims
        and all(isinstance(n, int) and not isinstance(n, bool) for n in size)
    )
    if not fits:
        raise ValueError(
            f"example_size={size!r}: give one whole number per spatial axis of this "
            f"{spatial_dims}D network, e.g. {example}, or leave it out (null: the size the "
            "network was trained at)."
        )
    if min(size) < min_input:
        raise ValueError(
            f"example_size={list(size)}: this network takes inputs of at least {min_input} "
            f"per axis (min_size in model.json), e.g. {example}, or leave it out (null: the "
            "size the network was trained at)."
        )


def check_free(out_dir: Path, formats: tuple[str, ...]) -> None:
    """Exports are never overwritten: none of the files ``formats`` would write may exist."""
    check_formats(formats)
    targets = [out_dir / f"model{SUFFIX[fmt]}" for fmt in formats] + [out_dir / CARD_NAME]
    existing = [p for p in targets if p.exists()]
    if existing:
        raise FileExistsError(f"{existing[0]} exists; exports are never overwritten.")


def write_model(
    model: LoadedModel,
    out_dir: str | Path,
    formats: tuple[str, ...] = FORMATS,
    example_size: list[int] | None = None,
    on_write: Callable[[], Any] | None = None,
) -> dict[str, float]:
    """A loaded checkpoint's network in each format plus ``model.json``; the largest reload
    difference per format. ``on_write``: as for :func:`export_checkpoint`."""
    out_dir = Path(out_dir)
    net = model.net
    check_example_size(example_size, net.spatial_dims, model.inference.min_input)
    check_free(out_dir, formats)
    if on_write is not None:
        on_write()
    out_dir.mkdir(parents=True, exist_ok=True)
    card = make_card(
        model.spec, model.module_args, model.info, model.metrics, model.inference.min_input
    )
    size = example_size or card["input"]["trained_input_size"]
    example = None
    if size:
        example = torch.randn(2, net.in_channels, *size)
    diffs: dict[str, float] = {}
    started: list[Path] = []
    try:
        for fmt in formats:
            path = out_dir / f"model{SUFFIX[fmt]}"
            started.append(path)
            with staged(path) as tmp:  # whole or not at all, even on a full disk
                if fmt == "safetensors":
                    save_safetensors(net, tmp)
                else:
                    WRITERS[fmt](net, tmp, example)
            normal_permissions(path)
            diffs[fmt], scale = reload_difference(net, path, fmt, example)
            say(f"{fmt:12s} {path}  largest difference on reload: {diffs[fmt]:.3g}")
            if not diffs[fmt] <= RELOAD_TOLERANCE * max(1.0, scale):  # NaN fails too
                raise ValueError(
                    f"{path}: reloaded, it gives logits up to {diffs[fmt]:.3g} away from the "
                    f"network's (whose largest is {scale:.3g}), so it was removed with the "
                    f"other files of this export. Export without it (formats=[...] without "
                    f"{fmt}), or report the model and torch version."
                )
        card = {
            **card,
            "files": {f: f"model{SUFFIX[f]}" for f in formats},
            "verified_max_abs_diff": diffs,
        }
        started.append(out_dir / CARD_NAME)
        write_text(out_dir / CARD_NAME, json.dumps(card, indent=2))
    except BaseException:
        # whatever stopped it (a failed write, a full disk, a reload that disagrees,
        # Ctrl+C): the files of this export go, none of them a verified model, and the
        # cause is raised
        for written in started:
            written.unlink(missing_ok=True)
        raise
    normal_permissions(out_dir / CARD_NAME)
    say(f"model card   {out_dir / CARD_NAME}")
    return diffs


def say(text: str) -> None:
    """A line of the export's report: on the console and in its log file (export.log)."""
    print(text)
    to_log_file(text, "segnet.serving.export")


def export_ensemble(
    ckpt_paths: list[Path],
    out_dir: str | Path,
    formats: tuple[str, ...] = FORMATS,
    example_size: list[int] | None = None,
    on_write: Callable[[], Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Each checkpoint exported into ``out_dir/member_<i>`` and ``ensemble.json`` listing
    them, in the order given; return each member's reload differences. Members that could
    not be averaged (other classes or preprocessing) are refused before anything is
    written."""
    from segnet.serving.ensemble import check_distinct, check_same_data

    out_dir = Path(out_dir)
    members = [f"member_{i}" for i in range(len(ckpt_paths))]
    taken = [p for p in (out_dir / ENSEMBLE_NAME, *(out_dir / m for m in members)) if p.exists()]
    check_formats(formats)  # before any member is read
    if taken:
        raise FileExistsError(f"{taken[0]} exists; exports are never overwritten.")
    check_rebuildable(ckpt_paths)
    models = [load_model(p) for p in ckpt_paths]  # a bad member stops the export here
    check_same_data([m.info for m in models], ckpt_paths)
    check_distinct([m.net for m in models], ckpt_paths)  # as evaluate and predict would
    for model in models:  # each member's smallest input, before the first is written
        check_example_size(example_size, model.net.spatial_dims, model.inference.min_input)
    for model, path in zip(models, ckpt_paths, strict=True):
        # the ensemble mirrors as its first member's recipe tested: each member must have
        # axes to flip then, as segnet.serving.predict would refuse the folder
        if models[0].inference.tta and model.inference.mirror_axes == []:
            raise ValueError(
                f"{path} was trained without flips, and this ensemble mirrors at test time "
                f"as its first member's recipe did ({ckpt_paths[0]}): leave that member out, "
                "or put first one whose recipe tests without mirroring."
            )
    diffs = {}
    try:
        for member, path, model in zip(members, ckpt_paths, models, strict=True):
            say(f"{member}: {path}")
            diffs[member] = write_model(model, out_dir / member, formats, example_size, on_write)
        listing = {
            "members": members,
            "checkpoints": [str(p) for p in ckpt_paths],
            # what segnet.serving.predict does, spelt out for a runtime without this package
            "combine": (
                "run each member as its model.json describes (its own window; mirroring on or off "
                "as the first member's says, each member flipping its own axes), average the "
                + (
                    "members' sigmoids per region, then turn the regions into labels as "
                    "output.to_label_map says"
                    if models[0].info.regions
                    else "members' softmax probabilities, then take the argmax"
                )
                + "; then apply deployment.label_map_cleanup only where every member's "
                "model.json gives the same one (otherwise none)"
            ),
        }
        write_text(out_dir / ENSEMBLE_NAME, json.dumps(listing, indent=2))
    except BaseException:
        # a member that failed (its file's check, a write, Ctrl+C) or the listing: no ensemble, so none of
        # its members either (each folder new, as checked above), and the folder free for
        # the next try
        for member in members:
            shutil.rmtree(out_dir / member, ignore_errors=True)
        raise
    normal_permissions(out_dir / ENSEMBLE_NAME)
    say(f"ensemble     {out_dir / ENSEMBLE_NAME} ({len(members)} members)")
    return diffs


if __name__ == "__main__":  # the command is its own module, which may use Hydra
    raise SystemExit("the export command is: python -m segnet.export (or segnet-export)")
