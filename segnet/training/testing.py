"""The test stage, as training ends and as an evaluation runs it: BatchNorm statistics
recomputed where asked (the SegNet paper's step), mirroring at test time said, and a
split tested in part (a debug limit) said where the figures are read."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import torch

from segnet.models import batchnorm_layers
from segnet.serving.checkpoints import read_checkpoint
from segnet.serving.postprocessing import Postprocessing, candidate_dice, choose
from segnet.training.checkpoint_io import AtomicCheckpointIO
from segnet.training.module import SegmentationModule

log = logging.getLogger(__name__)


def bn_batch_limit(trainer: L.Trainer) -> int | None:
    """A debug run (fast_dev_run, an integer limit_train_batches) recomputes BatchNorm over
    as many batches as it trains on, not the whole training set."""
    if trainer.fast_dev_run:
        return int(trainer.fast_dev_run)
    limit = trainer.limit_train_batches
    return limit if isinstance(limit, int) else None


def store_recomputed_bn(ckpt_path: str | Path, module: SegmentationModule) -> None:
    """Write the module's weights (recomputed BatchNorm statistics) into the checkpoint it
    was loaded from, marked ``bn_recomputed``, so that the checkpoint holds exactly what was
    tested. Written to a temporary file and renamed: never a half-written checkpoint."""
    path = Path(ckpt_path)
    ckpt = read_checkpoint(path, "best checkpoint")
    ckpt["state_dict"] = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    ckpt["bn_recomputed"] = module.bn_recomputed
    AtomicCheckpointIO().save_checkpoint(ckpt, path)


@torch.no_grad()
def choose_postprocessing(
    trainer: L.Trainer, module: SegmentationModule, dm: L.LightningDataModule
) -> tuple[Postprocessing, dict]:
    """The post-processing steps that raise Dice on the validation split, scored case by
    case as validation scores them (single pass, no mirroring, the trainer's precision).
    Every process scores the whole split; rank 0's choice is the one all apply."""
    precision = trainer.precision_plugin
    module.eval().to(trainer.strategy.root_device)
    rows = []
    for batch in dm.whole_val_dataloader():
        batch = module.on_after_batch_transfer(
            trainer.strategy.batch_to_device(batch, trainer.strategy.root_device), 0
        )
        x, y = precision.convert_input(batch["image"]), batch["label"]
        with precision.forward_context():
            logits = module.predict_logits(x, y.shape[1:], tta=False)
        pred = module.label_map(logits.float())
        rows.append(candidate_dice(pred, y, module.num_classes, module.ignore_index).cpu())
    chosen = choose(torch.cat(rows), module.class_names)
    return trainer.strategy.broadcast(chosen, src=0)


def store_postprocessing(ckpt_path: str | Path, plan: Postprocessing, record: dict) -> None:
    """Write the chosen post-processing into the checkpoint it was chosen for (its
    hyperparameters, which evaluate, predict and the model card read), atomically."""
    path = Path(ckpt_path)
    ckpt = read_checkpoint(path, "best checkpoint")
    ckpt.setdefault("hyper_parameters", {})["postprocessing"] = plan.to_dict() if plan else None
    ckpt["postprocessing_choice"] = record
    AtomicCheckpointIO().save_checkpoint(ckpt, path)


def settle_postprocessing(
    trainer: L.Trainer, module: SegmentationModule, dm: L.LightningDataModule, store_in: str | None
) -> None:
    """Choose the post-processing on validation (per-case data with a validation split),
    say what was chosen and on what scores, and keep it in ``store_in``."""
    if not module.per_case or not dm.has_split("val"):
        log.info("post-processing: chosen on per-case validation Dice; this data has none")
        return
    if "val" not in dm.datasets:
        dm.setup("fit")
    plan, record = choose_postprocessing(trainer, module, dm)
    module.set_postprocessing(plan)
    module.postprocessing_choice = record
    log.info(
        "post-processing chosen on %s: %s (validation Dice %.4f without, %.4f with)",
        record["chosen_on"],
        plan.describe(module.class_names),
        record["val_dice_without"],
        record["val_dice_with"],
    )
    if store_in and trainer.is_global_zero:
        store_postprocessing(store_in, plan, record)


def partial_test_setting(trainer: L.Trainer) -> str:
    """The setting that left part of the test split untested, as the user gave it:
    fast_dev_run (``debug=fdr`` sets it), which sets Lightning's limit_test_batches itself,
    or limit_test_batches."""
    if trainer.fast_dev_run:
        return f"trainer.fast_dev_run={trainer.fast_dev_run}"
    return f"trainer.limit_test_batches={trainer.limit_test_batches}"


def run_test(
    trainer: L.Trainer,
    module: SegmentationModule,
    dm: L.LightningDataModule,
    recompute_bn: bool = False,
    store_in: str | None = None,
    choose_postprocessing: bool = False,
) -> tuple[dict[str, float], str]:
    """Test on the DataModule's test split; returns the metrics and the split actually
    used.

    With ``recompute_bn``, BatchNorm statistics are recomputed first over the unaugmented
    training images at the network's input size, unless the checkpoint's already were
    (training does it once and stores them in ``store_in``, its best checkpoint), so that
    evaluating a checkpoint gives the numbers its training run reported. With
    ``choose_postprocessing`` (training), the post-processing is then chosen on the
    validation split and stored in ``store_in`` too.
    """
    split = dm.test_split()
    warning = dm.test_input_warning(module.data_info)
    if warning:
        log.warning(warning)
    if recompute_bn:
        if module.bn_recomputed:
            log.info(
                "BatchNorm statistics were recomputed by training (%s): used as stored",
                module.bn_recomputed,
            )
        elif not batchnorm_layers(module.net):
            # a network without BatchNorm has nothing to recompute: say so, not "0 batches"
            log.info("recompute_bn: this network has no BatchNorm statistics to recompute")
        else:
            dm.setup("test")
            module.to(trainer.strategy.root_device)
            n = module.recompute_batchnorm(dm.bn_dataloader(), bn_batch_limit(trainer))
            log.info(
                "recomputed BatchNorm statistics over %d training batches of %s",
                n,
                getattr(dm, "root", "the training data"),
            )
            if store_in and trainer.is_global_zero:
                store_recomputed_bn(store_in, module)
                log.info("stored them in %s", store_in)
    if choose_postprocessing:
        settle_postprocessing(trainer, module, dm, store_in)
    elif store_in and trainer.is_global_zero:
        # trained, and tested without a choice (postprocess=false): the checkpoint must
        # not keep one an earlier test of it stored
        store_postprocessing(store_in, module.postprocessing, None)
    if module.postprocessing and module.apply_postprocessing:
        log.info(
            "testing with post-processing: %s", module.postprocessing.describe(module.class_names)
        )
    if module.tta:
        axes = module.mirror_axes
        log.info(
            "testing with mirroring over the axes training flipped (%s%s): the %s "
            "averaged over %d passes per input (tta=false: one)",
            axes,
            "; each member of the ensemble its own" if len(module.ensemble_members) else "",
            "regions' sigmoids" if module.region_values else "softmax",
            2 ** len(axes),
        )
    results = trainer.test(module, datamodule=dm, verbose=False)
    ran, whole = sum(trainer.num_test_batches), len(dm.test_dataloader())
    # trainer.limit_test_batches (a debug setting) may leave part of the split untested
    module.tested_batches = (
        {"tested": ran, "of": whole, "by": partial_test_setting(trainer)} if ran < whole else None
    )
    if module.tested_batches:
        log.warning(
            "%s: the test metrics cover %d of the '%s' split's %d "
            "batches, not the whole split (metrics.json records it: tested_batches)",
            module.tested_batches["by"],
            ran,
            split,
            whole,
        )
    return (dict(results[0]) if results else {}), split
