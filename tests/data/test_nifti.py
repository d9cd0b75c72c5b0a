import gzip
import logging
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

from segnet.data import nifti
from segnet.data.checks import check_flip
from segnet.data.errors import DataError
from segnet.data.nifti_datamodule import AXIS_NAMES, NiftiDataModule, check_affine
from segnet.data.splits import split_cases
from segnet.training.metrics import per_case_dice
from tests.helpers import ODD_AFFINE, nifti_case, nifti_dataset, spaced_dataset


@pytest.mark.parametrize("layout", ["msd", "folders", "csv"])
def test_every_layout_finds_the_cases(tmp_path, layout):
    root = nifti_dataset(tmp_path / "d", layout, n=4)
    csv = str(root / "cases.csv") if layout == "csv" else None
    names = None if layout == "msd" else ["background", "one", "two"]
    dm = NiftiDataModule(
        str(root), csv=csv, class_names=names, num_workers=0, val_fraction=0.25, test_fraction=0.25
    )
    assert dm.cases == []  # nothing is read before prepare_data
    dm.prepare_data()
    assert [c.name for c in dm.cases] == ["case_000", "case_001", "case_002", "case_003"]
    info = dm.info()
    assert info.class_names == ["background", "one", "two"] and info.num_classes == 3
    assert info.in_channels == 1 and info.spatial_dims == 3 and info.per_case
    assert info.normalization == {"kind": "zscore_per_volume", "clip": None, "spacing": None}
    assert info.sliding_window["roi_size"] == list(dm.patch_size) == info.input_size


def test_hidden_files_and_subfolders_in_an_image_folder_are_not_cases(tmp_path):
    root = nifti_dataset(tmp_path / "d", "folders", n=2)
    (root / "images" / "._case_000.nii.gz").write_bytes(b"\x00\x05\x16\x07")  # macOS copy
    (root / "images" / "old.nii.gz").mkdir()
    assert [c.name for c in nifti.find_cases(root)] == ["case_000", "case_001"]


def test_a_label_folder_given_alone_replaces_the_one_dataset_json_lists(tmp_path):
    """data.label_dir on a Decathlon folder (e.g. corrected labels beside labelsTr/) takes
    the labels from that folder, not from dataset.json."""
    import shutil

    root = nifti_dataset(tmp_path / "d", "msd", n=2)
    shutil.copytree(root / "labelsTr", root / "labelsFixed")
    cases = nifti.find_cases(root, label_dir="labelsFixed")
    assert [c.label.parent.name for c in cases] == ["labelsFixed", "labelsFixed"]
    assert [c.image.parent.name for c in cases] == ["imagesTr", "imagesTr"]


def test_class_names_are_required_without_dataset_json(tmp_path):
    dm = NiftiDataModule(str(nifti_dataset(tmp_path / "d", "folders", n=2)), num_workers=0)
    with pytest.raises(RuntimeError, match="before prepare_data"):
        dm.info()
    with pytest.raises(ValueError, match="set data.class_names"):
        dm.prepare_data()


def test_multichannel_4d_images(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=2, channels=2)
    dm = NiftiDataModule(str(root), num_workers=0, val_fraction=0.5, test_fraction=0)
    dm.prepare_data()
    assert dm.info().in_channels == 2
    (v,) = dm.volumes("val")
    assert v.image.shape == (2, 19, 23, 17)
    # each channel z-scored on its own
    np.testing.assert_allclose(v.image.mean(axis=(1, 2, 3)), 0, atol=1e-4)
    np.testing.assert_allclose(v.image.std(axis=(1, 2, 3)), 1, atol=1e-4)


def test_reoriented_to_ras_and_predictions_saved_in_source_space(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=1, affine=ODD_AFFINE)
    case = nifti.find_cases(root)[0]
    v = nifti.load_volume(case, 3)
    assert nib.aff2axcodes(ODD_AFFINE) != ("R", "A", "S")
    # voxel axis 2 runs along world x (2.5 mm), axis 0 along y (0.8), axis 1 along z (1.2)
    assert v.spacing == pytest.approx((2.5, 0.8, 1.2))
    assert v.label.shape == (17, 19, 23)
    # writing the RAS label as a "prediction" must reproduce the label file exactly
    out = nifti.save_label_volume(v.label, v, tmp_path / "pred.nii.gz")
    saved, source = nib.load(str(out)), nib.load(str(case.label))
    assert saved.shape == source.shape
    np.testing.assert_array_equal(np.asarray(saved.dataobj), np.asarray(source.dataobj))
    np.testing.assert_allclose(saved.affine, source.affine)
    with pytest.raises(FileExistsError, match="never overwritten"):
        nifti.save_label_volume(v.label, v, out)


def write(path, data, affine=None):
    nib.save(nib.Nifti1Image(data, np.eye(4) if affine is None else affine), str(path))


@pytest.fixture
def one_case(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=1)
    return root, nifti.find_cases(root)[0]


def test_float_labels_holding_integers_are_accepted(one_case):
    root, case = one_case
    label = np.asarray(nib.load(str(case.label)).dataobj).astype(np.float32)
    write(case.label, label)
    loaded = nifti.load_volume(case, 3).label
    assert loaded.dtype == np.uint8 and np.array_equal(loaded, label)  # identity affine


def test_a_label_stored_in_another_axis_order_on_the_same_voxels_is_the_same_label(one_case):
    """A label written LPS (x and y reversed, the affine to match) or with its axes
    permuted over an RAS image: the same voxels in space, so the same label once both are
    in RAS. Reversed without the affine to match, it lies mirrored in space: read as such."""
    root, case = one_case
    image_affine = nib.load(str(case.image)).affine
    label = np.asarray(nib.load(str(case.label)).dataobj)
    shape = np.array(label.shape)
    lps = image_affine @ np.array(
        [[-1, 0, 0, shape[0] - 1], [0, -1, 0, shape[1] - 1], [0, 0, 1, 0], [0, 0, 0, 1]]
    )
    write(case.label, label[::-1, ::-1].copy(), lps)
    loaded = nifti.load_volume(case, 3).label
    assert np.array_equal(loaded, label)
    write(case.label, label[::-1, ::-1].copy(), image_affine)  # reversed, affine not
    assert np.array_equal(nifti.load_volume(case, 3).label, label[::-1, ::-1])
    permuted = label.transpose(1, 0, 2)  # y, x, z stored, with the matching affine
    swap = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    write(case.label, permuted.copy(), image_affine @ swap)
    assert np.array_equal(nifti.load_volume(case, 3).label, label)


