"""``evaluate(cfg)``: what evaluate.py runs. A checkpoint, an exported model or an
ensemble of them, tested on a split of the data it was trained with (or of new cases) as
its training run tested it; a setting that would make the figures another model's, or
the cases not held out, is refused before any data is read."""

from __future__ import annotations

import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from segnet.data.dataset_json import IGNORE
from segnet.data.drawn_masks import VOID
from segnet.data.info import DataInfo
from segnet.data.settings import AS_BEFORE_THEY_EXISTED
from segnet.runs.building import build, build_trainer
from segnet.runs.checks import check_accelerator, check_config_values, check_datamodule_provides
from segnet.runs.console import log_summary, print_table, quiet_library_noise, rank_zero_speaks
from segnet.runs.folders import Work, refuse_run_folder_in_use
from segnet.runs.records import write_outputs
from segnet.runs.settings import data_keys
from segnet.serving.checkpoints import read_checkpoint
from segnet.serving.ensemble import (
    check_members,
    check_recorded_splits,
    check_split,
    checkpoint_paths,
    scores_other_data,
    unfinished,
)
from segnet.serving.inference import check_mirroring
from segnet.serving.loading import SIZE_KEYS, ExportedNet, load_model
from segnet.training.callbacks.predictions import PredictionWriter
from segnet.training.ensemble_choice import choose_for_ensemble
from segnet.training.module import SegmentationModule
from segnet.training.testing import run_test

log = logging.getLogger(__name__)

# the data.* settings that change how a volume model is applied, and the sliding-window
# argument each sets
WINDOW_SETTINGS = {
    "sw_roi_size": "roi_size",
    "sw_overlap": "overlap",
    "sw_mode": "mode",
    "sw_batch_size": "sw_batch_size",
}


def load_module(ckpt_path: str) -> SegmentationModule:
    """A checkpoint (.ckpt) or an exported model (.safetensors/.onnx/.pt2 + model.json) as
    a module that evaluates like the checkpoint it came from."""
    path = Path(ckpt_path).expanduser()
    if path.suffix != ".ckpt":
        model = load_model(path)  # names a missing file or an unknown format
        net = {k: v for k, v in model.spec.items() if k not in SIZE_KEYS}
        module = SegmentationModule(net=net, data=model.info, **model.module_args)
        module.net = model.net
        return module.eval()
    ckpt = read_checkpoint(path, "ckpt_path")  # an error that names a missing or bad file
    hp = ckpt.get("hyper_parameters") or {}
    if "data" not in hp or "state_dict" not in ckpt:
        raise ValueError(
            f"{path} holds no model description or weights; train.py did not write it."
        )
    # built from the (upgraded) hyperparameters, so earlier checkpoints load too
    accepted = inspect.signature(SegmentationModule).parameters
    module = SegmentationModule(**{k: v for k, v in hp.items() if k in accepted})
    module.load_state_dict(ckpt["state_dict"])
    module.on_load_checkpoint(ckpt)
    return module


def scored_names(dm: Any, split: str) -> list[str] | None:
    """The names of the cases a split scores, where the data draws its splits (None for
    fixed split files); ``all`` is every case, which the record leaves out as the union of
    the others."""
    names = dm.split_names()
    if not names:
        return None
    if split == "all":
        return sorted({name for cases in names.values() for name in cases})
    return names.get(split)


def refuse_fixed_batchnorm(modules: list[SegmentationModule], paths: list[Path]) -> None:
    """``recompute_bn=true`` with an exported program (ONNX, pt2) of a BatchNorm network:
    its statistics are part of the program and cannot be recomputed."""
    for module, path in zip(modules, paths, strict=True):
        fixed = isinstance(module.net, ExportedNet)
        if fixed and (module.hparams.get("net") or {}).get("norm", "batch") == "batch":
            raise ValueError(
                f"recompute_bn=true: {path} is an exported program, whose BatchNorm "
                "statistics are fixed in it and cannot be recomputed. Evaluate the checkpoint "
                "it came from (or its .safetensors export) to recompute them, or leave "
                "recompute_bn out to use them as exported."
            )


def set_mirroring(modules: list[SegmentationModule], paths: list[Path], tta: bool | None) -> None:
    """Mirroring TTA on or off for every model of an evaluation alike (``tta`` None: as the
    first checkpoint's recipe tested); each flips the axes it was trained flipping, and one
    trained without flips is refused, named, before any data is read."""
    tta = modules[0].tta if tta is None else bool(tta)
    for module, path in zip(modules, paths, strict=True):
        check_mirroring(tta, module.inference.mirror_axes, path)
        module.tta = tta


