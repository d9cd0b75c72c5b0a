"""dataset.json, as the Decathlon and nnU-Net v2 write it: class names, regions and the
ignore label, read alike for volumes and 2D images; a volume dataset's ignore label is
left out of training and scores."""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest
import torch

from segnet.commands.train import train
from segnet.data.dataset_json import indexed_classes
from segnet.data.errors import DataError
from segnet.data.nifti import NiftiDataError
from segnet.data.nifti_datamodule import NiftiDataModule
from segnet.training.metrics import per_case_surface
from tests.commands.test_train_volumes import FAST
from tests.conftest import compose
from tests.helpers import nifti_dataset


def write_index(folder, labels, **more):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps({"labels": labels, **more}))
    return folder


@pytest.mark.parametrize(
    "labels",
    [{"0": "background", "2": "b", "1": "a"}, {"background": 0, "b": 2, "a": 1}],
    ids=["decathlon", "nnunet_v2"],
)
def test_class_names_in_label_value_order_in_either_form(tmp_path, labels):
    found = indexed_classes(write_index(tmp_path, labels))
    assert found.class_names == ["background", "a", "b"]
    assert found.ignore_value is None and found.regions is None


def test_the_ignore_label_is_no_class(tmp_path):
    found = indexed_classes(write_index(tmp_path, {"background": 0, "a": 1, "ignore": 2}))
    assert found.class_names == ["background", "a"] and found.ignore_value == 2


def test_regions_with_an_ignore_label(tmp_path):
    labels = {"background": 0, "whole": [1, 2], "core": 2, "ignore": 3}
    found = indexed_classes(write_index(tmp_path, labels, regions_class_order=[1, 2]))
    assert found.class_names == ["background", "label_1", "core"]
    assert found.regions == {"whole": [1, 2], "core": [2]}
    assert found.regions_class_order == [1, 2] and found.ignore_value == 3


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"background": 0, "a": 1, "ignore": 1}, "ignore label 1 is not an integer above"),
        ({"background": 0, "a": 2}, r"label values \[0, 2\] are not 0, 1, 2"),
        ({"background": 0, "a": "x"}, "maps neither label values to names"),
    ],
)
def test_labels_that_cannot_be_read_are_refused_naming_the_file(tmp_path, labels, message):
    write_index(tmp_path, labels)
    with pytest.raises(DataError, match=message) as err:
        indexed_classes(tmp_path)
    assert str(tmp_path / "dataset.json") in str(err.value)


def test_a_folder_without_dataset_json_names_no_classes(tmp_path):
    assert indexed_classes(tmp_path) is None
    (tmp_path / "dataset.json").write_text("{not json")
    with pytest.raises(DataError, match="is not valid JSON"):
        indexed_classes(tmp_path)


def ignore_dataset(root, ignore: int, regions: bool = False):
    """The generated Decathlon cases with a slab of each label set to ``ignore``, and an
    nnU-Net v2 index naming it the ignore label (with regions: a whole of both classes)."""
    root = nifti_dataset(root, "msd", n=10)
    for path in (root / "labelsTr").glob("*.nii.gz"):
        stored = nib.load(str(path))
        label = np.asarray(stored.dataobj).copy()
        label[:, :, :4] = ignore
        nib.save(nib.Nifti1Image(label, stored.affine), str(path))
    index = json.loads((root / "dataset.json").read_text())
    index["labels"] = {"background": 0, "one": 1, "two": 2, "ignore": ignore}
    if regions:
        index["labels"] = {"background": 0, "whole": [1, 2], "two": 2, "ignore": ignore}
    (root / "dataset.json").write_text(json.dumps(index))
    return root


def test_a_volume_ignore_label_is_read_as_the_index_past_the_classes(tmp_path):
    root = ignore_dataset(tmp_path / "d", ignore=7)
    dm = NiftiDataModule(str(root), num_workers=0, val_fraction=0.2, test_fraction=0.2)
    dm.prepare_data()
    info = dm.info()
    assert info.class_names == ["background", "one", "two"] and info.ignore_index == 3
    volume = dm.volumes("train")[0]
    assert set(np.unique(volume.label)) == {0, 1, 2, 3}
    assert (volume.label[:, :, :4] == 3).all()  # the slab, in RAS as stored (identity)


