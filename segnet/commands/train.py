"""The train command: ``train(cfg)`` is what ``train.py`` runs, a plain function that
returns ``(metrics, objects)`` so that tests and sweeps call it directly. Its stages, in
the order they must run (each refusal comes before the data is read, and the data before
any weight is trained):

1. :func:`check_before_start`: a resume's settings, the machine, the values;
2. :func:`open_run_folder`: a new folder, or a resume's own;
3. :func:`build_run`: DataModule, module and checkpoints checked, nothing read yet;
4. :func:`read_training_data`: the training labels (class weights) and the test split;
5. :func:`fit`: training, from the resumed checkpoint where there is one;
6. :func:`test_best` (or :func:`record_untested`): the best checkpoint on the test split;
7. :func:`finish`: the run's record to each tracker, and the summary."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities import rank_zero_only
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf, open_dict

from segnet.data.base import SegmentationDataModule, check_shareable
from segnet.runs.batch_plan import plan_batch
from segnet.runs.building import (
    build_datamodule,
    build_module,
    build_trainer,
    fit_workers_to_cpu,
    prepare,
)
from segnet.runs.checks import (
    check_accelerator,
    check_config_values,
    check_datamodule_provides,
    never_validates,
)
from segnet.runs.console import (
    log_config,
    log_summary,
    print_table,
    quiet_library_noise,
    rank_zero_speaks,
)
from segnet.runs.folders import Work, refuse_run_folder_in_use
from segnet.runs.records import (
    record_split,
    saved_epoch,
    write_metrics,
    write_outputs,
    write_tracker_record,
)
from segnet.runs.resume import (
    check_same_settings,
    check_start_checkpoints,
    refuse_untrained_resume,
    resume_dir,
    resumed_schedule_check,
    this_config_folder,
)
from segnet.runs.settings import SETTINGS, check_value
from segnet.serving.checkpoints import load_weights, read_checkpoint
from segnet.shell import override
from segnet.training.callbacks.time_budget import TimeBudget
from segnet.training.callbacks.trackers import record_file, tracker_addresses
from segnet.training.clock_schedule import check_clock_schedule
from segnet.training.module import SegmentationModule
from segnet.training.testing import run_test
from segnet.training.tracker_guard import close_guards

log = logging.getLogger(__name__)


def train(cfg: DictConfig, work: Work | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Train, then test the best checkpoint, as ``cfg`` says. ``work`` is marked started
    as training (or the test) begins: a failure after that keeps the run folder."""
    work = work or Work()
    quiet_library_noise()
    rank_zero_speaks()
    # as composed, before anything below fills in a default: what a checkpoint stores, and
    # what a resume from it compares with
    settings = OmegaConf.to_container(cfg, resolve=False)
    budget = time_budget_of(cfg)
    resumed = check_before_start(cfg)
    out_dir = open_run_folder(cfg, resumed)
    dm, module, test_split = build_run(cfg, settings)
    test_items = read_training_data(cfg, dm, module, test_split)
    extra = (resumed_schedule_check(),) if cfg.get("ckpt_path") else ()
    if budget is not None:
        extra += (budget,)
        module.schedule_progress = budget.progress
    trainer = build_trainer(cfg, extra_callbacks=extra)
    if cfg.get("train", True):
        plan_batch(dm, module.net, trainer.strategy.root_device, trainer.precision)
    if test_items is not None:  # a test split too small for the processes: now, not after training
        check_shareable(test_items, trainer.world_size, f"'{test_split}'")
    objects = {"cfg": cfg, "datamodule": dm, "module": module, "trainer": trainer}
    metrics: dict[str, float] = {}
    if cfg.get("train", True):
        metrics.update(fit(cfg, trainer, module, dm, out_dir, resumed is not None, work))
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    objects["best_ckpt"] = best
    # the train/* and val/* values in metrics.json are the last epoch's: it says which
    # epochs (rank 0, which writes it, has waited for its checkpoint writes when fit ends)
    epochs = {}
    if cfg.get("train", True) and trainer.is_global_zero:
        epochs = {"epochs_trained": trainer.current_epoch, "best_epoch": saved_epoch(best)}
    split = None
    if cfg.get("test", True):
        work.starts()  # a failure from here on keeps the run folder and its log
        split = test_best(cfg, trainer, module, dm, out_dir, best, metrics, epochs)
    elif cfg.get("train", True) and trainer.is_global_zero:
        record_untested(out_dir, module, metrics, best, epochs)
    finish(cfg, trainer, module, out_dir, metrics, best, split, epochs.get("best_epoch"))
    return metrics, objects