# the folder settings a run may name inside its data.root (image, label and ROI folders)
FOLDER_SETTINGS = ("image_dir", "label_dir", "roi_dir")


def drop_folders_it_lacks(data_cfg: DictConfig, overrides: dict[str, Any], ckpt: Path) -> None:
    """A new ``data.root`` is read by its own layout where it lacks the image or label
    folder the checkpoint was trained naming (``data.image_dir=scans``): both are dropped,
    as a pair, unless this command names one. A region-of-interest folder it lacks is
    dropped with a warning: the scores then cover whole images."""
    root = Path(str(data_cfg.root)).expanduser()
    if not root.is_dir():
        return
    lacks = lambda key: bool(data_cfg.get(key)) and not (root / str(data_cfg[key])).is_dir()  # noqa: E731
    pair = [k for k in ("image_dir", "label_dir") if data_cfg.get(k) and k not in overrides]
    lacking = [k for k in ("image_dir", "label_dir") if lacks(k) and k not in overrides]
    if lacking:
        log.info(
            "data.root=%s has no folder %s/ (%s trained with data.%s=%s): read by its own "
            "layout instead of %s", root, data_cfg[lacking[0]], ckpt, lacking[0],
            data_cfg[lacking[0]], " and ".join(f"data.{k}={data_cfg[k]}" for k in pair),
        )  # fmt: skip
        for key in pair:
            data_cfg[key] = None
    if "roi_dir" not in overrides and lacks("roi_dir"):
        log.warning(
            "data.root=%s has no folder %s/ (%s trained with data.roi_dir=%s): its images "
            "are scored whole; +data.roi_dir=<folder> names its regions of interest", root,
            data_cfg.roi_dir, ckpt, data_cfg.roi_dir,
        )  # fmt: skip
        data_cfg.roi_dir = None


def drop_mask_encoding(
    data_cfg: DictConfig, overrides: dict[str, Any], data_format: Any, ckpt: Path
) -> None:
    """A new ``data.root`` whose masks are drawn from annotation files numbers each class
    by its name: the mask values or colours the checkpoint's training masks held
    (``data.label_values=[0,255]``) do not read it, and are dropped unless given here."""
    recorded = [
        k for k in ("label_values", "palette") if data_cfg.get(k) is not None and k not in overrides
    ]
    if recorded and data_format.masks_drawn(data_cfg):
        log.info(
            "the masks of data.root=%s are drawn from its annotation files, each class by its "
            "name: %s of %s (its training masks' values) do not apply to them", data_cfg.root,
            " and ".join(f"data.{k}={data_cfg[k]}" for k in recorded), ckpt,
        )  # fmt: skip
        for key in recorded:
            data_cfg[key] = None


def drop_drawn_void(
    data_cfg: DictConfig, overrides: dict[str, Any], data_format: Any, as_trained: dict
) -> None:
    """The void of masks drawn from annotation files (255), which runs of the version that
    first drew them recorded as their own void value: dropped where another folder of
    mask images is read, as its 255 is a class there (black-and-white masks' white)."""
    drawn_void = [VOID]
    if "ignore_values" in overrides or list(data_cfg.get("ignore_values") or []) != drawn_void:
        return
    trained = OmegaConf.create(as_trained)
    if data_format.masks_drawn(data_cfg):
        return
    where = Path(str(trained.get("root") or "")).expanduser()
    recorded_values = data_cfg.get("palette") is not None or data_cfg.get("label_values")
    if trained.get("root") and not where.is_dir() and not recorded_values:
        log.warning(
            "data.ignore_values=[%d] is the checkpoint's, and its training data (%s) is not "
            "here to tell whether 255 was the void of masks drawn from annotation files (as "
            "runs of the first version that drew them recorded): where 255 is a class in "
            "data.root=%s's masks, give +data.ignore_values=[]", VOID, where, data_cfg.root,
        )  # fmt: skip
        return
    if not data_format.masks_drawn(trained):
        return
    log.info(
        "data.ignore_values=[%d] was the void of the masks %s drew from annotation files, "
        "not a value of data.root=%s's masks: not void there", VOID, trained.get("root"),
        data_cfg.root,
    )  # fmt: skip
    data_cfg.ignore_values = None


