"""One LightningModule for 2D and 3D segmentation."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import lightning as L
import torch
from torch import nn
from torchmetrics import CatMetric, MaxMetric, MeanMetric
from torchmetrics.classification import MulticlassConfusionMatrix

from segnet.data.info import DataInfo, test_mirror_axes
from segnet.models import batchnorm_layers, create_model, without_init_only
from segnet.serving.ensemble import average_probabilities
from segnet.serving.inference import Inference, check_mirroring, label_map, probabilities
from segnet.serving.postprocessing import Postprocessing
from segnet.training.clock_schedule import clock_schedule
from segnet.training.losses import (
    cross_entropy,
    deep_supervision_weights,
    labels_at,
    lovasz_softmax,
    region_loss,
    soft_dice,
    top_k_cross_entropy,
)
from segnet.training.metrics import (
    per_case_dice,
    per_case_overlap,
    per_case_surface,
    scores_from_confusion,
    summarize_cases,
)
from segnet.training.region_metrics import (
    region_case_scores,
    region_metric_names,
    summarize_regions,
)

STAGES = ("val", "test")
# the per-case scores, in the order their columns are gathered: volumes add surface scores
# at test time, images the overlap scores
CASE_METRICS = {3: ("dice", "hd95", "nsd"), 2: ("dice", "iou", "precision", "recall")}
# Scheduler arguments that mean "length of the run"; left unset, they are filled in with
# the trainer's number of optimizer steps.
# the arguments of torch's schedulers that fix a schedule's length, filled in from the run's
# planned number of steps or epochs (segnet.runs.resume checks a resume keeps it)
SCHEDULE_LENGTH_ARGS = ("total_steps", "total_iters", "T_max")


def enable_tf32() -> None:
    """TF32 matmuls and convolutions in the fp32 parts of a GPU step (bf16 autocast covers
    the rest)."""
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True


def full_resolution(net: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """``net`` giving only its full-resolution logits: in training mode a network with deep
    supervision returns them first in a list, with its coarser heads."""

    def apply(x: torch.Tensor) -> torch.Tensor:
        out = net(x)
        return out[0] if isinstance(out, (list, tuple)) else out

    return apply


def take_case_rows(store: CatMetric, metrics: Sequence[str], width: int) -> dict:
    """A stage's per-case rows ([index, each metric over ``width`` columns]), gathered,
    put back in dataset order and split by metric (as many of ``metrics`` as they hold);
    the store is emptied for the next stage."""
    rows = store.compute().cpu()
    store.reset()
    rows = rows.reshape(len(rows), -1)
    rows = rows[rows[:, 0].argsort()]
    names = metrics[: (rows.shape[1] - 1) // width]
    split = {m: rows[:, 1 + i * width : 1 + (i + 1) * width] for i, m in enumerate(names)}
    return {"index": rows[:, 0].long(), **split}


def check_monitor(monitor: str, scores: Iterable[str]) -> None:
    """The checkpoint with the highest ``monitor`` is kept, so it must be one of the scores
    validation reports (their names), and one where higher is better (not a loss or a
    distance)."""
    choices = [k for k in scores if not k.startswith(("val/hd95", "val/loss"))]
    if monitor not in choices:
        why = (
            "lower is better there, and the best checkpoint is the one with the highest monitor"
            if monitor.startswith(("val/hd95", "val/loss"))
            else "validation does not report it"
        )
        raise ValueError(f"monitor={monitor}: {why}. Choose one of: {', '.join(choices)}.")


def stopping_on_purpose(trainer: Any) -> bool:
    """Whether the run ends here as the user asked: early stopping or ``trainer.max_time``
    (not a SIGTERM or Ctrl+C), and allowed to (a stop requested before
    ``trainer.min_epochs`` or ``min_steps`` trains on, so it does not count)."""
    allowed = getattr(trainer.fit_loop, "_can_stop_early", True)  # Lightning's own test
    return bool(trainer.should_stop and allowed and not trainer.received_sigterm)


class SegmentationModule(L.LightningModule):
    """Trains any network of :mod:`segnet.models` with cross-entropy (+ soft Dice).

    Args:
        net: architecture spec, ``{"name": "segnet", ...}``; data-dependent sizes
            (channels, classes, spatial_dims) come from ``data``.
        data: the dataset's description, :class:`segnet.data.info.DataInfo` or its dict
            (``DataModule.info()``): classes, channels, dims, ignore label, sliding-window
            settings, whether to score per case (volumes: mean Dice over cases, and at
            test time HD95 and normalised surface Dice per case).
        class_weights: cross-entropy weight per class, or None.
        optimizer, scheduler: partially applied constructors (Hydra ``_partial_: true``).
        loss: weights of the terms, ``{"ce": 1.0, "dice": 0.0, "lovasz": 0.0}``
            (Lovasz-softmax: a surrogate of 1 - IoU that leaves void pixels out).
        lovasz_stride: evaluate the Lovasz term on every n-th pixel per axis (cheaper).
        ce_top_k: average the cross-entropy over this fraction of the labelled pixels,
            the hardest ones (bootstrapped cross-entropy); 1.0: over all of them.
        monitor: the validation metric whose best value is tracked; None: ``data``'s.
        surface_tolerance_mm: the normalised surface Dice tolerance, in mm.
        tta: mirroring test-time augmentation in the test stage, and by default in
            ``evaluate.py`` and exported models (as nnU-Net predicts). Validation never
            mirrors: the best checkpoint is chosen on single passes, 2-8x cheaper. It flips
            the axes training flipped (``data.mirror_axes``), and is refused for a network
            trained without flips.
        data_cfg: the data config the run's DataModule was made from; kept in checkpoints
            so that ``evaluate.py`` rebuilds the same data (``runs.building`` sets it).
        postprocessing: the clean-up the test stage applies to each label map
            (:class:`segnet.serving.postprocessing.Postprocessing` as a dict); chosen on
            validation when training ends and kept in the checkpoint, None before.

    Example:
        >>> from segnet.data.info import DataInfo, rgb_normalization
        >>> data = DataInfo(2, 3, ["sky", "road", "car"], [[0, 0, 255]] * 3, None,
        ...                 rgb_normalization([0.5] * 3, [0.25] * 3), None, None, "val/miou", False)
        >>> m = SegmentationModule({"name": "segnet_basic"}, data)
        >>> m(torch.zeros(1, 3, 36, 48)).shape
        torch.Size([1, 3, 36, 48])
    """

    def __init__(
        self,
        net: dict[str, Any],
        data: DataInfo | dict[str, Any],
        class_weights: Sequence[float] | None = None,
        optimizer: Callable[..., torch.optim.Optimizer] | None = None,
        scheduler: Callable[..., Any] | None = None,
        scheduler_interval: str = "step",
        loss: dict[str, float] | None = None,
        lovasz_stride: int = 1,
        ce_top_k: float = 1.0,
        monitor: str | None = None,
        surface_tolerance_mm: float = 1.0,
        compile: bool | str = "auto",
        channels_last: bool | str = "auto",
        data_cfg: dict[str, Any] | None = None,
        tta: bool = False,
        postprocessing: dict[str, Any] | None = None,
    ):
        super().__init__()
        info = data if isinstance(data, DataInfo) else DataInfo.from_dict(data)
        data = info.to_dict()  # plain data in the checkpoint's hyperparameters
        monitor = monitor or info.monitor
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.data_info = info
        num_classes, ignore_index = info.num_classes, info.ignore_index
        self.net = create_model(
            **dict(net),
            spatial_dims=info.spatial_dims,
            in_channels=info.in_channels,
            out_channels=info.out_channels,
        )
        # Reloading a checkpoint must not fetch the initial weights again: its own weights
        # replace them anyway.
        self.hparams["net"] = without_init_only(net)
        self.num_classes, self.ignore_index = num_classes, ignore_index
        self.class_names = list(info.class_names)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.scheduler_interval = scheduler_interval
        # classes that overlap or nest: one sigmoid output per region (segnet.data.regions)
        self.region_values = [list(v) for v in info.regions.values()] if info.regions else None
        self.set_loss(loss, lovasz_stride, ce_top_k)
        self.set_class_weights(class_weights)
        # whole-input inference (sliding window, small-input padding, TTA): plain torch,
        # shared with evaluation and deployed models
        self.inference = Inference.for_net(
            self.net, info.sliding_window, info.mirror_axes, sigmoid=bool(info.regions)
        )
        self.tta = tta
        self.postprocessing = Postprocessing.from_dict(postprocessing)
        # evaluate.py's postprocess=false tests without it
        self.apply_postprocessing = True
        # evaluate.py's save_probabilities=true: the test step hands them on to be written
        self.keep_probabilities = False
        # evaluate.py's further checkpoints of an ensemble (segnet.serving.ensemble), averaged with
        # this one in predict_logits; empty (and absent from checkpoints) otherwise
        self.ensemble_members = nn.ModuleList()
        self.monitor = monitor
        self.surface_tolerance_mm = surface_tolerance_mm
        self.add_metrics(info)
        self.set_speed_options(compile, channels_last)
        self.reset_run_state()

    def set_loss(self, loss: dict[str, float] | None, lovasz_stride: int, ce_top_k: float) -> None:
        """The loss terms' weights (cross-entropy, soft Dice, Lovasz), each checked."""
        self.lovasz_stride = int(lovasz_stride)
        self.loss_weights = {"ce": 1.0, "dice": 0.0, "lovasz": 0.0, **(loss or {})}
        unknown = set(self.loss_weights) - {"ce", "dice", "lovasz"}
        if unknown:
            raise ValueError(
                f"model.loss has unknown term(s) {sorted(unknown)}: use ce, dice and lovasz."
            )
        weights = self.loss_weights.values()
        if any(not w >= 0 for w in weights) or not any(w > 0 for w in weights):
            # a negative weight climbs that term; none above 0 learns nothing
            raise ValueError(
                f"model.loss={self.loss_weights}: weights must be 0 or above, and at least "
                "one term above 0."
            )
        if not 0 < ce_top_k <= 1:
            raise ValueError(f"model.ce_top_k={ce_top_k}: use a fraction in (0, 1].")
        if self.region_values and (self.loss_weights["lovasz"] > 0 or ce_top_k < 1):
            raise ValueError(
                "data.regions: a region network is trained with binary cross-entropy and "
                "soft Dice per region (model.loss.ce and model.loss.dice); model.loss.lovasz "
                "and model.ce_top_k are softmax terms: set them to 0 and 1."
            )
        self.ce_top_k = float(ce_top_k)
        self.dice_loss = None
        if self.loss_weights["dice"] > 0:
            from monai.losses import DiceLoss

            # soft Dice over the batch (see soft_dice). In 2D every class counts (a scene's
            # sky is a class, not a background); in volumes label 0 is the background,
            # which nnU-Net leaves out, with an ignore label or without
            two_d = self.data_info.spatial_dims == 2
            self.dice_loss = DiceLoss(include_background=two_d, batch=True)

    def add_metrics(self, info: DataInfo) -> None:
        """The confusion matrices, per-case rows and losses each evaluation stage keeps,
        and the best validation score (kept in checkpoints)."""
        num_classes, ignore_index = info.num_classes, info.ignore_index
        self.per_case = info.per_case
        self.confusion = nn.ModuleDict(
            {s: MulticlassConfusionMatrix(num_classes, ignore_index=ignore_index) for s in STAGES}
        )
        # per case: [dataset index, Dice per class (, HD95 per class, NSD per class)]; the
        # index puts cases back in dataset order after a gather across DDP ranks
        self.case_rows = nn.ModuleDict({s: CatMetric(nan_strategy="disable") for s in STAGES})
        # the loss per image (volume), averaged over the split: the same figure whatever the
        # batches, and across DDP ranks however unevenly the split shares out
        self.eval_loss = nn.ModuleDict({s: MeanMetric() for s in STAGES})
        self.best = MaxMetric()
        self.best.persistent(True)  # kept in checkpoints, so a resumed run's best survives
        self.last_confusion: dict[str, torch.Tensor] = {}
        self.last_case_metrics: dict[str, dict[str, torch.Tensor]] = {}
        # a region network's per-case rows: [index, each metric per region]
        self.region_rows = nn.ModuleDict({s: CatMetric(nan_strategy="disable") for s in STAGES})
        self.last_region_metrics: dict[str, dict[str, torch.Tensor]] = {}

    def set_speed_options(self, compile: bool | str, channels_last: bool | str) -> None:
        """``compile`` and ``channels_last`` (true, false or auto), applied by
        :meth:`accelerate` once the device is known."""
        for name, value in (("compile", compile), ("channels_last", channels_last)):
            if value not in (True, False, "auto"):
                raise ValueError(f"model.{name}={value!r}: use true, false or auto.")
        self.compile_option, self.channels_last_option = compile, channels_last
        self.channels_last = False
        self.compiled = False  # whether accelerate() compiled the network
        self._accelerated = False

    def reset_run_state(self) -> None:
        """What a run learns about this module as it goes, none of it a setting."""
        # set once BatchNorm statistics were recomputed over the training set; stored in
        # checkpoints, so evaluation knows the weights are the ones training tested
        self.bn_recomputed: dict[str, Any] | None = None
        # the cases of each split the checkpoint was trained with (None: not recorded)
        self.recorded_splits: dict[str, list[str]] | None = None
        # set by the train command: the settings as composed and the folder of the run's
        # config this part trained with (.hydra, .hydra.<n>), which its checkpoints record
        # for a resume to compare with
        self.run_settings: dict[str, Any] | None = None
        self.config_record: str | None = None
        # after a test of part of its split (trainer.limit_test_batches): how many batches
        self.tested_batches: dict[str, int] | None = None
        # the post-processing choice made on validation as training ended (metrics.json)
        self.postprocessing_choice: dict[str, Any] | None = None
        # the schedule lengths configure_optimizers filled in for this run's steps
        self.planned_schedule: dict[str, int] = {}
        # a time budget's progress (0..1): the learning-rate schedule follows it, not steps
        self.schedule_progress: Any = None

    def validation_scores(self) -> list[str]:
        """The names of the scores each validation reports (what ``monitor`` may name),
        known before any data is read: train.py and a sweep's check refuse a monitor that
        is not among them there, rather than at the first validation."""
        names = ["val/loss", "val/global_acc", "val/class_acc", "val/miou"]
        names += [f"val/iou/{name}" for name in self.class_names]
        if self.per_case:  # per-case Dice; HD95 and NSD are measured at test time only
            names += ["val/dice", *(f"val/dice/{name}" for name in self.class_names)]
        if self.per_case and self.region_values:
            names += ["val/region_dice", *(f"val/region_dice/{n}" for n in self.data_info.regions)]
        return names

    def set_postprocessing(self, plan: Postprocessing) -> None:
        """The post-processing chosen on validation, recorded in the hyperparameters (and
        so in the checkpoint and the model card) and applied by the test stage. Not in the
        settings loggers record, which a tracker such as MLflow refuses to see change
        between the fit and the test (metrics.json records the choice)."""
        self.postprocessing = plan
        self.hparams["postprocessing"] = plan.to_dict() if plan else None

    def set_class_weights(self, class_weights: Sequence[float] | None) -> None:
        """The cross-entropy's weight per class (None: unweighted), recorded in the
        hyperparameters. Training sets them once the training labels are read, after the
        module (and so every model setting) was checked before any data."""
        weights = None if class_weights is None else [float(w) for w in class_weights]
        if weights is not None and self.region_values:
            raise ValueError(
                "data.class_weights: a region network weighs no classes (each region has "
                "its own sigmoid and Dice term); set data.class_weights=none."
            )
        self.hparams["class_weights"] = weights
        initial = getattr(self, "_hparams_initial", None)  # what loggers record (hparams.yaml)
        if initial is not None:
            initial["class_weights"] = weights
        ignore_index = -100 if self.ignore_index is None else self.ignore_index
        self.ce = nn.CrossEntropyLoss(
            weight=None if weights is None else torch.tensor(weights, device=self.device),
            ignore_index=ignore_index,
        )

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["bn_recomputed"] = self.bn_recomputed
        # the length the learning-rate schedule was planned for: a resume checks it
        if self._trainer is not None:
            checkpoint["segnet"] = {
                # the run's config folder of this part (.hydra, .hydra.<n>): what a resume
                # from this checkpoint composes its settings from
                "config": self.config_record,
                "max_epochs": self.trainer.max_epochs,
                # an ensemble need not warn that this member stopped short of max_epochs
                "stopping": stopping_on_purpose(self.trainer),
            }
            if self.run_settings is not None:
                checkpoint["segnet"]["settings"] = self.run_settings
            datamodule = getattr(self.trainer, "datamodule", None)
            names = datamodule.split_names() if hasattr(datamodule, "split_names") else None
            if names:  # which cases trained it, for evaluations of it (segnet.serving.ensemble)
                checkpoint["segnet"]["splits"] = names

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.bn_recomputed = checkpoint.get("bn_recomputed")
        self.recorded_splits = (checkpoint.get("segnet") or {}).get("splits")

    def on_train_start(self) -> None:
        # a resume from a tested best.ckpt trains the weights on: its recomputed statistics
        # and the post-processing chosen for it no longer describe them, and its later
        # checkpoints must not say they do
        self.bn_recomputed = None
        self.set_postprocessing(Postprocessing())

    def setup(self, stage: str) -> None:
        """Speed settings that depend on the device the trainer chose ("auto": on for 2D
        networks on a GPU, where they pay; see ``accelerate``)."""
        if not self._accelerated:
            self.accelerate(self.trainer.strategy.root_device)

    def accelerate(self, device: torch.device) -> None:
        """channels_last, ``torch.compile`` and TF32 where they help.

        On a GPU, channels_last and compile together make the 2D SegNet step about 2.4x
        faster (issue 9's H100 loop: 170 -> 402 images/s); on a CPU channels_last makes
        max-unpool networks several times slower and compile gains nothing, hence "auto".
        For 3D networks "auto" leaves both off: unmeasured there, and compile re-traces for
        every whole-volume shape validation sees.
        """
        self._accelerated = True
        on_gpu = device.type == "cuda"
        two_d = self.data_info.spatial_dims == 2
        resolve = lambda v: (on_gpu and two_d) if v == "auto" else bool(v)  # noqa: E731
        if on_gpu:
            enable_tf32()
        self.channels_last = resolve(self.channels_last_option) and two_d
        if self.channels_last:
            self.net.to(memory_format=torch.channels_last)
        if resolve(self.compile_option):
            # compiles forward in place: the state_dict keeps its plain keys
            self.net.compile()
            self.compiled = True
        for member in self.ensemble_members:
            member.accelerate(device)

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        if self.channels_last:
            batch["image"] = batch["image"].contiguous(memory_format=torch.channels_last)
        return batch

    # -- inference ----------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def predict_logits(
        self, x: torch.Tensor, size: Sequence[int] | None = None, tta: bool | None = None
    ) -> torch.Tensor:
        """Logits for whole inputs (sliding window if configured, mirroring TTA with
        ``tta``, by default the module's), resized to ``size``: see
        :class:`segnet.serving.inference.Inference`. With ensemble members: their softmax averaged
        with this network's, each applied as it was validated, as log-probabilities."""
        logits = self.inference.logits(self.net, x, size, tta)
        if not len(self.ensemble_members):
            return logits
        tta = self.tta if tta is None else tta
        members = [m.predict_logits(x, size, tta) for m in self.ensemble_members]
        return average_probabilities([logits, *members], self.inference.sigmoid)

    @property
    def tta(self) -> bool:
        return self.inference.tta

    @tta.setter
    def tta(self, value: bool) -> None:
        check_mirroring(bool(value), self.inference.mirror_axes)
        self.inference.tta = bool(value)

    @property
    def mirror_axes(self) -> list[int]:
        """The spatial axes mirroring TTA flips: those training flipped."""
        return test_mirror_axes(self.data_info.spatial_dims, self.inference.mirror_axes)

    @property
    def sliding_window(self) -> dict[str, Any] | None:
        """The volume recipe's ``SlidingWindowInferer`` settings (None for images)."""
        return self.inference.sliding_window

    @sliding_window.setter
    def sliding_window(self, window: dict[str, Any]) -> None:
        # evaluate.py's data.sw_* overrides; the mirroring setting is kept
        if self.inference.sliding_window is None:
            raise ValueError("this model takes whole images: it has no sliding window to change.")
        self._check_window(window)
        self.inference = dataclasses.replace(self.inference, sliding_window=dict(window))
        self.data_info = dataclasses.replace(self.data_info, sliding_window=dict(window))
        self.hparams["data"] = self.data_info.to_dict()

    def _check_window(self, window: dict[str, Any]) -> None:
        # a window the network is sure to take: its deepest stage keeps 2 voxels per axis,
        # or the size it was trained on
        roi = list(window["roi_size"])
        floor = [min(self.inference.min_input, t) for t in self.data_info.input_size or roi]
        if any(r < f for r, f in zip(roi, floor, strict=True)):
            raise ValueError(
                f"data.sw_roi_size={roi} is too small for this network, which takes at least "
                f"{floor} voxels per axis: choose a window of at least that size."
            )

    # -- loss ---------------------------------------------------------------------------
    def compute_loss(
        self,
        logits: torch.Tensor | Sequence[torch.Tensor],
        target: torch.Tensor,
        lovasz: bool = True,
    ) -> torch.Tensor:
        """The weighted loss terms. ``lovasz=False`` leaves the Lovasz term out: validation
        and test do, since its sort over every pixel at the label's size (360x480 for
        CamVid) costs as much as the prediction, and ``val/loss`` chooses nothing.

        A list of logits (a network with deep supervision, in training) is scored at every
        scale against the labels resized to it, weighted as nnU-Net does."""
        if isinstance(logits, (list, tuple)):
            weights = deep_supervision_weights(len(logits))
            return sum(
                w * self.compute_loss(out, labels_at(target, out.shape[2:]), lovasz)
                for w, out in zip(weights, logits, strict=True)
            )
        if self.region_values:
            return region_loss(
                logits, target, self.region_values, self.ignore_index,
                self.loss_weights["ce"], self.loss_weights["dice"],
            )  # fmt: skip
        if self.ce_top_k < 1:
            ce = top_k_cross_entropy(
                logits, target, self.ce_top_k, self.ce.weight, self.ignore_index
            )
        else:
            ce = cross_entropy(self.ce, logits.float(), target)
        loss = self.loss_weights["ce"] * ce
        if self.dice_loss is not None:
            loss = loss + self.loss_weights["dice"] * soft_dice(
                logits, target, self.dice_loss, self.ignore_index
            )
        if lovasz and self.loss_weights["lovasz"] > 0:
            loss = loss + self.loss_weights["lovasz"] * lovasz_softmax(
                logits, target, self.ignore_index, self.lovasz_stride
            )
        return loss

    # -- steps --------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        x, y = batch["image"], batch["label"]
        loss = self.compute_loss(self.net(x), y)
        self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=len(x))
        return loss

    def _eval_step(self, batch: dict, stage: str) -> dict:
        x, y = batch["image"], batch["label"]
        logits = self.predict_logits(x, y.shape[1:], tta=self.tta and stage == "test")
        for i in range(len(x)):
            self.eval_loss[stage].update(self.compute_loss(logits[i : i + 1], y[i : i + 1], False))
        pred = self.label_map(logits)
        if self.region_values and self.per_case:
            self.record_regions(logits > 0, y, batch, stage)
        if stage == "test" and self.apply_postprocessing:
            pred = self.postprocessing.apply(pred)
        self.confusion[stage].update(pred, y)
        if self.per_case:
            rows = [
                batch["index"].to(pred.device, torch.float64).unsqueeze(1),
                per_case_dice(pred, y, self.num_classes, self.ignore_index),
            ]
            if stage == "test" and "spacing" in batch:
                rows += per_case_surface(
                    pred, y, self.num_classes, batch["spacing"], self.surface_tolerance_mm,
                    self.ignore_index,
                )  # fmt: skip
            elif stage == "test":  # images: the overlap scores of each, for per_case.csv
                rows += per_case_overlap(pred, y, self.num_classes, self.ignore_index)
            self.case_rows[stage].update(torch.cat(rows, 1))
        out = {"pred": pred}  # for callbacks (prediction panels): no second forward pass
        if stage == "test" and self.keep_probabilities:
            # the network's (or mirrored, or an ensemble's averaged) softmax, before any
            # post-processing: its arg-max is the label map postprocess=false gives
            # (a region network's: each region's sigmoid)
            out["probs"] = probabilities(logits, self.inference.sigmoid)
        return out

    def label_map(self, logits: torch.Tensor) -> torch.Tensor:
        """Label values from logits (:func:`segnet.serving.inference.label_map`)."""
        return label_map(logits, self.data_info)

    def record_regions(
        self, inside: torch.Tensor, y: torch.Tensor, batch: dict, stage: str
    ) -> None:
        """Each case's scores per region, as the classes' are recorded (``region_rows``)."""
        names = region_metric_names(stage, self.data_info.spatial_dims)
        scores = region_case_scores(
            inside, y, self.region_values, self.ignore_index, names,
            batch.get("spacing"), self.surface_tolerance_mm,
        )  # fmt: skip
        index = batch["index"].to(inside.device, torch.float64).unsqueeze(1)
        self.region_rows[stage].update(torch.cat([index, *scores], 1))

    def validation_step(self, batch: dict, batch_idx: int) -> dict:
        return self._eval_step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> dict:
        return self._eval_step(batch, "test")

    def _log_epoch(self, stage: str) -> dict[str, float]:
        cm = self.confusion[stage].compute()
        self.confusion[stage].reset()
        self.last_confusion[stage] = cm.cpu()
        scores = scores_from_confusion(cm)
        out = {f"{stage}/loss": float(self.eval_loss[stage].compute())}
        self.eval_loss[stage].reset()
        out.update({f"{stage}/{k}": float(scores[k]) for k in ("global_acc", "class_acc", "miou")})
        for name, value in zip(self.class_names, scores["iou"].tolist(), strict=True):
            out[f"{stage}/iou/{name}"] = value
        if stage == "test" and self.per_case:
            # binary and small-class tasks (images, volumes) read these beside Dice and IoU
            for metric in ("precision", "recall"):
                for name, value in zip(self.class_names, scores[metric].tolist(), strict=True):
                    out[f"{stage}/{metric}/{name}"] = value
        if self.per_case:
            c = self.num_classes
            metrics = CASE_METRICS[self.data_info.spatial_dims]
            self.last_case_metrics[stage] = take_case_rows(self.case_rows[stage], metrics, c)
            per_case = {k: v for k, v in self.last_case_metrics[stage].items() if k != "index"}
            names = list(per_case)
            summary = summarize_cases(per_case, self.class_names)
            # logged per case: Dice and the surface scores (the overlap scores of images
            # are logged over all pixels above, and per image in per_case.csv)
            for metric in (m for m in names if m in ("dice", "hd95", "nsd")):
                out[f"{stage}/{metric}"] = summary["foreground_mean"][metric]  # foreground
                for name, entry in summary["mean"].items():
                    if metric in entry:
                        out[f"{stage}/{metric}/{name}"] = entry[metric]
            if "hd95" in per_case:
                # the mean HD95 leaves out structures missed (or invented) outright, which
                # have no finite distance: how many, beside it, so a model missing hard
                # cases does not look better for it
                missed = torch.isinf(per_case["hd95"][:, 1:]).sum()
                out[f"{stage}/hd95_infinite"] = float(missed)
        if self.region_values and self.per_case:
            out.update(self.region_summary(stage))
        self.log_dict(out, sync_dist=False)  # already reduced across ranks by torchmetrics
        return out

    def region_summary(self, stage: str) -> dict[str, float]:
        """The mean over cases of each region's scores (``<stage>/region_dice``: over the
        regions too), kept per case for metrics.json and per_case.csv."""
        names = region_metric_names(stage, self.data_info.spatial_dims)
        kept = take_case_rows(self.region_rows[stage], names, len(self.region_values))
        self.last_region_metrics[stage] = kept
        per_region = {k: v for k, v in kept.items() if k != "index"}
        summary = summarize_regions(per_region, list(self.data_info.regions))
        out = {f"{stage}/region_{m}": v for m, v in summary["region_mean"].items()}
        for name, entry in summary["mean"].items():
            out.update({f"{stage}/region_{m}/{name}": v for m, v in entry.items() if "_" not in m})
        return out

    def on_validation_epoch_end(self) -> None:
        out = self._log_epoch("val")
        check_monitor(self.monitor, out)  # at the sanity check, before any training step
        if self.trainer.sanity_checking:
            return
        self.best.update(torch.tensor(out[self.monitor]))
        self.log(f"{self.monitor}_best", self.best.compute(), prog_bar=True)

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    # -- optimisation -------------------------------------------------------------------
    def configure_optimizers(self) -> Any:
        if not self.optimizer_factory:
            raise ValueError("model.optimizer is not set: training needs an optimizer config.")
        optimizer = self.optimizer_factory(params=self.net.parameters())
        self.planned_schedule = {}
        if not self.scheduler_factory:  # None, or {} from scheduler=none
            return optimizer
        if self.schedule_progress is not None:  # train_minutes: the schedule follows the clock
            scheduler = clock_schedule(optimizer, self.scheduler_factory, self.schedule_progress)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
            }
        func = getattr(self.scheduler_factory, "func", self.scheduler_factory)
        params = inspect.signature(func).parameters
        given = getattr(self.scheduler_factory, "keywords", {})
        length = (
            self.trainer.estimated_stepping_batches
            if self.scheduler_interval == "step"
            else self.trainer.max_epochs
        )
        fill = {a: int(length) for a in SCHEDULE_LENGTH_ARGS if a in params and a not in given}
        scheduler = self.scheduler_factory(optimizer=optimizer, **fill)
        self.planned_schedule = fill  # a resume restores the old length over it: checked
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": self.scheduler_interval},
        }

    # -- the paper's BatchNorm step -------------------------------------------------------
    @torch.no_grad()
    def recompute_batchnorm(self, loader: Any, max_batches: int | None = None) -> int:
        """Replace BatchNorm running statistics with their exact average over ``loader``
        (the SegNet authors' step before reporting test numbers), at most ``max_batches``
        batches (a debug run). Returns the batch count and marks the module."""
        norms = batchnorm_layers(self.net)
        if not norms:
            return 0
        saved = {m: m.momentum for m in norms}
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average = exact mean over the batches
        was_training = self.net.training
        # only the BatchNorm layers collect: dropout stays off, as in the inference whose
        # activations the statistics are for
        self.net.eval()
        for m in norms:
            m.train()
        n = samples = 0
        for batch in loader:
            if max_batches is not None and n >= max_batches:
                break
            x = batch["image"].to(self.device)
            if self.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.no_grad():
                # as inference applies the network: a small input padded, a volume in windows
                # of the training patch's size, so the statistics are those it will meet
                self.inference.logits(full_resolution(self.net), x, tta=False)
            n, samples = n + 1, samples + len(x)
        self.net.train(was_training)
        for m, momentum in saved.items():
            m.momentum = momentum
        self.bn_recomputed = {"batches": n, "samples": samples}
        return n
