"""A volume case's image in a file per channel: nnU-Net's numbered files (v2 folders, v1's
dataset.json), BraTS's files named by modality in a folder per case; read as one image of
those channels, and predicted from the same files."""

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from segnet.data import nifti, volume_channels
from segnet.data.errors import DataError
from segnet.data.nifti_datamodule import NiftiDataModule
from tests.helpers import nifti_case

BRATS = ("flair", "t1", "t1ce", "t2")


def save(array, path: Path, affine=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, np.eye(4) if affine is None else affine), str(path))


def case_channels(seed: int, count: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``count`` channels of a case, each its own: channel k is the label's image times
    k + 1 (so which file went where shows), and the label."""
    image, label, _ = nifti_case(seed=seed)
    return [image * (k + 1) for k in range(count)], label


def nnunet_channels(root: Path, n: int = 4, count: int = 2, v1: bool = False) -> Path:
    """nnU-Net's layout of ``count`` channel files per case (``case_000_0000.nii.gz`` ...
    beside the label ``case_000.nii.gz``): v2's dataset.json lists no cases, v1's lists
    each by its case's name."""
    for i in range(n):
        channels, label = case_channels(i, count)
        for k, image in enumerate(channels):
            save(image, root / "imagesTr" / f"case_{i:03d}_{k:04d}.nii.gz")
        save(label, root / "labelsTr" / f"case_{i:03d}.nii.gz")
    index = {"labels": {"background": 0, "one": 1, "two": 2}, "numTraining": n,
             "channel_names": {str(k): f"MR{k}" for k in range(count)}}  # fmt: skip
    if v1:
        index = {"labels": {"0": "background", "1": "one", "2": "two"}, "training": [
            {"image": f"./imagesTr/case_{i:03d}.nii.gz", "label": f"./labelsTr/case_{i:03d}.nii.gz"}
            for i in range(n)
        ]}  # fmt: skip
    (root / "dataset.json").write_text(json.dumps(index))
    return root


def brats_folders(root: Path, n: int = 4, sep: str = "_", words=BRATS) -> Path:
    """A folder per case of a file per modality and a ``_seg`` label (BraTS 2021; with
    ``sep="-"`` and its other words, BraTS 2023)."""
    for i in range(n):
        case = f"BraTS2021_{i:05d}"
        # written in another order than the words sort in: the order is the words'
        channels, label = case_channels(i, len(words))
        for word, image in reversed(list(zip(sorted(words), channels, strict=True))):
            save(image, root / case / f"{case}{sep}{word}.nii.gz")
        save(label, root / case / f"{case}{sep}seg.nii.gz")
    return root


def test_nnunet_v2_channel_files_are_one_case_each_read_as_its_channels_in_order(tmp_path):
    root = nnunet_channels(tmp_path / "Dataset001_Two", n=4, count=3)
    cases = nifti.find_cases(root)
    assert [c.name for c in cases] == ["case_000", "case_001", "case_002", "case_003"]
    images = root / "imagesTr"
    assert cases[1].image_files == tuple(images / f"case_001_{k:04d}.nii.gz" for k in range(3))
    assert cases[1].channel_words == ("0000", "0001", "0002")
    volume = nifti.load_volume(cases[1], 3)
    channels, label = case_channels(1, 3)
    assert volume.image.shape == (3, *label.shape)
    for k in range(3):  # each channel from its own file, in channel order
        np.testing.assert_allclose(volume.image[k], channels[k], rtol=1e-6)
    np.testing.assert_array_equal(volume.label, label)
    dm = NiftiDataModule(str(root), val_fraction=0.25, test_fraction=0.25)
    dm.prepare_data()
    info = dm.info()
    assert info.in_channels == 3
    assert info.normalization["channel_suffixes"] == ["0000", "0001", "0002"]


def test_nnunet_v1_dataset_json_lists_a_case_of_channel_files_by_its_name(tmp_path):
    root = nnunet_channels(tmp_path / "Task001_Two", n=2, count=2, v1=True)
    cases = nifti.find_cases(root)
    assert [c.image.name for c in cases] == ["case_000_0000.nii.gz", "case_001_0000.nii.gz"]
    assert [c.name for c in cases] == ["case_000", "case_001"]
    assert cases[0].channels == (root / "imagesTr" / "case_000_0001.nii.gz",)


