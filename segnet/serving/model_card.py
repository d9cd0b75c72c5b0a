"""The model card (``model.json``) written beside exported models: the network, the data
it expects and produces, and the settings evaluation rebuilds. Plain data, no torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segnet.data.info import WINDOW_BLENDING, test_mirror_axes

CARD_NAME = "model.json"
# 2: volumes may be resampled to data.normalization.spacing (a "resample" step); a reader
# that knows only version 1 would skip it and predict on the wrong grid. 3: mirroring flips
# the axes training flipped (deployment.onnx.mirroring.axes), which may be fewer than all
CARD_VERSION = 3
# SegmentationModule arguments a card carries besides the network and the data description
# (everything but optimisation), so that evaluating an exported model scores like its
# checkpoint
MODULE_KEYS = ("class_weights", "loss", "monitor", "surface_tolerance_mm", "data_cfg", "tta")


def make_card(
    spec: dict[str, Any],
    module_args: dict[str, Any],
    data: Any,
    metrics: dict[str, float] | None,
    min_input: int,
) -> dict[str, Any]:
    """``data``: the ``DataInfo`` the model was trained with; ``min_input``: the shortest
    axis the network takes (shorter inputs are padded)."""
    layout = "NCHW" if data.spatial_dims == 2 else "NCDHW (D, H, W = the RAS x, y, z axes)"
    return {
        "card_version": CARD_VERSION,
        "net": spec,
        "module": {k: module_args.get(k) for k in MODULE_KEYS},
        "data": data.to_dict(),
        "input": {
            "layout": layout,
            "dtype": "float32",
            "channels": data.in_channels,
            "normalization": data.normalization,
            "trained_input_size": data.input_size,
        },
        "output": {
            "layout": "logits, N x num_classes x spatial",
            "classes": data.class_names,
            "palette": data.palette,
        },
        "deployment": deployment_steps(data, bool(module_args.get("tta")), min_input),
        "metrics": metrics or {},
    }


def deployment_steps(data: Any, tta: bool, min_input: int) -> dict[str, Any]:
    """What to do around the ONNX file, step by step, with nothing but onnxruntime, numpy
    and Pillow (images) or nibabel (volumes): exactly what ``segnet.serving.predict`` does
    (``mirroring``: the axes training flipped, and whether the recipe tested with them,
    ``tta``). Each run of the network (each mirrored copy) goes through ``small_inputs``,
    then the sliding window, when the card has them."""
    norm = data.normalization
    onnx = {
        "input_name": "x",
        "output_name": "logits",
        "dynamic_axes": "batch and every spatial axis",
    }
    if min_input > 1:
        onnx["small_inputs"] = {
            "min_size": min_input,
            "pad": "each spatial axis shorter than min_size with zeros up to min_size, "
            "half before and the rest after",
            "then": "crop the logits back to the unpadded size",
        }
    steps = {"rgb_mean_std": rgb_steps, "image_mean_std": image_steps}.get(
        norm["kind"], volume_steps
    )
    pre, post = steps(data, norm, onnx)
    onnx["mirroring"] = mirroring(data, tta)
    return {"onnx": onnx, "preprocess": pre, "postprocess": post}


def rgb_steps(data: Any, norm: dict[str, Any], onnx: dict[str, Any]) -> tuple[list, list]:
    """Scene images (CamVid): uint8 RGB, resized to the trained size, scaled and
    normalised; the logits resized back to the image's size."""
    pre = [
        {"step": "decode", "to": "uint8 RGB (H, W, 3)", "channel_order": norm["channel_order"]},
    ]
    if data.input_size:
        pre.append(
            {
                "step": "resize",
                "size_hw": data.input_size,
                # what training and segnet.serving.predict ran; Pillow's BILINEAR resize is the
                # same filter, but rounds a few border pixels apart at non-integer scales
                "interpolation": "bilinear, antialiased, on the uint8 image",
                "as_run_by": "torchvision.transforms.v2.functional.resize(antialias=True)",
                "also": "Pillow Image.resize(BILINEAR): the same at integer scale factors, "
                "within rounding (under 1% of mask pixels at class borders) at others",
            }
        )
    pre += [
        {"step": "scale", "multiply_by": norm["scale"], "result": "float32 in [0, 1]"},
        {"step": "normalize", "subtract": norm["mean"], "divide_by": norm["std"]},
        {"step": "layout", "from": "HWC", "to": "NCHW", "add_batch_axis": True},
    ]
    post = [
        {
            "step": "resize_logits",
            "to": "the original image's (H, W)",
            "interpolation": "bilinear, half-pixel centres (align_corners=False)",
            "skip_if": "sizes already equal",
        },
        {"step": "argmax", "axis": 1, "result": "class index per pixel"},
        {"step": "colorize", "palette": "output.palette (RGB per class index)"},
    ]
    return pre, post


