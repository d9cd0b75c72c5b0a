"""What prediction asks of each data format, by the kind of model: which files it takes,
how an input is checked before any is predicted, read as the network takes it, and what
is written for it. A model's kind is its normalisation (``DataInfo.normalization["kind"]``,
which checkpoints and model cards carry), so ``segnet.serving`` and the commands ask
:func:`format_of_model` and never import a format's own module.

Three formats are registered: scene photos normalised as ImageNet-style RGB (CamVid),
your own images normalised with their training set's mean and std, and volumes (NIfTI
files, TIFF stacks, NumPy arrays: ``segnet.data.volume_files``).
Torch and the readers only; no Lightning, no Hydra (served models load without them)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segnet.data import images as own_images
from segnet.data import nifti, volume_channels, working_scale
from segnet.data.camvid import check_image, rgb_of
from segnet.data.errors import DataError
from segnet.data.folder_roles import says_labels_alone, says_mask
from segnet.data.image_pairs import folders_below, without_side_arrays
from segnet.data.info import WINDOW_BLENDING, DataInfo, sliding_window_steps, voxel_size_warning
from segnet.data.palette import colorize

log = logging.getLogger(__name__)


# the model card's step that brings a 2D model's logits back to its input image's size
RESIZE_LOGITS = {
    "step": "resize_logits",
    "to": "the original image's (H, W)",
    "interpolation": "bilinear, half-pixel centres (align_corners=False)",
}


@dataclass
class Prepared:
    """One input as the network takes it: ``x`` (1, C, *spatial) float32, the spatial
    ``size`` the logits are brought back to, and what writing the prediction needs."""

    x: torch.Tensor
    size: tuple[int, ...]
    source: Any = None


class ImageFiles:
    """2D image files (PNG, JPEG, TIFF ...): a mask of class indices and a coloured one."""

    what = "2D images (PNG, JPEG, TIFF ...)"
    spatial_dims = 2

    def takes(self, path: Path) -> bool:
        return path.suffix.lower() in own_images.IMAGE_SUFFIXES

    def files_in(self, folder: Path) -> list[Path]:
        return without_side_arrays([p for p in folder.iterdir() if self.takes(p)])

    def decode(self, path: Path) -> None:
        own_images.decode_whole(path)

    def targets(self, path: Path, out_dir: Path, info: DataInfo | None = None) -> list[Path]:
        stem = own_images.output_stem(path, channel_files_of(info))
        return [out_dir / f"{stem}.png", out_dir / f"{stem}_color.png"]

    def probability_target(self, path: Path, out_dir: Path, info: DataInfo | None = None) -> Path:
        return out_dir / f"{own_images.output_stem(path, channel_files_of(info))}_probabilities.npz"

    def write_probabilities(
        self, probs: np.ndarray, prepared: Prepared, info: DataInfo, target: Path
    ) -> Path:
        """(classes, H, W) float32 at the image's own size, with the class names (a region
        model's: its regions' sigmoids, with the region names)."""
        from segnet.files import write_probabilities

        return write_probabilities(target, probs, info.output_names)

    def write(
        self, pred: np.ndarray, prepared: Prepared, info: DataInfo, targets: list[Path]
    ) -> list[Path]:
        from segnet.files import write_image

        mask = pred.astype(np.uint8 if info.num_classes <= 256 else np.uint16)
        for target, array in zip(targets, (mask, colorize(mask, info.palette)), strict=True):
            write_image(target, array)
        return targets


class ScenePhotos(ImageFiles):
    """8-bit colour (or grey) photos, as CamVid: resized to the size trained at where the
    model has one, scaled to [0, 1] and normalised per RGB channel."""

    def check(self, path: Path, info: DataInfo) -> None:
        check_image(path)  # 8-bit colour or grey, as the model was trained on

    def read(self, path: Path, info: DataInfo) -> Prepared:
        from PIL import Image, ImageOps

        with Image.open(path) as im:
            # upright as viewers show it (a phone photo's EXIF orientation), so that the
            # mask lies over the picture the user sees
            return self.prepare(self.rgb(ImageOps.exif_transpose(im), path), info)

    @staticmethod
    def rgb(im: Any, path: Path) -> np.ndarray:
        """A decoded 8-bit picture (colour, grey or palette) as (H, W, 3) uint8 RGB; wider
        values (16-bit, float) are refused, naming ``path``."""
        return rgb_of(im, path)

    @staticmethod
    def prepare(rgb: np.ndarray, info: DataInfo) -> Prepared:
        """(H, W, 3) uint8 RGB as the network takes it (the transform the DataModule
        evaluates with, from the spec the model card gives)."""
        from torchvision import tv_tensors

        from segnet.data.transforms import normalize, resize_images

        norm = info.normalization
        x = torch.from_numpy(np.array(rgb)).permute(2, 0, 1)[None]  # a writable copy
        if info.input_size:
            x = resize_images(x, info.input_size)
        x = normalize(norm["mean"], norm["std"])(tv_tensors.Image(x))
        return Prepared(x.as_subclass(torch.Tensor), tuple(rgb.shape[:2]))

    def card_steps(
        self, data: Any, norm: dict[str, Any], onnx: dict[str, Any]
    ) -> tuple[list, list]:
        """For the model card: scene images (CamVid), uint8 RGB, resized to the trained size, scaled and
        normalised; the logits resized back to the image's size."""
        pre = [
            {"step": "decode", "to": "uint8 RGB (H, W, 3)", "channel_order": norm["channel_order"]},
        ]
        if data.input_size:
            pre.append(
                {
                    "step": "resize",
                    "size_hw": data.input_size,
                    # what training and segnet.serving.predict ran; Pillow's BILINEAR resize is the
                    # same filter, but rounds a few border pixels apart at non-integer scales
                    "interpolation": "bilinear, antialiased, on the uint8 image",
                    "as_run_by": "torchvision.transforms.v2.functional.resize(antialias=True)",
                    "also": "Pillow Image.resize(BILINEAR): the same at integer scale factors, "
                    "within rounding (under 1% of mask pixels at class borders) at others",
                }
            )
        pre += [
            {"step": "scale", "multiply_by": norm["scale"], "result": "float32 in [0, 1]"},
            {"step": "normalize", "subtract": norm["mean"], "divide_by": norm["std"]},
            {"step": "layout", "from": "HWC", "to": "NCHW", "add_batch_axis": True},
        ]
        post = [
            {**RESIZE_LOGITS, "skip_if": "sizes already equal"},
            {"step": "argmax", "axis": 1, "result": "class index per pixel"},
            {"step": "colorize", "palette": "output.palette (RGB per class index)"},
        ]
        return pre, post


