"""Volumes in ITK's formats (MetaImage ``.mha``/``.mhd``, NRRD ``.nrrd``) are the volumes
their NIfTI twins are: ITK's LPS geometry turned into NIfTI's RAS, voxels in NIfTI's
order, label maps written back in the case's own form and geometry."""

from __future__ import annotations

import numpy as np
import pytest

from segnet.data import nifti, volume_files

sitk = pytest.importorskip("SimpleITK")

ITK_SUFFIXES = (".mha", ".mhd", ".nrrd")


def oblique(voxels_zyx: np.ndarray):
    """An ITK image of ``voxels_zyx`` turned 20 degrees about z, with its own voxel size
    and origin: a geometry a mistake in the LPS/RAS turn or the axis order would show."""
    image = sitk.GetImageFromArray(voxels_zyx)
    image.SetSpacing((0.8, 1.1, 2.5))
    image.SetOrigin((10.0, -20.0, 30.0))
    t = np.deg2rad(20)
    image.SetDirection((np.cos(t), -np.sin(t), 0.0, np.sin(t), np.cos(t), 0.0, 0.0, 0.0, 1.0))
    return image


@pytest.mark.parametrize("suffix", ITK_SUFFIXES)
def test_an_itk_file_reads_as_the_nifti_file_itk_writes_of_it(tmp_path, suffix):
    """ITK's own NIfTI writer is the reference for its geometry: the same image saved as
    .nii.gz and as ``suffix`` reads with one affine and the same voxels, its header alone
    too."""
    voxels = np.random.default_rng(0).integers(0, 3, (5, 6, 7)).astype(np.uint8)
    image = oblique(voxels)
    sitk.WriteImage(image, str(tmp_path / "case.nii.gz"))
    sitk.WriteImage(image, str(tmp_path / f"case{suffix}"))
    twin = volume_files.read(tmp_path / "case.nii.gz")
    read = volume_files.read(tmp_path / f"case{suffix}")
    np.testing.assert_allclose(read.affine, twin.affine, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(read.dataobj), np.asarray(twin.dataobj))
    assert read.shape == (7, 6, 5)  # x, y, z: the fastest axis first, as NIfTI keeps it
    header = volume_files.header(tmp_path / f"case{suffix}")
    assert header.shape == read.shape
    np.testing.assert_allclose(header.affine, twin.affine, atol=1e-5)


@pytest.mark.parametrize("suffix", ITK_SUFFIXES)
def test_a_label_map_is_written_back_in_its_cases_form_and_geometry(tmp_path, suffix):
    """A prediction of an .mhd case is one file (MetaImage's data LOCAL): moving it moves
    its voxels; every form reads back as written, on its case's grid."""
    voxels = np.random.default_rng(1).integers(0, 3, (5, 6, 7)).astype(np.uint8)
    sitk.WriteImage(oblique(voxels), str(tmp_path / f"case{suffix}"))
    case = volume_files.read(tmp_path / f"case{suffix}")
    out = tmp_path / "out" / f"pred{suffix}"
    out.parent.mkdir()
    volume_files.write(case, out)
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no .raw beside it
    moved = tmp_path / f"moved{suffix}"
    out.rename(moved)
    back = sitk.ReadImage(str(moved))
    np.testing.assert_array_equal(sitk.GetArrayFromImage(back), voxels)
    reference = oblique(voxels)
    np.testing.assert_allclose(back.GetSpacing(), reference.GetSpacing(), atol=1e-6)
    np.testing.assert_allclose(back.GetOrigin(), reference.GetOrigin(), atol=1e-6)
    np.testing.assert_allclose(back.GetDirection(), reference.GetDirection(), atol=1e-6)


def test_components_per_voxel_are_channels_and_a_2d_image_is_refused(tmp_path):
    two = np.random.default_rng(2).random((4, 5, 6, 2)).astype(np.float32)  # z, y, x, c
    sitk.WriteImage(sitk.GetImageFromArray(two, isVector=True), str(tmp_path / "two.mha"))
    read = volume_files.read(tmp_path / "two.mha")
    assert read.shape == (6, 5, 4, 2)
    np.testing.assert_array_equal(np.asarray(read.dataobj)[..., 1], two[..., 1].transpose())
    assert volume_files.header(tmp_path / "two.mha").shape == (6, 5, 4, 2)
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((5, 6), np.uint8)), str(tmp_path / "flat.mha"))
    with pytest.raises(ValueError, match=r"flat\.mha holds an image of 2 axes \(6x5\)"):
        volume_files.read(tmp_path / "flat.mha")
    (tmp_path / "broken.nrrd").write_text("not an image")
    with pytest.raises(ValueError, match=r"broken\.nrrd: SimpleITK cannot read it"):
        volume_files.header(tmp_path / "broken.nrrd")


def test_a_folder_of_mha_images_and_nrrd_labels_is_found_as_cases(tmp_path):
    """As grand-challenge.org ships images (.mha) and 3D Slicer saves label maps (.nrrd):
    paired by name across the two forms, read as one case."""
    rng = np.random.default_rng(3)
    for i in range(3):
        image = rng.random((6, 7, 8)).astype(np.float32)
        label = (image > 0.5).astype(np.uint8)
        (tmp_path / "images").mkdir(exist_ok=True)
        (tmp_path / "labels").mkdir(exist_ok=True)
        sitk.WriteImage(oblique(image), str(tmp_path / "images" / f"case_{i}.mha"))
        sitk.WriteImage(oblique(label), str(tmp_path / "labels" / f"case_{i}.nrrd"))
    cases = nifti.find_cases(tmp_path)
    assert [(c.name, c.image.name, c.label.name) for c in cases] == [
        (f"case_{i}", f"case_{i}.mha", f"case_{i}.nrrd") for i in range(3)
    ]
    volume = nifti.load_volume(cases[0], num_classes=2)
    assert volume.image.shape[1:] == (8, 7, 6) and set(np.unique(volume.label)) <= {0, 1}
    assert volume.spacing == pytest.approx((0.8, 1.1, 2.5))


def test_2d_metaimage_and_nrrd_files_are_images_and_masks(tmp_path):
    """grand-challenge.org's 2D tasks ship .mha images (a volume of one slice, often):
    read as 2D images and masks by the image recipes; a volume of more slices is refused,
    pointing at the volume recipes."""
    from segnet.data.images import ImageDataError
    from tests.data.test_images import blob_label, prepared, train_labels

    for i in range(6):
        label = blob_label(40, 48, i)
        noise = np.random.default_rng(i).normal(0, 20, label.shape)
        image = (label.astype(np.float32) * 300 + noise).astype(np.int16)
        for folder in ("images", "masks"):
            (tmp_path / "d" / folder).mkdir(parents=True, exist_ok=True)
        sitk.WriteImage(sitk.GetImageFromArray(image), str(tmp_path / "d" / "images" / f"{i}.mha"))
        one_slice = sitk.GetImageFromArray(label.astype(np.uint8)[None])  # (1, H, W)
        sitk.WriteImage(one_slice, str(tmp_path / "d" / "masks" / f"{i}.nrrd"))
    dm = prepared(tmp_path / "d", class_names=["background", "disc"])
    assert dm.info().in_channels == 1
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 1}
    volume = np.zeros((3, 40, 48), np.int16)
    sitk.WriteImage(sitk.GetImageFromArray(volume), str(tmp_path / "d" / "images" / "0.mha"))
    with pytest.raises(ImageDataError, match=r"0\.mha holds a volume of 48x40x3 voxels"):
        prepared(tmp_path / "d", class_names=["background", "disc"]).info()
