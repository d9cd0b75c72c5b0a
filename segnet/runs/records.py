"""What a run records beside its checkpoints: ``metrics.json`` (what was tested, on which
split, with what), ``per_case.csv``, ``splits.json`` (the cases of each split) and
``trackers.json`` (where its trackers keep it, so that an export of its checkpoint can
add the exported model there)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from segnet.data.base import SegmentationDataModule
from segnet.files import write_text
from segnet.runs.resume import this_config_folder
from segnet.serving.checkpoints import peek_checkpoint
from segnet.training.metrics import summarize_cases
from segnet.training.module import SegmentationModule
from segnet.training.region_metrics import summarize_regions

log = logging.getLogger(__name__)


def write_metrics(path: Path, metrics: dict[str, Any], **extra: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {**extra, "metrics": {k: float(v) for k, v in metrics.items()}}
    # strict JSON, which other tools parse: a class absent from both label and prediction
    # has no Dice (NaN, as MONAI and nnU-Net leave it), written as null
    write_text(path, json.dumps(finite_or_null(payload), indent=2, allow_nan=False))
    return path


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float, however deeply nested, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def saved_epoch(ckpt_path: str | Path | None) -> int | None:
    """The epoch a checkpoint was saved at, as the epoch lines count (from 0); None without
    one."""
    return (peek_checkpoint(ckpt_path) or {}).get("epoch") if ckpt_path else None


def record_split(out_dir: Path, dm: SegmentationDataModule, resumed: bool = False) -> None:
    """The cases of each split, where the split is drawn from the data (volumes): counted
    in the log and listed by name in ``splits.json``, which a paper's methods section and
    a later run on the same cases can read. A resumed run keeps the record of the run it
    continues; where its cases differ from it, it says so and lists its own beside it
    (``splits.<n>.json`` for the part whose config is in ``.hydra.<n>``), as its
    checkpoints record them."""
    names = dm.split_names()
    if not names:  # fixed split files (CamVid): the files are the record
        return
    path = out_dir / "splits.json"
    if resumed and path.is_file():
        started = json.loads(path.read_text())
        if started == names:
            return
        refuse_a_test_drawn_from_training(started, names)
        part = (this_config_folder() or "").removeprefix(".hydra").strip(".") or "resumed"
        first, path = path, out_dir / f"splits.{part}.json"
        log.warning(
            "the cases of each split differ from those this run started with (%s): cases "
            "were added, removed or renamed since; this part's are in %s",
            first,
            path,
        )
    counts = ", ".join(f"{len(cases)} {split}" for split, cases in names.items())
    log.info("cases: %s (by name in %s)", counts, path)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(names, indent=2) + "\n")


def refuse_a_test_drawn_from_training(started: dict, names: dict) -> None:
    """A run begun with no test split, on the same cases, now drawing one: the data gives
    train alone, whose test the rule of today draws and that run's did not. Resumed so,
    its test would score cases it trained on: refused, with the setting that keeps its
    split, before training."""
    if started.get("test") or not names.get("test"):
        return
    if {c for cases in started.values() for c in cases} != {
        c for cases in names.values() for c in cases
    }:
        return  # cases added or removed: said as such below
    raise ValueError(
        "this run began with no test split, and the same cases now give one (where the data "
        "gives train alone, val and test are now both drawn from it; the run drew val "
        "alone): resumed so, it would train on a split other than its own and test on "
        "cases it trained on. Score its checkpoints as they are with python evaluate.py "
        "ckpt_path=<its last.ckpt> +data.test_fraction=0 data.split=val, or start a new run "
        "from their weights: init_from=<its last.ckpt>."
    )


def write_outputs(
    out_dir: Path,
    module: SegmentationModule,
    dm: Any,
    metrics: dict,
    split: str,
    ckpt_path: str | list[str],
    cfg: DictConfig,
    **training: Any,
) -> None:
    """metrics.json (what was tested, on which split; for volumes an nnU-Net-style summary
    of the per-case metrics; ``training``: the run's epochs, when a training run tests),
    plus ``per_case.csv`` for volumes."""
    cases = module.last_case_metrics.get("test")
    extra = dict(training)
    if module.tested_batches:  # part of the split: said where the figures are read
        extra["tested_batches"] = module.tested_batches
    if len(module.ensemble_members):  # each member as it was applied
        extra["members"] = [
            {
                "ckpt_path": path,
                "sliding_window": m.sliding_window,
                "bn_recomputed": m.bn_recomputed,
            }
            for path, m in zip(ckpt_path, [module, *module.ensemble_members], strict=True)
        ]
    if module.postprocessing_choice is not None or module.postprocessing:
        # what the test applied, and where training chose it, the scores it was chosen on
        applied = module.postprocessing if module.apply_postprocessing else None
        extra["postprocessing"] = {
            "applied": applied.describe(module.class_names) if applied else "none",
            **(module.postprocessing_choice or {}),
        }
    if cases is not None:
        per_case = {k: v for k, v in cases.items() if k != "index"}
        extra["cases"] = summarize_cases(per_case, module.class_names)
        extra["cases"]["surface_tolerance_mm"] = module.surface_tolerance_mm
    regions = module.last_region_metrics.get("test")
    if regions is not None:  # a region network: its regions as trained, and their scores
        info = module.data_info
        per_region = {k: v for k, v in regions.items() if k != "index"}
        extra["regions"] = {
            "definition": info.regions,
            "class_order": info.regions_class_order,
            **summarize_regions(per_region, list(info.regions)),
        }
        if cases is not None:  # per_case.csv: region_<metric>_<region> columns too
            cases = {**cases, **{f"region_{k}": v for k, v in per_region.items()}}
    write_metrics(
        out_dir / "metrics.json",
        metrics,
        split=split,
        ckpt_path=ckpt_path if isinstance(ckpt_path, list) else str(ckpt_path),
        monitor=module.monitor,
        recompute_bn=cfg.get("recompute_bn", False),
        tta=module.tta,
        # the axes mirroring flipped (the first model's; each member flips its own)
        mirror_axes=module.mirror_axes if module.tta else None,
        sliding_window=module.sliding_window,
        # the size the network saw the images at (None: as stored; volumes: the window)
        image_size=dm.info().input_size if module.data_info.spatial_dims == 2 else None,
        bn_recomputed=module.bn_recomputed,
        **extra,
    )
    if cases is not None:
        regions = list(module.data_info.regions or {})
        dm.write_case_table(cases, out_dir / "per_case.csv", regions)


TRACKERS_RECORD = "trackers.json"


def write_tracker_record(out_dir: Path, addresses: list[dict[str, Any]]) -> None:
    """Where the run's trackers keep it (an MLflow run's URI and id, a W&B run's id), for
    ``python -m segnet.export`` to add the exported model to the same runs."""
    if addresses:
        write_text(out_dir / TRACKERS_RECORD, json.dumps(addresses, indent=2) + "\n")


def send_to_run_trackers(run: Path, files: list[Path], folder: str) -> list[str]:
    """``files`` added, under ``folder``, to each tracker run that ``run``'s record names;
    returns where each went. A tracker that cannot take them (its server gone, its
    library not installed) is named in a warning: the files are in place either way."""
    path = run / TRACKERS_RECORD
    sent = []
    for address in json.loads(path.read_text()) if path.is_file() else []:
        try:
            sent.append(SENDERS[address["tracker"]](address, files, folder))
        except Exception as err:  # noqa: BLE001 - the export is written and verified
            log.warning(
                "the %s run of %s did not take the export: %s", address["tracker"], run, err
            )
    return sent


def send_to_mlflow(address: dict[str, Any], files: list[Path], folder: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=address["tracking_uri"])
    for file in files:
        client.log_artifact(address["run_id"], str(file), artifact_path=folder)
    return f"MLflow run {address['run_id']} ({address['tracking_uri']}), artifacts {folder}/"


def send_to_wandb(address: dict[str, Any], files: list[Path], folder: str) -> str:
    import wandb

    mode = "offline" if address.get("offline") else "online"
    with wandb.init(
        project=address["project"], id=address["id"], dir=address["dir"], resume="allow", mode=mode
    ) as run:
        for file in files:
            run.save(str(file), base_path=str(Path(file).parent), policy="now")
    return f"W&B run {address['id']} ({mode})"


SENDERS = {"mlflow": send_to_mlflow, "wandb": send_to_wandb}