@pytest.mark.parametrize(
    "breakage,match",
    [
        ("shape", r"label .*case_000.nii.gz has shape \(19, 23, 16\) but image"),
        # how far apart, and what to do: a misregistration is resampled...
        ("affine", r"different affines .*up to 18 mm or 18 voxel.*resample the label"),
        # ...a header rounded differently (a hundredth of a voxel) takes the image's affine
        ("rounded", r"different affines .*up to 0.01 mm.*save the label with the image's"),
        # ...but not into a label stored in another axis order: that would mirror it
        ("rounded_lps", r"up to 0.01 mm.*stored in LPS order and the image in RAS: resample"),
        # the image's shape as stored, but its first two axes swapped in space
        ("swapped", r"different affines"),
        ("value", r"holds values \[7\]; the classes are 0..2, one per class name"),
        ("fraction", r"holds \d+ voxel\(s\) that are not a class index \(e.g. 0.5, 1.5"),
        ("truncated", r"cannot read .*imagesTr/case_000.nii.gz"),
        ("ndim", r"has 2 dimensions"),
        ("nan", r"image .*case_000.nii.gz holds 1 NaN or infinite voxel value"),
    ],
)
def test_bad_volumes_name_the_file(one_case, breakage, match):
    root, case = one_case
    image, label, _ = nifti_case()
    if breakage == "shape":
        write(case.label, label[:, :, :16])
    elif breakage == "affine":
        write(case.label, label, np.diag([2.0, 1, 1, 1]))
    elif breakage == "rounded":
        write(case.label, label, np.diag([1.0, 1, 1, 1]) + np.diag([0.0, 0, 0, 0.01])[[3, 0, 1, 2]])
    elif breakage == "rounded_lps":  # LPS, on the image's voxels but for 0.01 mm
        x, y = label.shape[0] - 1 + 0.01, label.shape[1] - 1
        lps = np.array([[-1.0, 0, 0, x], [0, -1, 0, y], [0, 0, 1, 0], [0, 0, 0, 1]])
        write(case.label, label[::-1, ::-1].copy(), lps)
    elif breakage == "swapped":
        write(case.label, label, np.eye(4)[[1, 0, 2, 3]])
    elif breakage == "value":
        label[0, 0, 0] = 7
        write(case.label, label)
    elif breakage == "fraction":
        write(case.label, label.astype(np.float32) + 0.5)
    elif breakage == "truncated":
        data = case.image.read_bytes()
        case.image.write_bytes(data[: len(data) // 2])
    elif breakage == "ndim":
        write(case.image, image[:, :, 0])
    elif breakage == "nan":
        image = image.astype(np.float32)
        image[3, 4, 5] = np.nan
        write(case.image, image)
    with pytest.raises(nifti.NiftiDataError, match=match):
        nifti.load_volume(case, 3)


def test_garbage_gzip_is_reported(one_case):
    root, case = one_case
    case.image.write_bytes(gzip.compress(b"not a nifti"))
    with pytest.raises(nifti.NiftiDataError, match="cannot read"):
        nifti.load_volume(case, 3)


def test_image_without_label_in_folder_layout(tmp_path, caplog):
    root = nifti_dataset(tmp_path / "d", "folders", n=3)
    (root / "labels" / "case_001.nii.gz").unlink()
    with pytest.raises(nifti.NiftiDataError, match=r"case_001.nii.gz has no label"):
        nifti.find_cases(root)
    # a label named otherwise is pointed at, with the two ways to pair them
    (root / "labels" / "case_002.nii.gz").rename(root / "labels" / "case_002_seg.nii.gz")
    (root / "labels" / "case_001_seg.nii.gz").write_bytes(b"")
    with pytest.raises(
        nifti.NiftiDataError,
        match=r"case_001.nii.gz has no label: .* holds case_001_seg.nii.gz: name each label as "
        r"its image \(case_001.nii.gz\), or .* \(data.csv=",
    ):
        nifti.find_cases(root)
    # a label folder that is not there is said to be missing (also with no image at all)
    with pytest.raises(nifti.NiftiDataError, match=r"data.label_dir=segs: .* no label folder"):
        nifti.find_cases(root, image_dir="images", label_dir="segs")
    (root / "none").mkdir()
    with pytest.raises(nifti.NiftiDataError, match=r"data.label_dir=segs: .* no label folder"):
        nifti.find_cases(root, image_dir="none", label_dir="segs")
    with pytest.raises(nifti.NiftiDataError, match=r"no NIfTI cases found"):
        nifti.find_cases(root, image_dir="none", label_dir="labels")
    # another image's label is not offered as this one's (case_001_b's is not case_001's)
    (root / "labels" / "case_002_seg.nii.gz").rename(root / "labels" / "case_001_b.nii.gz")
    (root / "images" / "case_002.nii.gz").rename(root / "images" / "case_001_b.nii.gz")
    (root / "labels" / "case_001_seg.nii.gz").unlink()
    with pytest.raises(nifti.NiftiDataError, match=r"case_001.nii.gz has no label: .*\. Each"):
        nifti.find_cases(root)
    (root / "labels" / "case_001_b.nii.gz").rename(root / "labels" / "case_002_seg.nii.gz")
    (root / "images" / "case_001_b.nii.gz").rename(root / "images" / "case_002.nii.gz")
    (root / "labels" / "case_001_seg.nii.gz").write_bytes(b"")
    # a label without an image is left out, and said to be
    (root / "labels" / "case_001_seg.nii.gz").rename(root / "labels" / "case_001.nii.gz")
    (root / "labels" / "case_002_seg.nii.gz").rename(root / "labels" / "case_002.nii.gz")
    (root / "images" / "case_002.nii.gz").unlink()
    with caplog.at_level(logging.WARNING, logger="segnet.data.nifti"):
        assert [c.name for c in nifti.find_cases(root)] == ["case_000", "case_001"]
    assert "1 label file(s) in" in caplog.text and "left out: case_002.nii.gz" in caplog.text


def test_a_csv_row_without_a_label_is_refused_naming_its_line(tmp_path):
    root = nifti_dataset(tmp_path / "d", "csv", n=3)
    lines = (root / "cases.csv").read_text().splitlines()
    lines[2] = lines[2].split(",")[0] + ","  # case_001: an image, no label
    lines.insert(2, "")  # a blank line before it: the reader skips it, the count must not
    (root / "cases.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        nifti.NiftiDataError, match=r"cases.csv line 4 \(.*case_001.nii.gz\) has no label"
    ):
        nifti.find_cases(root, root / "cases.csv")


def test_a_spreadsheets_csv_reads_and_a_wrong_header_names_its_columns(tmp_path):
    """A byte-order mark and "image, label" (spaces after the commas) are a header like
    any; a header without the two columns is refused showing what it has."""
    root = nifti_dataset(tmp_path / "d", "csv", n=3)
    plain = nifti.find_cases(root, root / "cases.csv")
    lines = (root / "cases.csv").read_text().splitlines()
    spaced = [", ".join(line.split(",")) for line in lines]
    (root / "cases.csv").write_bytes("\ufeff".encode() + ("\r\n".join(spaced) + "\r\n").encode())
    assert nifti.find_cases(root, root / "cases.csv") == plain
    # a row with a cell past the header's columns (a trailing note) reads the same
    (root / "cases.csv").write_text("\n".join([lines[0], *(f"{r},note" for r in lines[1:])]))
    assert nifti.find_cases(root, root / "cases.csv") == plain
    # columns named in other words are the ones they mean
    (root / "cases.csv").write_text("img,seg\n" + "\n".join(lines[1:]) + "\n")
    assert nifti.find_cases(root, root / "cases.csv") == plain
    (root / "cases.csv").write_text("scan,other\n" + "\n".join(lines[1:]) + "\n")
    with pytest.raises(
        nifti.NiftiDataError, match=r"'image' and 'label' columns \(it has 'scan', 'other'\)"
    ):
        nifti.find_cases(root, root / "cases.csv")


def test_a_csv_split_column_is_kept_for_volumes_as_for_images(tmp_path):
    """The one case-list reader gives every format its split column: given splits are
    kept (val drawn from train where none is val), half-given ones and unknown names are
    refused naming the file."""
    root = nifti_dataset(tmp_path / "d", "csv", n=6)
    lines = (root / "cases.csv").read_text().splitlines()
    given = ["train", "train", "train", "train", "test", "test"]
    rows = [f"{r},{s}" for r, s in zip(lines[1:], given, strict=True)]
    (root / "cases.csv").write_text("\n".join([lines[0] + ",split", *rows]) + "\n")
    dm = NiftiDataModule(str(root), csv=str(root / "cases.csv"), class_names=["bg", "a", "b"],
                         num_workers=0, val_fraction=0.25)  # fmt: skip
    dm.prepare_data()
    assert dm.splits["test"] == [4, 5]
    assert len(dm.splits["val"]) == 1 and sorted(dm.splits["train"] + dm.splits["val"]) == [
        0,
        1,
        2,
        3,
    ]
    (root / "cases.csv").write_text(
        "\n".join([lines[0] + ",split", *rows[:-1], rows[-1].rsplit(",", 1)[0] + ","])
    )
    half = NiftiDataModule(str(root), csv=str(root / "cases.csv"), class_names=["bg", "a", "b"])
    with pytest.raises(ValueError, match=r"cases.csv: some cases name a split and others do not"):
        half.prepare_data()
    (root / "cases.csv").write_text(
        "\n".join([lines[0] + ",split", *rows[:-1], rows[-1].rsplit(",", 1)[0] + ",holdout"])
    )
    with pytest.raises(nifti.NiftiDataError, match=r"cases.csv, line 7: split 'holdout'"):
        nifti.find_cases(root, root / "cases.csv")


def test_two_csv_cases_of_one_file_name_are_refused(tmp_path):
    root = nifti_dataset(tmp_path / "d", "csv", n=2)
    (root / "other").mkdir()
    lines = (root / "cases.csv").read_text().splitlines()
    image, label = lines[1].split(",")
    (root / "other" / Path(image).name).write_bytes((root / image).read_bytes())
    lines.append(f"other/{Path(image).name},{label}")
    (root / "cases.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(nifti.NiftiDataError, match=r"are both case 'case_000'.*rename one"):
        nifti.find_cases(root, root / "cases.csv")


def test_splits_are_seeded_disjoint_and_folds_cover():
    names = [str(i) for i in range(20)]
    a = split_cases(names, 0.2, 0.25, seed=1)
    assert a == split_cases(names, 0.2, 0.25, seed=1)
    assert a != split_cases(names, 0.2, 0.25, seed=2)
    assert len(a["test"]) == 5 and len(a["val"]) == 4 and len(a["train"]) == 11
    assert not set(a["train"]) & set(a["val"]) and not set(a["val"]) & set(a["test"])
    folds = [split_cases(names, 0, 0.25, seed=1, fold=f, num_folds=3) for f in range(3)]
    vals = sorted(i for f in folds for i in f["val"])
    assert vals == sorted(set(range(20)) - set(a["test"]))
    with pytest.raises(ValueError, match="data.fold=3 must be in 0..2"):
        split_cases(names, 0, 0.25, seed=1, fold=3, num_folds=3)


def test_patches_are_padded_and_sampled_around_foreground(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=3, shape=(15, 17, 13))
    dm = NiftiDataModule(
        str(root),
        patch_size=(16, 24, 16),
        foreground_ratio=1.0,
        val_fraction=0.34,
        test_fraction=0,
        num_workers=0,
    )
    dm.setup("fit")
    for _ in range(6):
        s = dm.datasets["train"][0]
        assert s["image"].shape == (1, 16, 24, 16) and s["label"].shape == (16, 24, 16)
        assert s["label"].dtype == torch.long and (s["label"] > 0).any()
    assert dm.datasets["val"][0]["image"].shape == (1, 15, 17, 13)  # whole volume


def test_negative_patches_are_centred_on_background_with_uint8_labels(tmp_path):
    # cached labels are uint8, the type on which MONAI's sampler took every voxel for
    # background: with only negative patches, no patch may be centred on foreground
    root = nifti_dataset(tmp_path / "d", "msd", n=3, shape=(24, 16, 16))
    dm = NiftiDataModule(
        str(root),
        patch_size=(8, 8, 8),
        foreground_ratio=0.0,
        val_fraction=0.34,
        test_fraction=0,
        num_workers=0,
        flip=False,
        rotate90=False,
    )
    dm.setup("fit")
    volume = dm.datasets["train"].volumes[0]
    volume.label = np.zeros_like(volume.label)
    volume.label[:12] = 1  # half the case is foreground
    assert volume.label.dtype == np.uint8
    centres = [dm.datasets["train"][0]["label"][4, 4, 4].item() for _ in range(30)]
    assert centres == [0] * 30


def test_augmented_patches_keep_image_and_label_aligned(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=2, shape=(16, 16, 16))
    dm = NiftiDataModule(
        str(root),
        patch_size=(12, 12, 12),
        val_fraction=0.5,
        test_fraction=0,
        num_workers=0,
        intensity_scale=0,
        intensity_shift=0,
    )
    dm.setup("fit")
    for _ in range(8):
        s = dm.datasets["train"][0]
        img, lab = s["image"][0], s["label"]
        # foreground is bright in the image wherever the label says so, after any flip/rot
        if (lab > 0).any() and (lab == 0).any():
            assert img[lab > 0].mean() > img[lab == 0].mean() + 1.0


def _one_patch(root, **aug):
    dm = NiftiDataModule(
        str(root),
        patch_size=(16, 16, 16),
        val_fraction=0.5,
        test_fraction=0,
        num_workers=0,
        foreground_ratio=1.0,
        flip=False,
        rotate90=False,
        intensity_scale=0,
        intensity_shift=0,
        **aug,
    )
    dm.setup("fit")
    return dm.datasets["train"].volumes[0], dm.datasets["train"][0]


def test_zoom_magnifies_the_case_and_keeps_labels_whole(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=2, shape=(16, 16, 16))
    volume, plain = _one_patch(root)
    assert (plain["label"] > 0).sum() == (volume.label > 0).sum()  # off: the case as it is
    _, bigger = _one_patch(root, zoom=(2.0, 2.0), affine_prob=1.0)
    _, smaller = _one_patch(root, zoom=(0.5, 0.5), affine_prob=1.0)
    fg = (volume.label > 0).sum()
    assert (bigger["label"] > 0).sum() > 3 * fg and (smaller["label"] > 0).sum() < fg / 3
    for s in (bigger, smaller):
        # nearest-neighbour labels: only the case's own values, never blends
        assert set(s["label"].unique().tolist()) <= set(np.unique(volume.label).tolist())


def test_rotated_patches_keep_image_and_label_aligned(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=2, shape=(16, 16, 16))
    for _ in range(6):
        _, s = _one_patch(root, rotate=45.0, zoom=(0.8, 1.25), affine_prob=1.0)
        img, lab = s["image"][0], s["label"]
        assert img[lab > 0].mean() > img[lab == 0].mean() + 1.0


@pytest.mark.parametrize(
    "rotate, zoom, prob, match",
    [
        (30.0, (1.0, 1.0), 0.0, "needs data.affine_prob > 0"),
        (0.0, (1.0, 1.0), 0.2, "disagree"),
        (0.0, (1.4, 0.7), 0.2, "0 < min <= max"),
        (0.0, (0.0, 1.4), 0.2, "0 < min <= max"),
        (0.0, (0.7,), 0.2, r"\[min, max\]"),
        (270.0, (1.0, 1.0), 0.2, "data.rotate=270.0"),
        (30.0, (1.0, 1.0), 1.5, "data.affine_prob=1.5"),
    ],
)
def test_inconsistent_rotation_or_zoom_settings_are_refused(rotate, zoom, prob, match):
    with pytest.raises(ValueError, match=match):
        check_affine(rotate, zoom, prob)


@pytest.mark.parametrize(
    "setting, match",
    [
        ({"patch_size": [32, 48]}, r"data\.patch_size=\[32, 48\]: give three positive"),
        ({"patch_size": [32, 0, 32]}, r"data\.patch_size=\[32, 0, 32\]"),
        ({"foreground_ratio": 1.5}, r"data\.foreground_ratio=1\.5"),
        ({"test_fraction": 1.0}, r"data\.test_fraction=1\.0"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "leave no case to train on"),
        ({"num_folds": 1}, r"data\.num_folds=1"),
        ({"clip": [1000, -1000]}, r"data\.clip=\[1000, -1000\]: give \[low, high\]"),
        ({"intensity_scale": -0.1}, r"data\.intensity_scale=-0\.1"),
        ({"batch_size": 0}, r"data\.batch_size=0: expected a whole number >= 1 \(or null\)"),
        ({"max_patch_voxels": 10}, r"data\.max_patch_voxels=10: expected a whole number >= 64"),
        ({"steps_per_epoch": 20, "samples_per_volume": 2}, "give one of them"),
    ],
)
def test_patch_split_and_intensity_settings_are_refused_before_any_case(setting, match):
    with pytest.raises(ValueError, match=match):
        NiftiDataModule("nowhere", **setting)


def test_more_folds_than_cases_to_share_is_refused():
    names = [f"case_{i}" for i in range(12)]
    split_cases(names, 0.1, 0.25, seed=0, fold=2, num_folds=9)  # 9 cases, 9 folds
    with pytest.raises(ValueError, match=r"data.num_folds=10: only 9 case\(s\) are left"):
        split_cases(names, 0.1, 0.25, seed=0, fold=2, num_folds=10)


def test_per_case_dice_by_hand():
    pred = torch.tensor([[0, 1, 1, 2], [0, 0, 0, 0]])
    target = torch.tensor([[0, 1, 2, 2], [0, 0, 0, 0]])
    d = per_case_dice(pred, target, 3)
    # case 0: class 1: 2*1/(2+1); class 2: 2*1/(1+2); background 2*1/(1+1)
    torch.testing.assert_close(d[0], torch.tensor([1.0, 2 / 3, 2 / 3], dtype=torch.float64))
    # case 1 has no foreground at all: NaN, left out of the mean over cases
    assert d[1, 0] == 1 and d[1, 1:].isnan().all()


def test_sliding_window_equals_a_full_pass_when_the_volume_fits():
    from segnet.models import create_model
    from segnet.serving.inference import Inference

    torch.manual_seed(0)
    net = create_model("unet", spatial_dims=3, in_channels=1, out_channels=3, features=[4, 8, 8])
    net.eval()
    window = {"roi_size": [24, 24, 24], "overlap": 0.5, "mode": "gaussian"}
    windowed = Inference.for_net(net, window)
    x = torch.randn(1, 1, 19, 23, 17)
    with torch.no_grad():
        torch.testing.assert_close(windowed.logits(net, x), net(x), rtol=1e-4, atol=1e-4)
        # a volume larger than the window is stitched from windows, still full size, and
        # in its interior it agrees closely with a full pass (instance norm and borders
        # differ a little)
        big = torch.randn(1, 1, 40, 30, 26)
        stitched = windowed.logits(net, big)
        assert stitched.shape == (1, 3, 40, 30, 26)
        assert (stitched.argmax(1) == net(big).argmax(1)).float().mean() > 0.8


def test_ras_spacing_reads_the_header_in_the_volumes_axis_order(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=1, affine=ODD_AFFINE)
    case = nifti.find_cases(root)[0]
    assert nifti.ras_spacing(case.image) == pytest.approx(nifti.load_volume(case).spacing)
    assert nifti.ras_spacing(case.image) == pytest.approx((2.5, 0.8, 1.2))
    assert nifti.ras_grid(case.image)[1] == (17, 19, 23)  # voxel counts, in RAS order too


def test_resampled_cases_train_on_one_grid_and_are_scored_on_their_own(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=3, affine=ODD_AFFINE)
    dm = NiftiDataModule(
        str(root),
        spacing=[1.25, 1.6, 0.6],
        patch_size=(16, 8, 16),
        foreground_ratio=1.0,
        val_fraction=0.34,
        test_fraction=0,
        num_workers=0,
    )
    dm.setup("fit")
    assert dm.info().normalization["spacing"] == [1.25, 1.6, 0.6]
    # RAS (17, 19, 23) voxels of (2.5, 0.8, 1.2) mm cover the same extent in (34, 10, 46)
    val = dm.datasets["val"][0]
    assert val["image"].shape == (1, 34, 10, 46)
    assert val["label"].shape == (17, 19, 23)  # scored on the case's own grid
    assert val["spacing"].tolist() == pytest.approx([2.5, 0.8, 1.2])  # HD95 and NSD in mm
    # training patches come from the resampled grid, image and label voxel for voxel: the
    # image's intensity reveals the label (about 100 per class step)
    (volume,) = dm.datasets["train"].volumes[:1]
    assert volume.training_label.shape == volume.image.shape[1:]
    means = [volume.image[0][volume.training_label == k].mean() for k in range(3)]
    assert means[0] < means[1] < means[2]
    for _ in range(4):
        s = dm.datasets["train"][0]
        assert s["image"].shape == (1, 16, 8, 16) and s["label"].shape == (16, 8, 16)
        assert s["image"][0][s["label"] == 2].mean() > s["image"][0][s["label"] == 0].mean()


def test_median_spacing_comes_from_the_training_cases(tmp_path, caplog):
    spacings = [(1.0, 1.0, 1.0), (1.0, 1.0, 2.0), (1.0, 1.0, 3.0), (2.0, 1.0, 1.0)]
    root = spaced_dataset(tmp_path / "d", spacings)
    dm = NiftiDataModule(str(root), spacing="median", val_fraction=0, test_fraction=0.25)
    with caplog.at_level(logging.INFO):
        dm.prepare_data()
    train = [spacings[i] for i in dm.splits["train"]]
    expected = np.median(train, axis=0).tolist()
    assert dm.info().normalization["spacing"] == pytest.approx(expected)
    assert f"the median of {len(train)} training cases" in caplog.text


def test_median_spacing_of_thick_slices_keeps_the_thinner_ones(tmp_path, caplog):
    """nnU-Net's exception: along the coarse axis of a thick-slice dataset, the 10th
    percentile of the training cases' spacing rather than their median."""
    spacings = [(0.5, 0.5, z) for z in (2.0, 3.0, 4.0, 4.0, 5.0, 5.0)]
    root = spaced_dataset(tmp_path / "d", spacings, shape=(40, 40, 20))  # 80x80x4 to 10
    dm = NiftiDataModule(str(root), spacing="median", val_fraction=0, test_fraction=0.2)
    with caplog.at_level(logging.INFO):
        dm.prepare_data()
    thick = [spacings[i][2] for i in dm.splits["train"]]
    expected = [0.5, 0.5, np.percentile(thick, 10)]
    assert expected[2] < np.median(thick)
    assert dm.info().normalization["spacing"] == pytest.approx(expected)
    assert "the 10th percentile along the thick-slice axis" in caplog.text


def test_cases_of_different_voxel_sizes_without_a_spacing_are_warned_about(tmp_path, caplog):
    root = spaced_dataset(tmp_path / "d", [(1.0, 1.0, 1.0), (1.0, 1.0, 3.0), (1.0, 1.0, 2.0)])
    for spacing, warned in ((None, True), ([1, 1, 1], False)):
        caplog.clear()
        dm = NiftiDataModule(
            str(root), spacing=spacing, patch_size=(8, 8, 4), val_fraction=0.34, test_fraction=0
        )
        with caplog.at_level(logging.WARNING):
            dm.setup("fit")
        assert ("differ up to" in caplog.text) == warned
        assert ("data.spacing=median" in caplog.text) == warned


@pytest.mark.parametrize("spacing", [[1.0, 1.0], [1.0, 0.0, 1.0], "mean", [1, True, 1]])
def test_a_bad_spacing_is_refused_naming_the_setting(spacing):
    with pytest.raises(ValueError, match=r"data\.spacing=.*three voxel sizes in mm"):
        NiftiDataModule("unused", spacing=spacing)


def test_right_angle_rotations_stay_in_planes_of_square_voxels(tmp_path):
    from monai.transforms import RandRotate90d

    root = nifti_dataset(tmp_path / "d", "msd", n=3)
    planes = {}
    for spacing in (None, [1.0, 1.0, 2.0]):
        dm = NiftiDataModule(
            str(root), spacing=spacing, patch_size=(8, 8, 8), val_fraction=0.34, test_fraction=0
        )
        dm.prepare_data()
        ops = dm.train_transform().transforms
        planes[spacing is None] = [op.spatial_axes for op in ops if isinstance(op, RandRotate90d)]
    assert planes == {True: [(0, 1), (0, 2), (1, 2)], False: [(0, 1)]}
    # thick slices on their own grids (data.spacing null): not rotated into the slice axis
    thick = spaced_dataset(tmp_path / "thick", [(0.7, 0.7, 5.0)] * 3, shape=(16, 16, 40))
    dm = NiftiDataModule(str(thick), patch_size=(8, 8, 8), val_fraction=0.34, test_fraction=0)
    dm.prepare_data()
    ops = dm.train_transform().transforms
    assert [op.spatial_axes for op in ops if isinstance(op, RandRotate90d)] == [(0, 1)]


def test_resampling_refuses_a_degenerate_affine_and_a_unit_slip(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=1)
    case = nifti.find_cases(root)[0]
    with pytest.raises(nifti.NiftiDataError, match=r"case_000: .*data\.spacing is in millimetres"):
        nifti.resample_to_spacing(nifti.load_volume(case), (0.1, 0.1, 0.1))
    flat = nifti.load_volume(case)
    flat.spacing = (1.0, 0.0, 1.0)  # as a zero column in an affine gives
    with pytest.raises(nifti.NiftiDataError, match=r"voxel sizes \[1.0, 0.0, 1.0\] mm"):
        nifti.resample_to_spacing(flat, (1.0, 1.0, 1.0))


def nnunet_v2_dataset(root: Path, n: int = 3) -> Path:
    """nnU-Net v2's layout: images <case>_0000, labels <case>, names mapped to values in
    dataset.json and no case list."""
    import json

    nifti_dataset(root, "msd", n=n)
    for image in (root / "imagesTr").iterdir():
        image.rename(image.with_name(image.name.replace(".nii.gz", "_0000.nii.gz")))
    labels = {"background": 0, "one": 1, "two": 2}
    (root / "dataset.json").write_text(json.dumps({"labels": labels, "numTraining": n}))
    return root


def test_nnunet_v2_layout_is_read(tmp_path):
    root = nnunet_v2_dataset(tmp_path / "v2")
    cases = nifti.find_cases(root)
    assert [c.name for c in cases] == ["case_000", "case_001", "case_002"]
    assert cases[0].label == root / "labelsTr" / "case_000.nii.gz"
    dm = NiftiDataModule(str(root), val_fraction=0.34, test_fraction=0)
    dm.prepare_data()
    assert dm.info().class_names == ["background", "one", "two"]
    # a second channel in one case's own file and not the others' is refused, naming them
    second = root / "imagesTr" / "case_001_0001.nii.gz"
    second.write_bytes((root / "imagesTr" / "case_001_0000.nii.gz").read_bytes())
    with pytest.raises(
        DataError, match=r"case case_000 .* 1 channel file\(s\) and case case_001 2"
    ):
        nifti.find_cases(root)


def test_four_digit_case_numbers_are_not_taken_for_channels(tmp_path):
    root = nifti_dataset(tmp_path / "d", "folders", n=2)
    for folder in ("images", "labels"):
        for path in (root / folder).iterdir():
            path.rename(path.with_name(path.name.replace("case_00", "scan_000")))
    assert [c.name for c in nifti.find_cases(root)] == ["scan_0000", "scan_0001"]


def test_a_csv_takes_its_class_names_from_beside_it_not_from_data_root(tmp_path):
    listed = nifti_dataset(tmp_path / "listed", "csv", n=3)
    other = nifti_dataset(tmp_path / "other", "msd", n=3)  # has a dataset.json
    dm = NiftiDataModule(str(other), csv=str(listed / "cases.csv"), test_fraction=0)
    with pytest.raises(ValueError, match=r"no class names for data.csv=.*cases.csv"):
        dm.prepare_data()
    (listed / "dataset.json").write_text('{"labels": {"0": "bg", "1": "a", "2": "b"}}')
    dm = NiftiDataModule(str(other), csv=str(listed / "cases.csv"), test_fraction=0)
    dm.prepare_data()
    assert dm.info().class_names == ["bg", "a", "b"]


def test_flip_takes_all_none_or_a_list_of_axes_named_in_its_refusal():
    assert check_flip(True, AXIS_NAMES) == (0, 1, 2) and check_flip(False, AXIS_NAMES) == ()
    assert check_flip([2, 1], AXIS_NAMES) == (1, 2)
    for bad in ("no", [3], [1, 1], [True], 1):
        with pytest.raises(ValueError, match=r"data.flip=.*a list of axes \(0 left-right, 1 back"):
            check_flip(bad, AXIS_NAMES)
    # an image has two axes: the same rule, its own names
    assert check_flip(True, ("up-down", "left-right")) == (0, 1)
    with pytest.raises(ValueError, match=r"data.flip=\[2\]: .*\(0 up-down, 1 left-right\)"):
        check_flip([2], ("up-down", "left-right"))


@pytest.mark.parametrize(
    "flip, flipped, turned",
    [(True, [0, 1, 2], [(0, 1), (0, 2), (1, 2)]), ([1, 2], [1, 2], [(1, 2)]), (False, [], [])],
)
def test_flips_and_quarter_turns_keep_unmirrored_axes_as_they_are(tmp_path, flip, flipped, turned):
    """Where left and right differ (data.flip=[1,2]), no augmentation may mirror the
    left-right axis: neither a flip, nor a turn in a plane that holds it (a half turn
    mirrors both its axes). Testing mirrors the axes training flipped."""
    from monai import transforms as T

    root = nifti_dataset(tmp_path / "d", "msd", n=3, shape=(16, 16, 16))
    dm = NiftiDataModule(
        str(root), patch_size=(8, 8, 8), val_fraction=0.34, test_fraction=0, num_workers=0,
        flip=flip, rotate90=True,
    )  # fmt: skip
    dm.prepare_data()
    info = dm.info()
    ops = dm.train_transform().transforms
    assert sorted(op.flipper.spatial_axis for op in ops if isinstance(op, T.RandFlipd)) == flipped
    planes = [tuple(op.spatial_axes) for op in ops if isinstance(op, T.RandRotate90d)]
    assert planes == turned
    assert info.mirror_axes == flipped


def test_a_csv_group_column_keeps_a_patients_volumes_in_one_split(tmp_path):
    root = nifti_dataset(tmp_path / "d", "csv", n=6, shape=(9, 10, 8))
    lines = (root / "cases.csv").read_text().splitlines()
    # two volumes per patient (two visits): both in one split, whichever it is
    rows = [f"{line},patient{i // 2}" for i, line in enumerate(lines[1:])]
    (root / "cases.csv").write_text("\n".join([lines[0] + ",group", *rows]) + "\n")
    dm = NiftiDataModule(str(root), csv=str(root / "cases.csv"), class_names=["bg", "a", "b"],
                         num_workers=0, val_fraction=0.34, test_fraction=0.34)  # fmt: skip
    dm.prepare_data()
    patient = {c.name: c.group for c in dm.cases}
    held = [{patient[n] for n in names} for names in dm.split_names().values()]
    assert [len(h) for h in held] == [1, 1, 1]  # three patients, one in each split
    assert len(set().union(*held)) == 3


def test_a_group_pattern_reads_the_patient_from_the_case_name(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=6, shape=(9, 10, 8))
    dm = NiftiDataModule(str(root), num_workers=0, val_fraction=0.34, test_fraction=0.34,
                         groups="case_00{group}")  # fmt: skip
    dm.prepare_data()  # case_000 .. case_005: six groups of one, drawn as cases
    assert sum(len(v) for v in dm.split_names().values()) == 6
    dm = NiftiDataModule(str(root), num_workers=0, groups="{group}_frame*")
    with pytest.raises(ValueError, match="does not fit the name 'case_000'"):
        dm.prepare_data()


@pytest.mark.parametrize(
    ("names", "flip", "mirrored", "turned"),
    [
        (["background", "left kidney", "right kidney"], True, [1, 2], [(1, 2)]),
        (["background", "left kidney", "right kidney"], [0, 1, 2], [0, 1, 2], [(0, 1), (0, 2), (1, 2)]),
        (["background", "kidney_left", "liver"], True, [0, 1, 2], [(0, 1), (0, 2), (1, 2)]),
    ],
)  # fmt: skip
def test_volumes_whose_classes_name_both_sides_are_not_flipped_left_right(
    tmp_path, caplog, names, flip, mirrored, turned
):
    """RAS's first axis runs left to right: a flip or a half turn across it would show the
    left kidney as the right one. Unless data.flip names the axes, training flips,
    quarter turns and test-time mirroring keep to the other two; one side alone is
    swapped with nothing and flips as before."""
    root = nifti_dataset(tmp_path / "d", "folders", n=4, shape=(16, 16, 16))
    dm = NiftiDataModule(
        str(root), class_names=names, flip=flip, patch_size=[16, 16, 16], num_workers=0,
        val_fraction=0.25, test_fraction=0.25,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="segnet.data.sides"):
        dm.prepare_data()
        assert dm.info().mirror_axes == mirrored
    said = "name a side, which a left-right flip would swap" in caplog.text
    assert said == (mirrored == [1, 2])
    if said:
        assert "back-front and down-up only; 'data.flip=[0, 1, 2]' flips every axis" in caplog.text
    planes = [op.spatial_axes for op in dm.rotations90(["image", "label"])]
    assert sorted(tuple(p) for p in planes) == turned


def _save_case(image_path: Path, label_path: Path, seed: int) -> None:
    image, label, affine = nifti_case((12, 14, 10), seed=seed)
    for path, array in ((image_path, image), (label_path, label)):
        path.parent.mkdir(parents=True, exist_ok=True)
        nib.save(nib.Nifti1Image(array, affine), str(path))


def test_a_folder_per_case_of_imaging_and_segmentation_kits_style(tmp_path, caplog):
    """KiTS19: case_00000/imaging.nii.gz with segmentation.nii.gz, the case named by its
    folder; a folder of an image alone (a test case) is left out, said."""
    root = tmp_path / "kits19" / "data"
    for k in range(4):
        case = root / f"case_{k:05d}"
        _save_case(case / "imaging.nii.gz", case / "segmentation.nii.gz", k)
    (root / "case_00009").mkdir()
    shutil.copy(root / "case_00000" / "imaging.nii.gz", root / "case_00009" / "imaging.nii.gz")
    with caplog.at_level(logging.INFO, logger="segnet.data.volume_layouts"):
        cases = nifti.find_cases(root)
    assert [(c.name, c.image.name, c.label.name) for c in cases] == [
        (f"case_{k:05d}", "imaging.nii.gz", "segmentation.nii.gz") for k in range(4)
    ]
    assert "a folder per case" in caplog.text and "case_00009" in caplog.text


def test_labels_named_with_text_added_pair_in_a_label_folder_and_beside_images(tmp_path, caplog):
    """case_001_seg.nii.gz in labels/ for images/case_001.nii.gz; ACDC's
    patient001/patient001_frame01_gt.nii.gz beside its image, a folder per patient kept
    whole in one split, its unlabelled _4d cine left out, said."""
    folders = tmp_path / "folders"
    for k in range(4):
        _save_case(folders / "images" / f"case_{k:03d}.nii.gz",
                   folders / "labels" / f"case_{k:03d}_seg.nii.gz", k)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="segnet.data.volume_layouts"):
        cases = nifti.find_cases(folders)
    assert {(c.name, c.label.name) for c in cases} == {
        (f"case_{k:03d}", f"case_{k:03d}_seg.nii.gz") for k in range(4)
    }
    assert "with '_seg' added" in caplog.text
    acdc = tmp_path / "acdc"
    for p in range(4):
        patient = acdc / f"patient{p:03d}"
        for frame in ("01", "12"):
            _save_case(patient / f"{patient.name}_frame{frame}.nii.gz",
                       patient / f"{patient.name}_frame{frame}_gt.nii.gz", 10 * p + int(frame))  # fmt: skip
        shutil.copy(
            patient / f"{patient.name}_frame01.nii.gz", patient / f"{patient.name}_4d.nii.gz"
        )
    with caplog.at_level(logging.INFO, logger="segnet.data.volume_layouts"):
        dm = NiftiDataModule(str(acdc), class_names=["background", "one", "two"], num_workers=0,
                             val_fraction=0.25, test_fraction=0.25)  # fmt: skip
        dm.prepare_data()
    assert len(dm.cases) == 8 and all(c.label.name.endswith("_gt.nii.gz") for c in dm.cases)
    assert "4 volume(s)" in caplog.text and "patient000_4d" in caplog.text
    patients = {s: {dm.cases[i].group for i in dm.splits[s]} for s in ("train", "val", "test")}
    assert all(len(dm.splits[s]) == 2 * len(patients[s]) for s in patients)  # whole patients
    assert not patients["train"] & (patients["val"] | patients["test"])


def test_axes_named_that_flip_sides_into_each_other_are_kept_and_warned(tmp_path, caplog):
    """hippocampus_unet3d's data.flip=[0] (left-right alone) on classes of both sides:
    the axes named stand, with a warning naming the setting that keeps them apart."""
    root = nifti_dataset(tmp_path / "d", "folders", n=4, shape=(16, 16, 16))
    names = ["background", "left kidney", "right kidney"]
    dm = NiftiDataModule(str(root), class_names=names, flip=[0], patch_size=[16, 16, 16],
                         num_workers=0, val_fraction=0.25, test_fraction=0.25)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="segnet.data.sides"):
        dm.prepare_data()
    assert dm.info().mirror_axes == [0]
    assert "data.flip=[0] flips left-right" in caplog.text
    assert "'data.flip=false' 'model.tta=false' keeps them apart" in caplog.text


def test_labels_named_with_their_images_own_text_replaced_lits_and_btcv_style(tmp_path, caplog):
    """LiTS: volume-<n>.nii beside segmentation-<n>.nii (10 beside 1, so the part they
    share is not read short); BTCV: img/img0001.nii.gz with label/label0001.nii.gz, the
    folders found by their names."""
    lits = tmp_path / "lits"
    for k in (0, 1, 10, 11):
        _save_case(lits / f"volume-{k}.nii", lits / f"segmentation-{k}.nii", k)
    btcv = tmp_path / "btcv"
    for k in range(1, 4):
        _save_case(btcv / "img" / f"img{k:04d}.nii.gz", btcv / "label" / f"label{k:04d}.nii.gz", k)
    with caplog.at_level(logging.INFO, logger="segnet.data.volume_layouts"):
        lits_cases, btcv_cases = nifti.find_cases(lits), nifti.find_cases(btcv)
    assert {(c.name, c.label.name) for c in lits_cases} == {
        (f"volume-{k}", f"segmentation-{k}.nii") for k in (0, 1, 10, 11)
    }
    assert {(c.image.name, c.label.name) for c in btcv_cases} == {
        (f"img{k:04d}.nii.gz", f"label{k:04d}.nii.gz") for k in range(1, 4)
    }
    assert "'volume' replaced by 'segmentation'" in caplog.text
    assert "data.image_dir=img data.label_dir=label, by what their names say" in caplog.text


def test_labels_named_with_their_images_own_text_at_the_end_replaced(tmp_path, caplog):
    """case_001_ct beside case_001_seg, and scan/seg words sharing their first letter
    (case_1_scan, case_1_seg): the text after the shared start replaced, said."""
    flat = tmp_path / "flat"
    for k in range(3):
        _save_case(flat / f"case_{k:03d}_ct.nii.gz", flat / f"case_{k:03d}_seg.nii.gz", k)
    folders = tmp_path / "folders"
    for k in range(3):
        _save_case(folders / "images" / f"case_{k}_scan.nii.gz",
                   folders / "labels" / f"case_{k}_seg.nii.gz", k)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="segnet.data.volume_layouts"):
        flat_cases, folder_cases = nifti.find_cases(flat), nifti.find_cases(folders)
    assert {(c.name, c.label.name) for c in flat_cases} == {
        (f"case_{k:03d}_ct", f"case_{k:03d}_seg.nii.gz") for k in range(3)
    }
    assert {(c.image.name, c.label.name) for c in folder_cases} == {
        (f"case_{k}_scan.nii.gz", f"case_{k}_seg.nii.gz") for k in range(3)
    }
    assert "'ct' replaced by 'seg'" in caplog.text and "'scan' replaced by 'seg'" in caplog.text


