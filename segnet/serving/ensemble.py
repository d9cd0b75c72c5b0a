"""Several checkpoints evaluated (or exported models predicting) as one model: each applied
as it was validated (its own window, padding and mirroring), their softmax probabilities
averaged, as nnU-Net predicts with the models of every cross-validation fold.

``evaluate.py ckpt_path=[a.ckpt,b.ckpt]`` (or a multirun folder of ``train.py -m
data.fold=0,1,2,3,4``) checks the members with :func:`check_members` before any data is
read, then hands them to the first member's module, whose ``predict_logits`` averages them.
``segnet.serving.predict`` averages exported models the same way (:func:`check_same_data`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from segnet.models import batchnorm_layers
from segnet.serving.checkpoints import peek_checkpoint
from segnet.serving.inference import as_logits, probabilities
from segnet.serving.loading import exported_models
from segnet.serving.sweep_folders import FOLD_OVERRIDE, job_overrides, jobs_of

log = logging.getLogger(__name__)

# What a member must share with the first: the same input preprocessing and the same labels
# (the test data is prepared once, by the first member's settings, for all of them).
SAME_DATA = ("spatial_dims", "in_channels", "class_names", "ignore_index", "normalization",
             "regions", "regions_class_order")  # fmt: skip
# The data settings that decide which cases form the test split: equal in every member, so
# that no member was trained on a case the ensemble is scored on.
SAME_TEST_SPLIT = ("_target_", "test_fraction", "seed", "csv", "image_dir", "label_dir")
# ... and those that decide the validation split, which differs between folds.
SAME_VAL_SPLIT = ("fold", "num_folds", "val_fraction")


def checkpoint_paths(value: Any) -> list[Path]:
    """``ckpt_path`` as given: one path or a list. A folder stands for the best checkpoint
    of the run it holds (``<run>/checkpoints/best.ckpt``) or of each job of a multirun
    (``<sweep>/<job>/checkpoints/best.ckpt``, in job order), or for the model (or each
    member of the ensemble) that ``segnet.serving.export`` wrote into it."""
    given = [value] if isinstance(value, str | Path) else list(value)
    if not given:
        raise ValueError("ckpt_path=[]: give a checkpoint, or a list of them for an ensemble.")
    paths: list[Path] = []
    for item in given:
        path = Path(str(item)).expanduser()
        if not path.is_dir():
            paths.append(path)  # load_module names a missing or unreadable file
            continue
        run = path / "checkpoints" / "best.ckpt"
        exported = exported_models(path)
        if exported is not None:
            found = exported
        elif run.is_file():
            found = [run]
        else:
            found = multirun_checkpoints(path)
        if not found:
            raise FileNotFoundError(
                f"ckpt_path={item}: this folder holds neither checkpoints/best.ckpt (a run of "
                "train.py), <job>/checkpoints/best.ckpt (a multirun) nor an export "
                "(model.json, or ensemble.json); give checkpoint files."
            )
        paths.extend(found)
    seen: set[Path] = set()
    for path in paths:
        if path.resolve() in seen:
            raise ValueError(
                f"ckpt_path: {path} is given twice; an ensemble takes each model once."
            )
        seen.add(path.resolve())
    return paths


def multirun_checkpoints(sweep: Path) -> list[Path]:
    """The best checkpoints of a multirun's jobs, in job order. Refused where the jobs
    differ in more than ``data.fold`` (a sweep over other settings too would average them
    all); a job without one (failed, or stopped before its first) is named in a warning."""
    jobs = jobs_of(sweep)  # in job order: 0, 1, ..., 10
    settings: dict[tuple[str, ...], list[str]] = {}
    for job in jobs:
        others = tuple(sorted(o for o in job_overrides(job) if not o.startswith(FOLD_OVERRIDE)))
        settings.setdefault(others, []).append(job.name)
    if len(settings) > 1:
        listed = "; ".join(
            f"jobs {', '.join(j)}: {' '.join(s) or '-'}" for s, j in settings.items()
        )
        raise ValueError(
            f"ckpt_path={sweep}: its jobs differ in more than data.fold ({listed}); list the "
            "checkpoints of one setting instead (the sweep printed that command)."
        )
    found = [j / "checkpoints" / "best.ckpt" for j in jobs]
    missing = [p.parent.parent.name for p in found if not p.is_file()]
    if jobs and len(missing) == len(found):
        raise FileNotFoundError(
            f"ckpt_path={sweep}: a multirun whose {len(jobs)} job(s) ({', '.join(missing)}) "
            "have no checkpoints/best.ckpt: each failed or stopped before its first; their "
            "train.log says why."
        )
    if missing:
        log.warning(
            "%s: job(s) %s have no checkpoints/best.ckpt (failed, or stopped before one was "
            "saved) and are left out of the ensemble",
            sweep,
            ", ".join(missing),
        )
    return [p for p in found if p.is_file()]


def check_members(
    modules: Sequence[Any],
    paths: Sequence[Path],
    split: str | None,
    recompute_bn: bool = False,
    new_cases: bool = False,
) -> None:
    """Refuse an ensemble whose members would be averaged wrongly or scored on their own
    training cases, naming the checkpoint and the setting. One model: nothing to check."""
    if len(modules) < 2:
        return
    if recompute_bn:
        # evaluate recomputes the statistics of one model, over one training split
        stale = [str(p) for p, m in zip(paths, modules, strict=True) if needs_recompute(m)]
        if stale:
            raise ValueError(
                f"recompute_bn=true with an ensemble: {', '.join(stale)} hold BatchNorm layers "
                "whose statistics training did not recompute (or, exported, do not record "
                "it), and evaluate recomputes them for one model only. Train with "
                "recompute_bn=true, or leave it out here to use the statistics as stored."
            )
    check_distinct([m.net for m in modules], paths)
    check_same_data([m.data_info for m in modules], paths)
    first_cfg = modules[0].hparams.get("data_cfg") or {}
    for module, path in zip(modules[1:], paths[1:], strict=True):
        cfg = module.hparams.get("data_cfg") or {}
        # data.groups, where both record it (a member from before drew case by case)
        both = ("groups",) if "groups" in cfg and "groups" in first_cfg else ()
        for key in (*SAME_TEST_SPLIT, *both):
            if cfg.get(key) != first_cfg.get(key):
                raise ValueError(
                    f"{path} was trained with data.{key}={cfg.get(key)} and {paths[0]} with "
                    f"{first_cfg.get(key)}: their test splits differ, so one of them may have "
                    "trained on cases the other is tested on. Ensemble models of one split."
                )
    check_split(modules, paths, split, new_cases)


def scores_other_data(overrides: dict[str, Any], modules: Sequence[Any]) -> bool:
    """Whether an evaluation reads other cases than the members trained from: a
    ``data.root`` or ``data.csv`` given that is none of the folders or CSVs their runs read.
    The folder a member trained from, named again (absolute, or relative from elsewhere),
    is no way around the checks on its splits."""

    def same(given: Any, recorded: Any) -> bool:
        if not recorded:
            return False
        path, trained = Path(str(given)).expanduser().resolve(), Path(str(recorded)).expanduser()
        if trained.is_absolute():
            return path == trained.resolve()
        # relative to wherever training ran: the same folder if the given path ends so
        return path == trained.resolve() or path.parts[-len(trained.parts) :] == trained.parts

    return any(
        not any(same(overrides[key], (m.hparams.get("data_cfg") or {}).get(key)) for m in modules)
        for key in ("root", "csv")
        if key in overrides
    )


def check_split(
    modules: Sequence[Any], paths: Sequence[Path], split: str | None, new_cases: bool = False
) -> None:
    """Members validated on different cases (folds) are scored only on cases none of them
    trained on: the shared test split, or new cases (``data.root=``). Called with the split
    asked for, before any data is read, and again with the split the data resolves to (a
    NIfTI dataset without test cases falls back to val)."""
    if new_cases or split == "test" or len(modules) < 2:
        return
    first_cfg = modules[0].hparams.get("data_cfg") or {}
    for module, path in zip(modules[1:], paths[1:], strict=True):
        cfg = module.hparams.get("data_cfg") or {}
        if any(cfg.get(k) != first_cfg.get(k) for k in SAME_VAL_SPLIT):
            raise ValueError(
                f"data.split={split}: {path} and {paths[0]} were validated on different cases "
                "(data.fold or data.val_fraction differ), so this split holds cases some of "
                "them trained on (each fold's validation cases are another's training cases). "
                "Score an ensemble of folds on the test split (data.split=test, with "
                "data.test_fraction > 0 at training) or on new cases (data.root=... "
                "data.split=all)."
            )


def check_recorded_splits(
    modules: Sequence[Any],
    paths: Sequence[Path],
    split: str,
    scored: Sequence[str] | None,
    new_cases: bool = False,
) -> None:
    """The cases about to be scored, against the split each checkpoint recorded at training:
    a case it trained on (or, for a test, was validated on) in the scores is refused. A
    split drawn from a folder changes when cases are added or removed there, and would
    otherwise mix training cases in silently. Other differences are warned about, and so
    are case names of its training or validation cases among new cases (another folder) or
    in ``data.split=all``: scored, but not held out."""
    if scored is None or split == "train":
        return
    for module, path in zip(modules, paths, strict=True):
        recorded = getattr(module, "recorded_splits", None)
        if not recorded:
            continue  # an exported model, or a checkpoint from before splits were recorded
        seen = set(recorded.get("train", []))
        if split != "val":
            seen |= set(recorded.get("val", []))  # they chose its checkpoint
        leaked = sorted(set(scored) & seen)
        shown = ", ".join(leaked[:5]) + (", ..." if len(leaked) > 5 else "")
        if new_cases or split not in ("test", "val"):
            # another folder (names may repeat across datasets) or every case asked for:
            # scored, but not as held-out figures
            if not leaked:
                continue
            log.warning(
                "data.split=%s: %d of the %d cases scored (%s) have the names of cases that "
                "trained or validated %s: their scores are not held-out figures",
                split,
                len(leaked),
                len(scored),
                shown,
                path,
            )
            continue
        if leaked and not recorded.get("test"):
            raise ValueError(
                f"data.split={split}: {len(leaked)} of the {len(scored)} cases to score "
                f"({shown}) trained or validated {path}, whose run recorded no test split: "
                "where the data gives train alone, val and test are now both drawn from it, "
                "and that run drew val alone. +data.test_fraction=0 draws its split again "
                "(and data.split=val scores its val cases)."
            )
        if leaked:
            raise ValueError(
                f"data.split={split}: {len(leaked)} of the {len(scored)} cases to score "
                f"({shown}) trained or validated {path}, by the split its run recorded; the "
                "data folder has changed since (adding or removing cases draws the split "
                "anew). Score new cases by themselves: data.root=<a folder of them> "
                "data.split=all."
            )
        if set(scored) != set(recorded.get(split, [])):
            log.warning(
                "data.split=%s: %d case(s) scored that %s's run did not have in that split "
                "(the data folder has changed since training)",
                split,
                len(set(scored) - set(recorded.get(split, []))),
                path,
            )


def unfinished(path: Path) -> str | None:
    """Why a member's run may not have trained to its end, read from the ``last.ckpt``
    beside it (None when finished, or when there is none to tell): a multirun folder takes
    every job's best checkpoint, that of an interrupted job too."""
    last = path.parent / "last.ckpt"
    if path.suffix != ".ckpt" or not last.is_file():
        return None
    ckpt = peek_checkpoint(last)
    if ckpt is None:  # an unreadable last.ckpt says nothing about the member itself
        return None
    run = ckpt.get("segnet") or {}
    planned, done = run.get("max_epochs"), ckpt.get("epoch", -1) + 1
    # "stopping": early stopping or trainer.max_time ended it there, as the user asked
    if planned and done < planned and not run.get("stopping"):
        return (
            f"{path}: its run's last checkpoint is from epoch {done} of the {planned} it "
            "planned (interrupted, or failed?); it is averaged as it is"
        )
    return None


