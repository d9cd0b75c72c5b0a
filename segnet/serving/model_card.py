"""The model card (``model.json``) written beside exported models: the network, the data
it expects and produces, and the settings evaluation rebuilds. Plain data, no torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segnet.data.info import test_mirror_axes

CARD_NAME = "model.json"
# 2: volumes may be resampled to data.normalization.spacing (a "resample" step); a reader
# that knows only version 1 would skip it and predict on the wrong grid. 3: mirroring flips
# the axes training flipped (deployment.onnx.mirroring.axes), which may be fewer than all.
# 4: a label-map clean-up chosen on validation (deployment.label_map_cleanup), which a
# reader of version 3 would skip. 5: your own images may be read downscaled
# (data.normalization.downscale, a "downscale" step before the network and
# "resize_logits" after it), which a reader of version 4 would skip, predicting at native
# size; written only on such cards (the lowest version that reads a card right)
CARD_VERSION = 5
# SegmentationModule arguments a card carries besides the network and the data description
# (everything but optimisation), so that evaluating an exported model scores like its
# checkpoint
MODULE_KEYS = (
    "class_weights",
    "loss",
    "monitor",
    "surface_tolerance_mm",
    "data_cfg",
    "tta",
    "postprocessing",
)


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
        "card_version": CARD_VERSION if data.normalization.get("downscale") else 4,
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
        "output": output_description(data),
        "deployment": {
            **deployment_steps(data, bool(module_args.get("tta")), min_input),
            "label_map_cleanup": postprocessing_step(
                module_args.get("postprocessing"), list(data.class_names)
            ),
        },
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
    from segnet.data.formats import format_of_model

    # what reading, normalising and writing around the network are: the data format's own
    pre, post = format_of_model(data).card_steps(data, norm, onnx)
    if data.regions:  # not the arg-max: each region's sigmoid, then the label map
        regions_step = {"step": "regions_to_labels", "how": "output.to_label_map"}
        post = [regions_step if step.get("step") == "argmax" else step for step in post]
    onnx["mirroring"] = mirroring(data, tta)
    return {"onnx": onnx, "preprocess": pre, "postprocess": post}


def output_description(data: Any) -> dict[str, Any]:
    """What the network's outputs are and how they become a label map: a softmax over the
    classes, or (regions) one sigmoid per region turned back into labels."""
    out: dict[str, Any] = {"classes": data.class_names, "palette": data.palette}
    if not data.regions:
        return {"layout": "logits, N x num_classes x spatial", **out}
    order = data.regions_class_order
    return {
        "layout": "logits, N x num_regions x spatial: one sigmoid per region",
        **out,
        "regions": data.regions,
        "regions_class_order": order,
        "to_label_map": (
            "a region is predicted where its logit is above 0 (sigmoid above 0.5); "
            + (
                "start from 0 and paint each region, in order, with its regions_class_order "
                "label (later regions over earlier ones)"
                if order
                else "each label value scores, per voxel, 1 for every region whose "
                "prediction (in or out) equals the label's membership (in if the region "
                "lists it, else out), plus (regions listing it) / (number of regions + 1); "
                "the label with the highest score wins, instead of the argmax over classes"
            )
        ),
    }


def postprocessing_step(plan: dict[str, Any] | None, class_names: list[str]) -> dict | None:
    """The clean-up of the label map (after the arg-max, before writing) that training
    chose on validation, as ``segnet.serving.postprocessing`` applies it; None: none."""
    if not plan or not (plan.get("foreground") or plan.get("classes")):
        return None
    return {
        "foreground": bool(plan.get("foreground")),
        "classes": [class_names[c] for c in plan.get("classes") or []],
        "how": "first, where foreground is true, set every foreground voxel (class > 0) "
        "outside the largest connected foreground component to 0; then, for each class "
        "listed, set its voxels outside its own largest connected component to 0. "
        "Components touch along faces, edges or corners (scipy.ndimage.label with a "
        "full-connectivity structure)",
    }


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
            "combine": (
                "flip each output back, sigmoid per region, average; logits = log(mean / "
                "(1 - mean))"
                if data.regions
                else "flip each output back, softmax over classes, average; logits = log(mean)"
            ),
        }
    else:
        steps["run_on"] = "the input alone: the network was trained without flips"
    return steps


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