def test_a_stray_label_or_an_odd_case_folder_is_named_not_the_layout_refused(tmp_path, caplog):
    """A label of no image beside labels named by one rule is left out, said; a case
    folder holding a label alone among KiTS-style folders is named in the refusal."""
    root = tmp_path / "folders"
    for k in range(3):
        _save_case(
            root / "images" / f"case_{k}.nii.gz", root / "labels" / f"case_{k}_seg.nii.gz", k
        )
    shutil.copy(root / "labels" / "case_0_seg.nii.gz", root / "labels" / "case_9_seg.nii.gz")
    with caplog.at_level(logging.WARNING):
        assert len(nifti.find_cases(root)) == 3
    assert "case_9_seg.nii.gz" in caplog.text
    kits = tmp_path / "kits"
    for k in range(3):
        _save_case(
            kits / f"case_{k}" / "imaging.nii.gz", kits / f"case_{k}" / "segmentation.nii.gz", k
        )
    (kits / "case_3").mkdir()
    shutil.copy(kits / "case_0" / "segmentation.nii.gz", kits / "case_3" / "segmentation.nii.gz")
    with pytest.raises(
        nifti.DataError, match=r"case_3 holds segmentation.nii.gz: give it one image"
    ):
        nifti.find_cases(kits)


def test_folders_named_that_are_missing_are_refused_naming_the_setting(tmp_path):
    root = nifti_dataset(tmp_path / "d", "folders", n=2)
    with pytest.raises(nifti.NiftiDataError, match=r"data.image_dir=scans: .* has no image "
                       r"folder scans/ \(it holds images, labels\)"):  # fmt: skip
        nifti.find_cases(root, image_dir="scans", label_dir="labels")
    with pytest.raises(
        nifti.NiftiDataError, match=r"data.label_dir=segs: .* no label folder segs/"
    ):
        nifti.find_cases(root, image_dir="images", label_dir="segs")
    with pytest.raises(nifti.NiftiDataError, match=r"data.image_dir=images reads the labels from "
                       r"labelsTr/ unless data.label_dir names"):  # fmt: skip
        nifti.find_cases(root, image_dir="images")