def time_budget_of(cfg: DictConfig) -> TimeBudget | None:
    """``train_minutes``: the run's time budget, which then decides the epochs; None for a
    run counted in epochs. ``trainer.max_epochs`` given beside a recipe's budget counts
    epochs instead (said in a line). Under a budget ``trainer.max_epochs`` becomes -1
    (unbounded) in the config the run records, so that a resume compares like with like."""
    minutes, epochs = cfg.get("train_minutes"), cfg.trainer.get("max_epochs")
    for key, value in (("train_minutes", minutes), ("trainer.max_epochs", epochs)):
        if value is not None:  # compared below, before the config's other values are checked
            check_value(key, value, SETTINGS[key])
    if not cfg.get("train", True) or cfg.trainer.get("fast_dev_run"):
        return None
    if minutes is None:
        if epochs is None:
            raise ValueError(
                "train_minutes=null and trainer.max_epochs=null: give the length of the run, "
                "in minutes (train_minutes=15) or in epochs (trainer.max_epochs=50)."
            )
        return None
    if epochs is not None and epochs >= 0:
        log.info(
            "trainer.max_epochs=%s: training counts epochs (train_minutes=%s is not used)",
            epochs, minutes,
        )  # fmt: skip
        return None
    scheduler = cfg.model.get("scheduler") or {}
    check_clock_schedule(scheduler.get("_target_"))
    with open_dict(cfg):
        cfg.trainer.max_epochs = -1
    return TimeBudget(float(minutes))


def check_before_start(cfg: DictConfig) -> Path | None:
    """What the config alone refuses, before anything is written or read: a resume that
    changes its run's settings first (it is told which, whatever else), then the machine
    and the values. Returns the resumed run's folder (None for a new run)."""
    refuse_untrained_resume(cfg.get("ckpt_path"), cfg.get("train", True))
    resumed = resume_dir(cfg.get("ckpt_path"))
    if cfg.get("ckpt_path"):
        check_same_settings(cfg, resumed, cfg.ckpt_path, this_config_folder())
    check_accelerator(
        cfg,
        "with trainer=cpu (the CPU recipes: experiment=camvid_quick, "
        "experiment=hippocampus_unet3d)",
    )
    check_config_values(cfg)
    unvalidated = never_validates(cfg.trainer) if cfg.get("train", True) else None
    if unvalidated:  # said now, not only after training when the test finds no best.ckpt
        log.warning(
            "%s: no val metrics and no best.ckpt; %s",
            unvalidated,
            "the test scores the last weights" if cfg.get("test", True) else "only last.ckpt",
        )
    return resumed


def open_run_folder(cfg: DictConfig, resumed: Path | None) -> Path:
    """The run's folder: a resume's own run (its checkpoints, curves and metrics.json go on
    there), or a new one that holds no earlier run's outputs. Seeds the generators."""
    if cfg.get("seed") is not None:
        L.seed_everything(cfg.seed, workers=True)
    if resumed is not None:
        with open_dict(cfg):
            cfg.paths.output_dir = str(resumed)
        log.info("resuming %s in %s", cfg.ckpt_path, resumed)
        return resumed
    out_dir = Path(cfg.paths.output_dir)
    if rank_zero_only.rank == 0:
        # the other ranks start after rank 0 has begun writing here, so only it checks
        refuse_run_folder_in_use(
            out_dir,
            "a new training run",
            f", or resume: {override('ckpt_path', out_dir / 'checkpoints' / 'last.ckpt')}",
        )
    return out_dir


def build_run(
    cfg: DictConfig, settings: dict[str, Any]
) -> tuple[SegmentationDataModule, SegmentationModule, str | None]:
    """The DataModule (its data fetched and described, no image read) and the module,
    with every model setting and the start checkpoints checked against them; a new run
    from ``init_from`` gets its weights. Also returns the split the test will score."""
    fit_workers_to_cpu(cfg)
    dm = build_datamodule(cfg)
    prepare(cfg, dm)
    # a split that is not there stops the run now, not after training
    test_split = dm.test_split() if cfg.get("test", True) else None
    if rank_zero_only.rank == 0:
        # after the monitor and a resumed run's folder are filled in: the config that runs
        log_config(cfg)
    init_ckpt = check_start_checkpoints(cfg, dm)
    module = build_module(cfg, dm)
    check_datamodule_provides(cfg, dm, module)
    module.run_settings = settings
    module.config_record = this_config_folder()
    if init_ckpt is not None:
        load_weights(module, init_ckpt, cfg.init_from)
        log.info("new run from the weights of %s (fresh optimizer and schedule)", cfg.init_from)
    return dm, module, test_split


def read_training_data(
    cfg: DictConfig,
    dm: SegmentationDataModule,
    module: SegmentationModule,
    test_split: str | None,
) -> list | None:
    """Read the training data (the class weights come from its labels) and the test
    split's list, so that a bad test file stops the run now; returns that list."""
    if not cfg.get("train", True):
        return None
    dm.setup("fit")
    module.set_class_weights(dm.class_weights)
    return dm.read_split(test_split) if test_split is not None else None