def test_a_single_numbered_channel_is_a_case_named_by_case(tmp_path):
    root = nnunet_channels(tmp_path / "d", n=2, count=1)
    cases = nifti.find_cases(root)
    assert [c.name for c in cases] == ["case_000", "case_001"]
    assert cases[0].channels == () and cases[0].channel_words == ("0000",)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (
            "gap",
            r"case case_001 .* has the channel files case_001_0000.nii.gz, "
            r"case_001_0002.nii.gz: .* without a gap",
        ),  # fmt: skip
        ("fewer", r"case case_001 .* has 1 channel file\(s\) and case case_000 2"),
    ],
)
def test_numbered_channels_that_do_not_make_cases_alike_are_refused(tmp_path, breakage, message):
    root = nnunet_channels(tmp_path / "d", n=3, count=2)
    second = root / "imagesTr" / "case_001_0001.nii.gz"
    if breakage == "gap":
        second.rename(second.with_name("case_001_0002.nii.gz"))
    else:
        second.unlink()
    with pytest.raises(DataError, match=message):
        nifti.find_cases(root)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (
            "shape",
            r"channel files .*case_000_0000.nii.gz and .*case_000_0001.nii.gz of case "
            r"case_000 have different shapes \(\(19, 23, 17\) and \(19, 23, 16\)\)",
        ),  # fmt: skip
        ("affine", r"case_000_0001.nii.gz of case case_000 have different affines"),
        ("4d", r"channel file .*case_000_0001.nii.gz of case case_000 has shape \(19, 23, 17, 2\)"),
    ],
)
def test_channel_files_that_do_not_stack_are_refused_naming_both(tmp_path, breakage, message):
    root = nnunet_channels(tmp_path / "d", n=2, count=2)
    path = root / "imagesTr" / "case_000_0001.nii.gz"
    image = nib.load(path).get_fdata(dtype=np.float32)
    if breakage == "shape":
        save(image[..., :-1], path)
    elif breakage == "affine":
        save(image, path, np.diag([1.0, 1.0, 2.0, 1.0]))
    else:
        save(np.stack([image, image], -1), path)
    case = nifti.find_cases(root)[0]
    with pytest.raises(nifti.NiftiDataError, match=message):
        nifti.load_volume(case)


@pytest.mark.parametrize(("sep", "words"), [("_", BRATS), ("-", ("t1c", "t1n", "t2f", "t2w"))])
def test_a_folder_per_case_of_a_file_per_modality_is_a_case_of_those_channels(tmp_path, sep, words):
    root = brats_folders(tmp_path / "BraTS", n=3, sep=sep, words=words)
    cases = nifti.find_cases(root)
    assert [c.name for c in cases] == ["BraTS2021_00000", "BraTS2021_00001", "BraTS2021_00002"]
    assert cases[0].channel_words == tuple(sorted(words))  # t1 before t1ce: alphabetical
    assert cases[0].label.name == f"BraTS2021_00000{sep}seg.nii.gz"
    assert [p.name for p in cases[0].image_files] == [
        f"BraTS2021_00000{sep}{w}.nii.gz" for w in sorted(words)
    ]
    volume = nifti.load_volume(cases[2], 3)
    channels, _ = case_channels(2, len(words))
    for k in range(len(words)):
        np.testing.assert_allclose(volume.image[k], channels[k], rtol=1e-6)


def test_a_case_folder_with_other_modalities_than_the_rest_is_refused_naming_it(tmp_path):
    root = brats_folders(tmp_path / "BraTS", n=4)
    (root / "BraTS2021_00002" / "BraTS2021_00002_t1ce.nii.gz").unlink()
    with pytest.raises(DataError, match=r"each with the channel files flair, t1, t1ce, t2, but "
                       r"case BraTS2021_00002 has flair, t1, t2 \(.*BraTS2021_00002\)"):  # fmt: skip
        nifti.find_cases(root)


def test_a_case_folder_of_one_image_is_still_one_channel(tmp_path):
    for i in range(3):
        image, label, _ = nifti_case(seed=i)
        save(image, tmp_path / f"case_{i:05d}" / "imaging.nii.gz")
        save(label, tmp_path / f"case_{i:05d}" / "segmentation.nii.gz")
    cases = nifti.find_cases(tmp_path)
    assert [c.image.name for c in cases] == ["imaging.nii.gz"] * 3
    assert all(c.channels == () and c.channel_words == () for c in cases)