class OwnImages(ImageFiles):
    """Your own images (``data=images``): decoded to the colour mode trained on (grey of
    any bit depth, RGB or RGBA), normalised with the training set's mean and std, at their
    own size."""

    def check(self, path: Path, info: DataInfo) -> None:
        # decodes to the colour mode trained on (16-bit grey cannot become colour)
        own_images.read_input(path, info.normalization["color_mode"], channel_files_of(info))

    def read(self, path: Path, info: DataInfo) -> Prepared:
        norm = info.normalization
        raw = own_images.read_input(path, norm["color_mode"], channel_files_of(info))
        size = raw.shape[:2]
        if norm.get("downscale", 1) > 1:  # as training read it; the logits back to ``size``
            raw = working_scale.downscale_array(raw, norm["downscale"], whole=True)
        x = (raw - np.asarray(norm["mean"], np.float32)) / np.asarray(norm["std"], np.float32)
        return Prepared(torch.from_numpy(x.transpose(2, 0, 1).copy())[None], size)

    def card_steps(
        self, data: Any, norm: dict[str, Any], onnx: dict[str, Any]
    ) -> tuple[list, list]:
        """For the model card: a user's own images, read in their own units, normalised with the training set's
        mean and std, segmented whole (through the sliding window, where the card has one)."""
        pre = [
            {
                "step": "decode",
                "to": f"{norm['color_mode']} (H, W, {len(norm['mean'])}) in the image's own "
                "units (0-255 for 8 bit, 0-65535 for 16 bit), as float32",
                "with": (
                    "nnU-Net's one grey file per channel (<case>_0000.png, <case>_0001.png, "
                    "...): each file upright (EXIF orientation), as Pillow's convert('L') "
                    "reads it (16-bit grey as it is), stacked last in channel order"
                    if norm.get("channel_files")
                    else "tifffile (TIFF), numpy.load (.npy) or SimpleITK (.mha, .nrrd, .dcm: "
                    "a DICOM file's rescale applied and a MONOCHROME1 one turned, as "
                    "SimpleITK.ReadImage gives them): every band as the file holds it, rows "
                    "and columns first, the bands last"
                    if own_images.bands.count_of(norm["color_mode"])
                    else f"Pillow: Image.convert('{norm['color_mode']}'), except 16-bit grey "
                    "images, read as they are"
                ),
            },
        ]
        post = [
            {"step": "argmax", "axis": 1, "result": "class index per pixel, at native size"},
        ]
        if norm.get("downscale", 1) > 1:
            pre.append(downscale_step(norm["downscale"]))
            post.insert(0, RESIZE_LOGITS)
        pre += [
            {"step": "normalize", "subtract": norm["mean"], "divide_by": norm["std"]},
            {"step": "layout", "from": "HWC", "to": "NCHW", "add_batch_axis": True},
        ]
        if data.sliding_window:
            onnx["sliding_window"] = {**WINDOW_BLENDING, **data.sliding_window}
            onnx["sliding_window_steps"] = sliding_window_steps(data.sliding_window)
        return pre, post