def data_config(
    cfg: DictConfig, module: SegmentationModule, ckpt: Path
) -> tuple[DictConfig, dict[str, Any], dict[str, Any]]:
    """The data an evaluation reads: the checkpoint's training data settings, overridden by
    the ``data.*`` the user gives. Returns them with the overrides and the settings as
    trained, which :func:`check_overrides` weighs against each other."""
    as_trained = dict(module.hparams.get("data_cfg") or {})
    trained = OmegaConf.create(as_trained)
    overrides = {k: v for k, v in OmegaConf.to_container(cfg.data).items() if v is not None}
    data_cfg = OmegaConf.merge(trained, overrides)
    if "root" in overrides and data_cfg.get("csv") and "csv" not in overrides:
        # the checkpoint's case list would win over the folder asked for (a CSV lists the
        # cases wherever they are): the new folder's own cases are scored
        log.info("data.root=%s: its cases, not the CSV %s trained from", data_cfg.root, ckpt)
        data_cfg.csv = None
    if "root" in overrides:
        drop_folders_it_lacks(data_cfg, overrides, ckpt)
    if "_target_" not in data_cfg:
        raise ValueError(f"{ckpt} holds no data config; it was not made by train.py.")
    data_format = get_class(data_cfg._target_)
    if "root" in overrides:
        drop_mask_encoding(data_cfg, overrides, data_format, ckpt)
        drop_drawn_void(data_cfg, overrides, data_format, as_trained)
    for key, value in AS_BEFORE_THEY_EXISTED.items():  # a run recorded before key existed
        if key in getattr(data_format, "settings", {}) and key not in data_cfg:
            data_cfg[key] = value
    settle_classes(data_cfg, data_format, module, ckpt, overrides)
    fixed = data_format.settings_from_info(module.data_info)
    for key, value in fixed.items():
        data_cfg[key] = value
    return data_cfg, overrides, as_trained


def settle_classes(
    data_cfg: DictConfig,
    data_format: Any,
    module: SegmentationModule,
    ckpt: Path,
    overrides: dict[str, Any],
) -> None:
    """The classes and regions an evaluation reads the data as: the checkpoint's, where the
    run recorded none (a folder's own dataset.json or class file must then name them
    alike), or recorded them without the background the run added (masks per class);
    and regions a dataset.json gave, which the classes given would no longer read."""
    info = module.data_info
    if info is None:  # a description-less module: nothing to settle from it
        return
    trained_names = list(info.class_names)
    recorded = data_cfg.get("class_names")
    if (
        recorded
        and "class_names" not in overrides
        and [n.lower() for n in ["background", *recorded]] == [n.lower() for n in trained_names]
    ):
        data_cfg.class_names = trained_names
    if "regions" in data_cfg and data_cfg.get("regions") is None and info.regions:
        data_cfg.regions = dict(info.regions)
        data_cfg.regions_class_order = info.regions_class_order
    if "class_names" in data_cfg and not data_cfg.class_names:
        # the folder's own dataset.json or class file, where it has one, must name the label
        # values as the checkpoint does, or every per-class score would carry another class's name
        named = data_format.class_names_in_data(data_cfg)
        # a checkpoint from before nnU-Net's ignore label was void trained it as a class
        if named is not None and named + [IGNORE] == trained_names:
            named = trained_names
        # a class written in other case ("Anterior", a mask "anterior.nii.gz") is the same
        if named is not None and [n.lower() for n in named] != [n.lower() for n in trained_names]:
            where = (
                f"data.csv={data_cfg.csv}" if data_cfg.get("csv") else f"data.root={data_cfg.root}"
            )
            raise ValueError(
                f"the class list of {where} (its dataset.json or class file) names the label "
                f"values {named}, and {ckpt} was "
                f"trained on {trained_names}: relabel the data, or score data whose labels "
                "mean what the checkpoint's do."
            )
        # e.g. a plain folder without dataset.json: the checkpoint knows its classes
        data_cfg.class_names = trained_names