def test_channel_words_from_names():
    named = volume_channels.named_channels
    case = "BraTS-GLI-00000-000"
    assert list(named([Path(f"{case}/{case}-t1c.nii.gz"),
                       Path(f"{case}/{case}-t1n.nii.gz")], case)) == ["t1c", "t1n"]  # fmt: skip
    assert list(named([Path("x/only.nii")], "x")) == [""]
    # files not named as their case, or of two kinds: not channels
    assert named([Path("c/imaging.nii.gz"), Path("c/tumor.nii.gz")], "c") is None
    assert named([Path("c/c_t1.nii.gz"), Path("c/c_t2.nii")], "c") is None
    words = ("t1", "t1ce")
    case_of = volume_channels.case_of
    assert case_of(Path("B_001_t1ce.nii.gz"), words) == ("B_001", "t1ce")  # never read as t1
    assert case_of(Path("B_001/t1.nii.gz"), words) == ("B_001", "t1")  # named by its folder
    assert case_of(Path("B_001_t2.nii.gz"), words) is None
    assert case_of(Path("xt1.nii.gz"), words) is None  # no separator before the word
    first = volume_channels.first_file
    assert first(Path("d/B_001_t1ce.nii.gz"), words) == Path("d/B_001_t1.nii.gz")
    assert first(Path("d/B_001_t1.nii.gz"), words) is None


def test_a_case_missing_a_channel_file_is_refused_naming_it(tmp_path):
    images = tmp_path / "in"
    save(np.zeros((4, 4, 4), np.float32), images / "B_001_t1.nii.gz")
    with pytest.raises(DataError, match=r"B_001_t1.nii.gz is channel 't1' of case B_001, .*"
                       r"B_001_t1ce.nii.gz is missing"):  # fmt: skip
        volume_channels.files_of_case(images / "B_001_t1.nii.gz", ("t1", "t1ce"))


def test_a_model_of_channel_files_trains_evaluates_and_predicts_each_case_by_name(tmp_path):
    """Trained on BraTS's folders, the model reads a case from the same files: evaluate
    and predict name each prediction by its case, a further channel's file is never a
    case of its own, and a case missing a channel is refused before any is written."""
    from segnet.commands.evaluate import evaluate
    from segnet.commands.predict import main as predict
    from segnet.commands.train import train
    from tests.commands.test_train_volumes import FAST
    from tests.conftest import compose

    root = brats_folders(tmp_path / "BraTS", n=6, words=("t1", "t2"))
    _, objects = train(compose("train", ["experiment=hippocampus_unet3d", f"data.root={root}",
                                         *FAST, "trainer.max_epochs=1", "data.class_names=[background,one,two]"], tmp_path / "run"))  # fmt: skip
    best = objects["best_ckpt"]
    info = objects["module"].data_info
    assert info.in_channels == 2 and info.normalization["channel_suffixes"] == ["t1", "t2"]
    assert (
        objects["module"].net.state_dict()[next(iter(objects["module"].net.state_dict()))].shape[1]
        == 2
    )

    ev = [f"ckpt_path={best}", "save_predictions=true", "trainer.accelerator=cpu",
          "data.num_workers=0"]  # fmt: skip
    evaluate(compose("evaluate", ev, tmp_path / "ev"))
    test = objects["datamodule"].splits["test"]
    written = sorted(p.name for p in (tmp_path / "ev" / "predictions").glob("*.nii.gz"))
    assert written == sorted(f"{objects['datamodule'].cases[i].name}.nii.gz" for i in test)

    # other cases' channel files must be the ones trained on: evaluating nnU-Net's
    # numbered files (which of them is t1?) is refused before anything is scored
    numbered = nnunet_channels(tmp_path / "numbered", n=3, count=2)
    with pytest.raises(DataError, match=r"data.channels=\['t1', 't2'\] .* case case_000 .* "
                       r"has the channel files 0000, 0001"):  # fmt: skip
        evaluate(compose("evaluate", [*ev, f"data.root={numbered}", "data.split=all"],
                         tmp_path / "ev_numbered"))  # fmt: skip

    # new cases: a folder per case, each predicted once, named by its case, where it was
    new = brats_folders(tmp_path / "new", n=2, words=("t1", "t2"))
    for seg in new.glob("*/*_seg.nii.gz"):
        seg.unlink()
    predict([f"model={best}", f"inputs={new}", f"out={tmp_path / 'masks'}"])
    masks = sorted(
        str(p.relative_to(tmp_path / "masks")) for p in (tmp_path / "masks").rglob("*.nii.gz")
    )
    assert masks == [
        "BraTS2021_00000/BraTS2021_00000.nii.gz",
        "BraTS2021_00001/BraTS2021_00001.nii.gz",
    ]
    source = nib.load(new / "BraTS2021_00001" / "BraTS2021_00001_t1.nii.gz")
    assert nib.load(tmp_path / "masks" / masks[1]).shape == source.shape

    (new / "BraTS2021_00001" / "BraTS2021_00001_t2.nii.gz").unlink()
    with pytest.raises(SystemExit, match=r"BraTS2021_00001_t2.nii.gz is missing"):
        predict([f"model={best}", f"inputs={new}", f"out={tmp_path / 'again'}"])
    assert not (tmp_path / "again").exists()  # refused before any was written
    plain = tmp_path / "plain.nii.gz"
    save(np.zeros((8, 8, 8), np.float32), plain)
    with pytest.raises(SystemExit, match=r"reads a case from <case>_t1 with t2 beside it"):
        predict([f"model={best}", f"inputs={plain}", f"out={tmp_path / 'plain'}"])
    with pytest.raises(SystemExit, match=r"a further channel of its case, .* \(BraTS2021_00000_t1"):
        predict([f"model={best}", f"inputs={new / 'BraTS2021_00000' / 'BraTS2021_00000_t2.nii.gz'}",
                 f"out={tmp_path / 'one'}"])  # fmt: skip