def fit(
    cfg: DictConfig,
    trainer: L.Trainer,
    module: SegmentationModule,
    dm: SegmentationDataModule,
    out_dir: Path,
    resumed: bool,
    work: Work,
) -> dict[str, float]:
    """Train (resuming ``ckpt_path`` where given); returns the last epoch's scalars. An
    interrupted run (SIGTERM) has saved last.ckpt and says how to resume."""
    if trainer.is_global_zero:
        record_split(out_dir, dm, resumed=resumed)
    try:
        work.starts()
        # weights_only: Lightning's own read of a resumed checkpoint cannot run code
        trainer.fit(module, datamodule=dm, ckpt_path=cfg.get("ckpt_path"), weights_only=True)
    except SIGTERMException:
        # what the trackers have queued gets a few seconds, then stays in their journals
        close_guards(trainer.loggers, wait_s=5.0)
        # CheckpointOnInterrupt has saved last.ckpt; a stopped run is not tested. The
        # command is said once (rank 0); the other ranks stop with the same failure code
        said = "training interrupted; resume with python train.py " + override(
            "ckpt_path", out_dir / "checkpoints" / "last.ckpt"
        )
        raise SystemExit(said if trainer.is_global_zero else 1) from None
    return {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}


def test_best(
    cfg: DictConfig,
    trainer: L.Trainer,
    module: SegmentationModule,
    dm: SegmentationDataModule,
    out_dir: Path,
    best: str,
    metrics: dict[str, float],
    epochs: dict[str, Any],
) -> str:
    """Test the best checkpoint (the weights as they are where none was saved), adding
    its scores to ``metrics`` and writing metrics.json; returns the split tested."""
    # Rank 0 writes checkpoints in a background thread and waits for it when fit ends;
    # the other ranks must wait for rank 0 before they read the file.
    trainer.strategy.barrier("best checkpoint written")
    if best:
        ckpt = read_checkpoint(best, "best checkpoint")
        module.load_state_dict(ckpt["state_dict"])
        module.bn_recomputed = ckpt.get("bn_recomputed")
        log.info("testing the best checkpoint %s", best)
    else:
        why = (
            f" (no validation reported {module.monitor})"
            if cfg.get("train", True) and trainer.checkpoint_callback
            else ""
        )
        log.warning("no best checkpoint was saved%s: testing the weights as they are now", why)
    recompute = bool(cfg.get("recompute_bn", False))
    # chosen on validation for the weights tested (postprocess=false: none)
    choose = bool(cfg.get("postprocess", True)) and bool(cfg.get("train", True))
    test_metrics, split = run_test(
        trainer, module, dm, recompute, store_in=best or None, choose_postprocessing=choose
    )
    metrics.update(test_metrics)
    if trainer.is_global_zero:
        print_table(test_metrics, f"{Path(best).name if best else 'final weights'} on {split}")
        write_outputs(out_dir, module, dm, metrics, split, best, cfg, **epochs)
    return split


def record_untested(
    out_dir: Path,
    module: SegmentationModule,
    metrics: dict[str, float],
    best: str,
    epochs: dict[str, Any],
) -> None:
    """metrics.json of a run that is not tested (test=false, as in a search on val): the
    best validation score is still what a sweep's summary, a search or the parallel
    launcher read from the run."""
    write_metrics(
        out_dir / "metrics.json",
        metrics,
        split=None,
        ckpt_path=best,
        monitor=module.monitor,
        **epochs,
    )


def finish(
    cfg: DictConfig,
    trainer: L.Trainer,
    module: SegmentationModule,
    out_dir: Path,
    metrics: dict[str, float],
    best: str,
    split: str | None,
    best_epoch: int | None,
) -> None:
    """The summary on the console, the run's files to each tracker, and the settings with
    the final scores to each logger."""
    if trainer.is_global_zero:
        for name in ("metrics.json", "per_case.csv", "splits.json"):  # as trackers keep files
            if (out_dir / name).is_file():
                record_file(trainer, out_dir / name)
    for logger in trainer.loggers:
        # "hp/" names: the logger also writes these as scalars at step 0, which must not
        # add a stray point to the val/* and test/* curves.
        final = {f"hp/{k}": v for k, v in metrics.items() if k.count("/") == 1}
        params = OmegaConf.to_container(cfg, resolve=True)
        if "metrics" in inspect.signature(logger.log_hyperparams).parameters:
            logger.log_hyperparams(params, metrics=final)  # TensorBoard's HPARAMS tab
        else:  # CSV, MLflow, W&B: the settings, and the final scores beside them
            logger.log_hyperparams(params)
            logger.log_metrics(final)
        logger.finalize("success")
    if trainer.is_global_zero:
        # what each tracker on a server still has queued, sent before its record is written
        deliveries = close_guards(trainer.loggers)
        write_tracker_record(out_dir, tracker_addresses(trainer))
        log_summary(
            out_dir,
            best,
            split,
            metrics,
            best_epoch,
            limited=(module.tested_batches or {}).get("by"),
            monitor=module.monitor,
            trackers=deliveries,
        )