def refuse_other_input(
    overrides: dict[str, Any], as_trained: dict[str, Any], module: Any, data_format: Any
) -> None:
    """Settings of the network's input (its normalisation, the scale images are read at)
    other than the checkpoint's are refused: it takes its input as it was trained."""
    part_of_model = data_keys("part_of_model", data_format)
    # what the checkpoint resolved them to (data.downscale=auto's factor; 1 for a run from
    # before the setting existed): naming that is no change
    trained = {**as_trained, **data_format.settings_from_info(module.data_info)}
    renormalised = [
        f"data.{k}={json.dumps(overrides[k])}"
        for k in part_of_model
        if k in overrides and overrides[k] not in (as_trained.get(k), trained.get(k))
    ]
    if renormalised:
        raise ValueError(
            f"{', '.join(renormalised)}: the network takes its input as it was trained "
            f"({', '.join(f'{k}={trained[k]}' for k in part_of_model if k in trained)})"
            ", which the checkpoint keeps: leave these out."
        )


def check_overrides(
    overrides: dict[str, Any],
    as_trained: dict[str, Any],
    data_cfg: DictConfig,
    module: SegmentationModule,
    ckpt: Path,
) -> dict[str, str]:
    """Refuse a ``data.*`` override an evaluation would not honour (training's augmentation,
    the normalisation, the voxel spacing, a window for an image model), before any data is
    read, and settle what the checkpoint fixes in ``data_cfg``. Returns the sliding-window
    settings given (``data.sw_*`` to the window argument each sets)."""
    window = {k: WINDOW_SETTINGS[k] for k in overrides if k in WINDOW_SETTINGS}
    if window and module.sliding_window is None:
        raise ValueError(
            f"{', '.join('data.' + k for k in window)}: {ckpt} takes whole images, "
            "so there is no sliding window to set; leave these out."
        )
    if "patch_size" in overrides:
        # the window follows the patch only when training; here it would change nothing
        raise ValueError(
            f"data.patch_size={overrides['patch_size']} does not change an evaluation: the "
            "checkpoint is applied with the window it was validated with (volumes) or to "
            "whole images. To evaluate a volume model with another window, set "
            "data.sw_roi_size instead."
        )
    refuse_other_regions(overrides, as_trained, module)
    # as the format says (segnet.data.settings)
    data_format = get_class(data_cfg._target_)
    training_only = data_keys("training_only", data_format)
    unused = [
        f"data.{k}={json.dumps(v)}"
        for k, v in overrides.items()
        if k in training_only and v != as_trained.get(k)
    ]
    if unused:
        raise ValueError(
            f"{', '.join(unused)}: settings of training (augmentation, patch sampling, the "
            "loss's class weights), which an evaluation does not use: leave them out. "
            "Mirroring at test time is tta=true or false."
        )
    refuse_other_input(overrides, as_trained, module, data_format)
    if "image_size" in overrides and overrides["image_size"] != as_trained.get("image_size"):
        log.warning(
            "data.image_size=%s: the network sees the images at this size, not at the %s "
            "it was trained at; scores are taken at the labels' own size either way",
            overrides["image_size"],
            as_trained.get("image_size") or "native size",
        )
    if data_cfg.get("crop_size"):
        data_cfg.crop_size = None  # whole frames: the training crop must not limit image_size
    if "spacing" in overrides:
        trained_at = module.data_info.normalization.get("spacing")
        raise ValueError(
            f"data.spacing={overrides['spacing']} is refused: "
            + (
                "this checkpoint segments 2D images."
                if module.data_info.spatial_dims == 2
                else "a network is applied at the voxel spacing it was trained at ("
                + (f"{trained_at} mm" if trained_at else "each case on its own grid")
                + "), which the checkpoint keeps; scores are taken on each case's own grid."
            )
        )
    if "spacing" in data_cfg:
        # the spacing the network was trained at ("median" resolved then), not the median
        # of whatever data this evaluation reads
        data_cfg.spacing = module.data_info.normalization.get("spacing")
    return window


