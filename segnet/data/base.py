"""What every DataModule provides (the contract the commands rely on) and what the
CamVid and NIfTI DataModules share: loaders that are exact under DDP."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from segnet.data import class_weights
from segnet.data.info import DataInfo
from segnet.data.settings import TRAINING, WHERE_AND_HOW_FAST, Setting
from segnet.files import staged

log = logging.getLogger(__name__)


def check_shareable(items: int, processes: int, what: str) -> None:
    """Each process of a multi-process run needs at least one item of a split; one without
    would stop the run."""
    if items < processes:
        raise ValueError(
            f"{items} {what} item(s) cannot be shared by {processes} processes (each needs "
            f"at least one): run on at most {items} devices (trainer.devices=, "
            "trainer.num_nodes=), or give the split more data."
        )


class SegmentationDataModule(L.LightningDataModule):
    """Base class: the contract between a dataset and the commands that train and evaluate on it.

    A subclass implements:

    * ``describe()`` -> :class:`~segnet.data.info.DataInfo`: classes, channels, dims,
      palette, normalisation, input size, sliding-window settings. It may read metadata
      (a NIfTI header, ``dataset.json``) but no images.
    * ``build_datasets(stage)``: fill ``self.datasets`` ("train", "val" for fit; "test"
      for test) with datasets whose samples are ``{"image", "label", "index"}`` (plus
      ``"spacing"`` for volumes) and which have ``names`` (one per sample).
    * optionally ``fetch()`` (download the data when asked and absent),
      ``median_frequency_weights()`` (what ``data.class_weights=median_frequency`` asks:
      :func:`segnet.data.class_weights.median_frequency` of the training labels),
      ``has_split(split)``, ``split_names()``, ``read_split(split)`` (the default reads
      the test split's samples once), ``test_input_warning(info)``, ``bn_dataloader()``
      (``recompute_bn=true``, the default, needs it for a network with BatchNorm) and
      ``save_prediction(...)`` (``save_predictions=true`` needs it).

    Disk work happens in the hooks, never in ``__init__``: ``prepare_data`` fetches and
    describes, ``setup`` describes (on processes where ``prepare_data`` did not run),
    computes the class weights (fit) and builds the datasets. Afterwards ``info()`` is the
    one description that the module, the model card and evaluation read.

    Subclasses set ``batch_size``, ``eval_batch_size``, ``num_workers``, ``pin_memory``
    and ``split`` (the split testing uses) in ``__init__``.

    Under DDP each rank evaluates a disjoint share of the validation/test set with nothing
    repeated (PyTorch's DistributedSampler pads by repeating samples, which would bias the
    metrics), so multi-process metrics equal single-process ones. The DDP trainer configs
    set ``use_distributed_sampler: false`` to leave this to the DataModule.
    """

    worker_init_fn = None
    split = "test"
    # data.class_weights and data.class_weights_power, where a format takes them
    class_weights_option: Any = "none"
    class_weights_power = 1.0
    # how each setting (data.<name>) is treated: a row per argument of __init__
    # (segnet.data.settings); these are the ones every DataModule is likely to share
    settings: ClassVar[dict[str, Setting]] = dict(WHERE_AND_HOW_FAST)
    # a shorter way for a DataModule of the user's own to name its settings that shape
    # training alone (augmentation, patch sampling), which evaluate.py refuses to change
    training_only: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self.datasets: dict[str, Dataset] = {}
        self.class_weights: list[float] | None = None
        self._info: DataInfo | None = None

    # -- the contract ---------------------------------------------------------------------
    def describe(self) -> DataInfo:
        raise NotImplementedError(f"{type(self).__name__} must implement describe()")

    def build_datasets(self, stage: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement build_datasets()")

    def fetch(self) -> None:
        """Download the data when it is absent and downloading was asked for."""

    def compute_class_weights(self) -> list[float] | None:
        """The loss's class weights that ``data.class_weights`` asks for (None: none)."""
        return class_weights.from_option(
            self.class_weights_option, self.class_weights_power, self.median_frequency_weights
        )

    def median_frequency_weights(self) -> list[float]:
        raise NotImplementedError(
            f"{type(self).__name__} cannot compute median-frequency class weights: give "
            "data.class_weights as one number per class, or none."
        )

    def has_split(self, split: str) -> bool:
        return True

    def split_names(self) -> dict[str, list[str]] | None:
        """The cases of each split by name, where the split is drawn from the data (and so
        changes when cases are added or removed): checkpoints record it, so that an
        evaluation can tell training cases from test cases. None for fixed split files."""
        return None

    def read_split(self, split: str) -> int:
        """Read (and so check) every file of a split now, keeping it for later where it
        fits in memory: training reads its test split before the first step, so a bad
        file stops the run before training rather than at its end. Returns its number of
        items. This default builds the test datasets (``split`` is the one testing uses)
        and reads each sample once; a DataModule that caches its data overrides it."""
        if split != self.split:
            raise NotImplementedError(
                f"{type(self).__name__}.read_split({split!r}): the default reads only the split "
                f"testing uses ({self.split!r}); override read_split to read another."
            )
        self.build_datasets("test")
        dataset = self.datasets["test"]
        for i in range(len(dataset)):
            dataset[i]
        return len(dataset)

    def train_input_shape(self) -> tuple[int, ...] | None:
        """(channels, *spatial) of one training input (a patch, a crop, a frame): what the
        batch is planned from memory for. None: not known before loading (no plan)."""
        return None

    def test_input_warning(self, info: DataInfo) -> str | None:
        """A warning about the test split's inputs, for a model described by ``info``
        (the checkpoint's, which may come from other data): inputs unlike those it was
        trained on, which it would segment without complaint. None: nothing to say."""
        return None

    def bn_dataloader(self) -> DataLoader:
        """The training split without augmentation at the network's input size, in order,
        whole on every rank (``shard=False``): what BatchNorm statistics are recomputed
        over."""
        raise NotImplementedError(f"{type(self).__name__} cannot recompute BatchNorm")

    def save_prediction(self, pred: torch.Tensor, index: int, out_dir: Path) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot save predictions")

    def save_probabilities(self, probs: torch.Tensor, index: int, out_dir: Path) -> None:
        """Test item ``index``'s class probabilities (C, *spatial, at its label's size)
        beside its prediction (``save_probabilities=true`` needs it)."""
        raise NotImplementedError(f"{type(self).__name__} cannot save probabilities")

    @classmethod
    def settings_from_info(cls, info: DataInfo) -> dict[str, Any]:
        """The data settings a checkpoint fixes when its data is read again (evaluation),
        from its description: e.g. a normalisation computed from the training set, which
        the data scored must not recompute. None by default."""
        return {}

    def settings_found(self) -> dict[str, Any]:
        """Data settings left null that the data itself gave (a class list shipped with the
        images): the run records them, so that its checkpoint reads the data as it did
        wherever it is read again. None by default."""
        return {}

    @classmethod
    def class_names_in_data(cls, data_cfg: Any) -> list[str] | None:
        """The class names the data itself records (an index file beside the cases), for
        an evaluation to check against the checkpoint's; None where it records none."""
        return None

    @classmethod
    def masks_drawn(cls, data_cfg: Any) -> bool:
        """Whether the data ``data_cfg`` reads has its masks drawn from annotation files,
        each class numbered by its name (mask values or colours given do not read them).
        False by default."""
        return False

    @classmethod
    def axes_of_flip(cls, flip: Any) -> tuple[int, ...] | None:
        """``data.flip`` as the axes it flips (spellings that mean the same compare equal
        on resume); None for a format without that setting. Raises ValueError, naming the
        setting, for a value it does not take."""
        return None

    @classmethod
    def setting_rows(cls) -> dict[str, Setting]:
        """How this format treats each of its settings (the table of settings asks)."""
        return {**cls.settings, **{key: TRAINING for key in cls.training_only}}

    def provides(self, method: str) -> bool:
        """Whether this DataModule implements an optional part of the contract
        (``bn_dataloader``, ``save_prediction``): checked before any data is read by what
        needs it, rather than failing after training."""
        return getattr(type(self), method) is not getattr(SegmentationDataModule, method)

    # -- Lightning hooks --------------------------------------------------------------------
    def prepare_data(self) -> None:
        self.fetch()
        self._describe_once()

    def setup(self, stage: str | None = None) -> None:
        self._describe_once()
        if stage in ("fit", None) and self.class_weights is None:
            self.class_weights = self.compute_class_weights()
        self.build_datasets(stage or "fit")
        if stage is None:
            self.build_datasets("test")

    def _describe_once(self) -> None:
        if self._info is None:
            self._info = self.describe()

    def info(self) -> DataInfo:
        if self._info is None:
            raise RuntimeError(
                f"{type(self).__name__}.info() before prepare_data() or setup(): the "
                "description is read from the data there."
            )
        return self._info

    def test_split(self) -> str:
        """The split to test on (``data.split``). A copy without a test split (CamVid
        without test/) falls back to val, loudly; any other split that is not there is
        refused, naming those that are, rather than silently testing on another."""
        if self.has_split(self.split):
            return self.split
        if self.split == "test" and self.has_split("val"):
            log.warning("split 'test' not found: testing on 'val' instead")
            self.split = "val"
            return self.split
        have = [s for s in ("train", "val", "test", "all") if self.has_split(s)]
        missing = "neither that split nor val" if self.split == "test" else "no such split"
        raise ValueError(
            f"data.split={self.split!r}: this data has {missing} (it has "
            f"{', '.join(have) or 'none'}); set data.split to one of those"
            + (", and give training a val split to validate on." if "val" not in have else ".")
        )

    def write_case_table(
        self, cases: dict[str, torch.Tensor], path: Path, regions: list[str] | None = None
    ) -> Path:
        """One row per test case: Dice per class, and where measured HD95 (mm) and
        normalised surface Dice per foreground class (volumes) or IoU, precision and
        recall per class (images), and a region network's ``region_<metric>_<region>``
        (``regions``: their names, as the model has them)
        (nan: class in neither label nor prediction, or a ratio with nothing to divide by;
        inf: HD95 of a class in only one of them)."""
        names = self.datasets["test"].names
        class_names = self.info().class_names
        columns, values = [], []
        for metric in (m for m in cases if m != "index"):
            if metric.startswith("region_"):  # a region network's: one column per region
                columns += [f"{metric}_{r}" for r in regions or []]
                values.append(cases[metric])
                continue
            first = 1 if metric in ("hd95", "nsd") else 0  # surfaces: foreground only
            columns += [f"{metric}_{c}" for c in class_names[first:]]
            values.append(cases[metric][:, first:])
        table = torch.cat(values, 1).tolist()
        with staged(path) as tmp, tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["case", *columns])
            for i, row in zip(cases["index"].tolist(), table, strict=True):
                writer.writerow([names[i], *(f"{v:.6f}" for v in row)])
        return path

    def _sampler(self, dataset: Dataset, shuffle: bool):
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return None
        check_shareable(
            len(dataset), dist.get_world_size(), "training" if shuffle else "evaluation"
        )
        if shuffle:
            return DistributedSampler(dataset, shuffle=True, drop_last=True)
        from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler

        return UnrepeatedDistributedSampler(dataset, shuffle=False)

    def _loader(
        self, dataset: Dataset, batch_size: int, shuffle: bool, shard: bool = True
    ) -> DataLoader:
        """``shard=False``: every rank reads the whole dataset (BatchNorm recomputation,
        whose statistics must be the same on every rank)."""
        sampler = self._sampler(dataset, shuffle) if shard else None
        per_process = len(sampler) if sampler is not None else len(dataset)
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            # a last partial batch is dropped only where a full one is left
            drop_last=shuffle and per_process > batch_size,
            num_workers=self.num_workers,
            # None means "when a GPU is there": pinned pages let copies run asynchronously
            pin_memory=torch.cuda.is_available() if self.pin_memory is None else self.pin_memory,
            persistent_workers=self.num_workers > 0,
            worker_init_fn=self.worker_init_fn,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["val"], self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["test"], self.eval_batch_size, shuffle=False)

    def whole_val_dataloader(self) -> DataLoader:
        """The validation split in order, all of it on every process: what a choice made
        on it (the post-processing) is made from, so that every process makes the same."""
        batch_size = self.val_dataloader().batch_size
        return self._loader(self.datasets["val"], batch_size, shuffle=False, shard=False)