def test_a_model_of_numbered_files_names_its_predictions_by_case(tmp_path):
    from segnet.data.formats import Volumes
    from segnet.data.info import DataInfo, zscore_normalization
    from tests.helpers import data_info

    described = data_info(3, spatial_dims=3)
    info = DataInfo(
        **{**described, "normalization": zscore_normalization(None, None, None, ["0000"])}
    )
    given = tmp_path / "hippocampus_001_0000.nii.gz"
    assert Volumes().targets(given, tmp_path / "out", info) == [
        tmp_path / "out" / "hippocampus_001.nii.gz"
    ]
    # a model of one 4D file per case names its predictions as its inputs
    plain = DataInfo(**described)
    assert Volumes().targets(given, tmp_path / "out", plain) == [tmp_path / "out" / given.name]


def test_a_case_folder_of_images_not_named_as_channels_is_not_read_as_them(tmp_path, caplog):
    """A mask beside KiTS19's image (``tumor.nii.gz``) is no channel: such folders are not
    a folder per case; ACDC's folder of two frames, one labelled, pairs the frame with
    its label as before (not two channels of one label)."""
    import logging

    kits = tmp_path / "kits"
    for i in range(3):
        image, label, _ = nifti_case(seed=i)
        for name, array in (("imaging", image), ("tumor", label), ("segmentation", label)):
            save(array, kits / f"case_{i:05d}" / f"{name}.nii.gz")
    with pytest.raises(DataError, match=r"has neither dataset.json"):
        nifti.find_cases(kits)
    acdc = tmp_path / "acdc"
    for i in range(4):
        image, label, _ = nifti_case(seed=i)
        patient = acdc / f"patient{i:03d}"
        save(image, patient / f"{patient.name}_ED.nii.gz")
        save(image, patient / f"{patient.name}_ES.nii.gz")
        save(label, patient / f"{patient.name}_ED_gt.nii.gz")
    with caplog.at_level(logging.WARNING):
        cases = nifti.find_cases(acdc)
    assert [(c.image.name, c.channels, c.group) for c in cases][0] == (
        "patient000_ED.nii.gz",
        (),
        "patient000",
    )
    assert len(cases) == 4 and "patient000_ES" in caplog.text  # unlabelled frames, said


def test_cases_of_other_channels_than_the_rest_are_refused_from_their_names(tmp_path):
    """nnU-Net v1 lists each case alone, and a folder may mix a case of channel files with
    a plain one: refused when the cases are found, not when one is read (a test case's
    after training)."""
    root = nnunet_channels(tmp_path / "v1", n=3, count=2, v1=True)
    (root / "imagesTr" / "case_001_0001.nii.gz").unlink()
    with pytest.raises(DataError, match=r"case case_001 \(.*case_001_0000.nii.gz\) has one image "
                       r"file and case case_000 .* 2 channel files \(0000, 0001\)"):  # fmt: skip
        nifti.find_cases(root)
    mixed = nnunet_channels(tmp_path / "v2", n=3, count=2)
    second = mixed / "imagesTr" / "case_002_0001.nii.gz"
    second.rename(second.with_name("case_002_0001.nii"))
    with pytest.raises(DataError, match=r"case case_002 .* give a case's channels one kind"):
        nifti.find_cases(mixed)