def test_evaluating_another_root_reads_its_own_layout_where_it_lacks_the_trained_folders(
    tmp_path, caplog
):
    from omegaconf import OmegaConf

    from segnet.commands.evaluate import drop_folders_it_lacks

    trained = {"root": str(tmp_path), "image_dir": "scans", "label_dir": "segs"}
    (tmp_path / "images").mkdir()
    cfg = OmegaConf.create(trained)
    with caplog.at_level(logging.INFO):
        drop_folders_it_lacks(cfg, {"root": str(tmp_path)}, Path("best.ckpt"))
    assert cfg.image_dir is None and cfg.label_dir is None
    assert "has no folder scans/ (best.ckpt trained with data.image_dir=scans)" in caplog.text
    # one of the pair lacking drops both; a root holding both keeps them
    (tmp_path / "scans").mkdir()
    cfg = OmegaConf.create(trained)
    drop_folders_it_lacks(cfg, {"root": str(tmp_path)}, Path("best.ckpt"))
    assert cfg.image_dir is None and cfg.label_dir is None
    (tmp_path / "segs").mkdir()
    cfg = OmegaConf.create(trained)
    drop_folders_it_lacks(cfg, {"root": str(tmp_path)}, Path("best.ckpt"))
    assert (cfg.image_dir, cfg.label_dir) == ("scans", "segs")
    # a region-of-interest folder it lacks: scored whole, warned
    cfg = OmegaConf.create({**trained, "roi_dir": "mask"})
    with caplog.at_level(logging.WARNING):
        drop_folders_it_lacks(cfg, {"root": str(tmp_path)}, Path("best.ckpt"))
    assert cfg.roi_dir is None and (cfg.image_dir, cfg.label_dir) == ("scans", "segs")
    assert "its images are scored whole" in caplog.text
    cfg = OmegaConf.create({**trained, "image_dir": "other"})
    drop_folders_it_lacks(cfg, {"root": str(tmp_path), "image_dir": "other"}, Path("b.ckpt"))
    assert (cfg.image_dir, cfg.label_dir) == ("other", "segs")