def downscale_step(factor: float) -> dict[str, Any]:
    """The model card's step that reads an image as training did, ``factor`` times smaller."""
    return {
        "step": "downscale",
        "factor": float(factor),
        "size_hw": "[max(1, round(H / factor)), max(1, round(W / factor))], Python's round() "
        "(halves to even)",
        "interpolation": "bilinear, antialiased, half-pixel centres, on the float32 image; "
        "rounded to whole numbers where every value is one (8- and 16-bit images)",
        "as_run_by": "torch.nn.functional.interpolate(mode='bilinear', antialias=True, "
        "align_corners=False)",
    }


class Volumes:
    """NIfTI volumes: reoriented to RAS, clipped and z-scored per volume, resampled to the
    voxel spacing trained at where the model has one; the label map is written on the
    case's own grid with its affine."""

    what = "3D volumes (NIfTI, MetaImage, NRRD, TIFF stacks, NumPy arrays)"
    spatial_dims = 3

    def takes(self, path: Path) -> bool:
        return path.name.lower().endswith(nifti.VOLUME_SUFFIXES)

    def files_in(self, folder: Path) -> list[Path]:
        return nifti.nifti_files(folder)

    def decode(self, path: Path) -> None:
        nifti.load_volume(nifti.Case(nifti.case_name(path), path, None))

    def check(self, path: Path, info: DataInfo) -> None:
        """The header alone: every input is checked before any is predicted. For a model
        of a file per channel, a case is given by its first channel's file, and its other
        channels' files are read beside it."""
        files = case_files(path, info)
        if files:
            for file in files:
                shape = nifti.header_shape(file)
                if len(shape) != 3:
                    raise DataError(
                        f"{file} has shape {shape}: each channel file of a case is one 3D volume."
                    )
            return
        first = volume_channels.first_file(path, channel_suffixes(info))
        if first is not None:
            raise DataError(
                f"{path} is a further channel of its case, and the model reads a case from "
                f"its first channel's file ({first.name}) with the others beside it: give "
                "that one, or the folder."
            )
        shape = nifti.header_shape(path)
        channels = nifti.channel_count(shape)
        if len(shape) not in (3, 4) or channels != info.in_channels:
            words = channel_suffixes(info)
            files = (
                f"; it was trained on a file per channel, and reads a case from <case>_"
                f"{words[0]} with {', '.join(words[1:])} beside it: give that first file"
                if len(words) > 1
                else ""
            )
            raise DataError(
                f"{path} has shape {tuple(shape)}: {channels} channel(s), and the model "
                f"takes {info.in_channels} (one per modality, as in the data it was "
                f"trained on; a 3D volume, or 4D with the channels last){files}."
            )

    def read(self, path: Path, info: DataInfo) -> Prepared:
        # a stack that carries no voxel size is read with the one training gave such files
        stacks = info.normalization.get("stack_spacing")
        # (its channels were checked against the model's from its header: check)
        files = case_files(path, info) or (path,)
        case = nifti.Case(case_name(path, info), path, None, stacks, channels=files[1:])
        volume = nifti.load_volume(case)
        warning = voxel_size_warning(info, {str(path): volume.spacing})
        if warning:
            log.warning(warning)
        norm = info.normalization
        source_shape = volume.image.shape[1:]
        volume.image = nifti.normalize_intensity(volume.image, norm.get("clip"))
        if norm.get("spacing"):  # the grid the network was trained on
            volume = nifti.resample_to_spacing(volume, norm["spacing"])
        return Prepared(torch.from_numpy(volume.image)[None], tuple(source_shape), volume)

    def targets(self, path: Path, out_dir: Path, info: DataInfo | None = None) -> list[Path]:
        """Named as the input; a case of channel files by its case, as nnU-Net names it."""
        return [out_dir / volume_channels.renamed(path, case_name(path, info)).name]

    def probability_target(self, path: Path, out_dir: Path, info: DataInfo | None = None) -> Path:
        return out_dir / f"{case_name(path, info)}_probabilities.nii.gz"

    def write_probabilities(
        self, probs: np.ndarray, prepared: Prepared, info: DataInfo, target: Path
    ) -> Path:
        """Float32 NIfTI (X, Y, Z, classes) in the input's orientation, with its affine."""
        return nifti.save_probability_volume(probs, prepared.source, target)

    def write(
        self, pred: np.ndarray, prepared: Prepared, info: DataInfo, targets: list[Path]
    ) -> list[Path]:
        return [nifti.save_label_volume(pred.astype(np.int16), prepared.source, targets[0])]

    def card_steps(
        self, data: Any, norm: dict[str, Any], onnx: dict[str, Any]
    ) -> tuple[list, list]:
        """For the model card: volumes, reoriented to RAS, clipped, z-scored, resampled to the trained
        spacing; the logits back to the source grid and orientation."""
        pre = [
            {
                "step": "read",
                "with": "nibabel",
                "reorient_to": "RAS (nibabel.as_closest_canonical)",
                "stacks": "TIFF stacks and NumPy arrays (z, y, x): transposed to (x, y, z), "
                "voxel sizes from the file (ImageJ spacing and resolution, an .npz's "
                "spacing) or the data.stack_spacing trained with",
            },
            {
                "step": "layout",
                "to": "NCDHW",
                "channels": "4th NIfTI axis, if any"
                if not norm.get("channel_suffixes")
                else "a case's files <case><separator><suffix> (the separator _, - or "
                "., or the suffix alone in the case's folder), one per channel, in the order "
                f"of these suffixes: {', '.join(norm['channel_suffixes'])}",
            },
            {"step": "clip", "range": norm.get("clip"), "skip_if": "range is null"},
            {"step": "normalize", "how": "z-score per volume and channel (mean 0, std 1)"},
        ]
        post = []
        if norm.get("spacing"):
            pre.append(
                {
                    "step": "resample",
                    "spacing_mm": norm["spacing"],
                    "shape": "per RAS axis: voxels * source voxel size / spacing_mm, "
                    "rounded to the nearest whole number (halves to even), at least 1; "
                    "the source voxel sizes are the column lengths of the reoriented "
                    "(RAS) image's affine",
                    "interpolation": "trilinear, half-voxel centres (align_corners=False)",
                }
            )
            post.append(
                {
                    "step": "resize_logits",
                    "to": "the source volume's shape (in RAS)",
                    "interpolation": "trilinear, half-voxel centres (align_corners=False)",
                }
            )
        post += [
            {"step": "argmax", "axis": 1},
            {
                "step": "write",
                "reorient_from": "RAS back to the source image's orientation",
                "as": "the input's own form (NIfTI with its affine, a TIFF stack, an array)",
            },
        ]
        if data.sliding_window:
            # MONAI SlidingWindowInferer's keyword arguments, and the same spelt out
            onnx["sliding_window"] = {**WINDOW_BLENDING, **data.sliding_window}
            onnx["sliding_window_steps"] = sliding_window_steps(data.sliding_window)
        return pre, post


