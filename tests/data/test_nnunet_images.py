"""nnU-Net v2 datasets of 2D images, read as nnU-Net reads them: ``imagesTr/<case>_0000.png``
with ``labelsTr/<case>.png``, the classes (regions, ignore label) from dataset.json, a
labelled ``imagesTs/`` as the test split; what this tool cannot read is refused, named."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data.images import ImageDataError
from segnet.data.images_datamodule import ImageFolderDataModule
from segnet.data.nifti import NiftiDataError, find_cases
from tests.data.test_images import blob_label, prepared


def nnunet_2d(root, n: int = 6, test: int = 0, test_labels: bool = True, labels=None, rgb=True):
    """``n`` training cases (RGB ``case<k>_0000.png``, labels 0/1) and ``test`` test cases,
    with an nnU-Net v2 dataset.json."""
    for folder, count, prefix in (("Tr", n, "case"), ("Ts", test, "test")):
        for k in range(count):
            label = blob_label(24, 32, seed=k + 100 * (folder == "Ts"))
            image = (label * 120 + 60).astype(np.uint8)
            image = np.stack([image] * 3, -1) if rgb else image
            (root / f"images{folder}").mkdir(parents=True, exist_ok=True)
            Image.fromarray(image).save(root / f"images{folder}" / f"{prefix}{k}_0000.png")
            if folder == "Tr" or test_labels:
                (root / f"labels{folder}").mkdir(parents=True, exist_ok=True)
                Image.fromarray(label).save(root / f"labels{folder}" / f"{prefix}{k}.png")
    index = {
        "channel_names": {"0": "R", "1": "G", "2": "B"} if rgb else {"0": "grey"},
        "labels": labels or {"background": 0, "road": 1},
        "numTraining": n,
        "file_ending": ".png",
    }
    (root / "dataset.json").write_text(json.dumps(index))
    return root


def test_cases_pair_by_name_and_dataset_json_names_the_classes(tmp_path, caplog):
    root = nnunet_2d(tmp_path / "Dataset120_Roads", n=6, test=2, test_labels=False)
    with caplog.at_level(logging.INFO):
        dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    info = dm.info()
    assert info.class_names == ["background", "road"] and info.in_channels == 3
    names = dm.split_names()
    assert sorted(sum(names.values(), [])) == [f"case{k}.png" for k in range(6)]
    assert "imagesTs has no labels" in caplog.text  # left out, said
    dm.setup("fit")
    loaded = dm.load("train")[0]
    assert set(np.unique(loaded.label.numpy())) <= {0, 1} and loaded.label.max() == 1


def test_a_labelled_imagests_is_the_test_split_and_val_is_drawn_from_training(tmp_path):
    root = nnunet_2d(tmp_path / "d", n=6, test=3, test_labels=True)
    dm = prepared(root, val_fraction=0.34)
    names = dm.split_names()
    assert names["test"] == ["test/test0.png", "test/test1.png", "test/test2.png"]
    assert len(names["val"]) == 2 and len(names["train"]) == 4
    assert all(n.startswith("train/case") for n in names["train"] + names["val"])


def test_the_ignore_label_is_void_and_regions_come_from_dataset_json(tmp_path):
    labels = {"background": 0, "road": [1, 2], "lane": 2, "ignore": 5}
    root = nnunet_2d(tmp_path / "d", n=4, labels=labels)
    for path in (root / "labelsTr").iterdir():  # a lane inside each road, a void border
        label = np.array(Image.open(path))
        label[label == 1] = np.where(np.arange(32) % 4 == 0, 2, 1)[None].repeat(24, 0)[label == 1]
        label[0] = 5
        Image.fromarray(label).save(path)
    dm = prepared(root, val_fraction=0.25, test_fraction=0.25)
    info = dm.info()
    assert info.class_names == ["background", "label_1", "lane"]
    assert info.regions == {"road": [1, 2], "lane": [2]} and info.ignore_index == 3
    dm.setup("fit")
    label = dm.load("train")[0].label.numpy()
    assert set(np.unique(label)) == {0, 1, 2, 3} and (label[0] == 3).all()  # 5: void, 3


def test_a_dataset_json_naming_other_classes_than_a_checkpoint_is_seen_by_evaluation(tmp_path):
    root = nnunet_2d(tmp_path / "d", n=2)
    named = ImageFolderDataModule.class_names_in_data({"root": str(root), "csv": None})
    assert named == ["background", "road"]


def channel_files(root, n: int = 6, test: int = 0):
    """nnU-Net's one grey file per channel: ``case<k>_0000.png`` (the disc bright) and
    ``case<k>_0001.png`` (16-bit, the disc dark), labels 0/1."""
    root = nnunet_2d(root, n=n, test=test, rgb=False)
    for folder in ("imagesTr", "imagesTs"):
        for first in sorted((root / folder).glob("*_0000.png")) if (root / folder).is_dir() else ():
            grey = np.array(Image.open(first)).astype(np.uint16)
            second = first.with_name(first.name.replace("_0000", "_0001"))
            Image.fromarray((255 - grey) * 200).save(second)
    index = json.loads((root / "dataset.json").read_text())
    index["channel_names"] = {"0": "bright", "1": "dark"}
    (root / "dataset.json").write_text(json.dumps(index))
    return root


def test_one_grey_file_per_channel_stacks_into_the_bands_of_a_case(tmp_path):
    root = channel_files(tmp_path / "d", n=4)
    dm = prepared(root, val_fraction=0.25, test_fraction=0.25)
    info = dm.info()
    assert info.in_channels == 2 and info.normalization["color_mode"] == "bands:2"
    assert dm.pairs[0].channels == (root / "imagesTr" / "case0_0001.png",)
    dm.setup("fit")
    image = dm.load("train")[0]
    assert image.image.shape[0] == 2


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("gap", r"case case1 .* has the channel files case1_0000.png, case1_0002.png"),
        ("fewer", r"case case1 .* has 1 channel file\(s\) and case case0 2"),
        ("colour", r"case2_0001.png is one of 2 channel files of its case and is RGB"),
    ],
)
def test_channel_files_that_do_not_stack_are_refused_naming_the_case(tmp_path, breakage, message):
    root = channel_files(tmp_path / "d", n=3)
    if breakage == "gap":
        (root / "imagesTr" / "case1_0001.png").rename(root / "imagesTr" / "case1_0002.png")
    elif breakage == "fewer":
        (root / "imagesTr" / "case1_0001.png").unlink()
    else:
        Image.new("RGB", (32, 24)).save(root / "imagesTr" / "case2_0001.png")
    with pytest.raises(ImageDataError, match=message):
        prepared(root)


def test_a_model_of_channel_files_predicts_each_case_once_named_by_case(tmp_path):
    from segnet.commands.predict import main as predict
    from segnet.commands.train import train
    from tests.commands.test_train_images import QUICK
    from tests.conftest import compose

    root = channel_files(tmp_path / "d", n=8, test=2)
    train(compose("train", [*QUICK, f"data.root={root}"], tmp_path / "run"))
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    predict([f"model={best}", f"inputs={root / 'imagesTs'}", f"out={tmp_path / 'masks'}"])
    written = sorted(p.name for p in (tmp_path / "masks").iterdir())
    # named by case, as nnU-Net and evaluate.py name them
    assert written == ["test0.png", "test0_color.png", "test1.png", "test1_color.png"]
    with pytest.raises(SystemExit, match=r"test0.png exists"):  # never overwritten
        predict([f"model={best}", f"inputs={root / 'imagesTs'}", f"out={tmp_path / 'masks'}"])
    with pytest.raises(
        SystemExit, match="test0_0001.png: this model takes nnU-Net.s one grey file"
    ):
        predict([f"model={best}", f"inputs={root / 'imagesTs' / 'test0_0001.png'}",
                 f"out={tmp_path / 'one'}"])  # fmt: skip


def test_an_image_without_a_channel_number_is_refused(tmp_path):
    root = nnunet_2d(tmp_path / "d", n=3)
    (root / "imagesTr" / "case2_0000.png").rename(root / "imagesTr" / "case2.png")
    with pytest.raises(ImageDataError, match=r"case2.png: nnU-Net names each image file"):
        prepared(root)


def test_a_dataset_of_volumes_points_at_the_volume_recipes_and_back(tmp_path):
    volumes = tmp_path / "Dataset004_Hippocampus"
    (volumes / "imagesTr").mkdir(parents=True)
    (volumes / "labelsTr").mkdir()
    (volumes / "imagesTr" / "hippo_001_0000.nii.gz").write_bytes(b"")
    (volumes / "dataset.json").write_text(json.dumps({"labels": {"background": 0, "a": 1},
                                                      "file_ending": ".nii.gz"}))  # fmt: skip
    with pytest.raises(ImageDataError, match="nnU-Net dataset of volumes .*experiment=hippocampus"):
        prepared(volumes)
    images = nnunet_2d(tmp_path / "Dataset120_Roads", n=2)
    with pytest.raises(NiftiDataError, match=r"holds 2D images \(.png\).*images_quick"):
        find_cases(images)


def test_a_folder_setting_reads_the_folders_as_plain_ones(tmp_path):
    """data.image_dir names the folders itself: nnU-Net's naming is not assumed."""
    root = nnunet_2d(tmp_path / "d", n=3)
    dm = prepared(root, image_dir="imagesTr", label_dir="labelsTr", image_name="{id}_0000")
    assert sorted(sum(dm.split_names().values(), [])) == [f"case{k}_0000.png" for k in range(3)]