@pytest.mark.parametrize(("degrees", "warned"), [(120, True), (30, False)])
def test_rotations_past_a_right_angle_on_classes_of_both_sides_are_warned(
    tmp_path, caplog, degrees, warned
):
    root = nifti_dataset(tmp_path / "d", "folders", n=4, shape=(16, 16, 16))
    names = ["background", "left kidney", "right kidney"]
    dm = NiftiDataModule(str(root), class_names=names, rotate=degrees, affine_prob=0.2,
                         num_workers=0, val_fraction=0.25, test_fraction=0.25)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="segnet.data.sides"):
        dm.prepare_data()
    assert (f"data.rotate={degrees} turns a case past a right angle" in caplog.text) is warned


def test_black_and_white_labels_of_two_classes_read_white_as_the_foreground(tmp_path, caplog):
    """0/255 labels (ImageJ's binary masks, thresholded volumes saved as 8-bit) with two
    classes: 255 is class 1, said once; with three classes 255 is still refused, as a
    value past the classes."""
    import logging

    import nibabel as nib

    root = nifti_dataset(tmp_path / "d", "folders", n=3)
    for path in (root / "labels").iterdir():
        label = nib.load(str(path))
        white = (np.asarray(label.dataobj) > 0).astype(np.uint8) * 255
        nib.save(nib.Nifti1Image(white, label.affine), str(path))
    case = nifti.find_cases(root)[0]
    with caplog.at_level(logging.INFO):
        volume = nifti.load_volume(case, num_classes=2)
        nifti.load_volume(nifti.find_cases(root)[1], num_classes=2)
    expected = np.asarray(nib.as_closest_canonical(nib.load(str(case.label))).dataobj) == 255
    np.testing.assert_array_equal(volume.label, expected.astype(volume.label.dtype))
    assert caplog.text.count("hold 0 and 255") == 1
    with pytest.raises(nifti.NiftiDataError, match=r"holds values \[255\]"):
        nifti.load_volume(case, num_classes=3)


