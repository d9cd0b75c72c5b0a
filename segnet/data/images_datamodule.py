"""LightningDataModule for a user's own 2D images and masks (:mod:`segnet.data.images`),
configured from the command line: random patches for training, sized from the data; whole
images at their native size for validation, testing, evaluation and prediction (sliding
windows where an image is larger than the patch).

Before the first step it prints a plan (images, sizes, channels, patch, splits) and the
mask values of the training set with their pixel shares and the class each is read as; a
value the settings do not map stops the run, naming the file and suggesting settings.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from segnet.data import class_files, class_masks, run_length, stats_cache, working_scale
from segnet.data import images as img
from segnet.data.annotation_formats import annotation_classes
from segnet.data.base import SegmentationDataModule
from segnet.data.checks import as_list, check_count, check_flip, check_window
from segnet.data.class_weights import check_class_weights, median_frequency
from segnet.data.dataset_json import indexed_classes
from segnet.data.drawn_masks import VOID
from segnet.data.image_pairs import is_nnunet_layout
from segnet.data.info import DataInfo
from segnet.data.memory import available_bytes
from segnet.data.name_rules import name_pattern
from segnet.data.palette import colorize, label_palette
from segnet.data.patch_plan import MIN_BATCH, plan_batch_size
from segnet.data.regions import check_regions
from segnet.data.settings import (
    ANY,
    CLASS_WEIGHTS,
    DRAWN_SPLITS,
    MODEL,
    SLIDING_WINDOW,
    SWITCH,
    TRAINING,
    WHERE_AND_HOW_FAST,
)  # fmt: skip
from segnet.data.sides import axes_keeping_sides
from segnet.data.splits import SPLIT_CHOICES as SPLITS
from segnet.data.splits import DrawnSplits, given_or_drawn, split_settings
from segnet.data.transforms import resize_labels
from segnet.files import write_image, write_probabilities

log = logging.getLogger(__name__)
# the network pools four times: patches are whole multiples of this
PATCH_MULTIPLE = 16
IMAGE_AXES = ("up-down", "left-right")  # what data.flip=[0] and [1] mirror


def image_normalization(
    mode: str,
    mean: Sequence[float],
    std: Sequence[float],
    channel_files: bool = False,
    downscale: float = 1.0,
) -> dict:
    """Images in their own units (0-255, or 0-65535 for 16-bit), decoded to ``mode``
    (``L``, ``RGB``, ``RGBA`` or ``bands:<C>``): ``(value - mean) / std`` per channel, with
    the training set's mean and std; ``channel_files``: each channel a grey file of its
    own (nnU-Net's ``<case>_0000.png``, ``<case>_0001.png``), recorded only where so;
    ``downscale``: the factor the images were resized by before it (bilinear, antialiased,
    rounded: :mod:`segnet.data.working_scale`), the logits resized back to each image's
    size, recorded only where above 1 (a description without it: native size)."""
    norm = {
        "kind": "image_mean_std",
        "color_mode": mode,
        "mean": [float(m) for m in mean],
        "std": [float(s) for s in std],
    }
    if channel_files:
        norm["channel_files"] = True
    if downscale > 1:
        norm["downscale"] = float(downscale)
    return norm


def plan_patch(sizes: Sequence[tuple[int, int]], max_patch: int) -> tuple[int, int]:
    """The training patch: the training images' median size, at most ``max_patch`` per
    axis, rounded down to a multiple of 16 (at least 32), as nnU-Net plans its patch from
    the data's median shape."""
    median = np.median(np.array(sizes), axis=0)
    return tuple(
        int(max(2 * PATCH_MULTIPLE, min(max_patch, m) // PATCH_MULTIPLE * PATCH_MULTIPLE))
        for m in median
    )


# bytes per pixel held beside the image's own: the label (uint8), and while the folder is
# read, its mask codes or the places of its classes (up to 4)
LABEL_BYTES, TRANSIENT_BYTES = 1, 4
SPARE_BYTES = 2**30  # for the network, the loader workers and Python itself


def held_bytes(headers: Sequence[img.Header], channels: int, downscale: float = 1.0) -> int:
    """About the memory the decoded images of ``headers`` take while a run holds them,
    read ``downscale`` times smaller (a label kept at native size for scoring)."""
    return sum(
        int(h.height * h.width * (
            (channels * h.channel_bytes + TRANSIENT_BYTES) / downscale**2 + LABEL_BYTES
        ))
        for h in headers
    )  # fmt: skip


def check_memory(
    where: str, headers: Sequence[img.Header], channels: int, downscale: float = 1.0
) -> None:
    """Refuse, before anything is decoded, a folder whose images would not fit in the
    memory available (the run would otherwise be killed part-way through reading it)."""
    available = available_bytes()
    need = held_bytes(headers, channels, downscale)
    if available is None or need + SPARE_BYTES <= available:
        return
    pixels = sum(h.height * h.width for h in headers)
    raise img.ImageDataError(
        f"the {len(headers)} images of {where} hold {pixels / 1e6:,.0f} million pixels: "
        f"decoded and held through the run they need about {need / 1e9:.1f} GB, and this "
        f"machine has {available / 1e9:.1f} GB available. Downscale the images further "
        f"(data.downscale={max(2.0, 2 * downscale):g}: photos are usually trained at 1,024 "
        "pixels a side or less), train on part of the folder "
        "(a CSV listing the images: data.csv=...), or use a machine with more memory."
    )


def smallest_int(values: np.ndarray) -> type:
    """The smallest unsigned integer type that holds ``values`` (non-negative)."""
    top = int(values.max()) if values.size else 0
    return np.uint8 if top < 2**8 else np.uint16 if top < 2**16 else np.uint32


class Loaded:
    """One decoded pair: the image as decoded (C, H, W), the class indices (H, W), and the
    normalisation that makes network input of the image (``mean`` and ``std`` per channel,
    or none where the image is already network input). Read downscaled
    (``data.downscale``), the label is at the image's scale and ``native`` (where it is
    scored) the one the mask gives.

    8-bit images stay uint8 here, a quarter of the memory of float32: a folder is held in
    memory through training, so its size decides which folders fit at all. Pixels are
    normalised as they are read (:meth:`normalised`), with the same arithmetic as
    normalising the whole image first."""

    def __init__(
        self,
        name: str,
        raw: torch.Tensor,
        label: torch.Tensor,
        mean: torch.Tensor | None = None,
        std: torch.Tensor | None = None,
        native: torch.Tensor | None = None,
    ):
        self.name, self.raw, self.label = name, raw, label
        self.mean, self.std = mean, std
        self.native = native

    @property
    def target(self) -> torch.Tensor:
        """The label scores are taken against: at the mask's own size."""
        return self.label if self.native is None else self.native

    def normalised(self, rows: slice = slice(None), cols: slice = slice(None)) -> torch.Tensor:
        """Network input (float32) of the image, or of its ``rows`` and ``cols``."""
        x = self.raw[:, rows, cols].to(torch.float32)
        if self.mean is None:
            return x
        return (x - self.mean) / self.std

    @property
    def image(self) -> torch.Tensor:
        return self.normalised()


def foreground_by_class(label: torch.Tensor, void: int) -> list[torch.Tensor]:
    """Where each foreground class lies (classes 1.., void left out): the flat indices
    (``y * width + x``) of its pixels, one int32 tensor per class present in ``label``, in
    class order; row-major within a class. Flat, not (y, x): half the memory, for a list
    that can hold most of an image's pixels.

    Example:
        >>> [c.tolist() for c in foreground_by_class(torch.tensor([[0, 2, 1], [9, 2, 0]]), 9)]
        [[2], [1, 4]]
    """
    foreground = ((label > 0) & (label != void)).flatten()
    flat = torch.nonzero(foreground)[:, 0].to(torch.int32)
    classes = label.flatten()[foreground]  # in the order nonzero lists the pixels
    order = torch.argsort(classes, stable=True)  # keeps row-major order within a class
    counts = torch.unique_consecutive(classes[order], return_counts=True)[1]
    return list(flat[order].split(counts.tolist()))


class PatchDataset(Dataset):
    """Random training patches: an image picked in turn, a random zoom (``scale``), a crop
    centred on a labelled foreground pixel for ``foreground_ratio`` of them (anywhere
    else), flips of ``flip_axes`` and a small random contrast and brightness change.
    Crops past the border are padded: image 0 (the mean), label void.

    A centred crop first draws one of the foreground classes the image holds, then one of
    its pixels, as nnU-Net samples: with many classes, a thin one (a pole, a sign) is
    centred as often as the road, not in proportion to its few pixels. With one foreground
    class this is the same draw as picking any foreground pixel."""

    def __init__(
        self,
        items: list[Loaded],
        patch: tuple[int, int],
        length: int,
        void: int,
        flip_axes: Sequence[int],
        scale: Sequence[float],
        foreground_ratio: float,
        intensity: float,
    ):
        self.items, self.patch, self.length, self.void = items, patch, length, void
        self.flip_axes, self.scale = tuple(flip_axes), tuple(scale)
        self.foreground_ratio, self.intensity = foreground_ratio, intensity
        # where each image's foreground lies (classes 1.., not void), for centred crops: the
        # pixels of each class present, one tensor of flat indices per class
        self.foreground = [foreground_by_class(it.label, void) for it in items]

    def __len__(self) -> int:
        return self.length

    def _centre(self, k: int, h: int, w: int) -> tuple[int, int]:
        by_class = self.foreground[k]
        if by_class and torch.rand(()) < self.foreground_ratio:
            # one class: no draw for it, so binary folders sample as they always have
            fg = by_class[int(torch.randint(len(by_class), ())) if len(by_class) > 1 else 0]
            return divmod(int(fg[torch.randint(len(fg), ())]), w)
        return int(torch.randint(h, ())), int(torch.randint(w, ()))

    def __getitem__(self, i: int) -> dict:
        k = i % len(self.items)
        item = self.items[k]
        h, w = item.label.shape
        lo, hi = self.scale
        zoom = float(np.exp(np.log(lo) + torch.rand(()).item() * (np.log(hi) - np.log(lo))))
        ch, cw = (max(1, round(p / zoom)) for p in self.patch)
        cy, cx = self._centre(k, h, w)
        top, left = cy - ch // 2, cx - cw // 2
        image = torch.zeros((item.raw.shape[0], ch, cw), dtype=torch.float32)
        label = torch.full((ch, cw), self.void, dtype=torch.uint8)
        y0, y1, x0, x1 = max(top, 0), min(top + ch, h), max(left, 0), min(left + cw, w)
        image[:, y0 - top : y1 - top, x0 - left : x1 - left] = item.normalised(
            slice(y0, y1), slice(x0, x1)
        )
        label[y0 - top : y1 - top, x0 - left : x1 - left] = item.label[y0:y1, x0:x1]
        if (ch, cw) != self.patch:
            image = F.interpolate(
                image[None], self.patch, mode="bilinear", align_corners=False, antialias=zoom < 1
            )[0]
            label = F.interpolate(label[None, None].float(), self.patch, mode="nearest-exact")
            label = label[0, 0].to(torch.uint8)
        for axis in self.flip_axes:
            if torch.rand(()) < 0.5:
                image, label = image.flip(1 + axis), label.flip(axis)
        if self.intensity > 0:
            a = self.intensity
            image = image * (1 + (torch.rand(()) * 2 - 1) * a) + (torch.rand(()) * 2 - 1) * a
        return {"image": image.contiguous(), "label": label.long().contiguous(), "index": k}


class WholeImageDataset(Dataset):
    """Whole images, unaugmented (validation, test, BatchNorm): at the scale trained at,
    each with its label as scored (:attr:`Loaded.target`)."""

    def __init__(self, items: list[Loaded]):
        self.items = items
        self.names = [it.name for it in items]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        it = self.items[i]
        return {"image": it.image, "label": it.target.long(), "index": i}


def check_instance_masks(
    instance_masks: Any,
    palette: Any,
    class_names: Any,
    ignore_values: Any,
    label_values: Any,
    **_: Any,
) -> bool:
    """``data.instance_masks``: masks of one value per object, read as background (0) and
    object (any other value); two classes, no colours, no void values."""
    if not isinstance(instance_masks, bool):
        raise ValueError(
            f"data.instance_masks={instance_masks!r}: true (masks hold one value per object; "
            "every value but 0 is the object class) or false."
        )
    if not instance_masks:
        return False
    given = [n for n, v in (("data.palette", palette), ("data.ignore_values", ignore_values))
             if v]  # fmt: skip
    if label_values is not None and list(label_values) != [0, 1]:
        given.append("data.label_values (the masks read as 0 and 1)")
    if given or (class_names and len(class_names) != 2):
        raise ValueError(
            f"data.instance_masks=true reads every value but 0 as one object class: give two "
            f"class names (e.g. [background,nucleus]){' and leave out ' + ' and '.join(given) if given else ''}."
        )
    return True


def own_layout(settings: Any) -> bool:
    """No folder or name setting among ``settings`` (the layout, or a data config): the
    folder is read as its own layout says (VOC's, Cityscapes' classes may be assumed)."""
    folders = [settings.get(k) for k in ("image_dir", "label_dir", "roi_dir")]
    rules = [settings.get(k) or "{id}" for k in ("image_name", "label_name")]
    return not any(folders) and rules == ["{id}", "{id}"]


# images this many times the training patch's pixels or more are said to be large
LARGE_IMAGES = 100


def classes_beside(root: Path | None, own: bool, drawn: bool) -> class_files.ShippedClasses | None:
    """The classes of the annotation files ``root``'s masks are ``drawn`` from (COCO's
    categories, LabelMe's labels: the masks hold their numbers, whatever list lies
    beside them), else those a list shipped in it names (:mod:`segnet.data.class_files`)."""
    if drawn:
        return annotation_classes(root)
    return class_files.shipped_classes(root, own)


def nnunet_root(root: Path | None, csv: str | None) -> Path | None:
    """``data.root`` where it is an nnU-Net dataset (``imagesTr/``, ``labelsTr/``: its
    dataset.json names the classes, whichever of its folders are read); None for any other
    layout, whose dataset.json (if any) is not this tool's to read."""
    return root if root and not csv and is_nnunet_layout(root, ()) else None


def with_index_classes(folder: Path | None, **given: Any) -> dict[str, Any]:
    """The class settings ``given``, with what a dataset.json in ``folder`` (nnU-Net's)
    names where they are not given: the classes (the masks hold each class's index) and
    their regions, and the ignore label as void."""
    found = indexed_classes(folder, img.ImageDataError)
    if found is None:
        return given
    out = dict(given)
    if not given["class_names"]:
        out["class_names"], out["label_values"] = found.class_names, None
        if given["regions"] is None and found.regions:
            out["regions"], out["regions_class_order"] = found.regions, found.regions_class_order
        log.info(
            "the classes of %s: %s", folder / "dataset.json",
            ", ".join(f"{v} {n}" for v, n in enumerate(found.class_names)),
        )  # fmt: skip
    if found.ignore_value is not None and given["ignore_values"] is None:
        out["ignore_values"] = [found.ignore_value]  # void: neither trained nor scored
    return out


class ImageFolderDataModule(DrawnSplits, SegmentationDataModule):
    """A folder (or CSV) of 2D images and masks: see :mod:`segnet.data.images` for the
    layouts and mask forms, ``configs/data/images.yaml`` for every setting.

    Example:
        >>> dm = ImageFolderDataModule("membrane", class_names=["membrane", "cell"],
        ...                            label_values=[0, 255])           # doctest: +SKIP
        >>> dm.prepare_data(); dm.info().sliding_window["roi_size"]      # doctest: +SKIP
        [256, 256]
    """

    settings = {
        **WHERE_AND_HOW_FAST,
        **DRAWN_SPLITS,
        **SLIDING_WINDOW,
        **CLASS_WEIGHTS,
        "skip_unlabelled": SWITCH,
        "instance_masks": SWITCH,
        "rle_order": ANY,
        **{k: ANY for k in ("image_dir", "label_dir", "roi_dir", "image_name", "label_name",
                            "class_names", "label_values", "palette", "ignore_values",
                            "color_mode")},
        "mean": MODEL,
        "std": MODEL,
        "downscale": MODEL,
        "regions": ANY,
        "regions_class_order": ANY,
        **{k: TRAINING for k in ("patch_size", "max_patch", "batch_pixels", "patches_per_epoch",
                                 "steps_per_epoch", "foreground_ratio", "flip", "scale",
                                 "intensity")},
    }  # fmt: skip

    def __init__(
        self,
        root: str | None = None,
        csv: str | None = None,
        image_dir: str | None = None,
        label_dir: str | None = None,
        roi_dir: str | None = None,
        image_name: str = "{id}",
        label_name: str = "{id}",
        skip_unlabelled: bool = False,
        rle_order: str = "auto",
        instance_masks: bool = False,
        class_names: Sequence[str] | None = None,
        label_values: Sequence | None = None,
        palette: Sequence[Sequence[int]] | None = None,
        ignore_values: Sequence | None = None,
        color_mode: str | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        downscale: float | str = "auto",
        patch_size: Sequence[int] | None = None,
        max_patch: int = 256,
        batch_size: int | None = None,
        batch_pixels: int = 8 * 256 * 256,
        eval_batch_size: int = 1,
        patches_per_epoch: int | None = None,
        steps_per_epoch: int | None = None,
        foreground_ratio: float = 0.33,
        flip: bool | Sequence[int] = True,
        scale: Sequence[float] = (0.8, 1.25),
        intensity: float = 0.1,
        class_weights: str | Sequence[float] = "none",
        class_weights_power: float = 1.0,
        num_workers: int = 2,
        pin_memory: bool | None = None,
        split: str = "test",
        val_fraction: float = 0.15,
        test_fraction: float = 0.15,
        fold: int | None = None,
        num_folds: int = 5,
        seed: int = 0,
        groups: bool | str = True,
        sw_roi_size: Sequence[int] | None = None,
        sw_overlap: float = 0.5,
        sw_mode: str = "gaussian",
        sw_batch_size: int = 4,
        regions: dict[str, Sequence[int]] | None = None,
        regions_class_order: Sequence[int] | None = None,
    ):
        super().__init__()
        check_counts_and_choices(
            root, csv, split, color_mode, eval_batch_size=eval_batch_size,
            num_workers=num_workers, sw_batch_size=sw_batch_size, batch_pixels=batch_pixels,
        )  # fmt: skip
        check_batch(batch_size, patches_per_epoch, steps_per_epoch)
        scale, size = check_sampling(max_patch, foreground_ratio, scale, intensity, patch_size)
        self.downscale_setting = check_normalization(mean, std, downscale)  # describe() plans
        self.layout = layout(image_dir, label_dir, roi_dir, image_name, label_name,
                             skip_unlabelled, rle_order)  # fmt: skip
        self.root, self.csv = read_from(root, csv, self.layout), csv
        self._class_settings = dict(palette=palette, class_names=class_names, label_values=label_values,
            ignore_values=ignore_values, regions=regions, instance_masks=instance_masks,
            regions_class_order=regions_class_order)  # fmt: skip
        self.set_classes(**self._class_settings)
        names = self._class_names
        check_class_weights(class_weights, len(names) if names else None, class_weights_power)
        self.mean, self.std = (list(v) if v is not None else None for v in (mean, std))
        self.patch_size, self.max_patch = (tuple(size) if size else None), max_patch
        self.batch_size = self.given_batch = batch_size
        self.eval_batch_size, self.batch_pixels = eval_batch_size, batch_pixels
        self.patches_per_epoch, self.steps_per_epoch = patches_per_epoch, steps_per_epoch
        self.foreground_ratio, self.intensity, self.scale = foreground_ratio, intensity, scale
        self.flip_axes, self.flip_given = check_flip(flip, IMAGE_AXES), not isinstance(flip, bool)
        self.class_weights_option, self.class_weights_power = class_weights, class_weights_power
        self.num_workers, self.pin_memory, self.split = num_workers, pin_memory, split
        self.split_args = split_settings(val_fraction, test_fraction, seed, fold, num_folds, groups)
        self.window = check_window(sw_roi_size, sw_overlap, sw_mode, sw_batch_size, dims=2,
            minimum=2 * PATCH_MULTIPLE, default="twice the training patch per axis")  # fmt: skip
        self.color_mode = color_mode
        self.start_empty()

    def start_empty(self) -> None:
        """No pairs found and nothing decoded yet."""
        self.pairs: list[img.Pair] = []
        self.splits: dict[str, list[int]] = {}
        self._loaded: dict[int, Loaded] = {}
        self.downscale = 1.0
        self.told_order: str | None = None  # data.rle_order=auto's, of run-length CSVs
        self._norm: tuple[torch.Tensor, torch.Tensor] | None = None
        # training images and masks as describe() decoded them (for the statistics and the
        # mask values), kept until the training split is loaded: each file decoded once
        self._decoded_masks: dict[int, np.ndarray] = {}
        # (the image at the scale trained at, and its size as decoded)
        self._decoded_images: dict[int, tuple[str, np.ndarray, tuple[int, int]]] = {}
        # how the masks kept were read: the value counts' reading, where no class is named,
        # is the one the classes then assumed read them with, so they are not read again
        self._held_reading: dict[str, Any] | None = None

    def set_regions(
        self, regions: Any, class_order: Sequence[int] | None, class_names: Sequence[str] | None
    ) -> None:
        """Classes that overlap or nest, as sets of class indices (``segnet.data.regions``),
        checked against the classes named (without them, describe() stops first)."""
        self.regions = check_regions(regions, class_order, class_names) if class_names else None
        self.regions_class_order = list(class_order) if class_order else None
        self.regions_given = regions is not None or class_order is not None

    def use_class_masks(self) -> None:
        """Masks given one per class (:mod:`segnet.data.class_masks`): the classes named
        from their folders or columns, each a region of a label map whose classes are the
        combinations the masks hold (every combination until the masks are counted; those
        a checkpoint was trained for where ``data.class_names`` gives them back)."""
        if self.found_settings:  # a class list names the values of one mask per image
            log.info("the masks are given one per class: the class list beside them is not read")
            self.label_values = self.palette = self._class_names = None
            self.ignore_values, self.found_settings = self.own_ignore, {}
            self.class_list = None
        trained = self.trained_mask_classes()
        given = [
            name
            for name, is_given in (("data.label_values", self.label_values is not None),
                                   ("data.palette", self.palette is not None),
                                   ("data.regions", self.regions_given and not trained),
                                   ("data.instance_masks", self.instance_masks))
            if is_given
        ]  # fmt: skip
        if given:
            raise ValueError(
                f"{' and '.join(given)}: the masks of {self.where()} are given one per class "
                f"({', '.join(c for c, _ in self.pairs[0].class_masks)}), each black (0) "
                "outside its class and one value inside, and each class is its own region; "
                "leave these settings out (data.ignore_values still makes values void)."
            )
        names, codes = img.order_class_masks(self.pairs, self._class_names, trained)
        self.mask_classes = names
        self.mask_ignore = [
            img.colour_code(v, "data.ignore_values") for v in self.ignore_values or []
        ]
        self.combinations_given = codes is not None
        self.set_combinations(codes if codes is not None else range(2 ** len(names)))

    def trained_mask_classes(self) -> list[str] | None:
        """A checkpoint's classes of masks given one per class, in its outputs' order: its
        regions, which come back with its classes (the combinations); None for any other
        run."""
        trained = self.regions_given and self.regions_class_order is None
        trained = trained and class_masks.is_combination_run(self._class_names or [], self.regions)
        return list(self.regions) if trained else None

    def set_combinations(self, codes: Sequence[int]) -> None:
        """The label map's classes: these combinations of the mask classes (their bits),
        background first; a pixel void in any class's mask is void."""
        codes = list(codes)
        self._class_names = class_masks.combination_names(codes, self.mask_classes)
        void = 2 ** len(self.mask_classes)
        self.mapping = img.LabelMapping(self._class_names, codes, [void])
        self.regions = class_masks.combination_regions(codes, self.mask_classes)

    def settle_combinations(self, counts: dict[int, int]) -> None:
        """At training, the combinations of classes the masks of every split hold become the
        label map's classes: one that never occurs (an inner class outside its outer one)
        is never predicted, nor scored."""
        if self.mask_classes and not self.combinations_given:
            void = 2 ** len(self.mask_classes)
            self.set_combinations(sorted({0, *(c for c in counts if c != void)}))
            empty = [n for n, held in self.regions.items() if not held]
            if empty:  # an output never trained to be on, and no region to score it by
                raise ValueError(
                    f"the masks of {', '.join(empty)} are black in every image of "
                    f"{self.where()}: a class with no pixel cannot be learnt. Remove its "
                    "masks (its folder or column), or annotate it."
                )

    def set_classes(
        self, palette: Sequence[Sequence[int]] | None, by_row: bool = False, **given: Any
    ) -> None:
        """The classes as given (``class_names``, ``label_values``, ``ignore_values``,
        ``regions``, ``regions_class_order``), else as a dataset.json or a class list beside
        the data names them (a list of colours read by row where ``by_row``), else None
        (found in the masks); and how mask values map to them."""
        nnunet = nnunet_root(self.root, self.csv)
        given = with_index_classes(nnunet, **given)
        drawn = self.drawn = self._drawn_masks(nnunet is None, given["label_values"], palette)
        # a class list shipped with the data, and the class settings read from it, which
        # the run records as its own
        self.class_list: class_files.ShippedClasses | None = None
        self.found_settings: dict[str, Any] = {}
        self.own_ignore = given["ignore_values"]
        overriding = class_files.classes_given({**given, "palette": palette})
        if nnunet is None and not self.csv and not overriding:
            shipped = classes_beside(self.root, own_layout(self.layout), drawn)
            shipped = shipped.by_row() if shipped and by_row else shipped
            given = class_files.with_shipped_classes(shipped, palette=palette, **given)
            palette = given.pop("palette")
            self.class_list = shipped
            if shipped:
                self.found_settings = {
                    **{k: given[k] for k in ("class_names", "label_values", "ignore_values")},
                    "palette": palette,
                }
            if shipped and drawn:  # the drawing's void is added wherever masks are drawn;
                # recorded, it would void a class of another folder's mask images (255)
                self.found_settings["ignore_values"] = self.own_ignore
        elif nnunet is None and not self.csv and class_files.class_file_candidates(self.root):
            log.info("data.%s given: the class lists in %s are not read",
                         " and data.".join(overriding), self.root)  # fmt: skip
        # a classes.txt of names: read once the masks' values show whether it fits them
        eligible = nnunet is None and not self.csv and not overriding and not drawn
        eligible = eligible and self.class_list is None
        self.names_file = class_files.listed_names(self.root) if eligible else None
        # two names given alone (no values, no list): black-and-white masks may read as them
        self.names_alone = nnunet is None and bool(given["class_names"]) and not (
            given["label_values"] or palette or self.class_list)  # fmt: skip
        class_names, label_values = given["class_names"], given["label_values"]
        ignore_values = given["ignore_values"]
        if drawn:  # what the files mark unknown (a box alone, __ignore__), whatever is given
            ignore_values = [*(v for v in ignore_values or [] if v != VOID), VOID]
        self.instance_masks = check_instance_masks(palette=palette, **given)
        self.set_regions(given["regions"], given["regions_class_order"], class_names)
        self._class_names = list(class_names) if class_names else None
        self.mapping = (
            img.LabelMapping.from_settings(class_names, label_values, palette, ignore_values)
            if class_names
            else None
        )
        self.palette = palette
        self.label_values, self.ignore_values = label_values, ignore_values
        # masks given one per class (found by describe): their classes, and their void codes
        self.mask_classes: list[str] | None = None
        self.mask_ignore: list[int] = []
        self.combinations_given = False
        # per training image: its pixels of each class, and its size (void included)
        self._class_counts: tuple[np.ndarray, list[int]] | None = None

    def _names_of_the_file(self, counts: dict[int, int]) -> bool:
        """Where a ``classes.txt`` lists names (:func:`class_files.listed_names`) that fit
        the masks' values (class numbers, one per line, a void name's line void; or black
        and white for two names), they are the classes, said and recorded; False where
        they do not fit (a list of something else: YOLO's box classes), said."""
        path, listed = self.names_file
        void = [v for v, n in enumerate(listed) if n.lower() in class_files.VOID_NAMES]
        names = [n for v, n in enumerate(listed) if v not in void]
        values = [v for v in range(len(listed)) if v not in void]
        ignore = [*(self.ignore_values or []), *void]
        counted = [c for c in counts if c not in ignore]
        white = img.background_and_foreground(counts) if len(listed) == 2 else None
        if white and white[1] >= 2 and not void:
            values = list(white)
        elif not set(counted) <= set(range(len(listed))) or len(names) < 2:
            log.info("%s lists %s; the masks hold other values (%s): it is not read",
                     path, ", ".join(listed), ", ".join(map(img.code_text, sorted(counts)[:8])))  # fmt: skip
            return False
        log.info("the classes of %s, by mask value: %s%s", path,
                 ", ".join(f"{v} {n}" for v, n in zip(values, names, strict=True)),
                 f" ({', '.join(map(str, void))} void)" if void else "")  # fmt: skip
        label_values = None if values == list(range(len(names))) else values
        self._settle_classes(names, label_values, ignore or None)
        return True

    def _settle_classes(
        self, names: list[str], label_values: list[int] | None, ignore: list | None
    ) -> None:
        """The classes the masks settled (a fitting classes.txt, black and white): how
        masks map to them, recorded as the run's own settings for evaluation."""
        self._class_names, self.label_values, self.ignore_values = names, label_values, ignore
        self.mapping = img.LabelMapping.from_settings(names, label_values, None, ignore)
        self.found_settings = {"class_names": names, "label_values": label_values,
                               "ignore_values": ignore, "palette": None}  # fmt: skip

    def _drawn_masks(self, own_classes: bool, label_values: Any, palette: Any) -> bool:
        """Whether the masks are drawn from annotation files (where no class index or
        CSV says otherwise): they hold class numbers in the order of the classes, so
        mask values or colours given for them, which would read them wrongly, are
        refused."""
        if not own_classes or self.csv or not self.root or not own_layout(self.layout):
            return False
        if not img.drawn_masks_root(self.root, self.layout["skip_unlabelled"]):
            return False
        if label_values is not None or palette is not None:
            given = "data.label_values" if label_values is not None else "data.palette"
            raise ValueError(
                f"{given} given, and the masks of data.root={self.root} are drawn from its "
                "annotation files (COCO's, Label Studio's, YOLO's, ...) with each class's "
                f"number in the order of data.class_names: leave {given} out "
                "(data.class_names alone chooses and orders the classes)."
            )
        return True

    # -- what the model needs to know -----------------------------------------------------
    def where(self) -> str:
        return f"data.csv={self.csv}" if self.csv else f"data.root={self.root}"

    def _find_pairs(self) -> None:
        """The pairs; and the pixel order ``data.rle_order=auto`` told of run-length CSVs,
        which the run records (:meth:`settings_found`)."""
        # a checkpoint of a mask per class reads drawn masks so again, whatever the data
        drawing = {"class_names": self._class_names, "drawn": self.drawn,
                   "trained_mask_classes": self.trained_mask_classes()}  # fmt: skip
        self.pairs = img.find_pairs(self.root or Path("."), self.csv, **self.layout, **drawing)
        told = self.drawn and self.layout["rle_order"] == "auto"
        self.told_order = run_length.told_order(self.root) if told else None

    def describe(self) -> DataInfo:
        """Finds the pairs and splits them, reads the image headers (sizes, colour mode);
        where the normalisation is not given (training), decodes the training images for it,
        and counts their mask values."""
        self._find_pairs()
        self._settle_class_list()
        self.splits = self._draw_splits()
        headers = [img.pair_header(p) for p in self.pairs]  # nothing decoded
        mode = img.dataset_mode(headers, self.pairs, self.color_mode)
        train = self.splits["train"]
        self._classes_from_masks()
        native = [(headers[i].height, headers[i].width) for i in (train or self.splits["all"])]
        scale_why = self._plan_downscale(native)
        held = self.splits["all"] if self.mean is None else self.splits[self.split]
        check_memory(
            self.where(), [headers[i] for i in held], img.channel_count(mode), self.downscale
        )
        if self.mean is None:  # training: the masks are checked before anything else
            if not train:
                raise ValueError(
                    f"the 'train' split of {self.where()} is empty ({len(self.pairs)} images, "
                    f"{self.split_args}): lower data.test_fraction or data.val_fraction, or "
                    "give a train/ folder."
                )
            self.mean, self.std = self._scan_training(train, mode)
        elif self.mask_classes and not self.combinations_given:  # normalisation given
            self.settle_combinations(self._count_codes(self.splits["all"], keep=False)[0])
        elif self.mapping.nearest and self.splits[self.split]:  # evaluating values, colours
            self._judge_evaluated_values()
        self._say_turned(headers)
        if self.mask_classes:
            log.info(
                "one mask per class: %s; the label map's classes are the combinations the "
                "masks hold: %s",
                ", ".join(self.mask_classes),
                ", ".join(f"{v} {n}" for v, n in enumerate(self._class_names)),
            )
        channels = img.channel_count(mode)
        if len(self.mean) != channels:
            raise ValueError(
                f"data.mean={self.mean}: {len(self.mean)} value(s), and the images are {mode} "
                f"({channels} channel(s)): give one per channel, or leave it null."
            )
        sizes = [working_scale.scaled_size(h, w, self.downscale) for h, w in native]
        patch = self.patch_size or plan_patch(sizes, self.max_patch)
        self.patch_size = tuple(patch)
        self.batch_size = self.given_batch or plan_batch_size(patch, sizes, self.batch_pixels)
        names = self._class_names
        palette = (
            [list(c) for c in self.palette]
            if self.palette is not None
            else [list(c) for c in label_palette(len(names))]
        )
        # a convolutional network takes more than its training patch at once: windows of
        # twice its size per axis cover an image in a quarter of the passes
        roi = self.window["roi_size"] or tuple(2 * p for p in patch)
        self.flip_axes = axes_keeping_sides(
            self.flip_axes, self.flip_given, [*names, *(self.mask_classes or [])], 1, IMAGE_AXES
        )
        self._log_plan(native, mode, patch, roi, scale_why)
        return DataInfo(
            spatial_dims=2,
            in_channels=channels,
            class_names=list(names),
            palette=palette,
            ignore_index=len(names),
            normalization=image_normalization(
                mode, self.mean, self.std, any(p.channels for p in self.pairs), self.downscale
            ),
            input_size=None,  # whole images at native size
            sliding_window={**self.window, "roi_size": list(roi)},
            # one mask per class: the classes are the regions; the label map their combinations
            monitor=self.monitor(),
            per_case=True,
            mirror_axes=list(self.flip_axes),
            patch_size=list(patch),
            regions=self.regions,
            regions_class_order=self.regions_class_order,
        )

    def _plan_downscale(self, sizes: list[tuple[int, int]]) -> str:
        """Resolve ``data.downscale``: the factor given (or the one a checkpoint was trained
        at), or with ``auto`` the one planned from the training images' ``sizes`` and the
        thinnest class of their masks (:func:`working_scale.plan_downscale`); returns why."""
        if self.downscale_setting != "auto":
            self.downscale = float(self.downscale_setting)
            return f"data.downscale={self.downscale:g}"
        area = int(np.prod(self.patch_size or plan_patch(sizes, self.max_patch)))
        if working_scale.plan_downscale(sizes, area, None)[0] == 1:
            self.downscale = 1.0
            return ""
        self.downscale, why = working_scale.plan_downscale(sizes, area, self._thinnest_class())
        return f"data.downscale=auto: {why}"

    def _thinnest_class(self) -> float | None:
        """The thickness (:func:`working_scale.thickness`) of the thinnest class in up to
        ``MASKS_LOOKED_AT`` training masks spread over the split, void left out; of the
        thinnest mask value (of a share of the pixels that makes it no stray level) where
        the classes do not map every value yet."""
        train = self.splits["train"] or self.splits["all"]
        looked_at = train[:: max(1, len(train) // working_scale.MASKS_LOOKED_AT)]
        looked_at = looked_at[: working_scale.MASKS_LOOKED_AT]
        how, mapping = self.reading(), self.mapping

        def measure(i: int) -> tuple[tuple[dict, dict], bool]:
            codes = img.read_codes(self.pairs[i], how, self.mask_ignore)
            try:  # counted where read: large masks do not pile up
                label = mapping.apply(codes, self.pairs[i].masks[0]) if mapping else None
            except img.ImageDataError:  # a value no class maps (yet)
                label = None
            return working_scale.area_and_boundary(codes if label is None else label), (
                label is not None
            )

        with ThreadPoolExecutor(4) as pool:  # Pillow releases the GIL while decoding
            measured = list(pool.map(measure, looked_at))
        as_classes = all(mapped for _, mapped in measured)
        counted = [c for c, mapped in measured if mapped == as_classes]
        found = working_scale.thickness(
            counted,
            [mapping.void] if as_classes else (),
            0.0 if as_classes else working_scale.MIN_SHARE,
        )  # fmt: skip
        return min(found.values()) if found else None

    def _settle_class_list(self) -> None:
        """How the pairs found read a class list beside them (not at all where masks come
        one per class; by row where they hold its row numbers), said once."""
        if self.pairs and self.pairs[0].class_masks:
            self.use_class_masks()
        else:
            self._read_colour_list_by_row()
        if self.class_list is not None:
            class_files.say_classes(self.class_list)

    def _read_colour_list_by_row(self) -> None:
        """Where the class list read has colours and every mask is a file of one channel,
        which cannot hold them, and the values of the first masks are row numbers of the
        list, not all the levels of its grey colours, the masks hold class numbers: the
        list is read by row."""
        shipped = self.class_list
        if shipped is None or not shipped.has_colours:
            return
        labels = [p.label for p in self.pairs if p.label is not None]
        if not img.one_channel_masks(labels):
            return
        seen = set().union(*(np.unique(img.read_mask(m)).tolist() for m in labels[:8]))
        greys = {c[0] for c in shipped.codes if len(set(c)) == 1}
        if max(seen, default=0) < len(shipped.names) and not seen <= greys:
            self.set_classes(by_row=True, **self._class_settings)

    def _counts_as_shown(self) -> dict[int, int]:
        """The values of every mask, counted as a viewer shows them (1-bit white as 255,
        palette files by colour where some masks are colour masks): from the cache where
        these same files were counted before, else decoded once (twice where colour masks
        are among them) and kept, as the classes they settle read them the same way."""
        every = list(range(len(self.pairs)))
        masks = [item for p in self.pairs for item in (*map(str, p.masks), "|")]  # by pair
        key = stats_cache.file_key([*masks, f"masks:{img.MASK_READING}", "as shown:2",
                                    f"void per class:{self.mask_ignore}"])  # fmt: skip
        cached = stats_cache.read("mask_values", key)
        if cached is not None:
            return {int(v): c for v, c in cached["counts"].items()}
        # kept for training where it scans the statistics (not with data.mean given)
        keep = self.mean is None
        shown = {"one_bit_white": 255, "palette_colours": False}
        counts, _ = self._count_codes(every, keep, reading=shown)
        if any(map(img.is_colour, counts)):  # a new reading, not the kept masks' changed
            shown = {**shown, "palette_colours": True}
            counts, _ = self._count_codes(every, keep, reading=shown)
        stats_cache.write("mask_values", key, {"counts": counts})
        return counts

    def _unnamed_message(self, counts: dict[int, int]) -> str:
        if len(counts) == 1:  # no setting helps: a class needs pixels of another beside it
            folders = sorted({str(p.label.parent) for p in self.pairs if p.label is not None})
            return (
                f"every mask of {self.where()} ({len(self.pairs)} images; masks in "
                f"{', '.join(folders[:2])}{' ...' * (len(folders) > 2)}) holds the one value "
                f"{img.code_text(next(iter(counts)))} in every pixel: there is nothing to "
                "learn. Check that these are the masks meant (a mask that looks black may "
                "hold class numbers 0 and 1, but these hold one value), or draw the "
                "objects into them."
            )
        return (
            f"data.class_names is not set for {self.where()}: name one class per mask value. "
            f"Its masks hold:\n  {img.value_table(counts, None)}\nFor example: "
            f"{img.suggestion(counts, self._class_names)}."
        )

    def _classes_from_masks(self) -> None:
        """Where no class is named, or two alone, what the masks show settles them (black
        and white: :meth:`_assume_two_classes`); masks of anything else with no class named
        are refused, with the settings that fit."""
        if self._class_names is None:
            counts = self._counts_as_shown()
            if self.names_file and self._names_of_the_file(counts):
                return
            if not self._assume_two_classes(counts):
                raise ValueError(self._unnamed_message(counts))
        elif self._two_names_of_black_and_white():
            self._assume_two_classes(self._counts_as_shown(), self._class_names)

    def _two_names_of_black_and_white(self) -> bool:
        """Whether two classes are named with no values for them, the names alone (no
        class list, palette, drawing or masks per class), for training: black-and-white
        masks (0 and 255) then read as those two, not as class numbers 0 and 1."""
        return (
            self.names_alone and self.mean is None and len(self._class_names or []) == 2
            and not (self.drawn or self.instance_masks or self.regions_given)
            and all(p.label is not None for p in self.pairs)
        )  # fmt: skip

    def _assume_two_classes(
        self, counts: dict[int, int], named: Sequence[str] | None = None
    ) -> bool:
        """Where no class is named, or two are ``named`` alone, and every mask holds 0 and
        one other value (its compression noise aside: :func:`img.background_and_foreground`),
        they are the background and the foreground, said with the settings that name or
        swap them, and recorded as the run's own settings; False for any other masks
        (refused, with the settings that fit), and for masks of 0 and 1 where classes are
        named (class numbers, read as such)."""
        if self.instance_masks or self.regions_given:
            return False
        values = img.background_and_foreground(counts)
        if values is None:
            return False
        # named: a class number among the values (a class 1 beside a void 255), or white
        # given as void, says the masks are no black and white of the two
        if named and (values[1] in (self.ignore_values or []) or any(
                c in counts for c in range(1, len(named)))):  # fmt: skip
            return False
        names = list(named or ["background", "foreground"])
        if named:
            log.warning(
                "data.class_names=[%s] with no data.label_values, and the masks of %s hold %d "
                "and %d (black and white): read as %s (%d) and %s (%d); "
                "'data.label_values=[%d,%d]' swaps them",
                ",".join(names), self.where(), *values, names[0], values[0], names[1], values[1],
                values[1], values[0],
            )  # fmt: skip
        else:
            log.warning(
                "no class is named for %s, and its masks hold %d and %d: read as %s (%d) "
                "and %s (%d), the class val/dice scores. To name them, or to score the "
                "other: 'data.class_names=[background,foreground]' 'data.label_values=[%d,%d]'",
                self.where(), *values, names[0], values[0], names[1], values[1], *values,
            )  # fmt: skip
        self._settle_classes(names, list(values), self.ignore_values)
        return True

    def settings_found(self) -> dict[str, Any]:
        """The class settings read from a class list shipped with the data, and the pixel
        order told of run-length CSVs: the run records them, so that evaluation, export
        and a resume read the masks as it did."""
        told = {"rle_order": self.told_order} if self.told_order else {}
        return {**self.found_settings, **told}

    def monitor(self) -> str:
        """What picks the best checkpoint: the mean Dice of the foreground classes (after
        the first, the background), of the regions where masks come one per class, or the
        mIoU of every class where a class list names no background."""
        if self.mask_classes:
            return "val/region_dice"
        # a class list that names no background (DeepGlobe's land covers, CamVid's 32
        # classes): the best checkpoint is picked by the mIoU of every class
        if self.class_list is not None and not self.class_list.has_background:
            log.info(
                "no class of %s is the background: its monitor is val/miou, over every "
                "class, unless the run's monitor setting says otherwise (val/dice is the "
                "mean Dice of the classes after the first)", self.where(),
            )  # fmt: skip
            return "val/miou"
        return "val/dice"

    def _judge_evaluated_values(self) -> None:
        """Values off the given ones judged over the whole evaluated split, as training
        judged its folder, not mask by mask; the masks decoded stay for loading."""
        evaluated = self.splits[self.split]
        counts, self._first_with = self._count_codes(evaluated)
        self._check_values(counts, evaluated)

    def _say_turned(self, headers: Sequence[img.Header]) -> None:
        turned = sum(h.turned for h in headers)
        if turned:
            log.info(
                "%d image(s) of %s read turned upright, as their EXIF orientation shows them",
                turned, self.where(),
            )  # fmt: skip

    @classmethod
    def axes_of_flip(cls, flip: Any) -> tuple[int, ...]:
        return check_flip(flip, IMAGE_AXES)

    @classmethod
    def class_names_in_data(cls, data_cfg: Any) -> list[str] | None:
        """The classes a dataset.json beside the images names (nnU-Net's layout), or a
        class list shipped with them (:mod:`segnet.data.class_files`)."""
        root = read_from(data_cfg.get("root"), data_cfg.get("csv"), data_cfg, say=False)
        nnunet = nnunet_root(root, data_cfg.get("csv"))
        found = indexed_classes(nnunet, img.ImageDataError)
        if found is not None:
            return found.class_names
        shipped = (
            None
            if nnunet
            or data_cfg.get("csv")
            # masks drawn from annotation files are drawn for the classes given, by name:
            # no class list of the data's own to hold a checkpoint's classes against
            or cls.masks_drawn(data_cfg)
            else classes_beside(root, own_layout(data_cfg), drawn=False)
        )
        return shipped.class_names if shipped else None

    @classmethod
    def masks_drawn(cls, data_cfg: Any) -> bool:
        """Whether the masks of the data ``data_cfg`` reads are drawn from annotation files
        (:data:`~segnet.data.annotation_formats.FORMATS`: :func:`img.drawn_masks_root`)."""
        if data_cfg.get("csv") or not own_layout(data_cfg):
            return False
        return img.drawn_masks_root(read_from(data_cfg.get("root"), None, data_cfg, say=False))

    @classmethod
    def settings_from_info(cls, info: DataInfo) -> dict:
        """What a checkpoint fixes when its data is read again (evaluation): the
        normalisation and the scale it was trained with, not the statistics of the data scored (and with
        masks given one per class, the combinations of classes it was trained for)."""
        norm = info.normalization
        fixed = {"color_mode": norm["color_mode"], "mean": norm["mean"], "std": norm["std"],
                 "downscale": norm.get("downscale", 1.0)}  # fmt: skip
        if class_masks.is_combination_run(info.class_names, info.regions):
            # one mask per class: the label map's classes are the combinations it trained on,
            # and its regions the masks in the order of its outputs
            fixed["class_names"] = list(info.class_names)
            fixed["regions"] = dict(info.regions)
        return fixed

    def _draw_splits(self) -> dict[str, list[int]]:
        return given_or_drawn(
            [p.name for p in self.pairs], [p.split for p in self.pairs], self.where(),
            [p.group for p in self.pairs], groups_of_folders=not self.csv, **self.split_args,
        )  # fmt: skip

    def reading(self) -> dict[str, Any]:
        """How masks are read for the mapping given (:meth:`LabelMapping.reading`); as a
        viewer shows them where no classes are named yet; instance masks as 0 and 1."""
        how = self.mapping.reading() if self.mapping is not None else {}
        return {**how, "instances": True} if self.instance_masks else how

    def _count_codes(
        self,
        indices: Sequence[int],
        keep: bool = True,
        reading: dict | None = None,
        into: tuple[dict[int, int], dict[int, Path]] | None = None,
    ) -> tuple[dict[int, int], dict[int, Path]]:
        """The pixel count of each value over the masks of ``indices`` (kept decoded for
        loading where ``keep``), and a mask holding each value; added to ``into`` where
        given (counts and masks so far)."""
        how = self.reading() if reading is None else reading
        counts, first_with = into if into is not None else ({}, {})
        held = self._decoded_masks if self._held_reading == how else {}
        if keep and self._held_reading != how:  # masks kept are of one reading
            self._decoded_masks.clear()
            self._held_reading = dict(how)

        def read(i: int) -> tuple[np.ndarray | None, dict[int, int]]:
            mask = held[i] if i in held else img.read_codes(self.pairs[i], how, self.mask_ignore)
            # counted and made compact where it is read: the pool's results wait for the
            # loop below, and masks of large images would pile up there at full size
            # (kept: in the smallest type that holds them; codes are below 2**25)
            return (mask.astype(smallest_int(mask)) if keep else None), working_scale.value_counts(
                mask
            )

        with ThreadPoolExecutor(4) as pool:  # Pillow releases the GIL while decoding
            found = pool.map(read, indices)
            for i, (mask, values) in zip(indices, found, strict=True):
                if keep:
                    self._decoded_masks[i] = mask
                for v, c in values.items():
                    counts[v] = counts.get(v, 0) + c
                    first_with.setdefault(v, self.pairs[i].masks[0])
        return counts, first_with

    def _suggested(self, counts: dict[int, int], indices: Sequence[int]) -> str:
        """Settings that fit every mask of ``indices``: the masks counted as the suggested
        settings would read them, as a viewer shows them (1-bit white as 255, palette
        files by colour where some masks are colour masks)."""
        shown = {"one_bit_white": 255, "palette_colours": any(map(img.is_colour, counts))}
        if shown != self.reading():
            counts, _ = self._count_codes(indices, keep=False, reading=shown)
        return img.suggestion(counts, self._class_names)

    def _release_masks(self, indices: Sequence[int]) -> None:
        """Masks kept from counting their values that training does not load (the test
        split's, read at the end if at all): not held through training."""
        for i in indices:
            self._decoded_masks.pop(i, None)

    def _scan_training(self, train: list[int], mode: str) -> tuple[list[float], list[float]]:
        """The mask values of every split (checked: a value no setting maps stops the run
        now, not at the first validation) and the training images' mean and std: from the
        cache where these same files (paths, sizes, modification times) were scanned
        before, else decoded (the training files kept for loading, so each is decoded
        once) and cached."""
        in_train = set(train)  # once: in the comprehension, a set per image (quadratic)
        others = [i for i in self.splits["all"] if i not in in_train]
        files = [f for i in train for f in (*self.pairs[i].image_files, *self.pairs[i].masks)]
        files += [f for i in others for f in self.pairs[i].masks]
        # the mask reading's version: codes from another reading must not be reused
        key = stats_cache.file_key([*map(str, files), mode, f"masks:{img.MASK_READING}",
                                    f"reading:{sorted(self.reading().items())}",
                                    f"void per class:{self.mask_ignore}",
                                    *([f"downscale:{self.downscale}"] if self.downscale > 1
                                      else [])])  # fmt: skip
        val = set(self.splits["val"])
        test = [i for i in others if i not in val]
        cached = stats_cache.read("images", key)
        if cached is not None:
            self._release_masks(test)
            counts = {int(v): c for v, c in cached["counts"].items()}
            self._first_with = {int(v): Path(f) for v, f in cached["first_with"].items()}
            self.settle_combinations(counts)
            self._check_values(counts, self.splits["all"])
            log.info("statistics of the training set from %s", stats_cache.path("images", key))
            return cached["mean"], cached["std"]
        # validation masks kept too (read at the first validation); test masks, read at
        # the end if at all, decoded again then rather than held through training
        # masks of downscaled images are read again at loading: held at native size
        # through the scan, they would take more memory than the images
        found = self._count_codes(
            [*train, *(i for i in others if i in val)], keep=self.downscale == 1
        )
        counts, self._first_with = self._count_codes(test, keep=False, into=found)
        self._release_masks(test)
        self.settle_combinations(counts)
        self._check_values(counts, self.splits["all"])
        mean, std = self._statistics(train, mode)
        stats_cache.write(
            "images",
            key,
            {
                "counts": counts,
                "first_with": {v: str(f) for v, f in self._first_with.items()},
                "mean": mean,
                "std": std,
            },
        )
        return mean, std

    def _check_values(self, counts: dict[int, int], indices: Sequence[int]) -> None:
        """Every value of the masks of ``indices`` (every split) maps to a class or void:
        logged with its pixel share and class; one that does not stops the run, naming a
        mask that holds it and suggesting settings that fit them all (0/255 masks are
        never read as 256 classes, nor 255 as void by default)."""
        table = self.mapping.classes_of(counts)
        unmapped = sorted(c for c in counts if c not in table)
        if not unmapped:
            self.mapping.decided = table
            far = self.mapping.far_values(counts)
            if img.a_ramp(far):
                share = 100 * sum(counts[c] for c in far) / sum(counts.values())
                log.warning(
                    "%d mask values far from every given one (%.2f%% of the pixels, each "
                    "under 0.5%%) are read as the nearest class: the levels of smoothed "
                    "edges (masks resized with interpolation, or drawn anti-aliased); if a "
                    "class of its own is among them, name it in data.class_names with its "
                    "value", len(far), share,
                )  # fmt: skip
            elif far:
                log.warning(
                    "mask values far from every given one, each under 0.5%% of the pixels, "
                    "are read as the nearest class: %s; if one is a class of its own, name "
                    "it in data.class_names with its value",
                    ", ".join(f"{img.code_text(c)} ({100 * counts[c] / sum(counts.values()):.2f}%, "
                              f"as {self._class_names[t] if t < len(self._class_names) else 'void'})"
                              for c, t in sorted(far.items())[:8]),
                )  # fmt: skip
            log.info(
                "mask values over the %d masks of every split (pixel share -> class):\n  %s",
                len(indices),
                img.value_table(counts, self.mapping),
            )
            return
        if self.mask_classes:  # only where a checkpoint fixes the combinations
            raise self.unknown_combination(unmapped[0], self._first_with[unmapped[0]])
        others = f" (and the masks {len(unmapped) - 1} other value(s))" if len(unmapped) > 1 else ""
        table_text = img.value_table(counts, self.mapping)
        raise img.ImageDataError(
            f"mask {self._first_with[unmapped[0]]} holds {img.code_text(unmapped[0])}{others}, "
            f"which data.class_names={self._class_names}"
            + (
                " with no data.label_values does not map (index masks hold the class number, "
                f"0 to {self.mapping.void - 1})"
                if self.mapping.label_values is None
                else " and data.label_values / data.palette do not map"
            )
            + f". The masks of every split hold:\n  {table_text}\n"
            f"Settings that fit: {self._suggested(counts, indices)}."
        )

    def unknown_combination(self, code: int, path: Path) -> img.ImageDataError:
        """Masks given one per class that overlap in a way the label map has no class for
        (a checkpoint's, trained on masks that never did, or combinations given in
        ``data.class_names``)."""
        combo = class_masks.combination_names([code], self.mask_classes)[0]
        return img.ImageDataError(
            f"the masks of {path} (one per class) overlap as {combo}, which is none of the "
            f"label map's classes ({', '.join(self._class_names)}: the combinations a "
            "checkpoint was trained for, or data.class_names lists). Evaluate data whose "
            "classes overlap as in training; to train, leave data.class_names null (the "
            "combinations are found in the masks) or name the mask classes only."
        )

    def _statistics(self, indices: Sequence[int], mode: str) -> tuple[list[float], list[float]]:
        """Per-channel mean and std over the training images (their own units)."""
        total = total_sq = None
        pixels = 0

        def read(i: int) -> tuple[np.ndarray, tuple[int, int]]:
            # downscaled where it is read (the statistics are of what the network sees),
            # so that images of full size never pile up waiting for the loop below
            raw = img.read_pair_image(self.pairs[i], mode, compact=True)
            return self.at_working_scale(raw), raw.shape[:2]

        with ThreadPoolExecutor(4) as pool:
            images = list(pool.map(read, indices))
        for i, (raw, native) in zip(indices, images, strict=True):
            self._decoded_images[i] = (mode, raw, native)  # loading takes it from here
            x = raw.astype(np.float64)
            flat = x.reshape(-1, x.shape[-1])
            s, sq = flat.sum(0), (flat**2).sum(0)
            total = s if total is None else total + s
            total_sq = sq if total_sq is None else total_sq + sq
            pixels += len(flat)
        mean = total / pixels
        std = np.sqrt(np.maximum(total_sq / pixels - mean**2, 0))
        return mean.tolist(), np.maximum(std, 1e-3).tolist()

    def _log_plan(
        self,
        sizes: list[tuple[int, int]],
        mode: str,
        patch: Sequence[int],
        roi: Sequence[int],
        scale_why: str,
    ) -> None:
        hs, ws = zip(*sizes, strict=True)
        counts = {s: len(v) for s, v in self.splits.items() if s != "all"}
        median = working_scale.scaled_size(int(np.median(hs)), int(np.median(ws)), self.downscale)
        scale = (
            f"read {self.downscale:g} times smaller (median {median[0]}x{median[1]}; "
            f"{scale_why}), scored and predicted at native size"
            if self.downscale > 1
            else "whole images at native size in validation and test"
            + (f" ({scale_why})" if scale_why else "")
        )
        log.info(
            "plan for %s: %d images (%s), %s %s; sizes %d-%d x %d-%d (median %dx%d, H x W); "
            "%s; training patch %dx%d, batch %d%s; validation and test in %dx%d windows where "
            "larger; flips of axes %s",
            self.where(),
            len(self.pairs),
            ", ".join(f"{n} {s}" for s, n in counts.items()),
            mode,
            f"({img.channel_count(mode)} channel(s))",
            min(hs), max(hs), min(ws), max(ws), int(np.median(hs)), int(np.median(ws)),
            scale,
            *patch,
            self.batch_size,
            "" if self.given_batch else f" (planned from data.batch_pixels={self.batch_pixels})",
            *roi,
            list(self.flip_axes) or "none",
        )  # fmt: skip
        if median[0] * median[1] > LARGE_IMAGES * patch[0] * patch[1]:
            log.warning(
                "the images (median %dx%d as trained) are over %d times the %dx%d training "
                "patch: an object larger than a patch is seen only in part, and every "
                "validation and test image is read whole (slow on a CPU)%s. Where the objects "
                "are large, data.downscale=<factor> reads the images that many times smaller "
                "(scored and predicted at native size) and lets each patch see more of them",
                *median, LARGE_IMAGES, *patch,
                f" ({scale_why})" if scale_why else "",
            )  # fmt: skip

    def case_names(self) -> list[str]:
        return [p.name for p in self.pairs]

    def train_input_shape(self) -> tuple[int, ...] | None:
        return (self.info().in_channels, *self.patch_size)

    def read_split(self, split: str) -> int:
        return len(self.load(split, scored=True))

    # -- decoding ---------------------------------------------------------------------------
    def load(self, split: str, scored: bool = False) -> list[Loaded]:
        """Decode (once, then from memory) and check the pairs of a split: sizes that match,
        mask values the settings map. ``scored``: with each label at its mask's size where
        the images are read downscaled (validation, testing)."""
        if split not in self.splits:
            raise ValueError(f"data.split={split!r}: choose one of {SPLITS}.")
        native = scored and self.downscale > 1
        missing = [
            i for i in self.splits[split]
            if i not in self._loaded or (native and self._loaded[i].native is None)
        ]  # fmt: skip
        with ThreadPoolExecutor(4) as pool:  # Pillow releases the GIL while decoding
            loaded = pool.map(lambda i: self._load_one(i, native), missing)
            for i, item in zip(missing, loaded, strict=True):
                self._loaded[i] = item
        return [self._loaded[i] for i in self.splits[split]]

    def at_working_scale(self, raw: np.ndarray) -> np.ndarray:
        """A decoded image (H, W, C) as training reads it: ``data.downscale`` times
        smaller (:func:`working_scale.downscale_array`), or as it is."""
        if self.downscale == 1:
            return raw
        # rounded where its values are whole (16-bit images are held as float32), as
        # prediction rounds them
        return working_scale.downscale_array(raw, self.downscale, whole=True)

    def _load_one(self, i: int, native_label: bool = False) -> Loaded:
        pair = self.pairs[i]
        norm = self.info().normalization
        mode, raw, native = self._decoded_images.pop(i, (None, None, None))
        if mode != norm["color_mode"]:  # none kept, or decoded otherwise
            raw = img.read_pair_image(pair, norm["color_mode"], compact=True)
            native = raw.shape[:2]
            raw = self.at_working_scale(raw)
        codes = self._decoded_masks.pop(i, None)
        if codes is None or self._held_reading != self.reading():  # kept: read as now only
            codes = img.read_codes(pair, self.reading(), self.mask_ignore)
        if codes.shape != native:
            raise img.ImageDataError(
                f"mask {pair.masks[0]} is {codes.shape[1]}x{codes.shape[0]} and its image "
                f"{pair.image} {native[1]}x{native[0]} (W x H): a mask must be the size "
                "of its image."
            )
        # masks per class: a code the mapping lacks is an overlap the label map has no class for
        label = self.mapping.apply(
            codes,
            pair.masks[0],
            (lambda unknown: self.unknown_combination(min(unknown), pair.masks[0]))
            if self.mask_classes
            else None,
        )
        if pair.roi is not None:
            roi = img.read_mask(pair.roi)
            if roi.shape != codes.shape:
                raise img.ImageDataError(
                    f"region-of-interest mask {pair.roi} is {roi.shape[1]}x{roi.shape[0]} and "
                    f"its image {native[1]}x{native[0]}: it must be the size of its image."
                )
            label[roi == 0] = self.mapping.void
        if self._norm is None:  # shared by every image
            self._norm = tuple(
                torch.tensor(norm[k], dtype=torch.float32).view(-1, 1, 1) for k in ("mean", "std")
            )
        raw = torch.from_numpy(raw.transpose(2, 0, 1).copy())
        label = torch.from_numpy(label)
        if self.downscale == 1:
            return Loaded(pair.name, raw, label, *self._norm)
        # trained on the label at the image's scale, scored on the one the mask gives
        small = resize_labels(label[None], raw.shape[1:])[0]  # by the nearest pixel
        return Loaded(pair.name, raw, small, *self._norm, native=label if native_label else None)

    def _log_values(self, items: list[Loaded], indices: Sequence[int]) -> None:
        """Per-image class counts (for class weights), and a warning for classes no
        training mask holds."""
        void = self.mapping.void
        per_image = np.stack(
            [np.bincount(it.label.numpy().ravel(), minlength=void + 1)[:void] for it in items]
        )
        self._class_counts = per_image, [it.label.numel() for it in items]
        total = per_image.sum(0)
        if self.mask_classes:  # the classes are the masks; not every combination occurs
            absent = [n for n in self.mask_classes if total[self.regions[n]].sum() == 0]
            why = "their masks are black in every training image"
        else:
            absent = [n for n, c in zip(self._class_names, total, strict=True) if c == 0]
            why = "check data.label_values / data.palette (label_values[i] is the mask value of class i)"
        if absent:
            log.warning("class(es) %s occur in no training mask: %s", ", ".join(absent), why)

    # -- datasets -------------------------------------------------------------------------
    def build_datasets(self, stage: str) -> None:
        if stage in ("fit", "validate") and "train" not in self.datasets:
            for split in ("train", "val"):
                if not self.splits[split]:
                    raise ValueError(
                        f"the '{split}' split of {self.where()} is empty ({len(self.pairs)} "
                        f"images, {self.split_args}): give it images (a {split}/ folder, a CSV "
                        "split column) or change data.val_fraction / data.test_fraction."
                    )
            train = self.load("train")
            if self._class_counts is None:
                self._log_values(train, self.splits["train"])
            length = self.patches_per_epoch or self._default_length(train)
            log.info(
                "an epoch: %d patches in %d steps of %d", length, -(-length // self.batch_size),
                self.batch_size,
            )  # fmt: skip
            self.datasets["train"] = PatchDataset(
                train, self.patch_size, length, self.mapping.void, self.flip_axes, self.scale,
                self.foreground_ratio, self.intensity,
            )  # fmt: skip
            self.datasets["val"] = WholeImageDataset(self.load("val", scored=True))
        if stage in ("test", "predict"):
            self.datasets["test"] = WholeImageDataset(self.load(self.split, scored=True))

    def _default_length(self, train: list[Loaded]) -> int:
        """Patches per epoch: ``steps_per_epoch`` steps' worth of patches, a step being the
        batch given, or the ``batch_pixels`` a planned batch is made of (where the 5% bound
        makes that batch smaller, or memory lowers it, the same patches take more steps);
        else enough to cover the training pixels about once, at least a few batches."""
        if self.steps_per_epoch:
            area = self.patch_size[0] * self.patch_size[1]
            step = self.given_batch or max(MIN_BATCH, self.batch_pixels // area)
            return self.steps_per_epoch * step
        pixels = sum(it.label.numel() for it in train)
        area = self.patch_size[0] * self.patch_size[1]
        return max(4 * self.batch_size, -(-pixels // area))

    def median_frequency_weights(self) -> list[float]:
        if self._class_counts is None:
            self._log_values(self.load("train"), self.splits["train"])
        return median_frequency(*self._class_counts).tolist()

    def val_dataloader(self) -> DataLoader:
        # whole images differ in size: one at a time unless they all share one
        return self._loader(self.datasets["val"], self._eval_batch("val"), shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["test"], self._eval_batch("test"), shuffle=False)

    def _eval_batch(self, stage: str) -> int:
        shapes = {(*it.raw.shape, *it.target.shape) for it in self.datasets[stage].items}
        return self.eval_batch_size if len(shapes) == 1 else 1

    def bn_dataloader(self) -> DataLoader:
        return self._loader(WholeImageDataset(self.load("train")), 1, shuffle=False, shard=False)

    # -- outputs ---------------------------------------------------------------------------
    def save_prediction(self, pred: torch.Tensor, index: int, out_dir: Path) -> None:
        """``<image name>.png``: the class index of every pixel, at the image's size; and
        ``<image name>_color.png``, each class in its colour (``data.palette``, or the
        panels' colours), to look at: what ``segnet.predict`` writes too. An image in a
        subfolder has its predictions in the same subfolder of ``out_dir``."""
        name = self.output_stem(index)
        dtype = np.uint8 if len(self._class_names) <= 256 else np.uint16
        mask = pred.numpy().astype(dtype)
        write_image(out_dir / f"{name}.png", mask)
        write_image(out_dir / f"{name}_color.png", colorize(mask, self.info().palette))

    def output_stem(self, index: int) -> str:
        """What the predictions of the ``index``-th image tested are named after: its path
        in its split's image folder; with ``data.split=all``, under its split's name too
        (train/0 and test/0 written into one folder)."""
        return self.pairs[self.splits[self.split][index]].output_stem(self.split == "all")

    def save_probabilities(self, probs: torch.Tensor, index: int, out_dir: Path) -> None:
        """``<image name>_probabilities.npz``: (classes, H, W) float32 at the image's size
        (a region network's: (regions, H, W), each region's sigmoid)."""
        name = self.output_stem(index)
        write_probabilities(out_dir / f"{name}_probabilities.npz", probs.float().numpy(),
                            self.info().output_names)  # fmt: skip


def check_batch(
    batch_size: int | None, patches_per_epoch: int | None, steps_per_epoch: int | None
) -> None:
    """The batch (null: planned) and the epoch's length in patches or in steps, not both."""
    check_count("batch_size", batch_size, allow_none=True)
    check_count("patches_per_epoch", patches_per_epoch, allow_none=True)
    check_count("steps_per_epoch", steps_per_epoch, allow_none=True)
    if patches_per_epoch is not None and steps_per_epoch is not None:
        raise ValueError(
            f"data.patches_per_epoch={patches_per_epoch} and data.steps_per_epoch="
            f"{steps_per_epoch}: give one length of an epoch, and null the other."
        )


def check_sampling(
    max_patch: int,
    foreground_ratio: float,
    scale: Sequence[float],
    intensity: float,
    patch_size: Sequence[int] | None,
) -> tuple[list[float], list[int] | None]:
    """The training patches' settings, each named where it is wrong; returns the zoom
    range and the patch size as lists."""
    check_count("max_patch", max_patch, minimum=2 * PATCH_MULTIPLE)
    if not 0 <= foreground_ratio <= 1:
        raise ValueError(f"data.foreground_ratio={foreground_ratio}: a share, 0..1.")
    scale = as_list("data.scale", scale, "[0.8,1.25]")
    if len(scale) != 2 or not 0 < scale[0] <= scale[1]:
        raise ValueError(f"data.scale={scale}: give [min, max] with 0 < min <= max.")
    if not 0 <= intensity < 1:
        raise ValueError(f"data.intensity={intensity}: a strength in [0, 1), 0 for none.")
    size = as_list("data.patch_size", patch_size, "[256,256]")
    if size is not None and (
        len(size) != 2 or not all(isinstance(s, int) and s >= 2 * PATCH_MULTIPLE for s in size)
    ):
        raise ValueError(
            f"data.patch_size={size}: give [H, W], each a whole number of at least "
            f"{2 * PATCH_MULTIPLE}, or null (planned from the images)."
        )
    return scale, size


def check_normalization(
    mean: Sequence[float] | None, std: Sequence[float] | None, downscale: object = 1
) -> float | str:
    """``data.mean`` and ``data.std`` checked; ``data.downscale`` checked and returned."""
    for name, values in (("mean", mean), ("std", std)):
        as_list(f"data.{name}", values, "[0.5]")
    if (mean is None) != (std is None):
        raise ValueError("data.mean and data.std: give both, or neither (from the data).")
    if std is not None and not all(s > 0 for s in std):
        raise ValueError(f"data.std={list(std)}: every value must be above 0.")
    return working_scale.check_downscale(downscale)


def check_counts_and_choices(
    root: str | None,
    csv: str | None,
    split: str,
    color_mode: str | None,
    **counts: int,
) -> None:
    """Where the data is, the loaders' counts and the settings that take one of a few
    words, each named where it is wrong."""
    if root is None and csv is None:
        raise ValueError(
            "data.root and data.csv are both unset: point data.root at the folder with "
            "your images and masks (images/ + labels/, or train/ val/ test/ holding "
            "them), or data.csv at a CSV with image,label columns."
        )
    for name, value in counts.items():
        check_count(name, value, minimum=0 if name == "num_workers" else 1)
    if split not in SPLITS:
        raise ValueError(f"data.split={split!r}: choose one of {SPLITS}.")
    if color_mode is not None and not img.channel_count(str(color_mode)):
        raise ValueError(
            f"data.color_mode={color_mode!r}: one of {list(img.COLOR_MODES)}, bands:<C> "
            "(C channels, as a checkpoint of multi-band images records), or null (from the "
            "images)."
        )


def read_from(
    root: str | None, csv: str | None, layout: Mapping[str, Any], say: bool = True
) -> Path | None:
    """The folder the data is read from: ``root``, or the one folder in it where it holds
    that alone (:func:`img.unwrapped`), unless a CSV or folder setting is given (those
    name folders of ``root`` itself)."""
    folder = Path(root).expanduser() if root else None
    named = any(layout.get(k) for k in ("image_dir", "label_dir", "roi_dir"))
    return folder if csv or named else img.unwrapped(folder, say)


def layout(
    image_dir: str | None,
    label_dir: str | None,
    roi_dir: str | None,
    image_name: str,
    label_name: str,
    skip_unlabelled: bool = False,
    rle_order: str = "auto",
) -> dict[str, Any]:
    """Where the images, masks and regions of interest are, and how their names pair
    (``{id}`` patterns, each checked); whether images without a mask are left out; the
    pixel order of run-length CSVs."""
    name_pattern(image_name, "data.image_name")
    name_pattern(label_name, "data.label_name")
    if not isinstance(skip_unlabelled, bool):
        raise ValueError(
            f"data.skip_unlabelled={skip_unlabelled!r}: true (images without a mask are left "
            "out) or false (they are refused, named)."
        )
    if rle_order not in run_length.ORDERS:
        raise ValueError(
            f"data.rle_order={rle_order!r}: auto (told from the masks), columns (pixels "
            "numbered top to bottom, then left to right, as Kaggle numbers them) or rows."
        )
    return dict(
        skip_unlabelled=skip_unlabelled,
        rle_order=rle_order,
        image_dir=image_dir,
        label_dir=label_dir,
        roi_dir=roi_dir,
        image_name=image_name,
        label_name=label_name,
    )
