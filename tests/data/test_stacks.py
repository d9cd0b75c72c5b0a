"""TIFF stacks and NumPy arrays read as volumes: the same cases as NIfTI files and as
stacks are the same volumes, train from the command line's settings alike, and score the
same Dice from one checkpoint; predictions are written in the input's own form."""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest
from PIL import Image
from PIL.TiffImagePlugin import TiffImageFile

from segnet.data import nifti, volume_files
from segnet.data.volume_formats.stacks import read_tiff
from tests.conftest import compose
from tests.helpers import nifti_dataset

SPACING_ZYX = (2.0, 0.5, 0.25)


def save_stack(data_xyz: np.ndarray, path, spacing_zyx=None) -> None:
    """A volume in (x, y, z) order saved as a file holds it: pages (z) of rows (y) of
    columns (x); the voxel size in the file where ``spacing_zyx`` is given."""
    pages = np.ascontiguousarray(data_xyz.transpose(2, 1, 0))
    suffix = path.name.split(".", 1)[1]
    if suffix == "npy":
        np.save(path, pages)
    elif suffix == "npz":
        extra = {"spacing": np.array(spacing_zyx)} if spacing_zyx else {}
        np.savez(path, image=pages, **extra)
    else:
        frames = [Image.fromarray(p) for p in pages]
        info = {}
        if spacing_zyx:
            z, y, x = spacing_zyx
            info = {"x_resolution": 1 / x, "y_resolution": 1 / y, "resolution_unit": 1,
                    "tiffinfo": {270: f"ImageJ=1.11a\nimages={len(pages)}\nspacing={z}\n"}}  # fmt: skip
        frames[0].save(path, format="TIFF", save_all=True, append_images=frames[1:], **info)


def stack_copy(root, suffix: str, where, spacing_zyx=None):
    """The cases of a NIfTI dataset (identity affines) as stacks in images/ and labels/ of
    a new folder in ``where``."""
    copy = where / f"{root.name}_{suffix.strip('.')}"
    for src, dst in (("imagesTr", "images"), ("labelsTr", "labels")):
        (copy / dst).mkdir(parents=True)
        for path in sorted((root / src).glob("*.nii.gz")):
            data = np.asarray(nib.load(str(path)).dataobj)
            save_stack(data, copy / dst / (path.name[: -len(".nii.gz")] + suffix), spacing_zyx)
    return copy


@pytest.fixture(scope="module")
def volumes(tmp_path_factory):
    return nifti_dataset(tmp_path_factory.mktemp("stacks") / "data", "msd", n=8, shape=(19, 23, 17))


@pytest.mark.parametrize("suffix", [".tif", ".tiff", ".npy", ".npz"])
def test_a_stack_is_the_volume_its_nifti_twin_is(volumes, suffix, tmp_path):
    copy = stack_copy(volumes, suffix, tmp_path)
    (case,) = [c for c in nifti.find_cases(copy) if c.name == "case_003"]
    assert case.image.name == f"case_003{suffix}"
    as_stack = nifti.load_volume(case, num_classes=3)
    as_nifti = nifti.load_volume(
        nifti.Case("case_003", volumes / "imagesTr" / "case_003.nii.gz",
                   volumes / "labelsTr" / "case_003.nii.gz"), num_classes=3)  # fmt: skip
    np.testing.assert_array_equal(as_stack.image, as_nifti.image)
    np.testing.assert_array_equal(as_stack.label, as_nifti.label)
    assert as_stack.spacing == as_nifti.spacing == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("suffix", [".tif", ".npz"])
def test_a_voxel_size_comes_from_the_file_else_from_the_setting(volumes, suffix, tmp_path):
    carried = stack_copy(volumes, suffix, tmp_path, SPACING_ZYX)
    case = nifti.find_cases(carried)[0]
    assert nifti.load_volume(case).spacing == (0.25, 0.5, 2.0)  # x, y, z
    case.spacing = (9.0, 9.0, 9.0)  # a file's own voxel size wins over the setting
    assert nifti.load_volume(case).spacing == (0.25, 0.5, 2.0)
    bare = nifti.find_cases(stack_copy(volumes, ".npy", tmp_path))[0]
    bare.spacing = SPACING_ZYX
    assert nifti.load_volume(bare).spacing == (0.25, 0.5, 2.0)
    assert nifti.ras_spacing(bare.image, SPACING_ZYX) == (0.25, 0.5, 2.0)


