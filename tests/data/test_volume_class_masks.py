"""Volumes labelled by a folder of one mask per class, as TotalSegmentator and
AbdomenAtlas keep them (``s0000/ct.nii.gz`` beside ``s0000/segmentations/liver.nii.gz``):
read as one label map per case, trained, evaluated and predicted from the command line."""

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from segnet.data import formats, nifti
from segnet.data.errors import DataError
from segnet.data.nifti_datamodule import NiftiDataModule
from segnet.data.volume_class_masks import combine_masks
from segnet.data.volume_layouts import nifti_files

STRUCTURES = ("spleen", "liver", "kidney_left")
AFFINE = np.diag([1.5, 1.5, 2.0, 1.0])


def save(array, path: Path, affine=AFFINE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, affine), str(path))


def label_of_case(seed: int, shape=(20, 22, 18)) -> np.ndarray:
    """Three boxes, one per structure (1 spleen, 2 liver, 3 kidney_left), a little moved
    from case to case."""
    rng = np.random.default_rng(seed)
    label = np.zeros(shape, np.uint8)
    x, y, z = rng.integers(0, 3, 3)
    label[2 + x : 8 + x, 3:10, 2:8] = 1
    label[11:17, 4 + y : 10 + y, 9:15] = 2
    label[3:9, 13:19, 8 + z : 14 + z] = 3
    return label


def class_mask_cases(root: Path, n: int = 6, structures=STRUCTURES) -> Path:
    """TotalSegmentator's layout: ``s<i>/ct.nii.gz`` and ``s<i>/segmentations/<name>.nii.gz``,
    mask k (in ``structures``' order) holding structure k + 1 of :func:`label_of_case`."""
    for i in range(n):
        label = label_of_case(i)
        image = label * 200.0 - 300 + np.random.default_rng(i).normal(0, 30, label.shape)
        save(image.astype(np.int16), root / f"s{i:04d}" / "ct.nii.gz")
        for k, name in enumerate(structures):
            mask = (label == k + 1).astype(np.uint8)
            save(mask, root / f"s{i:04d}" / "segmentations" / f"{name}.nii.gz")
    return root


def test_a_case_is_its_image_and_its_masks_read_as_one_label_map(tmp_path, caplog):
    root = class_mask_cases(tmp_path / "TotalSeg")
    (root / "meta.csv").write_text("image_id;split\n")  # files beside the cases are no case
    dm = NiftiDataModule(str(root), val_fraction=0.2, test_fraction=0.2)
    with caplog.at_level("INFO"):
        info = dm.describe()
    assert "one mask per class (ct.nii.gz with segmentations/: 3 classes" in caplog.text
    # the classes are the masks' names, in name order, background first
    assert info.class_names == ["background", "kidney_left", "liver", "spleen"]
    case = dm.cases[0]
    assert case.name == "s0000" and case.image == root / "s0000" / "ct.nii.gz"
    assert case.label == root / "s0000" / "segmentations"
    volume = nifti.load_volume(case, info.num_classes)
    truth = label_of_case(0)  # 1 spleen, 2 liver, 3 kidney_left
    expected = np.select([truth == 3, truth == 2, truth == 1], [1, 2, 3], 0)
    assert np.array_equal(volume.label, expected)  # RAS already: a diagonal affine


def test_class_names_choose_and_order_the_masks_trained_on(tmp_path, caplog):
    root = class_mask_cases(tmp_path / "TotalSeg")
    dm = NiftiDataModule(str(root), class_names=["liver", "spleen"])
    with caplog.at_level("INFO"):
        info = dm.describe()
    assert info.class_names == ["background", "liver", "spleen"]
    assert "2 of the 3 masks per case are read (liver, spleen)" in caplog.text
    volume = nifti.load_volume(dm.cases[0], info.num_classes)
    truth = label_of_case(0)
    # the kidney is background now; liver 1, spleen 2 as named
    assert np.array_equal(volume.label, np.select([truth == 2, truth == 1], [1, 2], 0))
    # a checkpoint's classes come back with background first: the same reading
    again = NiftiDataModule(str(root), class_names=["background", "liver", "spleen"])
    assert again.describe().class_names == info.class_names
    # ... and a dataset.json's names may be written otherwise ("Liver")
    capital = NiftiDataModule(str(root), class_names=["background", "Liver", "Spleen"])
    assert capital.describe().class_names == info.class_names
    with pytest.raises(DataError, match=r"kidney_left, liver, spleen\); pancreas is none of them"):
        NiftiDataModule(str(root), class_names=["liver", "pancreas"]).describe()