def test_a_class_no_training_label_holds_is_named_in_a_warning(caplog):
    import logging
    from types import SimpleNamespace

    from segnet.data.nifti_datamodule import absent_classes_said

    labels = [np.array([[[0, 1]]], np.uint8), np.array([[[0, 0]]], np.uint8)]
    volumes = [SimpleNamespace(label=x) for x in labels]
    with caplog.at_level(logging.WARNING):
        absent_classes_said(volumes, ["background", "anterior"])
    assert "occur in no training label" not in caplog.text
    with caplog.at_level(logging.WARNING):
        absent_classes_said(volumes, ["background", "anterior", "posterior"])
    assert "class(es) posterior occur in no training label" in caplog.text


def test_a_label_saved_with_a_trailing_axis_of_one_is_the_3d_label_it_holds(tmp_path):
    import nibabel as nib

    root = nifti_dataset(tmp_path / "d", "folders", n=2)
    case = nifti.find_cases(root)[0]
    plain = nifti.load_volume(case, num_classes=3).label
    label = nib.load(str(case.label))
    nib.save(nib.Nifti1Image(np.asarray(label.dataobj)[..., None], label.affine), str(case.label))
    np.testing.assert_array_equal(nifti.load_volume(case, num_classes=3).label, plain)
    flat = nib.Nifti1Image(np.zeros((4, 5, 1), np.uint8), np.eye(4))  # a slice keeps its axis
    assert nifti.three_axes(flat).shape == (4, 5, 1)