@pytest.mark.parametrize("suffix", [".tif", ".npy", ".npz"])
@pytest.mark.parametrize("carried", [None, SPACING_ZYX], ids=["bare", "carried"])
def test_a_header_says_what_the_read_gives_without_the_voxels(volumes, suffix, carried, tmp_path,
                                                              monkeypatch):  # fmt: skip
    """The checks before training read every training case's header: for a stack that is
    its page count and tags, for an array its own header, never its voxels."""
    copy = stack_copy(volumes, suffix, tmp_path, carried if suffix != ".npy" else None)
    path = nifti.find_cases(copy)[0].image
    image = volume_files.read(path, (3.0, 2.0, 1.0))
    read_array = np.lib.format.read_array

    def no_voxels(*args, **kwargs):  # an .npz's spacing is read, its volume not
        array = read_array(*args, **kwargs)
        return array if array.size <= 3 else pytest.fail("voxels read")

    with monkeypatch.context() as m:  # decoding a page or loading an array would fail here
        m.setattr(TiffImageFile, "load", lambda *_: pytest.fail("a page was decoded"))
        m.setattr(np.lib.format, "read_array", no_voxels)
        header = volume_files.header(path, (3.0, 2.0, 1.0))
    assert header.shape == image.shape == (19, 23, 17)
    np.testing.assert_array_equal(header.affine, image.affine)


def test_what_a_stack_cannot_be_is_refused_naming_the_file(tmp_path):
    flat = tmp_path / "flat.npy"
    np.save(flat, np.zeros((4, 5), np.float32))
    with pytest.raises(nifti.NiftiDataError, match=r"flat\.npy.*\(z, y, x\)"):
        nifti.load_volume(nifti.Case("flat", flat, None))
    colour = tmp_path / "colour.tif"
    frames = [Image.new("RGB", (5, 4)) for _ in range(3)]
    frames[0].save(colour, format="TIFF", save_all=True, append_images=frames[1:])
    with pytest.raises(ValueError, match="one grey channel"):
        read_tiff(colour, None)
    with pytest.raises(ValueError, match="data.stack_spacing"):
        from segnet.data.nifti_datamodule import check_stack_spacing

        check_stack_spacing([1.0, 0.0, 1.0])


def test_stacks_train_and_score_the_dice_of_their_nifti_twins(volumes, tmp_path):
    """One checkpoint, trained on TIFF stacks as the command line gives them, scores the
    same Dice on the NIfTI originals as on the stacks; predictions are TIFF stacks that
    read back as the label maps scored."""
    from segnet.commands.evaluate import evaluate
    from segnet.commands.train import train

    stacks = stack_copy(volumes, ".tif", tmp_path)
    quick = ["experiment=hippocampus_unet3d", "data.patch_size=[16,16,16]", "data.batch_size=2",
             "data.num_workers=0", "model.net.features=[4,8,8]", "trainer.max_epochs=1",
             "trainer.accelerator=cpu", "trainer.check_val_every_n_epoch=1",
             "data.class_names=[background,one,two]"]  # fmt: skip
    train(compose("train", [*quick, f"data.root={stacks}"], tmp_path / "run"))
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    scored = {}
    for name, root in (("nifti", volumes), ("stacks", stacks)):
        args = [f"ckpt_path={best}", f"data.root={root}", "data.split=all", "data.num_workers=0"]
        if name == "stacks":
            args.append("save_predictions=true")
        scored[name], _ = evaluate(compose("evaluate", args, tmp_path / name))
    assert scored["stacks"]["test/dice"] == pytest.approx(scored["nifti"]["test/dice"], abs=1e-6)
    predictions = sorted((tmp_path / "stacks" / "predictions").glob("*.tif"))
    assert len(predictions) == 8
    written = nifti.load_volume(nifti.Case("p", predictions[0], None)).image[0]
    assert written.shape == (19, 23, 17) and set(np.unique(written)) <= {0, 1, 2}
    assert json.loads((tmp_path / "stacks" / "metrics.json").read_text())
    # predict, as segnet-predict does: a TIFF in, the same label map out as a TIFF
    from segnet.serving.predict import Predictor

    case = stacks / "images" / predictions[0].name
    (out,) = Predictor(best).predict_file(case, tmp_path / "predicted")
    assert out.name == predictions[0].name
    again = nifti.load_volume(nifti.Case("q", out, None)).image[0]
    np.testing.assert_array_equal(again, written)


def test_prediction_reads_a_bare_array_with_the_voxel_size_training_gave(volumes, tmp_path):
    """An array that carries no voxel size is read at predict time with the
    ``data.stack_spacing`` the model was trained with (its model card keeps it), so that
    a model that resamples sees the grid training saw."""
    from segnet.data.formats import Volumes
    from segnet.data.info import DataInfo, zscore_normalization
    from tests.helpers import data_info

    case = nifti.find_cases(stack_copy(volumes, ".npy", tmp_path))[0].image
    described = data_info(spatial_dims=3, in_channels=1)  # as a checkpoint keeps it
    info = DataInfo.from_dict(described)
    trained = DataInfo.from_dict(
        {**described, "normalization": zscore_normalization(None, None, SPACING_ZYX)}
    )
    assert Volumes().read(case, trained).source.spacing == (0.25, 0.5, 2.0)
    assert Volumes().read(case, info).source.spacing == (1.0, 1.0, 1.0)