def test_a_case_of_other_masks_is_refused_naming_it(tmp_path):
    root = class_mask_cases(tmp_path / "TotalSeg", n=4)
    (root / "s0002" / "segmentations" / "liver.nii.gz").unlink()
    with pytest.raises(DataError, match=r"s0002/segmentations\) lacks a mask of liver, against"):
        NiftiDataModule(str(root)).describe()
    # the classes every case has, named, train: the others' voxels are background
    chosen = NiftiDataModule(str(root), class_names=["spleen", "kidney_left"]).describe()
    assert chosen.class_names == ["background", "spleen", "kidney_left"]
    save(np.zeros((20, 22, 18), np.uint8), root / "s0002" / "segmentations" / "liver.nii.gz")
    save(np.zeros((20, 22, 18), np.uint8), root / "s0003" / "segmentations" / "aorta.nii.gz")
    with pytest.raises(DataError, match=r"s0003/segmentations\) has masks of aorta besides"):
        NiftiDataModule(str(root)).describe()
    (root / "s0003" / "segmentations" / "aorta.nii.gz").rename(root / "s0003" / "liver.nii")
    with pytest.raises(
        DataError, match=r"s0003 holds ct.nii.gz, liver.nii, segmentations/kidney_left"
    ):
        NiftiDataModule(str(root)).describe()  # a folder that fits no case is never left out
    (root / "s0003" / "liver.nii").rename(root / "s0003" / "segmentations" / "liver.nii")
    with pytest.raises(DataError, match=r"liver.nii and .*liver.nii.gz are both masks of 'liver'"):
        NiftiDataModule(str(root)).describe()


def test_overlapping_or_many_valued_masks_are_refused_naming_the_files():
    a, b = np.array([0, 1, 1, 0]), np.array([0, 0, 1, 1])
    with pytest.raises(DataError, match=r"masks a.nii and b.nii \(case s1\) overlap on 1 voxel"):
        combine_masks([a, b], ["a.nii", "b.nii"], "s1")
    with pytest.raises(
        DataError, match=r"mask b.nii \(case s1\) holds 2 values besides 0 \(1, 2\)"
    ):
        combine_masks([a, np.array([0, 0, 1, 2])], ["a.nii", "b.nii"], "s1")
    # a mask of any one value inside (255, a float 1.0) is its class
    inside = combine_masks([a * 255, np.array([1.0, 0, 0, 1.0])], ["a", "b"], "s1")
    assert inside.tolist() == [2, 1, 1, 2]


def test_a_label_file_beside_the_masks_is_not_read(tmp_path, caplog):
    """AbdomenAtlas's ``combined_labels.nii.gz`` beside ``segmentations/``: the masks are
    read, as they name their classes and the label map does not; said."""
    root = class_mask_cases(tmp_path / "cases", n=3)
    for i in range(3):
        save(label_of_case(i), root / f"s{i:04d}" / "combined_labels.nii.gz")
    with caplog.at_level("INFO"):
        cases = nifti.find_cases(root)
    assert [c.label.name for c in cases] == ["segmentations"] * 3
    assert [c.image.name for c in cases] == ["ct.nii.gz"] * 3
    assert "3 case(s) also hold a label file beside their masks" in caplog.text
    # without the mask folders, the label files are the labels, as before (KiTS19's)
    for i in range(3):
        for mask in (root / f"s{i:04d}" / "segmentations").iterdir():
            mask.unlink()
        (root / f"s{i:04d}" / "segmentations").rmdir()
    assert [c.label.name for c in nifti.find_cases(root)] == ["combined_labels.nii.gz"] * 3


