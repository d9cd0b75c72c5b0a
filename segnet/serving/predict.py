"""Masks from images or volumes with a trained or exported model.

API::

    from segnet.serving.predict import Predictor
    predictor = Predictor("export/model.onnx")        # or .safetensors, .pt2, .ckpt
    mask = predictor.predict_image(rgb_uint8_array)     # (H, W) class indices
    predictor.predict_file("scan.nii.gz", "out/")       # writes out/scan.nii.gz

Predicting imports neither Lightning, Hydra nor torchmetrics (``segnet.serving.loading``).

The command line is ``segnet.commands.predict`` (``python -m segnet.predict``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import tv_tensors

from segnet.data import images as own_images
from segnet.data import nifti
from segnet.data.camvid import check_image, rgb_of
from segnet.data.info import voxel_size_warning
from segnet.data.palette import colorize
from segnet.data.transforms import normalize, resize_images
from segnet.files import write_image
from segnet.serving.ensemble import average_probabilities, check_distinct, check_same_data
from segnet.serving.inference import check_mirroring
from segnet.serving.loading import load_model, model_files

IMAGE_SUFFIXES = own_images.IMAGE_SUFFIXES

log = logging.getLogger(__name__)


def expand_inputs(items: list[str]) -> list[Path]:
    """The files to predict: each file as given, and each folder's images (PNG, JPEG) and
    NIfTI volumes, not its subfolders nor hidden files (a copy tool's ``._scan.nii.gz``).
    Refused, before any model loads: a path that does not exist, a folder with none."""
    files, missing = [], []
    for item in map(Path, items):
        if item.is_dir():
            # NIfTI names as the loader finds them; image suffixes in any case (.JPG)
            images = (p for p in item.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            found = sorted(
                p
                for p in [*nifti.nifti_files(item), *images]
                if p.is_file() and not p.name.startswith(".")
            )
            if not found:
                raise SystemExit(
                    f"{item}: a folder with no images (.png, .jpg) or NIfTI volumes (.nii, "
                    ".nii.gz) in it; give the folder that holds them, or the files."
                )
            files += found
        elif item.is_file():
            files.append(item)
        else:
            missing.append(item)
    if missing:
        raise SystemExit(f"{missing[0]}: no such file or folder ({len(missing)} missing).")
    return files


class Predictor:
    """``model_path``: one model, or several (an ensemble, e.g. one per cross-validation
    fold; or an exported ensemble's folder), each applied as it was validated and their
    softmax probabilities averaged; they must share the classes and the preprocessing.
    ``tta``: mirroring test-time augmentation; None predicts as the (first) model's recipe
    tested (``model.tta``, kept in the checkpoint and the model card)."""

    def __init__(
        self,
        model_path: str | Path | Sequence[str | Path],
        device: str = "cpu",
        tta: bool | None = None,
    ):
        given = [model_path] if isinstance(model_path, str | Path) else list(model_path)
        # an export folder: its model, or each member of an exported ensemble
        paths = [file for item in given for file in model_files(item)]
        if not paths:
            raise ValueError("no model given: give one, or several for an ensemble.")
        self.models = [load_model(p).to(device) for p in paths]
        check_distinct([m.net for m in self.models], [Path(p) for p in paths])
        check_same_data([m.info for m in self.models], [Path(p) for p in paths])
        tta = self.models[0].inference.tta if tta is None else tta
        for model, path in zip(self.models, paths, strict=True):
            check_mirroring(tta, model.inference.mirror_axes, path)
            model.inference.tta = tta
        self.model = self.models[0]
        self.device = torch.device(device)
        self.info = self.model.info
        self.palette = self.info.palette

    @torch.no_grad()
    def logits(self, x: torch.Tensor, size) -> torch.Tensor:
        """The model's logits at ``size``; an ensemble's averaged probabilities, as
        log-probabilities."""
        if len(self.models) == 1:
            return self.model.logits(x, size)
        return average_probabilities([m.logits(x, size) for m in self.models])

    @torch.no_grad()
    def predict_image(self, rgb: np.ndarray | Image.Image) -> np.ndarray:
        """(H, W, 3) uint8 RGB (or a PIL image) -> (H, W) uint8 class indices at the
        image's own size. Other arrays are refused, not rescaled by guess: the network
        takes 8-bit values, and a float or wider array would be scaled as another range."""
        if isinstance(rgb, Image.Image):
            rgb = rgb_of(rgb, Path("the image given"))
        if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3:
            shape = getattr(rgb, "shape", type(rgb).__name__)
            raise ValueError(f"expected an (H, W, 3) RGB array or a PIL image, got {shape}.")
        if rgb.dtype != np.uint8:
            raise ValueError(
                f"expected 8-bit RGB values (uint8, 0-255), got a {rgb.dtype} array: convert it "
                "first, e.g. np.clip(a, 0, 255).astype(np.uint8) for values in 0-255, or "
                "(a * 255).round().astype(np.uint8) for 0-1."
            )
        norm = self.info.normalization
        x = torch.from_numpy(np.array(rgb)).permute(2, 0, 1)[None]  # a writable copy
        if self.info.input_size:
            x = resize_images(x, self.info.input_size)
        # the transform the DataModule evaluates with, from the spec the model card gives
        x = normalize(norm["mean"], norm["std"])(tv_tensors.Image(x)).to(self.device)
        pred = self.logits(x, rgb.shape[:2]).argmax(1)[0]
        return pred.cpu().numpy().astype(np.uint8)

    @torch.no_grad()
    def predict_own_image(self, path: str | Path) -> np.ndarray:
        """An image file -> (H, W) class indices at its own size, for a model trained on
        one's own images (``data=images``): decoded to the colour mode it was trained on,
        normalised with its training set's mean and std, windows over a large image."""
        norm = self.info.normalization
        raw = own_images.read_image(Path(path), norm["color_mode"])
        x = (raw - np.asarray(norm["mean"], np.float32)) / np.asarray(norm["std"], np.float32)
        x = torch.from_numpy(x.transpose(2, 0, 1).copy())[None].to(self.device)
        pred = self.logits(x, raw.shape[:2]).argmax(1)[0]
        dtype = np.uint8 if self.info.num_classes <= 256 else np.uint16
        return pred.cpu().numpy().astype(dtype)

    @torch.no_grad()
    def predict_volume(self, path: str | Path) -> tuple[np.ndarray, nifti.Volume]:
        """A NIfTI file -> (RAS label map, the volume it came from)."""
        volume = nifti.load_volume(nifti.Case(nifti.case_name(Path(path)), Path(path), None))
        channels = self.info.in_channels
        if volume.image.shape[0] != channels:
            raise ValueError(
                f"{path} has {volume.image.shape[0]} channel(s); the model takes {channels} "
                "(one per modality, as in the data it was trained on)."
            )
        warning = voxel_size_warning(self.info, {str(path): volume.spacing})
        if warning:
            log.warning(warning)
        norm = self.info.normalization
        source_shape = volume.image.shape[1:]
        volume.image = nifti.normalize_intensity(volume.image, norm.get("clip"))
        if norm.get("spacing"):  # the grid the network was trained on
            volume = nifti.resample_to_spacing(volume, norm["spacing"])
        x = torch.from_numpy(volume.image)[None].to(self.device)
        pred = self.logits(x, source_shape).argmax(1)[0]
        return pred.cpu().numpy().astype(np.int16), volume

    def predict_file(self, path: str | Path, out_dir: str | Path) -> list[Path]:
        """Write the mask(s) of one input file into ``out_dir``; never overwrites."""
        from PIL import ImageOps

        path, out_dir = Path(path), Path(out_dir)
        is_volume = self.check_kind(path)
        targets = self.targets(path, out_dir)
        existing = [t for t in targets if t.exists()]
        if existing:  # checked before any work
            raise FileExistsError(f"{existing[0]} exists; predictions are never overwritten.")
        out_dir.mkdir(parents=True, exist_ok=True)
        if is_volume:
            pred, volume = self.predict_volume(path)
            return [nifti.save_label_volume(pred, volume, targets[0])]
        if self.info.normalization["kind"] == "image_mean_std":
            mask = self.predict_own_image(path)
        else:
            with Image.open(path) as im:
                # upright as viewers show it (a phone photo's EXIF orientation), so that the
                # mask lies over the picture the user sees
                mask = self.predict_image(rgb_of(ImageOps.exif_transpose(im), path))
        for target, array in zip(targets, (mask, colorize(mask, self.palette)), strict=True):
            write_image(target, array)
        return targets

    def check_kind(self, path: Path) -> bool:
        """Whether ``path`` is a volume; refused where the model segments the other kind."""
        is_volume = path.name.endswith(nifti.NIFTI_SUFFIXES)
        dims = self.info.spatial_dims
        if is_volume != (dims == 3):
            kind = "NIfTI volumes" if dims == 3 else "2D images (PNG, JPEG)"
            raise ValueError(
                f"{path}: this model segments {kind} ({dims}D); give it one of those, or use a "
                f"model trained on {'volumes' if is_volume else 'images'}."
            )
        if not is_volume:
            if self.info.normalization["kind"] == "image_mean_std":
                # decodes to the colour mode trained on (16-bit grey cannot become colour)
                own_images.read_image(path, self.info.normalization["color_mode"])
            else:
                check_image(path)  # 8-bit colour or grey, as the model was trained on
        if is_volume:  # the header alone: every input is checked before any is predicted
            try:
                shape = nifti.header_shape(path)
            except nifti.NiftiDataError as err:
                raise ValueError(str(err)) from None
            channels = nifti.channel_count(shape)
            if len(shape) not in (3, 4) or channels != self.info.in_channels:
                raise ValueError(
                    f"{path} has shape {tuple(shape)}: {channels} channel(s), and the model "
                    f"takes {self.info.in_channels} (one per modality, as in the data it was "
                    "trained on; a 3D volume, or 4D with the channels last)."
                )
        return is_volume

    @staticmethod
    def targets(path: Path, out_dir: Path) -> list[Path]:
        """The files ``predict_file`` writes for ``path``."""
        if path.name.endswith(nifti.NIFTI_SUFFIXES):
            return [out_dir / path.name]
        return [out_dir / f"{path.stem}.png", out_dir / f"{path.stem}_color.png"]


if __name__ == "__main__":  # the command is its own module, which may use Hydra
    raise SystemExit("the predict command is: python -m segnet.predict (or segnet-predict)")
