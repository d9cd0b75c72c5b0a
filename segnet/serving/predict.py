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
from typing import Any

import numpy as np
import torch
from PIL import Image

from segnet.data import formats
from segnet.serving.ensemble import average_probabilities, check_distinct, check_same_data
from segnet.serving.inference import check_mirroring, label_map
from segnet.serving.inference import probabilities as output_probabilities
from segnet.serving.loading import load_model, model_files
from segnet.serving.postprocessing import Postprocessing

log = logging.getLogger(__name__)


def agreed_postprocessing(models: list, paths: list) -> Postprocessing | None:
    """The post-processing the models record (chosen on validation by their training),
    where they all record the same; None, with a warning, where they differ."""
    plans = {Postprocessing.from_dict(m.module_args.get("postprocessing")) for m in models}
    if len(plans) == 1:
        return plans.pop()
    log.warning(
        "the models record different post-processing (%s); predicting without any",
        ", ".join(map(str, paths)),
    )
    return None


def expand_inputs(items: list[str], out: Path | None = None) -> list[tuple[Path, Path]]:
    """The files to predict, each with the subfolder of the output folder its masks go
    to: each file as given, and each folder's images (PNG, JPEG) and NIfTI volumes, not
    its subfolders nor hidden files (a copy tool's ``._scan.nii.gz``), into the output
    folder itself. A folder that holds no inputs but subfolders that do (a folder per
    city or patient, as training reads them) stands for theirs, each subfolder's masks
    in the same subfolder of the output, ``out`` itself left out (an earlier run's masks
    are no inputs). Refused, before any model loads: a path that does not exist, a folder
    with none."""
    files: list[tuple[Path, Path]] = []
    missing = []
    for item in map(Path, items):
        if item.is_dir():
            if out is not None and out.resolve() == item.resolve():
                raise SystemExit(
                    f"--out {out} is the folder of inputs {item}: give the masks a folder of "
                    "their own."
                )
            found = formats.input_files(item) or formats.input_files_below(item, out)
            if not found:
                raise SystemExit(
                    f"{item}: a folder with no images (.png, .jpg) or NIfTI volumes (.nii, "
                    ".nii.gz) in it or below it; give the folder that holds them, or the files."
                )
            files += [(f, f.parent.relative_to(item)) for f in found]
        elif item.is_file():
            files.append((item, Path(".")))
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
        postprocess: bool = True,
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
        self.postprocessing = agreed_postprocessing(self.models, paths) if postprocess else None
        self.device = torch.device(device)
        self.info = self.model.info
        self.palette = self.info.palette

    @torch.no_grad()
    def logits(self, x: torch.Tensor, size) -> torch.Tensor:
        """The model's logits at ``size``; an ensemble's averaged probabilities, as
        log-probabilities."""
        if len(self.models) == 1:
            return self.model.logits(x, size)
        return average_probabilities(
            [m.logits(x, size) for m in self.models], self.model.inference.sigmoid
        )

    @torch.no_grad()
    def predict_image(self, rgb: np.ndarray | Image.Image) -> np.ndarray:
        """(H, W, 3) uint8 RGB (or a PIL image) -> (H, W) uint8 class indices at the
        image's own size. Other arrays are refused, not rescaled by guess: the network
        takes 8-bit values, and a float or wider array would be scaled as another range."""
        if isinstance(rgb, Image.Image):
            rgb = formats.ScenePhotos.rgb(rgb, Path("the image given"))
        if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3:
            shape = getattr(rgb, "shape", type(rgb).__name__)
            raise ValueError(f"expected an (H, W, 3) RGB array or a PIL image, got {shape}.")
        if rgb.dtype != np.uint8:
            raise ValueError(
                f"expected 8-bit RGB values (uint8, 0-255), got a {rgb.dtype} array: convert it "
                "first, e.g. np.clip(a, 0, 255).astype(np.uint8) for values in 0-255, or "
                "(a * 255).round().astype(np.uint8) for 0-1."
            )
        return self.predict_prepared(formats.ScenePhotos.prepare(rgb, self.info)).astype(np.uint8)

    @torch.no_grad()
    def predict_prepared(self, prepared: formats.Prepared) -> np.ndarray:
        """Class indices at the input's own size, for an input its format has read."""
        return self.label_map(self.logits(prepared.x.to(self.device), prepared.size))

    def label_map(self, logits: torch.Tensor) -> np.ndarray:
        """The label map of one input's logits, post-processed as the model records."""
        pred = label_map(logits, self.info)
        if self.postprocessing:
            pred = self.postprocessing.apply(pred)
        return pred[0].cpu().numpy()

    def predict_volume(self, path: str | Path) -> tuple[np.ndarray, Any]:
        """A NIfTI file -> (its RAS label map, int16, and the volume it came from)."""
        prepared = self.check_kind(Path(path)).read(Path(path), self.info)
        return self.predict_prepared(prepared).astype(np.int16), prepared.source

    @torch.no_grad()
    def predict_file(
        self, path: str | Path, out_dir: str | Path, probabilities: bool = False
    ) -> list[Path]:
        """Write the mask(s) of one input file into ``out_dir`` (``probabilities``: and its
        class probabilities, the softmax before any post-processing); never overwrites."""
        path, out_dir = Path(path), Path(out_dir)
        kind = self.check_kind(path)
        targets = kind.targets(path, out_dir, self.info)
        extra = [kind.probability_target(path, out_dir, self.info)] if probabilities else []
        existing = [t for t in targets + extra if t.exists()]
        if existing:  # checked before any work
            raise FileExistsError(f"{existing[0]} exists; predictions are never overwritten.")
        out_dir.mkdir(parents=True, exist_ok=True)
        prepared = kind.read(path, self.info)
        logits = self.logits(prepared.x.to(self.device), prepared.size)
        written = kind.write(self.label_map(logits), prepared, self.info, targets)
        if probabilities:
            probs = output_probabilities(logits, bool(self.info.regions))[0].cpu().numpy()
            written.append(kind.write_probabilities(probs, prepared, self.info, extra[0]))
        return written

    def read_with_another(self, path: Path, inputs: set[Path]) -> bool:
        """Whether ``path`` is read with another of ``inputs`` rather than predicted alone:
        a further channel file of an nnU-Net case, for a model of channel files."""
        return formats.read_with_another(path, self.info, inputs)

    def check_kind(self, path: Path) -> formats.ScenePhotos | formats.OwnImages | formats.Volumes:
        """The format this model reads ``path`` with; refused where the file is of the
        other kind, or does not decode as the model takes it (its header alone, for a
        volume), so that every input is checked before any is predicted."""
        kind = formats.format_of_model(self.info)
        formats.check_same_kind(path, kind)
        kind.check(path, self.info)
        return kind

    def targets(self, path: Path, out_dir: Path, probabilities: bool = False) -> list[Path]:
        """The files ``predict_file`` writes for ``path``."""
        return formats.targets_of(path, out_dir, probabilities, self.info)


if __name__ == "__main__":  # the command is its own module, which may use Hydra
    raise SystemExit("the predict command is: python -m segnet.predict (or segnet-predict)")