def structure_set_cases(root: Path, beside: bool, n: int = 4) -> Path:
    """Radiotherapy structure sets as DICOM converters write them: dcmrtstruct2nii's
    ``P<i>/image.nii.gz`` beside ``P<i>/mask_<Structure>.nii.gz`` (``beside``), or
    platipy's ``P<i>/IMAGES/P<i>_CT.nii.gz`` beside ``P<i>/STRUCTURES/P<i>_<Structure>``."""
    for i in range(n):
        label, case = label_of_case(i), root / f"P{i}"
        image = label * 100.0 + np.random.default_rng(i).normal(0, 10, label.shape)
        save(
            image.astype(np.float32),
            case / ("image.nii.gz" if beside else f"IMAGES/P{i}_CT.nii.gz"),
        )
        for k, name in enumerate(["Spleen", "Liver", "Kidney_L"]):
            mask = case / (f"mask_{name}.nii.gz" if beside else f"STRUCTURES/P{i}_{name}.nii.gz")
            save((label == k + 1).astype(np.uint8), mask)
    return root


@pytest.mark.parametrize("beside", [True, False], ids=["dcmrtstruct2nii", "platipy"])
def test_structure_sets_of_dicom_converters_are_masks_named_by_their_structure(tmp_path, beside):
    root = structure_set_cases(tmp_path / "RT", beside)
    cases = nifti.find_cases(root)
    assert [c.name for c in cases] == ["P0", "P1", "P2", "P3"]
    assert [c.image.name for c in cases][:2] == (
        ["image.nii.gz"] * 2 if beside else ["P0_CT.nii.gz", "P1_CT.nii.gz"]
    )
    # each class named by its structure alone: not by the case, nor by "mask_"
    assert [n for n, _ in cases[1].class_masks] == ["Kidney_L", "Liver", "Spleen"]
    info = NiftiDataModule(str(root), val_fraction=0.25, test_fraction=0.25).describe()
    assert info.class_names == ["background", "Kidney_L", "Liver", "Spleen"]
    label = nifti.load_volume(cases[2], 4).label
    assert np.array_equal(
        label, np.select([label_of_case(2) == k for k in (3, 2, 1)], [1, 2, 3], 0)
    )
    # predicting the folder: the images, not the masks nor the structures' folder
    found = formats.input_files_below(root)
    assert [f.parent.parent if not beside else f.parent for f in found] == [
        root / f"P{i}" for i in range(4)
    ]
    assert all("CT" in f.name or f.name == "image.nii.gz" for f in found)
    # structure sets often differ from patient to patient: the classes every case has train
    mask = next(p for _, p in cases[3].class_masks if "Liver" in p.name)
    mask.unlink()
    with pytest.raises(DataError, match=r"case P3 \(.*\) lacks a mask of Liver"):
        NiftiDataModule(str(root)).describe()
    chosen = NiftiDataModule(str(root), class_names=["Spleen", "Kidney_L"]).describe()
    assert chosen.class_names == ["background", "Spleen", "Kidney_L"]