def test_class_names_that_reach_the_ignore_label_are_refused(tmp_path):
    root = ignore_dataset(tmp_path / "d", ignore=3)
    dm = NiftiDataModule(
        str(root), class_names=["background", "one", "two", "three"], num_workers=0
    )
    with pytest.raises(NiftiDataError, match="makes label value 3 its ignore label"):
        dm.prepare_data()
        dm.info()


@pytest.mark.parametrize("regions", [False, True], ids=["classes", "regions"])
def test_a_volume_run_with_an_ignore_label_trains_and_scores_the_classes_alone(tmp_path, regions):
    root = ignore_dataset(tmp_path / "d", ignore=3, regions=regions)
    overrides = ["experiment=hippocampus_unet3d", f"data.root={root}", *FAST]
    metrics, _ = train(compose("train", overrides, tmp_path / "run"))
    saved = (tmp_path / "run" / "metrics.json").read_text()
    assert {"test/dice/two", "test/hd95/two"} <= set(metrics)
    assert ("test/region_hd95/whole" in metrics) == regions
    assert not any("ignore" in key for key in metrics) and '"ignore"' not in saved


def test_surface_scores_leave_out_what_is_predicted_where_the_label_is_ignored():
    target = torch.zeros(1, 12, 12, 12, dtype=torch.long)
    target[0, 2:6, 2:6, 2:6] = 1
    target[0, :, :, 9:] = 2  # ignored
    pred = target.masked_fill(target == 2, 0)
    pred[0, 4:8, 4:8, 10:] = 1  # a blob inside the ignored slab
    spacing = torch.ones(1, 3)
    kept, _ = per_case_surface(pred, target, 2, spacing, 1.0, ignore_index=2)
    assert kept[0, 1] == 0.0
    counted, _ = per_case_surface(pred, target.masked_fill(target == 2, 0), 2, spacing, 1.0)
    assert counted[0, 1] > 3.0


def test_a_list_of_one_value_is_that_value_as_nnunet_reads_it(tmp_path):
    found = indexed_classes(write_index(tmp_path, {"background": 0, "a": [1], "b": [2]}))
    assert found.class_names == ["background", "a", "b"] and found.regions is None


def test_patches_centre_on_labelled_foreground_not_on_ignored_voxels(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=4)
    for path in (root / "labelsTr").glob("*.nii.gz"):
        stored = nib.load(str(path))
        label = np.asarray(stored.dataobj).copy()
        label[:, :, 13:] = 3  # away from the two blobs (z 5 to 12)
        nib.save(nib.Nifti1Image(label, stored.affine), str(path))
    index = json.loads((root / "dataset.json").read_text())
    index["labels"] = {"background": 0, "one": 1, "two": 2, "ignore": 3}
    (root / "dataset.json").write_text(json.dumps(index))
    dm = NiftiDataModule(str(root), num_workers=0, val_fraction=0.25, test_fraction=0.0,
                         patch_size=(4, 4, 4), foreground_ratio=1.0, samples_per_volume=8,
                         rotate90=False, flip=False)  # fmt: skip
    dm.prepare_data()
    dm.setup("fit")
    patches = [dm.datasets["train"][i] for i in range(len(dm.datasets["train"]))]
    assert set(patches[0]) == {"image", "label", "index"}
    assert all(((p["label"] == 1) | (p["label"] == 2)).any() for p in patches)


def test_a_checkpoint_that_trained_the_ignore_label_as_a_class_scores_it_as_one(tmp_path):
    root = ignore_dataset(tmp_path / "d", ignore=3)
    dm = NiftiDataModule(str(root), class_names=["background", "one", "two", "ignore"],
                         num_workers=0)  # fmt: skip
    dm.prepare_data()
    info = dm.info()
    assert info.ignore_index is None and info.class_names[-1] == "ignore"