@pytest.mark.parametrize("white", [1, 255])
def test_two_valued_labels_with_no_class_named_are_background_and_foreground(
    tmp_path, caplog, white
):
    """A binary segmentation (0/1, or 0/255 as ImageJ saves it) with no dataset.json and
    no class named: background and foreground, said with the setting that names them, and
    recorded for evaluation; labels of three values still need their names."""
    import logging

    import nibabel as nib

    root = nifti_dataset(tmp_path / "d", "folders", n=4)
    with pytest.raises(ValueError, match="no class names for"):  # 0, 1 and 2
        NiftiDataModule(str(root), num_workers=0).prepare_data()
    for path in (root / "labels").iterdir():
        label = nib.load(str(path))
        two = (np.asarray(label.dataobj) > 0).astype(np.uint8) * white
        nib.save(nib.Nifti1Image(two, label.affine), str(path))
    dm = NiftiDataModule(str(root), num_workers=0, test_fraction=0)
    with caplog.at_level(logging.WARNING):
        dm.prepare_data()
        info = dm.info()
    assert info.class_names == ["background", "foreground"]
    assert f"hold 0 and {white}: read as background and foreground" in caplog.text
    assert dm.settings_found()["class_names"] == ["background", "foreground"]
    dm.setup("fit")
    assert set(np.unique(np.concatenate([v.label.ravel() for v in dm.volumes("train")]))) == {0, 1}