def test_structure_names_and_case_folders_that_are_not_structure_sets(tmp_path, caplog):
    from segnet.data.volume_class_masks import class_names_of

    names = class_names_of
    # the case's name at a mask's start goes, mask by mask; a whole-name match stays
    assert names([Path("P_00_Heart.nii.gz"), Path("External.nii.gz")], "P_00", False) == [
        "Heart", "External",
    ]  # fmt: skip
    assert names([Path("P_00.nii.gz"), Path("P_001_x.nii.gz")], "P_00", False) == [
        "P_00", "P_001_x",
    ]  # fmt: skip
    # a word every mask shares to say so goes beside the image only: a segmentations/
    # folder's liver_mask stays the class it was
    assert names([Path("mask_ROI_1.nii.gz"), Path("mask_Heart.nii")], "P", True) == [
        "ROI_1", "Heart",
    ]  # fmt: skip
    assert names([Path("liver_mask.nii.gz"), Path("spleen_mask.nii")], "P", False) == [
        "liver_mask", "spleen_mask",
    ]  # fmt: skip
    # an image beside its label and a mask of something else pairs by the label's name
    for i in range(3):
        case = tmp_path / "bids" / f"sub-0{i}"
        save(np.zeros((8, 8, 8), np.float32), case / f"sub-0{i}_T1w.nii.gz")
        save(label_of_case(i)[:8, :8, :8], case / f"sub-0{i}_T1w_seg.nii.gz")
        save(np.ones((8, 8, 8), np.uint8), case / f"sub-0{i}_brain_mask.nii.gz")
    cases = nifti.find_cases(tmp_path / "bids")
    assert [(c.image.name, c.label.name) for c in cases][0] == (
        "sub-00_T1w.nii.gz",
        "sub-00_T1w_seg.nii.gz",
    )
    assert not cases[0].class_masks
    # a structure named as a region of interest is a mask too: not predicted, not an image
    rt = tmp_path / "rt_case"
    for name in ("image", "mask_ROI_1", "mask_Heart"):
        save(np.zeros((8, 8, 8), np.uint8), rt / f"{name}.nii.gz")
    assert formats.input_files(rt) == [rt / "image.nii.gz"]
    from segnet.data.volume_class_masks import mask_folder

    held = mask_folder(nifti_files(rt), {})
    assert held.image == rt / "image.nii.gz" and len(held.mask_files) == 2
    # platipy's folder of a patient not contoured: left out, said, not refused
    root = structure_set_cases(tmp_path / "RT", beside=False)
    save(np.zeros((8, 8, 8), np.float32), root / "P9" / "IMAGES" / "P9_CT.nii.gz")
    with caplog.at_level("WARNING"):
        assert len(nifti.find_cases(root)) == 4
    assert "P9" in caplog.text


def nested_cases(root: Path, n: int = 6) -> Path:
    """dcmrtstruct2nii's layout, a ``Body`` mask holding the organs' masks (``Liver``,
    ``Spleen``: structures 2 and 1 of :func:`label_of_case`), as structure sets do."""
    for i in range(n):
        label, case = label_of_case(i), root / f"P{i}"
        body = np.zeros(label.shape, np.uint8)
        body[1:19, 1:21, 1:17] = 1
        image = label * 100.0 + body * 50 + np.random.default_rng(i).normal(0, 10, label.shape)
        save(image.astype(np.float32), case / "image.nii.gz")
        save(body, case / "mask_Body.nii.gz")
        for k, name in enumerate(["Spleen", "Liver"]):
            save((label == k + 1).astype(np.uint8), case / f"mask_{name}.nii.gz")
    return root


def test_masks_that_overlap_are_regions_and_their_combinations_the_classes(tmp_path):
    root = nested_cases(tmp_path / "RT")
    dm = NiftiDataModule(str(root), val_fraction=0.2, test_fraction=0.2)
    info = dm.describe()
    # bits in the masks' order (Body 1, Liver 2, Spleen 4): the combinations the cases hold
    assert info.class_names == ["background", "Body", "Body+Liver", "Body+Spleen"]
    assert info.regions == {"Body": [1, 2, 3], "Liver": [2], "Spleen": [3]}
    assert info.monitor == "val/region_dice" and info.num_classes == 4
    label = nifti.load_volume(dm.cases[2], info.num_classes).label
    truth = label_of_case(2)
    body = np.zeros(truth.shape, bool)
    body[1:19, 1:21, 1:17] = True
    assert np.array_equal(label, np.select([truth == 1, truth == 2, body], [3, 2, 1], 0))
    # the run records them: evaluation reads the masks as the checkpoint's regions
    found = dm.settings_found()
    assert found == {"regions": info.regions, "class_names": info.class_names}
    again = NiftiDataModule(str(root), **found).describe()
    assert (again.class_names, again.regions) == (info.class_names, info.regions)
    # regions given otherwise are regions of the masks' label map, as they always were
    given = {"organs": [1, 2], "liver": [1]}
    over = NiftiDataModule(str(root), class_names=["Liver", "Spleen"], regions=given).describe()
    assert over.regions == given and over.class_names == ["background", "Liver", "Spleen"]
    # a checkpoint's regions and classes, in other case than the masks' files: as trained
    upper = {"regions": {k.upper(): v for k, v in info.regions.items()},
             "class_names": ["background", *(n.upper() for n in info.class_names[1:])]}  # fmt: skip
    assert NiftiDataModule(str(root), **upper).describe().class_names == upper["class_names"]
    # masks that do not overlap, named alone: one class per voxel, as before
    apart = NiftiDataModule(str(root), class_names=["Liver", "Spleen"]).describe()
    assert apart.class_names == ["background", "Liver", "Spleen"] and apart.regions is None
    # a case whose masks overlap otherwise: a class of its own when training, and refused,
    # named, where a checkpoint fixes the classes
    body = np.asarray(nib.load(root / "P5" / "mask_Body.nii.gz").dataobj).copy()
    body[label_of_case(5) == 2] = 0
    save(body, root / "P5" / "mask_Body.nii.gz")
    fixed = NiftiDataModule(str(root), **found)
    fixed.describe()
    with pytest.raises(DataError, match=r"case P5 hold Liver on 216 voxel\(s\), a combination"):
        nifti.load_volume(next(c for c in fixed.cases if c.name == "P5"), 4)
    retrained = NiftiDataModule(str(root)).describe()
    assert retrained.class_names == ["background", "Body", "Liver", "Body+Liver", "Body+Spleen"]