def test_channels_given_set_the_order_and_a_run_records_the_ones_it_found(tmp_path):
    root = brats_folders(tmp_path / "BraTS", n=4, words=("t1", "t2"))
    dm = NiftiDataModule(str(root), class_names=["bg", "one", "two"], val_fraction=0.25,
                         test_fraction=0.25)  # fmt: skip
    dm.prepare_data()
    assert dm.settings_found() == {"channels": ["t1", "t2"]}
    turned = NiftiDataModule(str(root), class_names=["bg", "one", "two"], channels=["t2", "t1"],
                             val_fraction=0.25, test_fraction=0.25)  # fmt: skip
    turned.prepare_data()
    assert turned.settings_found() == {}  # given, so recorded as the run's own setting
    assert turned.info().normalization["channel_suffixes"] == ["t2", "t1"]
    case = turned.cases[0]
    assert [p.name for p in case.image_files] == [
        f"{case.name}_t2.nii.gz",
        f"{case.name}_t1.nii.gz",
    ]
    volume = nifti.load_volume(case, 3)
    channels, _ = case_channels(0, 2)
    np.testing.assert_allclose(volume.image[0], channels[1], rtol=1e-6)  # t2 first now
    with pytest.raises(DataError, match=r"data.channels=\['t1', 'flair'\]"):
        NiftiDataModule(str(root), class_names=["bg", "one", "two"],
                        channels=["t1", "flair"]).prepare_data()  # fmt: skip


def test_a_datalist_naming_each_cases_channel_files_reads_them_in_its_order(tmp_path, caplog):
    """A MONAI datalist (dataset.json whose cases list their channel files, each with a
    fold): the case named by what the files share, its channels in the list's order, the
    folds said not to be read; a case without a label is refused, naming it."""
    root = brats_folders(tmp_path / "BraTS", n=3, words=("t1", "t2"))
    entries = [
        {"fold": i, "label": f"BraTS2021_{i:05d}/BraTS2021_{i:05d}_seg.nii.gz",
         "image": [f"BraTS2021_{i:05d}/BraTS2021_{i:05d}_{w}.nii.gz" for w in ("t2", "t1")]}
        for i in range(3)
    ]  # fmt: skip
    (root / "dataset.json").write_text(json.dumps({"labels": {"0": "background", "1": "a",
                                                               "2": "b"}, "training": entries}))  # fmt: skip
    with caplog.at_level("INFO"):
        cases = nifti.find_cases(root)
    assert "gives each case a fold: data.fold=k makes fold k the val split" in caplog.text
    assert [c.name for c in cases] == ["BraTS2021_00000", "BraTS2021_00001", "BraTS2021_00002"]
    assert cases[1].channel_words == ("t2", "t1")
    channels, _ = case_channels(1, 2)  # t1 the first file written, t2 the second
    volume = nifti.load_volume(cases[1], 3)
    assert np.allclose(volume.image[0], channels[1]) and np.allclose(volume.image[1], channels[0])
    # data.fold picks the datalist's fold as val; the others train, and no case is test
    dm = NiftiDataModule(str(root), fold=1, class_names=["background", "a", "b"])
    dm.describe()
    assert [dm.cases[i].name for i in dm.splits["val"]] == ["BraTS2021_00001"]
    assert len(dm.splits["train"]) == 2 and not dm.splits["test"]
    with pytest.raises(
        DataError, match=r"data.fold=4: the datalist gives its cases the folds \[0, 1, 2\]"
    ):
        NiftiDataModule(str(root), fold=4).describe()
    del entries[2]["label"]
    (root / "dataset.json").write_text(
        json.dumps({"labels": {"0": "background"}, "training": entries})
    )
    with pytest.raises(DataError, match=r"training case 2 is .*; each case is \{\"image\""):
        nifti.find_cases(root)