def test_a_dataset_json_of_another_layout_is_not_read(tmp_path):
    from tests.data.test_images import make_folder

    root = make_folder(tmp_path / "d", n=4)
    (root / "dataset.json").write_text(json.dumps({"labels": ["a", "b"]}))  # someone else's
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert dm.info().class_names == ["background", "disc"]
    assert ImageFolderDataModule.class_names_in_data({"root": str(root), "csv": None}) is None


def test_only_a_model_of_channel_files_reads_inputs_as_channel_files(tmp_path):
    from segnet.data import images as img

    root = channel_files(tmp_path / "d", n=2)
    dm = prepared(root, image_name="{id}_0000")  # nnU-Net's naming written out: the same
    assert dm.info().normalization["channel_files"] is True and dm.pairs[0].channels
    first, second = root / "imagesTr" / "case0_0000.png", root / "imagesTr" / "case0_0001.png"
    assert img.read_input(first, "bands:2", channel_files=True).shape == (24, 32, 2)
    assert img.first_channel(second, channel_files=True) == first
    # a model of multi-band files named tile_0000.tif, tile_0001.tif: each file an input
    assert img.first_channel(second, channel_files=False) is None
    second.unlink()
    with pytest.raises(ImageDataError, match="has 1 channel file.*takes of 2 band"):
        img.read_input(first, "bands:2", channel_files=True)
    Image.new("RGB", (32, 24)).save(second)
    with pytest.raises(ImageDataError, match="case0_0001.png is one of 2 channel files .* RGB"):
        img.read_input(first, "bands:2", channel_files=True)