def test_predicting_a_folder_of_cases_leaves_their_mask_folders_out(tmp_path):
    root = class_mask_cases(tmp_path / "TotalSeg", n=2)
    found = formats.input_files_below(root)
    assert found == [root / "s0000" / "ct.nii.gz", root / "s0001" / "ct.nii.gz"]
    # a 2D dataset's root given as it is: its images, not its masks
    from PIL import Image

    for folder in ("images", "masks"):
        (tmp_path / "flat" / folder).mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "flat" / folder / "1.png")
    assert formats.input_files_below(tmp_path / "flat") == [tmp_path / "flat" / "images" / "1.png"]
    # ... and so with a split folder in each
    for folder in ("images", "masks"):
        (tmp_path / "flat" / folder / "1.png").rename(tmp_path / "flat" / f"{folder}.png")
        (tmp_path / "flat" / folder / "train").mkdir()
        (tmp_path / "flat" / f"{folder}.png").rename(tmp_path / "flat" / folder / "train" / "1.png")
    found = formats.input_files_below(tmp_path / "flat")
    assert found == [tmp_path / "flat" / "images" / "train" / "1.png"]
    # a folder whose name holds a mask's word among others is a dataset, not its labels
    (tmp_path / "flat" / "masks").rename(tmp_path / "flat" / "Kvasir-SEG")
    assert len(formats.input_files_below(tmp_path / "flat")) == 2