def test_nnunets_ignore_label_255_stays_void_in_a_case_of_0_and_255(tmp_path):
    """A sparsely annotated case (0 and the ignore label 255 only) of two classes: 255 is
    void, never read as the foreground."""
    import nibabel as nib

    root = nifti_dataset(tmp_path / "d", "folders", n=1)
    case = nifti.find_cases(root)[0]
    label = nib.load(str(case.label))
    sparse = np.where(np.asarray(label.dataobj) > 0, 255, 0).astype(np.uint8)
    nib.save(nib.Nifti1Image(sparse, label.affine), str(case.label))
    volume = nifti.load_volume(case, num_classes=2, ignore_value=255)
    assert set(np.unique(volume.label)) == {0, 2}  # 2: the void index past the classes


def test_no_class_named_and_an_unreadable_label_is_refused_naming_it_later(tmp_path):
    from segnet.data.nifti_datamodule import two_valued_labels

    root = nifti_dataset(tmp_path / "d", "folders", n=2)
    case = nifti.find_cases(root)[0]
    case.label.write_bytes(case.label.read_bytes()[:100])  # truncated
    assert two_valued_labels(nifti.find_cases(root)) is None


def test_a_patch_and_batch_left_null_are_planned_from_the_training_cases(tmp_path, caplog):
    """Thick slices (0.5 mm pixels, 2 mm apart): the patch is the median case on the grid
    training reads, cut to the budget along the fine axes; the batch fills its voxels;
    the window is the patch; the run records both, so that a resume and an evaluation
    take them as planned."""
    from segnet.data.patch_plan import plan_batch_size, plan_volume_patch

    root = spaced_dataset(tmp_path / "d", [(0.5, 0.5, 2.0)] * 6, shape=(24, 24, 20))
    dm = NiftiDataModule(
        str(root), spacing="median", patch_size=None, batch_size=None, max_patch_voxels=8192,
        batch_voxels=3 * 8192, val_fraction=0, test_fraction=0.2,
    )  # fmt: skip
    with caplog.at_level(logging.INFO):
        dm.prepare_data()
    info = dm.info()
    shapes = [(48, 48, 10)] * len(dm.splits["train"])
    expected = plan_volume_patch(shapes, (0.5, 0.5, 2.0), 8192)
    assert dm.patch_size == expected == (24, 24, 8)  # 12 mm, 12 mm, 16 mm
    assert info.patch_size == info.input_size == list(expected)
    assert info.sliding_window["roi_size"] == list(expected)
    assert dm.batch_size == plan_batch_size(expected, shapes, 3 * 8192) >= 2
    assert dm.settings_found()["patch_size"] == list(expected)
    assert dm.settings_found()["batch_size"] == dm.batch_size
    said = f"plan: {len(shapes)} training cases of median shape 48x48x10 at 0.5x0.5x2 mm"
    assert said in caplog.text
    # given ones are kept, and neither recorded as found
    given = NiftiDataModule(str(root), patch_size=[16, 16, 8], batch_size=2, test_fraction=0.2)
    given.prepare_data()
    assert given.info().patch_size == [16, 16, 8] and given.batch_size == 2
    assert "patch_size" not in given.settings_found()


def test_steps_per_epoch_sets_how_many_batches_an_epoch_holds(tmp_path):
    root = nifti_dataset(tmp_path / "d", n=5)
    dm = NiftiDataModule(
        str(root), patch_size=[8, 8, 8], batch_size=3, steps_per_epoch=7, num_workers=0,
        val_fraction=0.2, test_fraction=0.2,
    )  # fmt: skip
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 21 and len(dm.train_dataloader()) == 7