def check_distinct(nets: Sequence[torch.nn.Module], paths: Sequence[Path]) -> None:
    """No model twice under two names (a checkpoint and its ``.safetensors`` export, or a
    copy): averaged with itself it would count double, and a single model's score would be
    reported as an ensemble's. Exported programs (ONNX, pt2) hold no weights to compare."""
    seen: list[tuple[dict[str, torch.Tensor], Path]] = []
    for net, path in zip(nets, paths, strict=True):
        state = net.state_dict()
        if not state:
            continue
        for other, other_path in seen:
            if same_weights(state, other):
                raise ValueError(
                    f"{path} and {other_path} hold the same weights: one model under two "
                    "names (a checkpoint and its export, or a copy), or two trainings that "
                    "ended identically (e.g. folds that saw the same batches). An ensemble "
                    "takes each model once: leave one of them out."
                )
        seen.append((state, path))


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    # the first differing tensor ends it: for two trained models, the first one compared
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and torch.equal(a[k].cpu(), b[k].cpu()) for k in a
    )


def check_same_data(infos: Sequence[Any], paths: Sequence[Path]) -> None:
    """Every member's dataset description (``DataInfo``) agrees with the first's on the
    classes and the input preprocessing, or the one that differs is named."""
    # 2D: the input size images are resized to, before any network sees them (for volumes
    # it is the training patch, and each member keeps its own window)
    keys = SAME_DATA + (("input_size",) if infos[0].spatial_dims == 2 else ())
    for info, path in zip(infos[1:], paths[1:], strict=True):
        for key in keys:
            mine, theirs = getattr(info, key, None), getattr(infos[0], key, None)
            # regions in another order are other outputs: a dict's == would not see it
            ordered = isinstance(mine, dict) and isinstance(theirs, dict)
            if mine != theirs or ordered and list(mine) != list(theirs):
                raise ValueError(
                    f"{path} and {paths[0]} differ in {key} ({mine} against {theirs}): an "
                    "ensemble averages models of one dataset, prepared one way."
                )


def needs_recompute(module: Any) -> bool:
    """Whether a module has BatchNorm layers whose statistics were not recomputed."""
    return not module.bn_recomputed and bool(batchnorm_layers(module.net))


def average_probabilities(logits: Sequence[torch.Tensor], sigmoid: bool = False) -> torch.Tensor:
    """The members' softmax probabilities (regions: sigmoids) averaged, as logits of the
    average (so that a softmax, an arg-max, a threshold or the loss treat them like a
    network's)."""
    probs = sum(probabilities(x, sigmoid) for x in logits) / len(logits)
    return as_logits(probs, sigmoid)