def test_a_class_mask_run_trains_evaluates_and_predicts_label_maps(tmp_path):
    from segnet.commands.evaluate import evaluate
    from segnet.commands.predict import main as predict
    from segnet.commands.train import train
    from tests.commands.test_train_volumes import FAST
    from tests.conftest import compose

    root = class_mask_cases(tmp_path / "TotalSeg", n=8)
    settings = ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST]
    metrics, objects = train(
        compose("train", [*settings, "trainer.max_epochs=1"], tmp_path / "run")
    )
    assert {"test/dice/liver", "test/dice/spleen", "test/dice/kidney_left"} <= set(metrics)
    best = objects["best_ckpt"]
    ev = [f"ckpt_path={best}", "save_predictions=true", "trainer.accelerator=cpu",
          "data.num_workers=0"]  # fmt: skip
    scores, _ = evaluate(compose("evaluate", ev, tmp_path / "ev"))
    assert scores["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)
    test = [objects["datamodule"].cases[i].name for i in objects["datamodule"].splits["test"]]
    saved = sorted(p.name for p in (tmp_path / "ev" / "predictions").glob("*.nii.gz"))
    assert saved == sorted(f"{name}.nii.gz" for name in test)
    # the same cases as label maps, a dataset.json naming the classes in other case
    msd = tmp_path / "msd"
    for i in range(8):
        case = f"s{i:04d}"
        save(nib.load(root / case / "ct.nii.gz").get_fdata(), msd / "imagesTr" / f"{case}.nii.gz")
        truth = label_of_case(i)
        save(np.select([truth == 3, truth == 2, truth == 1], [1, 2, 3], 0).astype(np.uint8),
             msd / "labelsTr" / f"{case}.nii.gz")  # fmt: skip
    labels = {"background": 0, "Kidney_Left": 1, "Liver": 2, "Spleen": 3}
    (msd / "dataset.json").write_text(json.dumps({"labels": labels}))
    as_maps, _ = evaluate(compose("evaluate", [*ev, f"+data.root={msd}"], tmp_path / "ev_msd"))
    assert as_maps["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)
    predict([f"model={best}", f"inputs={root}", f"out={tmp_path / 'masks'}"])
    written = sorted(
        p.relative_to(tmp_path / "masks") for p in (tmp_path / "masks").rglob("*.nii*")
    )
    assert written == [Path(f"s{i:04d}") / "ct.nii.gz" for i in range(8)]
    mask = nib.load(tmp_path / "masks" / written[0])
    assert mask.shape == (20, 22, 18) and np.asarray(mask.dataobj).max() <= 3


def test_a_label_folder_of_a_folder_per_class_pairs_by_name(tmp_path):
    """``images/s0.nii.gz`` with ``labels/liver/s0.nii.gz`` ...: the 2D layout of a mask
    per class, for volumes; an image lacking a class's mask is refused, named."""
    cases = class_mask_cases(tmp_path / "cases", n=3)
    root = tmp_path / "plain"
    for i in range(3):
        case = cases / f"s{i:04d}"
        (root / "images").mkdir(parents=True, exist_ok=True)
        (case / "ct.nii.gz").rename(root / "images" / f"s{i}.nii.gz")
        for mask in (case / "segmentations").iterdir():
            (root / "labels" / mask.name.split(".")[0]).mkdir(parents=True, exist_ok=True)
            mask.rename(root / "labels" / mask.name.split(".")[0] / f"s{i}.nii.gz")
    dm = NiftiDataModule(str(root), val_fraction=0.34, test_fraction=0.0)
    assert dm.describe().class_names == ["background", "kidney_left", "liver", "spleen"]
    volume = nifti.load_volume(dm.cases[1], 4)
    truth = label_of_case(1)
    assert np.array_equal(
        volume.label, np.select([truth == 3, truth == 2, truth == 1], [1, 2, 3], 0)
    )
    (root / "labels" / "liver" / "s2.nii.gz").unlink()
    with pytest.raises(DataError, match=r"liver/ has no mask named s2 for .*s2.nii.gz"):
        nifti.find_cases(root)


def test_masks_that_overlap_but_cannot_be_regions_are_refused_naming_them(tmp_path, caplog):
    root = nested_cases(tmp_path / "RT", n=4)
    for i in range(4):  # a mask no case holds
        save(np.zeros((20, 22, 18), np.uint8), root / f"P{i}" / "mask_Tumor.nii.gz")
    with pytest.raises(DataError, match=r"overlap, .* but Tumor hold\(s\) no voxel in any case"):
        NiftiDataModule(str(root)).describe()
    assert NiftiDataModule(str(root), class_names=["Body", "Liver"]).describe().regions
    for i in range(4):  # '+' joins the names of combinations
        (root / f"P{i}" / "mask_Tumor.nii.gz").unlink()
        margin = (label_of_case(i) == 2).astype(np.uint8)
        save(margin, root / f"P{i}" / "mask_Liver+5mm.nii.gz")
    with pytest.raises(DataError, match=r"the mask\(s\) Liver\+5mm have '\+' in their names"):
        NiftiDataModule(str(root)).describe()
    # outlines that touch: trained as regions, warned
    for i in range(4):
        spleen = (label_of_case(i) == 1).astype(np.uint8)
        liver = (label_of_case(i) == 2).astype(np.uint8)
        liver[np.argwhere(spleen)[0][0], np.argwhere(spleen)[0][1], np.argwhere(spleen)[0][2]] = 1
        save(liver, root / f"P{i}" / "mask_Liver.nii.gz")
    with caplog.at_level("INFO"):
        info = NiftiDataModule(str(root), class_names=["Liver", "Spleen"]).describe()
    assert info.class_names == ["background", "Liver", "Spleen", "Liver+Spleen"]
    assert "masks that touch rather than hold one another: Liver+Spleen 4 voxels" in caplog.text
    # masks of two grids in a case
    save(np.zeros((20, 22, 17), np.uint8), root / "P2" / "mask_Spleen.nii.gz")
    with pytest.raises(DataError, match=r"mask_Spleen.nii.gz \(case P2\) is \(20, 22, 17\)"):
        NiftiDataModule(str(root), class_names=["Liver", "Spleen"]).describe()


@pytest.mark.slow  # the default suite reads the masks as a checkpoint would, untrained
def test_a_run_of_overlapping_masks_trains_regions_and_evaluates_as_trained(tmp_path):
    from segnet.commands.evaluate import evaluate
    from segnet.commands.train import train
    from tests.commands.test_train_volumes import FAST
    from tests.conftest import compose

    root = nested_cases(tmp_path / "RT", n=8)
    settings = ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST]
    metrics, objects = train(
        compose("train", [*settings, "trainer.max_epochs=1"], tmp_path / "run")
    )
    assert {"test/region_dice/Body", "test/region_dice/Liver", "test/dice/Body+Spleen"} <= set(
        metrics
    )
    assert objects["module"].hparams["data_cfg"]["regions"] == {
        "Body": [1, 2, 3], "Liver": [2], "Spleen": [3],
    }  # fmt: skip
    ev = [f"ckpt_path={objects['best_ckpt']}", "trainer.accelerator=cpu", "data.num_workers=0"]
    scores, _ = evaluate(compose("evaluate", ev, tmp_path / "ev"))
    assert scores["test/region_dice"] == pytest.approx(metrics["test/region_dice"], abs=1e-6)
    assert scores["test/dice"] == pytest.approx(metrics["test/dice"], abs=1e-6)


def test_classes_chosen_among_masks_are_read_back_on_label_maps(tmp_path):
    """A run given data.class_names (masks, no background) records them so; an evaluation
    on label maps reads the checkpoint's classes, background first."""
    from segnet.commands.evaluate import settle_data
    from segnet.runs.building import build_datamodule, build_module
    from tests.commands.test_train_volumes import FAST
    from tests.conftest import compose

    root = class_mask_cases(tmp_path / "TotalSeg", n=6)
    settings = ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST,
                "data.class_names=[liver,spleen]"]  # fmt: skip
    cfg = compose("train", settings, tmp_path / "train")
    dm = build_datamodule(cfg)
    dm.prepare_data()
    module = build_module(cfg, dm)
    msd = tmp_path / "msd"
    for i in range(6):
        save(
            nib.load(root / f"s{i:04d}" / "ct.nii.gz").get_fdata(),
            msd / "imagesTr" / f"c{i}.nii.gz",
        )
        truth = label_of_case(i)
        save(
            np.select([truth == 2, truth == 1], [1, 2], 0).astype(np.uint8),
            msd / "labelsTr" / f"c{i}.nii.gz",
        )
    ev = compose("evaluate", ["ckpt_path=x.ckpt", "trainer.accelerator=cpu", f"+data.root={msd}",
                              "data.split=all"], tmp_path / "ev")  # fmt: skip
    read, _ = settle_data(ev, [module], [tmp_path / "x.ckpt"])
    assert read.info().class_names == ["background", "liver", "spleen"]
    # cases whose masks overlap read as regions: a network of one class per voxel cannot
    # score them, and says so rather than comparing its classes with their combinations
    for i in range(6):
        liver = root / f"s{i:04d}" / "segmentations" / "liver.nii.gz"
        save((label_of_case(i) > 0).astype(np.uint8), liver)
    ev = compose("evaluate", ["ckpt_path=x.ckpt", "trainer.accelerator=cpu"], tmp_path / "ev2")
    with pytest.raises(ValueError, match=r"trained for the classes .*, and the data given reads"):
        settle_data(ev, [module], [tmp_path / "x.ckpt"])