def test_a_csv_of_a_column_per_channel_reads_them_in_the_columns_order(tmp_path):
    """``image_t2,image_t1,label``: a case per row, its channels in the columns' order and
    named by them; an empty channel cell, or an ``image`` column beside them, is refused."""
    root = brats_folders(tmp_path / "BraTS", n=3, words=("t1", "t2"))
    rows = ["image_t2,image_t1,label,split"] + [
        f"{c}/{c}_t2.nii.gz,{c}/{c}_t1.nii.gz,{c}/{c}_seg.nii.gz,{s}"
        for c, s in (("BraTS2021_00000", "train"), ("BraTS2021_00001", "val"),
                     ("BraTS2021_00002", "test"))
    ]  # fmt: skip
    (root / "cases.csv").write_text("\n".join(rows) + "\n")
    cases = nifti.find_cases(root, root / "cases.csv")
    assert [c.name for c in cases] == ["BraTS2021_00000", "BraTS2021_00001", "BraTS2021_00002"]
    assert cases[2].channel_words == ("t2", "t1") and cases[2].split == "test"
    channels, _ = case_channels(2, 2)  # t1 the first written, t2 the second
    volume = nifti.load_volume(cases[2], 3)
    assert np.allclose(volume.image[0], channels[1]) and np.allclose(volume.image[1], channels[0])
    (root / "cases.csv").write_text("\n".join([rows[0], rows[1], rows[2].replace("_t1.nii.gz", "")
                                               .split(",", 1)[0] + ",," + rows[2].split(",")[2]]))  # fmt: skip
    with pytest.raises(DataError, match=r"cases.csv line 3 \(.*_t2.nii.gz\) has no image_t1"):
        nifti.find_cases(root, root / "cases.csv")
    (root / "cases.csv").write_text("image_t1,label\na,b\n")  # one channel's column alone
    with pytest.raises(DataError, match=r"it has 'image_t1', 'label'\); for a file per channel"):
        nifti.find_cases(root, root / "cases.csv")


def test_datalists_and_csvs_of_other_forms_read_as_meant(tmp_path, caplog):
    """A one-file list is a case as any; a datalist's validation cases are the val split;
    channel files named by modality alone are named by their folder; a CSV's image_*
    columns beside an 'image' column are notes; channel files not named as their columns
    say are warned about."""
    root = tmp_path / "MONAI"
    channels, label = case_channels(0, 2)
    for i in range(3):
        for word, image in zip(("flair", "t1"), channels, strict=True):
            save(image, root / f"c{i}" / f"{word}.nii.gz")
        save(label, root / f"c{i}" / "seg.nii.gz")

    def entry(i, words):
        return {"image": [f"c{i}/{w}.nii.gz" for w in words], "label": f"c{i}/seg.nii.gz"}

    index = {"labels": {"0": "background", "1": "a", "2": "b"},
             "training": [entry(0, ("flair", "t1")), entry(1, ("flair", "t1"))],
             "validation": [entry(2, ("flair", "t1"))]}  # fmt: skip
    (root / "dataset.json").write_text(json.dumps(index))
    cases = nifti.find_cases(root)
    assert [(c.name, c.split, c.channel_words) for c in cases] == [
        ("c0", "train", ("flair", "t1")), ("c1", "train", ("flair", "t1")),
        ("c2", "val", ("flair", "t1")),
    ]  # fmt: skip
    # a list of one file: the case named as that file, of one channel
    for i in range(2):
        (root / f"c{i}" / "t1.nii.gz").rename(root / f"c{i}" / f"case_{i}.nii.gz")
    index["training"] = [
        {"image": [f"c{i}/case_{i}.nii.gz"], "label": f"c{i}/seg.nii.gz"} for i in range(2)
    ]
    index.pop("validation")
    (root / "dataset.json").write_text(json.dumps(index))
    assert [(c.name, c.channels, c.split) for c in nifti.find_cases(root)] == [
        ("case_0", (), None),
        ("case_1", (), None),
    ]
    # a CSV: image_* columns beside 'image' are notes; channel columns of files not
    # named by them are warned about
    (root / "notes.csv").write_text(
        "image,label,image_id\nc0/case_0.nii.gz,c0/seg.nii.gz,7\nc1/case_1.nii.gz,c1/seg.nii.gz,8\n"
    )
    assert [c.name for c in nifti.find_cases(root, root / "notes.csv")] == ["case_0", "case_1"]
    (root / "channels.csv").write_text(
        "image_t1,image_flair,label\nc2/flair.nii.gz,c2/t1.nii.gz,c2/seg.nii.gz\n"
    )
    with caplog.at_level("WARNING"):
        nifti.find_cases(root, root / "channels.csv")
    assert "flair.nii.gz is not named <case>_t1 as its column image_t1 says" in caplog.text