def evaluate(cfg: DictConfig, work: Work | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Test a checkpoint on ``data.split``; the data settings come from the checkpoint
    (what it was trained with), overridden by any ``data.*`` the user gives. ``work`` is
    marked started as the test begins."""
    work = work or Work()
    quiet_library_noise()
    rank_zero_speaks()
    check_accelerator(cfg, "without trainer= (the default takes whatever device there is)")
    check_config_values(cfg)
    out_dir = Path(cfg.paths.output_dir)
    refuse_run_folder_in_use(out_dir, "evaluate")
    paths = checkpoint_paths(cfg.ckpt_path)  # one checkpoint, or an ensemble's
    modules = [load_module(str(p)) for p in paths]
    dm, split = settle_data(cfg, modules, paths)
    module = join_ensemble(modules, paths)
    postprocess = bool(cfg.get("postprocess", True))
    # the masks are written as the test step makes them: one pass over the split
    # (save_probabilities=true writes them beside the label maps, which it writes too)
    module.keep_probabilities = bool(cfg.get("save_probabilities"))
    saves = cfg.get("save_predictions") or module.keep_probabilities
    writer = (PredictionWriter(dm, out_dir / "predictions"),) if saves else ()
    trainer = build_trainer(cfg, extra_callbacks=writer)
    work.starts()  # a failure from here on keeps the run folder and its log
    chosen = (
        postprocess
        and len(modules) > 1
        and choose_for_the_ensemble(trainer, module, modules, paths)
    )
    if not chosen:
        set_postprocessing(module, modules, paths, postprocess)
    metrics, split = run_test(trainer, module, dm, bool(cfg.get("recompute_bn", False)))
    if trainer.is_global_zero:  # every file, and the table, once
        # absolute, as training writes it: metrics.json names the files wherever it is read
        tested = [os.path.abspath(p) for p in paths]
        tested = tested[0] if len(paths) == 1 else tested
        write_outputs(out_dir, module, dm, metrics, split, tested, cfg)
        title = Path(paths[0]).name if len(paths) == 1 else f"ensemble of {len(paths)}"
        print_table(dict(metrics), f"{title} on {split}")
        # where the files went (metrics.json, per_case.csv, predictions/): the run folder
        log_summary(
            out_dir, None, split, dict(metrics), limited=(module.tested_batches or {}).get("by")
        )
    return metrics, {"module": module, "datamodule": dm, "output_dir": out_dir}


def settle_data(
    cfg: DictConfig, modules: list[SegmentationModule], paths: list[Path]
) -> tuple[Any, str]:
    """The DataModule an evaluation reads (the checkpoint's training data settings, with
    the ``data.*`` given), every setting and member checked before any data is read, and
    the split it scores."""
    module, ckpt = modules[0], paths[0]
    if cfg.get("recompute_bn"):
        refuse_fixed_batchnorm(modules, paths)
    data_cfg, overrides, as_trained = data_config(cfg, module, ckpt)
    # before any data is read: members that cannot be averaged, or scored fairly, stop here
    new_cases = scores_other_data(overrides, modules)  # another folder or CSV than trained on
    check_members(modules, paths, data_cfg.get("split"), cfg.get("recompute_bn"), new_cases)
    set_mirroring(modules, paths, cfg.get("tta"))
    window = check_overrides(overrides, as_trained, data_cfg, module, ckpt)
    dm = build(data_cfg)  # refuses bad window settings, naming them
    check_datamodule_provides(cfg, dm, module)
    dm.prepare_data()
    check_read_as_trained(dm.info(), module.data_info, ckpt)
    if overrides.get("split") == "test" and not dm.has_split("test"):
        # asked for by name: val figures under test/* names would pass for held-out ones
        raise ValueError(
            f"data.split=test: {data_cfg.get('root') or 'this data'} has no test split. "
            "Score its validation split by name (data.split=val), or give data.root a copy "
            "with test data."
        )
    # the split the data resolves to (without test data, a checkpoint's own split falls
    # back to val, with a warning)
    split = dm.test_split()
    check_split(modules, paths, split, new_cases)
    check_recorded_splits(modules, paths, split, scored_names(dm, split), new_cases)
    if "root" in overrides and "split" not in overrides and "test_fraction" in data_cfg:
        # the checkpoint's split settings re-split the new folder: say so, as a user who
        # points evaluate at new cases usually wants every one of them scored
        log.warning(
            "data.root=%s with the checkpoint's split settings: scoring its '%s' split "
            "(data.test_fraction=%s, seed %s), not every case; data.split=all scores them all.",
            overrides["root"],
            data_cfg.split,
            data_cfg.test_fraction,
            data_cfg.get("seed"),
        )
    if window:  # otherwise the window each checkpoint was validated with
        for member in modules:
            member.sliding_window = {
                **member.sliding_window,
                **{key: dm.sliding_window[key] for key in window.values()},
            }
        log.info("sliding window for this evaluation: %s", module.sliding_window)
    return dm, split


def check_read_as_trained(info: DataInfo, trained: DataInfo, ckpt: Path) -> None:
    """The data scored must read as the classes and regions, in the order of the outputs,
    the network was trained for (names compared in any case: a dataset.json's ``Liver``
    is a mask's ``liver``), or the scores would compare its outputs with other classes:
    masks given one per class that overlap, scored by a network trained on masks that did
    not, are refused here."""

    def said(data: DataInfo) -> tuple:
        regions = [(k.lower(), list(v)) for k, v in (data.regions or {}).items()]
        return [n.lower() for n in data.class_names], regions, data.regions_class_order

    if said(info) != said(trained):
        combined = any("+" in n for n in [*info.class_names, *trained.class_names])
        raise ValueError(
            f"{ckpt} was trained for the classes {list(trained.class_names)}"
            + (f" as the regions {trained.regions}" if trained.regions else "")
            + f", and the data given reads as {list(info.class_names)}"
            + (f" of the regions {info.regions}" if info.regions else "")
            + ": score data labelled as its training data was"
            + (
                " (masks given one per class that overlap train as regions of their "
                "combinations: a network trained on masks that did not, or that overlapped "
                "otherwise, cannot score them)."
                if combined
                else "."
            )
        )


def refuse_other_regions(
    overrides: dict[str, Any], as_trained: dict[str, Any], module: SegmentationModule
) -> None:
    """The network's outputs are the regions it was trained for (or the classes): an
    evaluation cannot ask for others."""
    changed = [k for k in ("regions", "regions_class_order") if k in overrides
               and overrides[k] != as_trained.get(k)]  # fmt: skip
    if changed:
        raise ValueError(
            f"{', '.join(f'data.{k}={json.dumps(overrides[k])}' for k in changed)}: the "
            f"network's outputs are the regions it was trained with "
            f"({module.data_info.regions or 'none: one class per voxel'}), which the "
            "checkpoint keeps; leave these out, or train a network for other regions."
        )


def set_postprocessing(
    module: SegmentationModule, modules: list[SegmentationModule], paths: list[Path], use: bool
) -> None:
    """The post-processing each checkpoint's training chose, applied (``postprocess=true``)
    where every model of the evaluation chose the same: one chosen for another model's
    predictions would be applied unmeasured."""
    plans = {m.postprocessing for m in modules}
    module.apply_postprocessing = use and len(plans) == 1
    if use and len(plans) > 1:
        log.warning(
            "post-processing: the checkpoints chose different steps (%s); the ensemble is "
            "scored without any",
            "; ".join(
                f"{p}: {m.postprocessing.describe(m.class_names)}"
                for p, m in zip(paths, modules, strict=True)
            ),
        )


def choose_for_the_ensemble(
    trainer: Any, module: SegmentationModule, modules: list[SegmentationModule], paths: list[Path]
) -> bool:
    """The post-processing of an ensemble chosen on its members' validation cases, each
    predicted by the members holding it out (:mod:`segnet.training.ensemble_choice`), and
    applied; False where it cannot be (data scored as a whole, no recorded validation
    cases, the members' data not readable here): each member's own choice is then applied
    where they agree."""
    if not module.per_case:
        return False
    # the members' own data (not data.* given for this evaluation), every case of it
    data_cfg, _, _ = data_config(OmegaConf.create({"data": {"split": "all"}}), modules[0], paths[0])
    try:
        every_case = build(data_cfg)
        every_case.prepare_data()
        every_case.setup("test")
    except (OSError, ValueError) as err:
        log.warning(
            "post-processing for the ensemble: the data its members trained on cannot be read "
            "here (%s); each member's own choice is used where they agree",
            err,
        )
        return False
    chosen = choose_for_ensemble(trainer, modules, every_case)
    if chosen is None:
        log.info("post-processing for the ensemble: its members recorded no validation cases")
        return False
    plan, record = chosen
    module.set_postprocessing(plan)
    module.postprocessing_choice = record
    module.apply_postprocessing = True
    log.info(
        "post-processing chosen for the ensemble on %s: %s (validation Dice %.4f without, "
        "%.4f with)",
        record["chosen_on"],
        plan.describe(module.class_names),
        record["val_dice_without"],
        record["val_dice_with"],
    )
    return True


def join_ensemble(modules: list[SegmentationModule], paths: list[Path]) -> SegmentationModule:
    """The first module, with the others as ensemble members whose probabilities it
    averages; one checkpoint's module as it is."""
    module = modules[0]
    if len(modules) > 1:
        for warning in filter(None, map(unfinished, paths)):
            log.warning(warning)
        module.ensemble_members.extend(modules[1:])
        log.info(
            "an ensemble of %d models, probabilities averaged: %s",
            len(paths),
            ", ".join(map(str, paths)),
        )
    return module