# by the normalisation kind a model records
FORMATS: dict[str, ScenePhotos | OwnImages | Volumes] = {
    "rgb_mean_std": ScenePhotos(),
    "image_mean_std": OwnImages(),
    "zscore_per_volume": Volumes(),
}
FILE_KINDS = (FORMATS["image_mean_std"], FORMATS["zscore_per_volume"])


def format_of_model(info: DataInfo) -> ScenePhotos | OwnImages | Volumes:
    kind = info.normalization.get("kind")
    if kind not in FORMATS:
        raise DataError(
            f"a model normalising its inputs as {kind!r}, which this version does not know "
            f"(it knows {', '.join(FORMATS)}): predict with the version that trained it."
        )
    return FORMATS[kind]


def read_with_another(path: Path, info: DataInfo, inputs: set[Path]) -> bool:
    """Whether the model of ``info`` reads ``path`` with another of ``inputs`` rather than
    alone: a further channel file of a case (nnU-Net's ``<case>_0001.png``, BraTS's
    ``_t1``) beside its first channel's file, for a model of channel files."""
    model = format_of_model(info)
    if isinstance(model, Volumes):
        return volume_channels.first_file(path, channel_suffixes(info)) in inputs
    if not isinstance(model, OwnImages):
        return False
    return own_images.first_channel(path, channel_files_of(info)) in inputs


