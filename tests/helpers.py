"""Small generated datasets in the real layouts, for tests."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image

# Small versions of every network (variant: registry name, optionally -<upsampler>), shared by
# the network tests and the export tests.
SMALL_NETS = {
    "segnet": dict(features=(4, 8, 8), convs=(2, 1, 2)),
    "segnet_basic": dict(features=(4, 4, 4, 4)),
    "unet-transpose": dict(features=(4, 8, 8), upsample="transpose"),
    "unet-unpool": dict(features=(4, 8, 8), upsample="unpool"),
    "unet-stages": dict(features=(4, 8, 8), convs=(1, 2, 3)),  # one count per stage
}


def small_net(variant: str, dims: int, in_ch: int = 2, out_ch: int = 3):
    from segnet.models import create_model

    name = variant.split("-")[0]
    kwargs = dict(SMALL_NETS[variant])
    if name == "segnet_basic":
        kwargs["kernel_size"] = 3  # 7x7x7 kernels make the 3D cases needlessly slow
    return create_model(name, spatial_dims=dims, in_channels=in_ch, out_channels=out_ch, **kwargs)


def camvid_like(
    root: Path,
    counts: dict[str, int] | None = None,
    size: tuple[int, int] = (45, 61),
    list_files: bool = True,
    seed: int = 0,
) -> Path:
    """A CamVid-layout folder whose images are learnable from their labels: each class has
    its own colour plus noise, on blocky label maps with all 11 classes and some void."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(0, 256, size=(12, 3))
    h, w = size
    for split, n in (counts or {"train": 6, "val": 3, "test": 3}).items():
        (root / split).mkdir(parents=True, exist_ok=True)
        (root / f"{split}annot").mkdir(exist_ok=True)
        lines = []
        for i in range(n):
            blocks = rng.integers(0, 12, size=(h // 8 + 1, w // 8 + 1))
            blocks.flat[:11] = np.arange(11)  # every class present
            label = np.kron(blocks, np.ones((8, 8), dtype=np.int64))[:h, :w].astype(np.uint8)
            image = colours[label] + rng.integers(-20, 21, size=(h, w, 3))
            name = f"{split}_{i:03d}.png"
            Image.fromarray(image.clip(0, 255).astype(np.uint8)).save(root / split / name)
            Image.fromarray(label).save(root / f"{split}annot" / name)
            # absolute paths from another machine, as in the real list files
            lines.append(f"/SegNet/CamVid/{split}/{name} /SegNet/CamVid/{split}annot/{name}")
        if list_files:
            (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return root


# A non-identity affine: axes permuted and flipped (LPI-like), anisotropic spacing.
ODD_AFFINE = np.array(
    [[0.0, 0.0, -2.5, 40.0], [-0.8, 0.0, 0.0, 12.0], [0.0, 1.2, 0.0, -7.0], [0, 0, 0, 1]]
)


def nifti_case(shape=(19, 23, 17), channels=1, seed=0, affine=None):
    """An image whose intensity reveals its label: two blobs (classes 1, 2) on background."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"), -1)
    label = np.zeros(shape, np.uint8)
    for cls, centre in ((1, (0.35, 0.4, 0.5)), (2, (0.65, 0.6, 0.5))):
        c = np.array(centre) * np.array(shape) + rng.uniform(-1, 1, 3)
        label[(((grid - c) / (np.array(shape) * 0.18)) ** 2).sum(-1) < 1] = cls
    image = label * 100.0 + rng.normal(0, 20, shape) + 300
    if channels > 1:
        image = np.stack([image * (k + 1) for k in range(channels)], -1)
    return image.astype(np.float32), label, (affine if affine is not None else np.eye(4))


def nifti_dataset(
    root: Path, layout: str = "msd", n: int = 8, shape=(19, 23, 17), channels: int = 1, affine=None
) -> Path:
    """n cases in the Decathlon layout ("msd"), plain folders ("folders") or a CSV ("csv")."""
    import json

    import nibabel as nib

    images = root / ("images" if layout == "folders" else "imagesTr")
    labels = root / ("labels" if layout == "folders" else "labelsTr")
    images.mkdir(parents=True, exist_ok=True)
    labels.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        image, label, aff = nifti_case(shape, channels, seed=i, affine=affine)
        name = f"case_{i:03d}.nii.gz"
        nib.save(nib.Nifti1Image(image, aff), str(images / name))
        nib.save(nib.Nifti1Image(label, aff), str(labels / name))
        rows.append((f"{images.name}/{name}", f"{labels.name}/{name}"))
    if layout == "msd":
        (root / "dataset.json").write_text(
            json.dumps(
                {
                    "labels": {"0": "background", "1": "one", "2": "two"},
                    "modality": {str(k): f"MR{k}" for k in range(channels)},
                    "training": [{"image": f"./{a}", "label": f"./{b}"} for a, b in rows],
                }
            )
        )
    elif layout == "csv":
        (root / "cases.csv").write_text("image,label\n" + "".join(f"{a},{b}\n" for a, b in rows))
    return root


def left_right_dataset(root: Path, n: int = 24, size: int = 24) -> Path:
    """Decathlon-layout cases of two identical balls, class 1 always on the left (low RAS
    x), class 2 on the right: only their side tells them apart."""
    import json

    import nibabel as nib

    rng = np.random.default_rng(0)
    (root / "imagesTr").mkdir(parents=True, exist_ok=True)
    (root / "labelsTr").mkdir(exist_ok=True)
    grid = np.stack(np.meshgrid(*[np.arange(size)] * 3, indexing="ij"), -1)
    names = []
    for i in range(n):
        label = np.zeros((size,) * 3, np.uint8)
        for cls, x in ((1, 0.27), (2, 0.73)):
            centre = np.array([x * size, *rng.uniform(0.3, 0.7, 2) * size])
            label[(((grid - centre) / (size / 6)) ** 2).sum(-1) < 1] = cls
        image = (label > 0) * 100.0 + rng.normal(0, 20, label.shape) + 300
        names.append(f"lr_{i:03d}.nii.gz")
        nib.save(
            nib.Nifti1Image(image.astype(np.float32), np.eye(4)), root / "imagesTr" / names[-1]
        )
        nib.save(nib.Nifti1Image(label, np.eye(4)), root / "labelsTr" / names[-1])
    cases = [{"image": f"./imagesTr/{m}", "label": f"./labelsTr/{m}"} for m in names]
    labels = {"0": "background", "1": "left", "2": "right"}
    (root / "dataset.json").write_text(json.dumps({"labels": labels, "training": cases}))
    return root


def spaced_dataset(root, spacings, shape=(19, 23, 17)):
    """Decathlon-layout cases of the same anatomy sampled at different voxel sizes: case i
    has spacing ``spacings[i]`` (mm per axis) and a shape that keeps the physical extent."""
    import json

    import nibabel as nib

    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    entries = []
    for i, spacing in enumerate(spacings):
        size = tuple(round(n / s) for n, s in zip(shape, spacing, strict=True))
        image, label, _ = nifti_case(size, seed=i)
        affine = np.diag([*spacing, 1.0])
        name = f"case_{i:03d}.nii.gz"
        nib.save(nib.Nifti1Image(image, affine), str(root / "imagesTr" / name))
        nib.save(nib.Nifti1Image(label, affine), str(root / "labelsTr" / name))
        entries.append({"image": f"./imagesTr/{name}", "label": f"./labelsTr/{name}"})
    labels = {"0": "background", "1": "one", "2": "two"}
    (root / "dataset.json").write_text(json.dumps({"labels": labels, "training": entries}))
    return root


class StopAfterEpochs:
    """A callback that stops training after ``epochs`` epochs, as an interruption at an
    epoch boundary would (see :func:`stopping_after`)."""

    def __new__(cls, epochs: int):
        import lightning as L

        class _Stop(L.Callback):
            def on_train_epoch_end(self, trainer, pl_module):
                if trainer.current_epoch + 1 >= epochs:
                    trainer.should_stop = True

        return _Stop()


@contextmanager
def stopping_after(epochs: int):
    """Training started inside stops after ``epochs`` epochs, as an interruption at an
    epoch boundary would: the callback is added to the trainer, not to the run's config,
    which a resume compares with its own."""
    from unittest import mock

    import segnet.commands.train as command

    original = command.build_trainer

    def build(cfg, *args, extra_callbacks=(), **kwargs):
        stop = StopAfterEpochs(epochs)
        return original(cfg, *args, extra_callbacks=(*extra_callbacks, stop), **kwargs)

    with mock.patch.object(command, "build_trainer", build):
        yield


SIGTERM_RECORD: dict = {}


class SigtermDuringValidation:
    """A callback (``+callbacks.halt._target_=tests.helpers.SigtermDuringValidation``) that
    records the training weights and the EMA's (in ``SIGTERM_RECORD``) after each training
    step of ``epoch``, then
    raises Lightning's SIGTERM flag after the first batch of that epoch's validation, as a
    cluster pre-empting the job mid-validation would."""

    def __new__(cls, epoch: int = 0):
        import lightning as L
        from lightning.pytorch.callbacks import WeightAveraging

        class _Halt(L.Callback):
            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                if trainer.current_epoch == epoch:
                    ema = next(c for c in trainer.callbacks if isinstance(c, WeightAveraging))
                    SIGTERM_RECORD["training"] = {
                        k: v.clone() for k, v in pl_module.net.state_dict().items()
                    }
                    SIGTERM_RECORD["average"] = {
                        k: v.clone() for k, v in ema._average_model.module.net.state_dict().items()
                    }

            def on_validation_batch_end(self, trainer, pl_module, *args, **kwargs):
                if not trainer.sanity_checking and trainer.current_epoch == epoch:
                    trainer._signal_connector.received_sigterm = True

        return _Halt()


def data_info(num_classes: int = 3, spatial_dims: int = 2, in_channels: int | None = None):
    """A dataset description (``DataModule.info()``) for modules built without data."""
    from segnet.data.info import DataInfo, rgb_normalization, zscore_normalization

    two_d = spatial_dims == 2
    return DataInfo(
        spatial_dims=spatial_dims,
        in_channels=in_channels or (3 if two_d else 1),
        class_names=[f"class{i}" for i in range(num_classes)],
        palette=[[10 * i, 0, 0] for i in range(num_classes)],
        ignore_index=None,
        normalization=rgb_normalization([0.5] * 3, [0.25] * 3)
        if two_d
        else zscore_normalization(None),
        input_size=None,
        sliding_window=None,
        monitor="val/miou" if two_d else "val/dice",
        per_case=not two_d,
    ).to_dict()