def image_steps(data: Any, norm: dict[str, Any], onnx: dict[str, Any]) -> tuple[list, list]:
    """A user's own images: read in their own units, normalised with the training set's
    mean and std, segmented whole (through the sliding window, where the card has one)."""
    pre = [
        {
            "step": "decode",
            "to": f"{norm['color_mode']} (H, W, {len(norm['mean'])}) in the image's own "
            "units (0-255 for 8 bit, 0-65535 for 16 bit), as float32",
            "with": f"Pillow: Image.convert('{norm['color_mode']}'), except 16-bit grey "
            "images, read as they are",
        },
        {"step": "normalize", "subtract": norm["mean"], "divide_by": norm["std"]},
        {"step": "layout", "from": "HWC", "to": "NCHW", "add_batch_axis": True},
    ]
    post = [
        {"step": "argmax", "axis": 1, "result": "class index per pixel, at native size"},
    ]
    if data.sliding_window:
        onnx["sliding_window"] = {**WINDOW_BLENDING, **data.sliding_window}
        onnx["sliding_window_steps"] = sliding_window_steps(data.sliding_window)
    return pre, post


def volume_steps(data: Any, norm: dict[str, Any], onnx: dict[str, Any]) -> tuple[list, list]:
    """NIfTI volumes: reoriented to RAS, clipped, z-scored, resampled to the trained
    spacing; the logits back to the source grid and orientation."""
    pre = [
        {
            "step": "read",
            "with": "nibabel",
            "reorient_to": "RAS (nibabel.as_closest_canonical)",
        },
        {"step": "layout", "to": "NCDHW", "channels": "4th NIfTI axis, if any"},
        {"step": "clip", "range": norm.get("clip"), "skip_if": "range is null"},
        {"step": "normalize", "how": "z-score per volume and channel (mean 0, std 1)"},
    ]
    post = []
    if norm.get("spacing"):
        pre.append(
            {
                "step": "resample",
                "spacing_mm": norm["spacing"],
                "shape": "per RAS axis: voxels * source voxel size / spacing_mm, "
                "rounded to the nearest whole number (halves to even), at least 1; "
                "the source voxel sizes are the column lengths of the reoriented "
                "(RAS) image's affine",
                "interpolation": "trilinear, half-voxel centres (align_corners=False)",
            }
        )
        post.append(
            {
                "step": "resize_logits",
                "to": "the source volume's shape (in RAS)",
                "interpolation": "trilinear, half-voxel centres (align_corners=False)",
            }
        )
    post += [
        {"step": "argmax", "axis": 1},
        {"step": "write", "reorient_from": "RAS back to the source image's orientation"},
    ]
    if data.sliding_window:
        # MONAI SlidingWindowInferer's keyword arguments, and the same spelt out
        onnx["sliding_window"] = {**WINDOW_BLENDING, **data.sliding_window}
        onnx["sliding_window_steps"] = sliding_window_steps(data.sliding_window)
    return pre, post


def mirroring(data: Any, tta: bool) -> dict[str, Any]:
    """The layout's axes (after batch and channel) that training flipped: the ones
    mirroring flips, where the recipe tests with it, or an ensemble's first member says
    to."""
    axes = [2 + a for a in test_mirror_axes(data.spatial_dims, data.mirror_axes)]
    steps: dict[str, Any] = {"as_tested": bool(tta), "axes": axes}
    if axes:
        steps |= {
            "run_on": f"the input flipped along every subset of the axes {axes} of the "
            f"{'NCHW' if data.spatial_dims == 2 else 'NCDHW'} layout ({2 ** len(axes)} runs, "
            "the unflipped input included)",
            "combine": "flip each output back, softmax over classes, average; logits = log(mean)",
        }
    else:
        steps["run_on"] = "the input alone: the network was trained without flips"
    return steps


def sliding_window_steps(window: dict[str, Any]) -> dict[str, str]:
    """MONAI's ``SlidingWindowInferer`` with the card's ``sliding_window`` arguments, spelt
    out for a deployment that has only numpy."""
    return {
        "skip_if": "no spatial axis is longer than roi_size: then one run over the whole input",
        "pad": "each axis shorter than roi_size with cval up to roi_size, half before and the "
        "rest after; crop the blended logits back at the end",
        "windows": "per axis, starts 0, s, 2s, ... with s = max(1, int(roi_size * (1 - "
        "overlap))) (s = roi_size where the axis equals it), up to the first window that "
        "reaches the axis's end, which is moved back to end exactly there",
        "blend": "logits of all windows summed, each voxel weighted by w, then divided by the "
        "summed weights"
        + (
            "; w = the product over the axes of exp(-d**2 / (2 * (sigma_scale * roi_size)**2)), "
            "d = the offset from the window's centre, (roi_size - 1) / 2; then the whole "
            "product map clamped below at max(its smallest value, 0.001)"
            if window.get("mode", "constant") == "gaussian"
            else "; w = 1"
        ),
    }


def read_card(model_path: str | Path) -> dict[str, Any]:
    path = Path(model_path).with_name(CARD_NAME)
    if not path.is_file():
        raise FileNotFoundError(
            f"{model_path} has no model card: expected {path} beside it (python -m "
            "segnet.serving.export writes both)."
        )
    card = json.loads(path.read_text())
    version = card.get("card_version", 1)
    if version > CARD_VERSION:
        raise ValueError(
            f"{path} is model card version {version}, written by a newer segnet than this "
            f"one (which reads up to {CARD_VERSION}); upgrade segnet to use this model."
        )
    return card
