"""LightningDataModule for NIfTI volumes: random patches for training, whole volumes
(sliding-window inference in the module) for validation and testing.

Patch sampling and augmentation are MONAI's (``RandCropByPosNegLabeld`` and friends):
the field's standard, tested implementations, rather than hand-written copies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from segnet.data import (
    class_masks,
    dataset_json,
    nifti,
    stats_cache,
    volume_class_masks,
)
from segnet.data.base import SegmentationDataModule
from segnet.data.checks import as_list, check_count, check_flip, check_window
from segnet.data.info import DataInfo, voxel_size_warning, zscore_normalization
from segnet.data.palette import label_palette
from segnet.data.patch_plan import middle_spacing, plan_batch_size, plan_volume_patch
from segnet.data.regions import check_regions
from segnet.data.settings import (
    ANY,
    DRAWN_SPLITS,
    MODEL,
    RESUMABLE,
    SLIDING_WINDOW,
    TRAINING,
    TRAINING_SWITCH,
    WHERE_AND_HOW_FAST,
)  # fmt: skip
from segnet.data.sides import axes_keeping_sides, check_rotation
from segnet.data.splits import SPLIT_CHOICES as SPLITS
from segnet.data.splits import DrawnSplits, given_or_drawn, split_settings

log = logging.getLogger(__name__)


# RAS axes, as volumes are held (segnet.data.nifti)
AXIS_NAMES = ("left-right", "back-front", "down-up")


def check_affine(rotate: float, zoom: Sequence[float], prob: float) -> dict | None:
    """The random rotation/zoom settings, or None when they are off; inconsistent or
    out-of-range values are refused, naming the setting."""
    zoom = tuple(float(z) for z in zoom)
    if len(zoom) != 2 or not 0 < zoom[0] <= zoom[1]:
        raise ValueError(
            f"data.zoom={list(zoom)} must be [min, max] magnifications with 0 < min <= max "
            "(nnU-Net draws from [0.7, 1.4]; [1.0, 1.0] is off)."
        )
    if not 0 <= rotate <= 180:
        raise ValueError(f"data.rotate={rotate} must be an angle in degrees in 0..180 (0 is off).")
    if not 0 <= prob <= 1:
        raise ValueError(f"data.affine_prob={prob} must be a probability in 0..1.")
    ranges = rotate > 0 or zoom != (1.0, 1.0)
    if ranges != (prob > 0):
        raise ValueError(
            f"data.rotate={rotate}, data.zoom={list(zoom)} and data.affine_prob={prob} disagree: "
            "a rotation or zoom range needs data.affine_prob > 0 to be applied, and "
            "data.affine_prob > 0 needs a range (nnU-Net: data.rotate=30 "
            "'data.zoom=[0.7,1.4]' data.affine_prob=0.2)."
        )
    return dict(rotate=float(rotate), zoom=zoom, prob=float(prob)) if ranges else None


def check_spacing(spacing: Sequence[float] | str | None) -> tuple[float, ...] | str | None:
    """The target voxel spacing: None (each case keeps its grid), "median", or three
    sizes in mm; anything else is refused, naming the setting and the choices."""
    if spacing is None or spacing == "median":
        return spacing
    if (
        isinstance(spacing, Sequence)
        and not isinstance(spacing, str)
        and len(spacing) == 3
        and all(isinstance(s, int | float) and not isinstance(s, bool) and s > 0 for s in spacing)
    ):
        return tuple(float(s) for s in spacing)
    raise ValueError(
        f"data.spacing={spacing!r}: give three voxel sizes in mm in RAS axis order "
        "(left-right, posterior-anterior, inferior-superior), e.g. 'data.spacing=[1.0,1.0,1.5]'; "
        "'median' for the median spacing of the training cases (as nnU-Net chooses); or null "
        "to train on each case's own grid."
    )


def spread(spacings: Sequence[Sequence[float]]) -> float:
    """The largest ratio of two cases' voxel sizes along one axis (1.0: all alike).

    Example:
        >>> spread([(1.0, 1.0, 2.0), (1.0, 1.0, 5.0)])
        2.5
    """
    a = np.asarray(spacings, dtype=np.float64)
    return float((a.max(0) / a.min(0)).max())


# nnU-Net's test for a dataset of thick slices: one axis's spacing over 3x the others'
ANISOTROPY = 3.0


def median_target_spacing(
    spacings: Sequence[Sequence[float]], shapes: Sequence[Sequence[int]]
) -> tuple[tuple[float, ...], bool]:
    """``data.spacing=median`` as nnU-Net resolves it: the training cases' median spacing,
    except along the coarse axis of a thick-slice dataset (its median spacing over 3x the
    others' and its median voxel count under a third of theirs), which takes the 10th
    percentile instead (but no finer than the other axes): the median would blur the
    thinner-sliced cases along it. Returns the spacing and whether that exception applied.

    Example:
        >>> median_target_spacing([(1.0, 1.0, 1.0), (1.0, 1.0, 2.0), (1.0, 1.0, 3.0)],
        ...                       [(100, 100, 60)] * 3)
        ((1.0, 1.0, 2.0), False)
        >>> median_target_spacing([(0.5, 0.5, 3.0), (0.5, 0.5, 4.0), (0.5, 0.5, 5.0)],
        ...                       [(320, 320, 20)] * 3)
        ((0.5, 0.5, 3.2), True)
    """
    spacing = np.median(np.asarray(spacings, dtype=np.float64), axis=0)
    size = np.median(np.asarray(shapes, dtype=np.float64), axis=0)
    coarse = int(np.argmax(spacing))
    others = [axis for axis in range(3) if axis != coarse]
    thick = spacing[coarse] > ANISOTROPY * spacing[others].max()
    few_slices = size[coarse] * ANISOTROPY < size[others].min()
    if thick and few_slices:
        finer = np.percentile([s[coarse] for s in spacings], 10)
        spacing[coarse] = max(finer, spacing[others].max())
    return tuple(round(float(s), 6) for s in spacing), bool(thick and few_slices)


def check_sampling(
    patch_size: Sequence[int] | None,
    foreground_ratio: float,
    clip: Sequence[float] | None,
    intensity_scale: float,
    intensity_shift: float,
) -> None:
    """The patch (null: planned) and intensity settings, before any case is read: each
    would otherwise fail deep inside MONAI mid-epoch, or train silently on something else."""
    patch = as_list("data.patch_size", patch_size, "[32,48,32]")
    if patch is not None and (
        len(patch) != 3 or not all(isinstance(p, int) and p > 0 for p in patch)
    ):
        raise ValueError(
            f"data.patch_size={list(patch_size)}: give three positive whole numbers (voxels "
            "along the RAS axes)."
        )
    if not 0 <= foreground_ratio <= 1:
        raise ValueError(
            f"data.foreground_ratio={foreground_ratio}: a share of patches, from 0 to 1."
        )
    if clip is not None and (len(clip) != 2 or not clip[0] < clip[1]):
        raise ValueError(f"data.clip={list(clip)}: give [low, high] with low < high, or null.")
    for name, value in (("intensity_scale", intensity_scale), ("intensity_shift", intensity_shift)):
        if not value >= 0:
            raise ValueError(f"data.{name}={value}: use 0 (off) or a positive strength.")


def _nbytes(volume: nifti.Volume) -> int:
    arrays = (volume.image, volume.label, volume.grid_label)
    return sum(a.nbytes for a in arrays if a is not None)


def sampler_label(volume: nifti.Volume) -> torch.Tensor:
    """The training label as the patch sampler needs it: (1, *spatial), never uint8.

    MONAI's RandCropByPosNegLabeld finds background as ``~torch.any(label, 0)``; on a uint8
    tensor ``torch.any`` gives uint8 and ``~`` flips bits, so every voxel, foreground
    included, counts as background and the "negative" patches land anywhere. Cached labels
    are uint8 to save memory; widening one case's label per patch costs little.
    """
    label = volume.training_label[None]
    return torch.from_numpy(label.astype(np.int16) if label.dtype == np.uint8 else label)


class PatchDataset(Dataset):
    """Random training patches through a MONAI dictionary transform."""

    def __init__(
        self,
        volumes: list[nifti.Volume],
        transform,
        samples_per_volume: int = 1,
        ignore_index: int | None = None,
        length: int | None = None,
    ):
        self.volumes, self.transform = volumes, transform
        self.samples_per_volume, self.ignore_index = samples_per_volume, ignore_index
        # an epoch of ``length`` patches (data.steps_per_epoch batches' worth, of the batch
        # planned or given: one lowered to fit memory takes them in more steps), cycling
        # through the cases
        self.length = length or len(volumes) * samples_per_volume

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict:
        v = self.volumes[i % len(self.volumes)]
        case = {"image": torch.from_numpy(v.image), "label": sampler_label(v)}
        if self.ignore_index is not None:  # foreground: labelled, and not ignored
            label = case["label"]
            case["foreground"] = ((label > 0) & (label != self.ignore_index)).to(torch.int16)
        out = self.transform(case)
        out = out[0] if isinstance(out, list) else out
        image = torch.as_tensor(out["image"]).as_subclass(torch.Tensor).float()
        label = torch.as_tensor(out["label"]).as_subclass(torch.Tensor)[0].long()
        return {
            "image": image.contiguous(),
            "label": label.contiguous(),
            "index": i % len(self.volumes),
        }


class VolumeDataset(Dataset):
    """Whole volumes, unaugmented."""

    def __init__(self, volumes: list[nifti.Volume]):
        self.volumes = volumes
        self.names = [v.name for v in volumes]

    def __len__(self) -> int:
        return len(self.volumes)

    def __getitem__(self, i: int) -> dict:
        v = self.volumes[i]
        label = (
            torch.from_numpy(v.label).long()
            if v.label is not None
            else torch.zeros(v.image.shape[1:], dtype=torch.long)
        )
        spacing = torch.tensor(v.spacing or (1.0,) * label.ndim, dtype=torch.float64)
        return {"image": torch.from_numpy(v.image), "label": label, "index": i, "spacing": spacing}


def _seed_worker(worker_id: int) -> None:
    # MONAI transforms keep their own RandomState: without this every worker would draw
    # the same patches and flips.
    info = get_worker_info()
    transform = getattr(info.dataset, "transform", None)
    if transform is not None and hasattr(transform, "set_random_state"):
        transform.set_random_state(seed=torch.initial_seed() % 2**32)


def check_counts(
    batch_size: int | None,
    num_workers: int,
    samples_per_volume: int,
    steps_per_epoch: int | None,
    max_patch_voxels: int,
    batch_voxels: int,
    split: str,
) -> None:
    """The batch, the loader, the epoch's length, the planning budgets and the split
    scored, before any case is read."""
    check_count("batch_size", batch_size, allow_none=True)
    check_count("num_workers", num_workers, minimum=0)
    check_count("samples_per_volume", samples_per_volume)
    check_count("steps_per_epoch", steps_per_epoch, allow_none=True)
    check_count("max_patch_voxels", max_patch_voxels, minimum=4**3)
    check_count("batch_voxels", batch_voxels)
    if steps_per_epoch is not None and samples_per_volume != 1:
        raise ValueError(
            f"data.steps_per_epoch={steps_per_epoch} and data.samples_per_volume="
            f"{samples_per_volume} both set an epoch's length: give one of them."
        )
    if split not in SPLITS:
        raise ValueError(f"data.split={split!r}: choose one of {SPLITS}.")


def check_stack_spacing(spacing: Sequence[float] | None) -> tuple[float, ...] | None:
    """``data.stack_spacing``: the voxel size (z, y, x: between pages, rows, columns) of
    TIFF stacks and NumPy arrays that carry none; None: 1 along each axis."""
    if spacing is None:
        return None
    sizes = as_list("data.stack_spacing", spacing, "[2.0,0.5,0.5]")
    if len(sizes) != 3 or not all(isinstance(s, int | float) and s > 0 for s in sizes):
        raise ValueError(
            f"data.stack_spacing={sizes}: three voxel sizes above 0, between pages, rows and "
            "columns (z, y, x), e.g. [2.0,0.5,0.5]."
        )
    return tuple(float(s) for s in sizes)


class NiftiDataModule(DrawnSplits, SegmentationDataModule):
    """NIfTI volumes in the Decathlon layout, plain folders or a CSV.

    Example:
        >>> dm = NiftiDataModule("data/Task04_Hippocampus", patch_size=(40, 56, 40))  # doctest: +SKIP
        >>> dm.prepare_data(); dm.info().class_names                                 # doctest: +SKIP
        ['background', 'Anterior', 'Posterior']
    """

    # no class named, and two-valued labels read as background and foreground (recorded)
    assumed_names = False

    # masks given one per class that overlap: each mask a region (_class_mask_names())
    mask_regions: dict[str, list[int]] | None = None
    settings = {
        **WHERE_AND_HOW_FAST,
        **DRAWN_SPLITS,
        **SLIDING_WINDOW,
        **{k: ANY for k in ("image_dir", "label_dir", "class_names", "spacing", "stack_spacing",
                            "regions", "regions_class_order")},
        "clip": MODEL,
        "channels": MODEL,
        "rotate90": TRAINING_SWITCH,
        **{k: TRAINING for k in ("patch_size", "max_patch_voxels", "batch_voxels",
                                 "steps_per_epoch", "samples_per_volume", "foreground_ratio",
                                 "flip", "rotate", "zoom", "affine_prob", "intensity_scale",
                                 "intensity_shift")},
        "cache_max_gb": RESUMABLE,
    }  # fmt: skip
    del settings["eval_batch_size"]  # whole volumes, one at a time

    worker_init_fn = staticmethod(_seed_worker)

    def __init__(
        self,
        root: str = "data/Task04_Hippocampus",
        csv: str | None = None,
        image_dir: str | None = None,
        label_dir: str | None = None,
        class_names: Sequence[str] | None = None,
        patch_size: Sequence[int] | None = (40, 56, 40),
        batch_size: int | None = 4,
        samples_per_volume: int = 1,
        foreground_ratio: float = 0.5,
        num_workers: int = 2,
        pin_memory: bool | None = None,
        split: str = "test",
        val_fraction: float = 0.1,
        test_fraction: float = 0.2,
        fold: int | None = None,
        num_folds: int = 5,
        seed: int = 0,
        groups: bool | str = True,
        clip: Sequence[float] | None = None,
        spacing: Sequence[float] | str | None = None,
        flip: bool | Sequence[int] = True,
        rotate90: bool = True,
        rotate: float = 0.0,
        zoom: Sequence[float] = (1.0, 1.0),
        affine_prob: float = 0.0,
        intensity_scale: float = 0.1,
        intensity_shift: float = 0.1,
        sw_roi_size: Sequence[int] | None = None,
        sw_overlap: float = 0.5,
        sw_mode: str = "gaussian",
        sw_batch_size: int = 4,
        cache_max_gb: float = 8.0,
        stack_spacing: Sequence[float] | None = None,
        channels: Sequence[str] | None = None,
        regions: dict[str, Sequence[int]] | None = None,
        regions_class_order: Sequence[int] | None = None,
        max_patch_voxels: int = 48**3,
        batch_voxels: int = 4 * 32 * 48 * 32,
        steps_per_epoch: int | None = None,
    ):
        super().__init__()
        check_counts(
            batch_size, num_workers, samples_per_volume, steps_per_epoch, max_patch_voxels,
            batch_voxels, split,
        )  # fmt: skip
        as_list("data.zoom", zoom, "[0.7,1.4]")
        check_sampling(patch_size, foreground_ratio, clip, intensity_scale, intensity_shift)
        self.root = Path(root).expanduser()
        self.csv, self.image_dir, self.label_dir = csv, image_dir, label_dir
        self._class_names = list(class_names) if class_names else None
        # null: planned from the training cases by describe() (segnet.data.patch_plan)
        self.patch_size = tuple(int(p) for p in patch_size) if patch_size else None
        self.planned = dict(patch=patch_size is None, batch=batch_size is None)
        self.max_patch_voxels, self.batch_voxels, self.steps_per_epoch = (
            max_patch_voxels, batch_voxels, steps_per_epoch,
        )  # fmt: skip
        # whole volumes differ in shape, so validation and testing take one at a time
        self.batch_size, self.eval_batch_size = batch_size, 1
        self.samples_per_volume, self.foreground_ratio = samples_per_volume, foreground_ratio
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.split = split
        self.split_args = split_settings(val_fraction, test_fraction, seed, fold, num_folds, groups)
        self.clip = tuple(clip) if clip else None
        self.stack_spacing = check_stack_spacing(stack_spacing)
        self.channels = [str(c) for c in channels] if channels else None  # see settings_found
        self.spacing = check_spacing(spacing)  # "median" is resolved by describe()
        self.flip_axes, self.flip_given = check_flip(flip, AXIS_NAMES), not isinstance(flip, bool)
        self.sides_kept = False  # whether the side rule took the left-right axis out
        self.aug = dict(rotate90=rotate90, scale=intensity_scale, shift=intensity_shift)
        self.affine = check_affine(rotate, zoom, affine_prob)
        self.sliding_window = check_window(
            sw_roi_size, sw_overlap, sw_mode, sw_batch_size, dims=3, minimum=1,
            default="the training patch, data.patch_size",
        )  # fmt: skip
        self.cache_max_gb = cache_max_gb
        self.given_regions = (regions, regions_class_order)  # checked against the classes
        self.start_empty()

    def start_empty(self) -> None:
        """No case found and none read yet."""
        self.cases: list[nifti.Case] = []
        self.indexed: dataset_json.IndexedClasses | None = None  # read by describe()
        self.ignore_value: int | None = None
        self.splits: dict[str, list[int]] = {}
        self._volumes: dict[int, nifti.Volume] = {}
        self._grids: list | None = None  # the training cases' headers (_train_grids)

    # -- what the model needs to know -----------------------------------------------------
    def settings_found(self) -> dict[str, Any]:
        """The words of a case's channel files, where each channel was a file of its own
        and no order was given, and the regions of masks given one per class that overlap:
        the run records them, so that its checkpoint reads other cases' channels in the
        order it was trained on, and their masks as its regions."""
        first = self.cases[0] if self.cases else None
        found: dict[str, Any] = {}
        if self.mask_regions and self.given_regions[0] is None:
            # the masks that overlap and their combinations, as trained
            found["regions"] = dict(self.mask_regions)
            found["class_names"] = class_masks.combination_names(
                self.cases[0].combinations, list(self.mask_regions)
            )
        if self.assumed_names:  # read as background and foreground: evaluation reads so too
            found["class_names"] = list(self._class_names)
        # the patch and batch planned: a resume and an evaluation take them as they were
        if self.planned["patch"] and self.patch_size:
            found["patch_size"] = list(self.patch_size)
        if self.planned["batch"] and self.batch_size:
            found["batch_size"] = self.batch_size
        if self.channels or first is None or not first.channels:
            return found
        return {**found, "channels": list(first.channel_words)}

    @classmethod
    def class_names_in_data(cls, data_cfg) -> list[str] | None:
        """The dataset.json beside the cases (a CSV's own folder, else ``data.root``)."""
        found = dataset_json.indexed_classes(
            dataset_json.index_folder(data_cfg.root, data_cfg.get("csv")), nifti.NiftiDataError
        )
        return found.class_names if found else None

    @classmethod
    def axes_of_flip(cls, flip) -> tuple[int, ...]:
        return check_flip(flip, AXIS_NAMES)

    def describe(self) -> DataInfo:
        """Finds the cases and splits them; reads one header (the channel count) and
        dataset.json (the class names). Volumes are read later, once, in setup."""
        self.cases = nifti.find_cases(self.root, self.csv, self.image_dir, self.label_dir)
        if self.channels:
            self.cases = nifti.in_channel_order(self.cases, self.channels)
        for case in self.cases:  # stacks and arrays that carry no voxel size
            case.spacing = self.stack_spacing
        where = f"data.csv={self.csv}" if self.csv else f"data.root={self.root}"
        given = nifti.listed_splits(self.cases, self.split_args["fold"])
        self.splits = given_or_drawn(
            [c.name for c in self.cases], given, where, [c.group for c in self.cases],
            **self.split_args,
        )  # fmt: skip
        shape = nifti.header_shape(self.cases[0].image)
        if self.cases[0].channels:
            words = self.cases[0].channel_words
            log.info(
                "each case's image is %d files, one per channel (%s), read as one image of "
                "%d channels in that order", len(words), ", ".join(words), len(words),
            )  # fmt: skip
        self.indexed = dataset_json.indexed_classes(
            dataset_json.index_folder(self.root, self.csv), nifti.NiftiDataError
        )
        class_names = self._read_class_names()
        # RAS: the first axis runs left to right
        flips = axes_keeping_sides(self.flip_axes, self.flip_given, class_names, 0, AXIS_NAMES)
        if self.affine:
            check_rotation(self.affine["rotate"], class_names)
        self.sides_kept, self.flip_axes = flips != self.flip_axes, flips
        self.ignore_value = self._ignore_value(class_names)
        if self.spacing == "median":
            self._resolve_median_spacing()
        if self.patch_size is None or self.batch_size is None:
            self._plan_patch()
        if not self.sliding_window["roi_size"]:
            self.sliding_window["roi_size"] = list(self.patch_size)
        # trained on each case's own grid: the range of voxel sizes it met, so that
        # inference can tell a case it would see at another scale (headers only)
        voxel_sizes = (
            nifti.voxel_size_range(
                [self.cases[i].image for i in self.splits["train"]], self.stack_spacing
            )
            if self.spacing is None
            else None
        )
        regions, class_order = self._regions(class_names)
        # each case's alike (segnet.data.volume_channels); a channel file holds one channel
        words = self.cases[0].channel_words if len(shape) == 3 else ()
        return DataInfo(
            regions=regions,
            regions_class_order=class_order,
            spatial_dims=3,
            in_channels=len(words) or nifti.channel_count(shape),
            class_names=class_names,
            palette=[list(c) for c in label_palette(len(class_names))],
            # nnU-Net's ignore label: read as the index past the classes, as 2D void is
            ignore_index=None if self.ignore_value is None else len(class_names),
            normalization=zscore_normalization(self.clip, self.spacing, self.stack_spacing, words),
            input_size=list(self.patch_size),
            sliding_window=dict(self.sliding_window),
            # given or planned from the cases: the network's poolings are planned from it
            patch_size=list(self.patch_size),
            monitor="val/region_dice" if self.mask_regions else "val/dice",
            per_case=True,
            mirror_axes=list(self.flip_axes),
            voxel_sizes=voxel_sizes,
        )

    def _train_grids(self, why: str) -> list[tuple[tuple[float, ...], tuple[int, ...]]]:
        """The training cases' voxel sizes and shapes (RAS), from their headers, read once
        for the median spacing and the plan alike; ``why`` names the setting that needs
        them, in the refusal of an empty training split."""
        if self._grids is None:
            self._grids = [
                nifti.ras_grid(self.cases[i].image, self.stack_spacing)
                for i in self.splits["train"]
            ]
        grids = self._grids
        if not grids:
            raise ValueError(
                f"{why} needs training cases to plan from; the 'train' split is empty "
                "(lower data.test_fraction or data.val_fraction)."
            )
        return grids

    def _resolve_median_spacing(self) -> None:
        """``data.spacing=median``: the training cases' (nnU-Net's rule), said in the log."""
        grids = self._train_grids("data.spacing=median")
        self.spacing, thick = median_target_spacing(*zip(*grids, strict=True))
        log.info(
            "data.spacing=median: resampling every case to %s mm (the median of %d "
            "training cases%s)",
            [round(s, 4) for s in self.spacing],
            len(grids),
            ", but the 10th percentile along the thick-slice axis, as nnU-Net" if thick else "",
        )

    def _plan_patch(self) -> None:
        """``data.patch_size=null`` and ``data.batch_size=null``: planned from the training
        cases' shapes on the grid training reads (resampled to ``data.spacing``, else their
        own, at the middle of their voxel sizes), said in the log."""
        grids = self._train_grids("data.patch_size=null or data.batch_size=null")
        sizes = np.asarray([mm for mm, _ in grids])
        spacing = self.spacing or middle_spacing(sizes.min(0), sizes.max(0))
        shapes = [
            tuple(n * s / t for n, s, t in zip(shape, mm, spacing, strict=True))
            for mm, shape in grids
        ]
        if self.patch_size is None:
            self.patch_size = plan_volume_patch(shapes, spacing, self.max_patch_voxels)
        if self.batch_size is None:
            self.batch_size = plan_batch_size(self.patch_size, shapes, self.batch_voxels)
        median = np.median(np.asarray(shapes), axis=0)
        log.info(
            "plan: %d training cases of median shape %s at %s mm; training patch %s%s, batch %d%s",
            len(shapes),
            "x".join(str(round(n)) for n in median),
            "x".join(f"{s:.3g}" for s in spacing),
            "x".join(map(str, self.patch_size)),
            f" (planned: at most data.max_patch_voxels={self.max_patch_voxels})"
            if self.planned["patch"]
            else "",
            self.batch_size,
            f" (planned from data.batch_voxels={self.batch_voxels}, at most 5% of the "
            "training voxels)"
            if self.planned["batch"]
            else "",
        )

    def _regions(self, class_names: list[str]) -> tuple[dict | None, list[int] | None]:
        """``data.regions`` as given, else nnU-Net's region labels in dataset.json."""
        regions, order = self.given_regions
        if self.mask_regions:  # checked against the masks by _class_mask_names()
            return check_regions(self.mask_regions, None, class_names), None
        if regions is None and not self._class_names and self.indexed:
            regions = self.indexed.regions
            order = self.indexed.regions_class_order if regions else order
        regions = check_regions(regions, order, class_names)
        return regions, (list(order) if order is not None else None)

    def _read_class_names(self) -> list[str]:
        """The classes: given, or dataset.json's; for cases of a mask per class the masks'
        (given ones chosen among them), the cases' masks then put in that order."""
        if self.cases[0].class_masks:  # the masks' names are the classes: no list read
            return self._class_mask_names()
        if self._class_names:
            return self._class_names
        # a CSV lists cases from anywhere: the dataset.json beside it, not data.root's
        if self.indexed:
            return self.indexed.class_names
        folder = Path(self.csv).expanduser().parent if self.csv else self.root
        where = f"data.csv={self.csv}" if self.csv else str(self.root)
        if values := two_valued_labels(self.cases):
            log.warning(
                "no class is named for %s (no dataset.json), and the labels of its first "
                "%d cases hold %s and %s: read as background and foreground. To name them: "
                "'data.class_names=[background,<structure>]'",
                where, min(len(self.cases), LABELS_LOOKED_AT), *values,
            )  # fmt: skip
            self._class_names = ["background", "foreground"]
            self.assumed_names = True
            return self._class_names
        raise ValueError(
            f"no class names for {where}: no dataset.json with 'labels' in {folder}; set "
            "data.class_names=[background,...] (one per label value)."
        )

    def _class_mask_names(self) -> list[str]:
        """The classes of cases given one mask per class: the masks' (given ones chosen
        among them); where masks overlap, each is a region and the label map's classes are
        the combinations the cases hold (:mod:`segnet.data.class_masks`), or a
        checkpoint's, given back as its regions and classes. Regions given otherwise
        (``data.regions`` over the masks' classes) are those regions of one label map."""
        self.mask_regions = None
        regions, order = self.given_regions
        if regions is not None and class_masks.is_combination_run(self._class_names, regions):
            masks = list(regions)  # a checkpoint's, spelt as trained
            _, self.cases = nifti.in_class_order(self.cases, masks)
            codes = class_masks.combination_codes(self._class_names, masks)
        else:
            class_names, self.cases = nifti.in_class_order(self.cases, self._class_names)
            masks = class_names[1:]
            given = regions is not None or order is not None
            codes = None if given else self._overlapping_masks(masks)
            if codes is None:
                return class_names
        self.cases = [replace(c, combinations=tuple(codes)) for c in self.cases]
        self.mask_regions = class_masks.combination_regions(codes, masks)
        names = class_masks.combination_names(codes, masks)
        log.info(
            "the masks overlap: each of the %d is a region of its own (a sigmoid each), and "
            "the label map's classes are the combinations the cases hold: %s", len(masks),
            ", ".join(f"{v} {n}" for v, n in enumerate(names)),
        )  # fmt: skip
        return names

    def _overlapping_masks(self, masks: list[str]) -> list[int] | None:
        """Where the cases' masks overlap (each mask read once, what it found kept for the
        next run of these files), the combinations of them (bits) the cases hold; None
        where none overlap, or too many masks are trained to read them as bits (an
        overlap then refused as each case is read)."""
        if len(masks) > volume_class_masks.MAX_OVERLAPPING:
            return None
        files = [str(f) for case in self.cases for f in case.label_files]
        key = stats_cache.file_key([*files, "mask combinations: 2"])
        cached = stats_cache.read("volume-masks", key)
        if cached is None:
            log.info("reading the masks of %d cases for where they overlap", len(self.cases))
            counts: dict[int, int] = {}
            with ThreadPoolExecutor(4) as pool:  # nibabel's gzip decoding releases the GIL
                for found in pool.map(nifti.mask_combinations, self.cases):
                    for code, n in found.items():
                        counts[code] = counts.get(code, 0) + n
            cached = {"counts": counts}
            stats_cache.write("volume-masks", key, cached)
        counts = {int(c): int(n) for c, n in cached["counts"].items()}
        return volume_class_masks.overlapping_combinations(counts, masks, self.root)

    def _ignore_value(self, class_names: list[str]) -> int | None:
        """nnU-Net's ignore label in dataset.json, where it has one: the label value left
        out of training and scores (the classes are 0 to one below it)."""
        value = self.indexed.ignore_value if self.indexed else None
        if value is not None and class_names[value : value + 1] == [dataset_json.IGNORE]:
            log.warning(
                "the classes given (a checkpoint's from before nnU-Net's ignore label was "
                "read as void) name label value %d %r: it is scored as that class", value,
                dataset_json.IGNORE,
            )  # fmt: skip
            return None
        if value is not None and value < len(class_names):
            raise nifti.NiftiDataError(
                f"the dataset.json of {self.root} makes label value {value} its ignore label, "
                f"and data.class_names names {len(class_names)} classes (0..."
                f"{len(class_names) - 1}): name only the classes below the ignore label."
            )
        return value

    def case_names(self) -> list[str]:
        return [c.name for c in self.cases]

    def train_input_shape(self) -> tuple[int, ...] | None:
        return (self.info().in_channels, *self.patch_size)

    def read_split(self, split: str) -> int:
        return len(self.volumes(split))

    # -- volumes ----------------------------------------------------------------------------
    def volumes(self, split: str) -> list[nifti.Volume]:
        """Read (once, then from memory) and normalise the volumes of a split."""
        indices = self.splits[split]
        missing = [i for i in indices if i not in self._volumes]

        info = self.info()

        def read(i: int) -> nifti.Volume:
            v = nifti.load_volume(self.cases[i], info.num_classes, self.ignore_value)
            if v.image.shape[0] != info.in_channels:
                raise nifti.NiftiDataError(
                    f"image {self.cases[i].image} has {v.image.shape[0]} channel(s); the "
                    f"dataset's first image has {info.in_channels}."
                )
            v.image = nifti.normalize_intensity(v.image, self.clip)
            if self.spacing:  # resolved by describe() ("median" is a figure by now)
                v = nifti.resample_to_spacing(v, self.spacing)
            return v

        with ThreadPoolExecutor(4) as pool:  # nibabel's gzip decoding releases the GIL
            loaded = dict(zip(missing, pool.map(read, missing), strict=True))
        if split == "train" and len(loaded) == len(indices):  # read now, whole
            absent_classes_said(list(loaded.values()), info.class_names)
        size_gb = sum(_nbytes(v) for v in loaded.values()) / 1e9
        if size_gb + self._cached_gb() <= self.cache_max_gb:
            self._volumes.update(loaded)
        else:
            log.warning(
                "volumes of split '%s' (%.1f GB) exceed data.cache_max_gb; not cached",
                split,
                size_gb,
            )
        return [self._volumes.get(i) or loaded[i] for i in indices]

    def _cached_gb(self) -> float:
        return sum(_nbytes(v) for v in self._volumes.values()) / 1e9

    def check_spacings(self, volumes: list[nifti.Volume]) -> None:
        """Warn when training cases differ in voxel size and none is set: the network
        would see one anatomy at several scales."""
        if self.spacing is None and len(volumes) > 1:
            ratio = spread([v.spacing for v in volumes])
            if ratio > 1.1:
                log.warning(
                    "the training cases' voxel sizes differ up to %.1fx along one axis and "
                    "data.spacing is null, so each case is trained on its own grid; "
                    "data.spacing=median resamples them all to one spacing (as nnU-Net does).",
                    ratio,
                )

    # -- datasets --------------------------------------------------------------------------
    def train_transform(self):
        from monai import transforms as T

        # with an ignore label, patches are centred on labelled foreground, not on the
        # ignored voxels: a map of it travels with the case until the patch is cut
        crop_keys = ["image", "label"] + (["foreground"] if self.ignore_value is not None else [])
        keys = ["image", "label"]
        ops = [T.SpatialPadd(crop_keys, spatial_size=self.patch_size)]
        if self.affine:
            zoom_min, zoom_max = self.affine["zoom"]
            # on the whole (padded) case before cropping, so a patch has no padded corners
            # where the case has content; labels by nearest neighbour, never blended
            ops.append(
                T.RandAffined(
                    crop_keys,
                    prob=self.affine["prob"],
                    rotate_range=[np.deg2rad(self.affine["rotate"])] * 3,
                    # MONAI's scale maps output to input coordinates: magnifying the
                    # content by z samples the case at 1/z
                    scale_range=[(1 / zoom_max - 1, 1 / zoom_min - 1)] * 3,
                    mode=("bilinear", *["nearest"] * (len(crop_keys) - 1)),
                    padding_mode="zeros",
                )
            )
        ops += [
            T.RandCropByPosNegLabeld(
                crop_keys,
                label_key=crop_keys[-1],
                spatial_size=self.patch_size,
                pos=self.foreground_ratio,
                neg=1 - self.foreground_ratio,
                num_samples=1,
                allow_smaller=True,
            ),
        ]
        if len(crop_keys) > len(keys):
            ops.append(T.DeleteItemsd(crop_keys[len(keys) :]))
        ops += [T.RandFlipd(keys, prob=0.5, spatial_axis=axis) for axis in self.flip_axes]
        if self.aug["rotate90"]:
            ops += self.rotations90(keys)
        if self.aug["scale"]:
            ops.append(T.RandScaleIntensityd("image", factors=self.aug["scale"], prob=1.0))
        if self.aug["shift"]:
            ops.append(T.RandShiftIntensityd("image", offsets=self.aug["shift"], prob=1.0))
        transform = T.Compose(ops)
        transform.set_random_state(seed=int(torch.initial_seed() % 2**32))
        return transform

    def rotations90(self, keys: list[str]) -> list:
        """Random quarter turns, only in planes whose patch sides are equal, so the patch
        keeps its shape; whose voxels are square (in every training case, on their own
        grids), so the anatomy keeps its proportions; and whose two axes data.flip mirrors:
        a half turn mirrors both axes of its plane, and a quarter turn swaps them."""
        from monai import transforms as T

        p = self.patch_size
        if self.spacing:
            sizes = [self.spacing]
        else:  # from the headers: the volumes may be too many to hold twice
            sizes = [
                nifti.ras_spacing(self.cases[i].image, self.stack_spacing)
                for i in self.splits["train"]
            ]
        ops, kept_by_flip = [], []
        for a, b in ((0, 1), (0, 2), (1, 2)):
            square = all(np.isclose(mm[a], mm[b], rtol=1e-3) for mm in sizes)
            if p[a] != p[b] or not square:
                continue
            if {a, b} <= set(self.flip_axes):
                ops.append(T.RandRotate90d(keys, prob=0.5, spatial_axes=(a, b)))
            else:
                kept_by_flip.append(f"{AXIS_NAMES[a]}/{AXIS_NAMES[b]}")
        if kept_by_flip:  # a change from before data.flip took axes: said, not silent
            # where the side rule (segnet.data.sides) kept an axis, it was said already
            log.log(
                logging.INFO if self.sides_kept else logging.WARNING,
                "data.rotate90: no quarter turns in the %s plane(s), as data.flip=%s leaves "
                "an axis of each unmirrored",
                ", ".join(kept_by_flip),
                list(self.flip_axes) or "false",
            )
        return ops

    def build_datasets(self, stage: str) -> None:
        if stage in ("fit", "validate") and "train" not in self.datasets:
            for split in ("train", "val"):
                if not self.splits[split]:
                    raise ValueError(
                        f"the '{split}' split is empty ({len(self.cases)} cases, "
                        f"{self.split_args}); lower data.test_fraction or raise data.val_fraction."
                    )
            train = self.volumes("train")
            self.check_spacings(train)
            self.datasets["train"] = PatchDataset(
                train, self.train_transform(), self.samples_per_volume, self.info().ignore_index,
                length=self.steps_per_epoch * self.batch_size if self.steps_per_epoch else None,
            )  # fmt: skip
            self.datasets["val"] = VolumeDataset(self.volumes("val"))
        if stage in ("test", "predict"):
            self.datasets["test"] = VolumeDataset(self.volumes(self.split))

    def test_input_warning(self, info: DataInfo) -> str | None:
        cases = [self.cases[i] for i in self.splits[self.split]]
        sizes = {c.name: nifti.header_voxel_size(c.image, c.spacing) for c in cases}
        return voxel_size_warning(info, {name: s for name, s in sizes.items() if s})

    def bn_dataloader(self) -> DataLoader:
        return self._loader(VolumeDataset(self.volumes("train")), 1, shuffle=False, shard=False)

    # -- outputs ---------------------------------------------------------------------------
    def save_prediction(self, pred: torch.Tensor, index: int, out_dir: Path) -> None:
        """``<case>.nii.gz`` in the source image's orientation, affine and header (a TIFF
        stack's or an array's in its own form: ``<case>.tif``, ``<case>.npy``)."""
        volume = self.datasets["test"].volumes[index]
        case = next(c for c in self.cases if c.name == volume.name)
        nifti.save_label_volume(
            pred.numpy().astype(np.int16), volume, out_dir / nifti.prediction_name(case)
        )

    def save_probabilities(self, probs: torch.Tensor, index: int, out_dir: Path) -> None:
        """``<case>_probabilities.nii.gz``: float32 (X, Y, Z, classes) in the source image's
        orientation and affine, beside its label map."""
        volume = self.datasets["test"].volumes[index]
        path = out_dir / f"{volume.name}_probabilities.nii.gz"
        nifti.save_probability_volume(probs.float().numpy(), volume, path)


def absent_classes_said(volumes: list[nifti.Volume], class_names: Sequence[str]) -> None:
    """A warning naming the classes no training label holds a voxel of (a class list
    longer than the labels' values, or in another order): trained on nothing, they score
    0 or NaN."""
    labelled = [v.label for v in volumes if v.label is not None]
    if not labelled or len(class_names) < 2:
        return
    held = np.zeros(len(class_names), bool)
    for label in labelled:
        held |= np.bincount(label.ravel(), minlength=len(class_names))[: len(class_names)] > 0
    absent = [name for name, h in zip(class_names, held, strict=True) if not h]
    if absent:
        log.warning(
            "class(es) %s occur in no training label: check data.class_names (one per label "
            "value, background first) against the values the labels hold",
            ", ".join(absent),
        )


# the cases whose labels are read to see whether they hold two values, where no class
# is named: a case holding a third is refused when it is read, named
LABELS_LOOKED_AT = 8


def two_valued_labels(cases: Sequence[nifti.Case]) -> tuple[int, int] | None:
    """0 and 1 (or 0 and 255, black and white) where the labels of the first cases hold
    those two values and no other (a binary segmentation: a tumour, an organ), else None
    (the classes must be named)."""
    labelled = [c for c in cases if c.label is not None and not c.class_masks]
    if not labelled or len(labelled) < len(cases):
        return None
    held: set[int] = set()
    for case in labelled[:LABELS_LOOKED_AT]:
        try:
            values = np.unique(np.asanyarray(nifti.read_stored(case.label, case.spacing).dataobj))
        except nifti.NiftiDataError:
            return None  # unreadable: refused, named, when the case is read
        if values.dtype.kind == "f" and not np.array_equal(values, np.round(values)):
            return None
        held |= {int(v) for v in values}
        if len(held) > 2 or not held <= {0, 1, 255}:  # a third value: names needed
            return None
    for pair in ((0, 1), (0, 255)):
        if held == set(pair):
            return pair
    return None