def format_of_file(path: Path) -> ImageFiles | Volumes | None:
    """The kind of file ``path`` is by its name (an image or a volume), None for neither."""
    return next((f for f in FILE_KINDS if f.takes(path)), None)


def input_files(folder: Path) -> list[Path]:
    """The files in ``folder`` that some format takes, not its subfolders nor hidden
    files (a copy tool's ``._scan.nii.gz``), in name order; where some names say label
    and others do not (KiTS19's ``segmentation.nii.gz`` beside ``imaging.nii.gz``, ACDC's
    ``_gt`` files), those are labels, not inputs: left out, said."""
    found = {p for kind in FILE_KINDS for p in kind.files_in(folder)}
    files = sorted(p for p in found if p.is_file() and not p.name.startswith("."))
    labels = [p for p in files if says_mask(nifti.case_name(p))]
    if labels and len(labels) < len(files):
        log.info(
            "%s: %d file(s) named as labels (%s) are not predicted", folder, len(labels),
            labels[0].name,
        )  # fmt: skip
        return [p for p in files if p not in labels]
    return files


def input_files_below(folder: Path, leave_out: Path | None = None) -> list[Path]:
    """:func:`input_files` of every folder below ``folder`` (hidden ones left out, each
    once: :func:`~segnet.data.image_pairs.folders_below`), ``leave_out`` and what is below
    it left out (the output folder, where it is inside), in path order. A folder of labels
    beside the inputs (named as labels alone, beside a folder of inputs or in one: a
    dataset's ``masks/`` beside ``images/``, a case's ``segmentations/`` beside its
    ``ct.nii.gz``) is left out with what is below it, warned."""
    skip = leave_out.resolve() if leave_out is not None else None
    kept, labels = [], []
    for d in folders_below(folder):
        real = d.resolve()
        if skip is not None and (real == skip or skip in real.parents):
            log.info("%s: inside the output folder %s, not read as inputs", d, leave_out)
        elif any(d == m or m in d.parents for m in labels) or labels_beside_inputs(d):
            labels.append(d)
        else:
            kept.append(d)
    if labels:
        log.warning(
            "%s: %d folder(s) of labels beside the inputs are not predicted (%s); give one "
            "as inputs= to predict what it holds", folder, len(labels),
            ", ".join(str(d.relative_to(folder)) for d in labels[:3]),
        )  # fmt: skip
    return sorted(f for d in kept for f in input_files(d))


def labels_beside_inputs(d: Path) -> bool:
    """Whether ``d`` is named as a folder of labels alone and lies in a folder of inputs
    or beside a folder of them (``images/`` with ``masks/``, ``images/train/`` with
    ``masks/train/``; ``ct.nii.gz`` with ``segmentations/``)."""
    if not says_labels_alone(d.name):
        return False
    if any(kind.files_in(d.parent) for kind in FILE_KINDS):
        return True
    beside = [s for s in d.parent.iterdir() if s.is_dir() and s != d and not s.name.startswith(".")]
    # the first input found will do: a folder of thousands is not listed whole
    return any(
        format_of_file(f) is not None for s in beside for f in s.rglob("*")
        if not f.name.startswith(".")
    )  # fmt: skip


def decode_whole(path: Path) -> None:
    """``path`` decodes whole as the kind of file it is named as (a truncated file, a text
    file, NaN voxels are refused with a :class:`DataError`)."""
    kinds = [k for k in FILE_KINDS if k.takes(path)] or [FILE_KINDS[0]]  # neither: an image?
    refusals: list[tuple[str, DataError]] = []
    for kind in kinds:  # a name both kinds take (.tif, .npy): either may decode it
        try:
            return kind.decode(path)
        except DataError as err:
            refusals.append((kind.what, err))
    if len(refusals) == 1:
        raise refusals[0][1]
    raise DataError(
        f"{path} reads neither way; " + "; ".join(f"as {what}: {err}" for what, err in refusals)
    )


def targets_of(
    path: Path, out_dir: Path, probabilities: bool = False, info: DataInfo | None = None
) -> list[Path]:
    """The files a prediction of ``path`` by the model of ``info`` may write into
    ``out_dir`` (``probabilities``: its class probabilities' too): for a name both an image
    and a volume may have (``.tif``), both kinds' (which one, the model decides)."""
    kinds = [k for k in FILE_KINDS if k.takes(path)] or [FILE_KINDS[0]]
    targets = [target for kind in kinds for target in kind.targets(path, out_dir, info)]
    if probabilities:
        targets += [kind.probability_target(path, out_dir, info) for kind in kinds]
    return targets


def channel_files_of(info: DataInfo | None) -> bool:
    """Whether the model of ``info`` was trained on nnU-Net's one file per channel."""
    return bool(info is not None and info.normalization.get("channel_files", False))


def channel_suffixes(info: DataInfo | None) -> list[str]:
    """The channels' words of a volume model trained on a file per channel (nnU-Net's
    ``0000``, ``0001``; BraTS's ``flair``, ``t1`` ...); empty for any other model."""
    return list((info.normalization.get("channel_suffixes") or []) if info is not None else [])


def case_files(path: Path, info: DataInfo | None) -> tuple[Path, ...] | None:
    """Every channel file of the case ``path`` is the first channel's file of, for a model
    of channel files; None otherwise."""
    words = channel_suffixes(info)
    return volume_channels.files_of_case(path, words) if words else None


def case_name(path: Path, info: DataInfo | None) -> str:
    """What a volume's prediction is named after: its case, for a model of channel files
    and a case's first channel's file (``BRATS_001_0000.nii.gz``: ``BRATS_001``), else its
    own name."""
    found = volume_channels.case_of(path, channel_suffixes(info))
    return found[0] if found else nifti.case_name(path)


def check_same_kind(path: Path, model: ScenePhotos | OwnImages | Volumes) -> None:
    """Refuse a file of the other kind than the model segments, saying what it takes."""
    if not model.takes(path):
        other = format_of_file(path)
        given = "volumes" if isinstance(other, Volumes) else "images"
        raise DataError(
            f"{path}: this model segments {model.what}; give it one of those, or use a "
            f"model trained on {given}."
        )
