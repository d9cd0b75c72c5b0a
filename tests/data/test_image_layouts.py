"""Folders of images laid out as the well-known datasets lay them out (split folders inside
the image and mask folders, as ADE20K; a subfolder per city or patient, as Cityscapes and
slice exports), and splits drawn by group so one patient's images are never both trained
and tested on."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.data.images import ImageDataError, find_pairs
from segnet.data.splits import given_or_drawn, split_groups
from tests.data.test_images import blob_label, prepared

TWO = dict(class_names=["background", "disc"], label_values=[0, 255])


def write_pair(image_path, mask_path, seed: int, size=(24, 32)) -> None:
    label = blob_label(*size, seed)
    image = (label * 120 + 60 + np.random.default_rng(seed).normal(0, 10, size)).clip(0, 255)
    for path, array in ((image_path, image), (mask_path, label * 255)):
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(array.astype(np.uint8)).save(path)


def patient_folders(root, patients: int = 6, slices: int = 4):
    """images/p<k>/<n>.png with masks/p<k>/<n>.png: the same file names in every patient."""
    for k in range(patients):
        for n in range(slices):
            write_pair(root / "images" / f"p{k}" / f"{n}.png", root / "masks" / f"p{k}" / f"{n}.png",
                       seed=10 * k + n)  # fmt: skip
    return root


def test_split_folders_inside_the_image_and_mask_folders_ade20k_style(tmp_path, caplog):
    root = tmp_path / "ADEChallengeData2016"
    for split, n in (("training", 5), ("validation", 2)):
        for i in range(n):
            write_pair(root / "images" / split / f"ADE_{split}_{i}.jpg",
                       root / "annotations" / split / f"ADE_{split}_{i}.png", seed=i)  # fmt: skip
    write_pair(root / "images" / "testing" / "ADE_test_0.jpg", tmp_path / "elsewhere.png", 0)
    with caplog.at_level(logging.WARNING, logger="segnet.data.image_pairs"):
        dm = prepared(root, **TWO)
    names = dm.split_names()
    assert names["train"] == [f"train/ADE_training_{i}.jpg" for i in range(5)]
    assert names["val"] == ["val/ADE_validation_0.jpg", "val/ADE_validation_1.jpg"]
    assert names["test"] == []  # its images have no masks: left out, and said
    assert "testing has no masks" in caplog.text and "segnet.predict" in caplog.text


def test_subfolders_pair_with_the_same_subfolders_cityscapes_style(tmp_path):
    root = tmp_path / "cityscapes"
    for split, cities in (("train", ("aachen", "bremen")), ("val", ("lindau",))):
        for city in cities:
            for i in range(2):
                stem = f"{city}_00000{i}_000019"
                write_pair(root / "leftImg8bit" / split / city / f"{stem}_leftImg8bit.png",
                           root / "gtFine" / split / city / f"{stem}_gtFine_labelIds.png", i)  # fmt: skip
                # the other files beside each mask match no rule and are not read
                Image.new("RGB", (32, 24)).save(
                    root / "gtFine" / split / city / f"{stem}_gtFine_color.png"
                )
    pairs = find_pairs(root, None, "leftImg8bit", "gtFine", None, "{id}_leftImg8bit",
                       "{id}_gtFine_labelIds")  # fmt: skip
    assert len(pairs) == 6 and {p.split for p in pairs} == {"train", "val"}
    first = pairs[0]
    assert first.name == "train/aachen/aachen_000000_000019_leftImg8bit.png"
    assert first.label.name == "aachen_000000_000019_gtFine_labelIds.png"
    assert first.label.parent.name == "aachen" and first.group == "aachen"
    assert first.output_stem() == "aachen/aachen_000000_000019_leftImg8bit"
    assert first.output_stem(keep_split=True) == "train/" + first.output_stem()


def test_drawn_splits_keep_each_patient_whole(tmp_path, caplog):
    root = patient_folders(tmp_path / "slices")
    with caplog.at_level(logging.INFO, logger="segnet.data.splits"):
        dm = prepared(root, val_fraction=0.2, test_fraction=0.2, **TWO)
    names = dm.split_names()
    patients = {s: {n.split("/")[0] for n in names[s]} for s in ("train", "val", "test")}
    assert all(len(names[s]) == 4 * len(patients[s]) for s in patients)  # whole patients
    assert not patients["train"] & patients["val"] and not patients["train"] & patients["test"]
    assert not patients["val"] & patients["test"]
    assert len(patients["val"]) == len(patients["test"]) == 1  # the fractions count patients
    assert "drawn by group" in caplog.text and "6 groups" in caplog.text
    # the same names in every patient are told apart by their subfolder
    assert len(set(dm.case_names())) == 24 and "p0/0.png" in dm.case_names()


def test_splits_drawn_image_by_image_where_asked(tmp_path):
    root = patient_folders(tmp_path / "slices")
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2, groups=False, **TWO)
    names = dm.split_names()
    in_train = {n.split("/")[0] for n in names["train"]}
    assert in_train & {n.split("/")[0] for n in names["test"]}  # seed 0 mixes patients


def test_predictions_follow_the_subfolder(tmp_path):
    root = patient_folders(tmp_path / "slices", patients=3, slices=2)
    dm = prepared(root, test_fraction=0.34, val_fraction=0.34, **TWO)
    dm.setup("test")
    (tested,) = {n.split("/")[0] for n in dm.split_names()["test"]}
    out = tmp_path / "predictions"
    for i in range(len(dm.datasets["test"])):
        dm.save_prediction(torch.zeros(24, 32, dtype=torch.long), i, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png")) == [
        f"{tested}/0.png", f"{tested}/0_color.png", f"{tested}/1.png", f"{tested}/1_color.png"
    ]  # fmt: skip


def test_hidden_files_are_not_images(tmp_path):
    root = patient_folders(tmp_path / "d", patients=2, slices=2)
    for junk in ("__MACOSX/p0/._0.png", ".ipynb_checkpoints/0-checkpoint.png", "p0/._1.png"):
        path = root / "images" / junk
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x00\x05\x16\x07 not a picture")
    pairs = find_pairs(root, None)
    assert sorted(p.name for p in pairs) == ["p0/0.png", "p0/1.png", "p1/0.png", "p1/1.png"]


def test_a_mask_in_another_subfolder_is_named(tmp_path):
    root = patient_folders(tmp_path / "d", patients=2, slices=2)
    (root / "masks" / "p1" / "1.png").rename(root / "masks" / "p0" / "7.png")
    with pytest.raises(ImageDataError, match=r"p0/7\.png has no image.*1 mask\(s\)"):
        find_pairs(root, None)


def test_two_folders_for_one_split_are_refused(tmp_path):
    for split in ("val", "validation"):
        write_pair(tmp_path / split / "images" / "0.png", tmp_path / split / "labels" / "0.png", 0)
    with pytest.raises(ImageDataError, match="both val/ and validation/"):
        find_pairs(tmp_path, None)


def csv_of_groups(folder, groups: int, per_group: int) -> str:
    """A CSV of pairs ``i<k>_<n>.png`` with ``m<k>_<n>.png``, in group ``patient<k>``."""
    rows = ["image,label,group"]
    for k in range(groups):
        for n in range(per_group):
            image, mask = folder / f"i{k}_{n}.png", folder / f"m{k}_{n}.png"
            write_pair(image, mask, seed=10 * k + n)
            rows.append(f"{image.name},{mask.name},patient{k}")
    (folder / "cases.csv").write_text("\n".join(rows) + "\n")
    return str(folder / "cases.csv")


def test_a_csv_group_column_keeps_each_group_whole(tmp_path):
    csv = csv_of_groups(tmp_path, groups=5, per_group=3)
    dm = prepared(None, csv=csv, val_fraction=0.2, test_fraction=0.2, **TWO)
    names = dm.split_names()
    group_of = {f"i{k}_{n}.png": k for k in range(5) for n in range(3)}
    held = [{group_of[n] for n in names[s]} for s in ("train", "val", "test")]
    assert sum(len(h) for h in held) == 5 and len(set().union(*held)) == 5


def test_groups_split_by_fraction_and_fold_of_groups():
    names = [f"{g}_{i}" for g in "abcdefghij" for i in range(3)]
    groups = [n[0] for n in names]
    a = split_groups(names, groups, val_fraction=0.2, test_fraction=0.2, seed=1)
    assert a == split_groups(names, groups, val_fraction=0.2, test_fraction=0.2, seed=1)
    assert len(a["test"]) == len(a["val"]) == 6 and len(a["train"]) == 18  # 2, 2, 6 groups
    folds = [
        split_groups(names, groups, val_fraction=0, test_fraction=0, seed=1, fold=f, num_folds=5)
        for f in range(5)
    ]
    for f in folds:
        assert {groups[i] for i in f["val"]}.isdisjoint({groups[i] for i in f["train"]})
    assert sorted(i for f in folds for i in f["val"]) == list(range(30))
    with pytest.raises(ValueError, match=r"only 10 group\(s\) are left"):
        split_groups(names, groups, val_fraction=0, test_fraction=0, seed=1, fold=0, num_folds=11)


@pytest.mark.parametrize("groups", [["a"] * 6, list("abcdef"), None])
def test_one_group_or_none_draws_case_by_case(groups):
    names = [str(i) for i in range(6)]
    drawn = given_or_drawn(names, [None] * 6, "test", groups, val_fraction=0.34,
                           test_fraction=0.0, seed=0, fold=None, num_folds=5)  # fmt: skip
    assert len(drawn["val"]) == 2 and len(drawn["train"]) == 4


def test_val_drawn_from_a_given_train_split_keeps_groups_whole():
    names = [f"{g}{i}" for g in "abcd" for i in range(2)] + ["t0", "t1"]
    given = ["train"] * 8 + ["test"] * 2
    drawn = given_or_drawn(names, given, "test", [n[0] for n in names], val_fraction=0.25,
                           test_fraction=0.0, seed=0, fold=None, num_folds=5)  # fmt: skip
    assert drawn["test"] == [8, 9] and len(drawn["val"]) == 2
    assert names[drawn["val"][0]][0] == names[drawn["val"][1]][0]


@pytest.mark.parametrize("test_fraction", [0.25, 0.0])
def test_a_train_split_given_alone_is_drawn_from_as_data_without_splits(test_fraction):
    """A CSV or folders giving every case train set nothing apart: val and test are drawn
    as if no split were given, groups whole (data.test_fraction=0: val alone)."""
    names = [f"{g}{i}" for g in "abcdefgh" for i in range(2)]
    args = dict(val_fraction=0.25, test_fraction=test_fraction, seed=0, fold=None, num_folds=5)
    groups = [n[0] for n in names]
    drawn = given_or_drawn(names, ["train"] * 16, "a CSV", groups, **args)
    assert drawn == given_or_drawn(names, [None] * 16, "a CSV", groups, **args)
    assert len(drawn["val"]) == 4 and len(drawn["test"]) == (4 if test_fraction else 0)
    assert {names[i][0] for i in drawn["test"]}.isdisjoint(names[i][0] for i in drawn["train"])


def test_a_run_begun_before_test_was_drawn_from_train_alone_is_not_resumed_or_scored_on_it(
    tmp_path,
):
    """A run that drew val alone from a train-only folder: resumed now, its test would hold
    cases it trained on, so the resume is refused before training; scored, the refusal
    says why and gives the setting that draws its split again."""
    from types import SimpleNamespace

    from segnet.runs.records import record_split
    from segnet.serving.ensemble import check_recorded_splits

    began = {"train": ["a", "b", "c", "d"], "val": ["e"], "test": []}
    (tmp_path / "splits.json").write_text(json.dumps(began))
    now = {"train": ["a", "b", "c"], "val": ["d"], "test": ["e"]}
    with pytest.raises(ValueError, match=r"began with no test split.*init_from="):
        record_split(tmp_path, SimpleNamespace(split_names=lambda: now), resumed=True)
    assert json.loads((tmp_path / "splits.json").read_text()) == began  # kept as it was
    grown = {**now, "train": [*now["train"], "f"]}  # cases added: warned, as before
    record_split(tmp_path, SimpleNamespace(split_names=lambda: grown), resumed=True)
    module = SimpleNamespace(recorded_splits=began)
    with pytest.raises(ValueError, match=r"recorded no test split.*\+data.test_fraction=0"):
        check_recorded_splits([module], [tmp_path / "last.ckpt"], "test", now["test"])


def test_images_and_masks_in_one_folder_per_patient_lgg_style(tmp_path):
    """Each patient's folder holds scan_<n>.tif beside scan_<n>_mask.tif."""
    root = tmp_path / "kaggle_3m"
    for k in range(3):
        for n in range(2):
            folder = root / f"TCGA_{k}"
            write_pair(folder / f"TCGA_{k}_{n}.tif", folder / f"TCGA_{k}_{n}_mask.tif", 3 * k + n)
    (root / "data.csv").write_text("patient,grade\n")  # a dataset's other files are not read
    pairs = find_pairs(root, None, ".", ".", label_name="{id}_mask")
    assert [p.name for p in pairs][:2] == ["TCGA_0/TCGA_0_0.tif", "TCGA_0/TCGA_0_1.tif"]
    assert len(pairs) == 6 and all(p.label.stem == p.image.stem + "_mask" for p in pairs)
    assert {p.group for p in pairs} == {"TCGA_0", "TCGA_1", "TCGA_2"}
    with pytest.raises(ImageDataError, match="holds the images and the masks: set data.label_name"):
        find_pairs(root, None, ".", ".")
    # no images/ and masks/, and one rule pairs every file: that rule, found
    assert find_pairs(root, None) == pairs
    (root / "TCGA_0" / "TCGA_0_9.tif").write_bytes((root / "TCGA_0" / "TCGA_0_0.tif").read_bytes())
    with pytest.raises(FileNotFoundError, match=r"data.image_dir=\. data.label_dir=\. and"):
        find_pairs(root, None)  # an image without its mask: the message says how to read these


def test_images_without_masks_are_left_out_where_asked_voc_style(tmp_path, caplog):
    """JPEGImages/ holds every photo, SegmentationClass/ masks for some: palette PNGs of
    class numbers, 255 (the border) void."""
    root = tmp_path / "VOC2012"
    for i in range(6):
        image, mask = (
            root / "JPEGImages" / f"2007_{i}.jpg",
            root / "SegmentationClass" / f"2007_{i}.png",
        )
        write_pair(image, mask, seed=i)
        if i >= 4:
            mask.unlink()  # photos for detection only
            continue
        label = Image.new("P", (32, 24))
        label.putpalette([0, 0, 0, 128, 0, 0] + [0, 0, 0] * 253 + [224, 224, 192])
        codes = blob_label(24, 32, i)
        codes[0] = 255
        label.putdata(codes.ravel().tolist())
        label.save(mask)
    layout = dict(image_dir="JPEGImages", label_dir="SegmentationClass")
    with pytest.raises(ImageDataError, match="2 image.* have none.*data.skip_unlabelled=true"):
        prepared(root, class_names=["background", "aeroplane"], ignore_values=[255], **layout)
    with caplog.at_level(logging.WARNING, logger="segnet.data.image_pairs"):
        dm = prepared(root, class_names=["background", "aeroplane"], ignore_values=[255],
                      skip_unlabelled=True, val_fraction=0.25, test_fraction=0.25, **layout)  # fmt: skip
    assert len(dm.case_names()) == 4 and "2 of the 6 images" in caplog.text
    dm.setup("fit")
    labels = torch.cat([it.label.ravel() for it in dm.load("train")])
    assert set(labels.unique().tolist()) == {0, 1, 2}  # 2: void, the border


def test_a_folder_of_images_is_read_alone_as_before(tmp_path, caplog):
    """A flat folder keeps its images and masks whatever other folders sit beside or
    among them (a run's training/ logs, an images/test/ of unlabelled photos, thumbs/)."""
    root = patient_folders(tmp_path / "d", patients=1, slices=3)
    for name in ("0.png", "1.png", "2.png"):  # flat: images/<n>.png, masks/<n>.png
        (root / "images" / "p0" / name).rename(root / "images" / name)
        (root / "masks" / "p0" / name).rename(root / "masks" / name)
    (root / "training").mkdir()
    write_pair(root / "images" / "test" / "9.png", tmp_path / "unlabelled.png", 9)
    write_pair(root / "images" / "thumbs" / "0.png", root / "masks" / "colour" / "0.png", 9)
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        pairs = find_pairs(root, None)
    assert [p.name for p in pairs] == ["0.png", "1.png", "2.png"]
    assert {p.split for p in pairs} == {None} and {p.group for p in pairs} == {None}
    assert "its subfolders (test/, thumbs/) are not read" in caplog.text


def test_a_link_back_up_the_tree_is_followed_once(tmp_path):
    root = patient_folders(tmp_path / "d", patients=2, slices=2)
    for folder in ("images", "masks"):
        (root / folder / "p0" / "up").symlink_to(root / folder, target_is_directory=True)
        (root / folder / "p1" / "again").symlink_to(root / folder, target_is_directory=True)
    assert [p.name for p in find_pairs(root, None)] == ["p0/0.png", "p0/1.png", "p1/0.png",
                                                        "p1/1.png"]  # fmt: skip


def test_a_patient_named_like_a_split_is_a_patient(tmp_path):
    root = patient_folders(tmp_path / "d", patients=2, slices=2)
    write_pair(root / "images" / "Val" / "0.png", root / "masks" / "Val" / "0.png", 5)
    pairs = find_pairs(root, None)
    assert {p.group for p in pairs} == {"p0", "p1", "Val"} and {p.split for p in pairs} == {None}


def test_the_group_is_the_first_subfolder(tmp_path):
    """patient/series/slice: one patient's series are one group."""
    for k, series in ((0, "t1"), (0, "t2"), (1, "t1"), (2, "t1")):
        for n in range(2):
            rel = f"patient{k}/{series}/{n}.png"
            write_pair(tmp_path / "images" / rel, tmp_path / "masks" / rel, seed=k + n)
    pairs = find_pairs(tmp_path, None)
    assert [p.group for p in pairs][:4] == ["patient0"] * 4 and len(pairs) == 8


def test_too_few_folders_for_a_test_split_are_drawn_image_by_image(tmp_path, caplog):
    """Three folders (BUSI's benign/ malignant/ normal/): drawn whole, val would be one of
    them and test none; so they are drawn image by image, warned."""
    root = patient_folders(tmp_path / "d", patients=3, slices=4)
    with caplog.at_level(logging.INFO, logger="segnet.data.splits"):
        dm = prepared(root, **TWO)
    names = dm.split_names()
    assert [len(names[s]) for s in ("train", "val", "test")] == [8, 2, 2]
    assert "3 folders of images (p0, p1, p2): too few" in caplog.text
    assert "drawn by group" not in caplog.text


def test_too_few_groups_of_a_csv_column_are_kept_whole_and_said(tmp_path, caplog):
    """A CSV's group column is the user's word: its groups stay whole, however few."""
    csv = csv_of_groups(tmp_path, groups=3, per_group=2)
    with caplog.at_level(logging.INFO, logger="segnet.data.splits"):
        dm = prepared(None, csv=csv, **TWO)  # 0.15 of 3: none to test
    assert dm.split_names()["test"] == [] and len(dm.split_names()["val"]) == 2
    assert "1 val, 0 test of 3 groups" in caplog.text
    assert "no test split (the run tests on val" in caplog.text


def test_one_region_of_interest_folder_serves_every_split_folder(tmp_path):
    root = tmp_path / "d"
    (root / "fov").mkdir(parents=True)
    for split in ("training", "validation"):
        write_pair(
            root / "images" / split / f"{split}.png", root / "masks" / split / f"{split}.png", 1
        )
        Image.new("L", (32, 24), 255).save(root / "fov" / f"{split}.png")
    pairs = find_pairs(root, None)
    assert [p.roi.name for p in pairs] == ["training.png", "validation.png"]


def test_an_unlabelled_split_folder_at_the_root_is_left_out(tmp_path, caplog):
    write_pair(
        tmp_path / "training" / "images" / "0.png", tmp_path / "training" / "labels" / "0.png", 0
    )
    write_pair(tmp_path / "testing" / "images" / "1.png", tmp_path / "elsewhere.png", 1)
    with caplog.at_level(logging.WARNING, logger="segnet.data.image_pairs"):
        pairs = find_pairs(tmp_path, None)
    assert [p.name for p in pairs] == [
        "train/0.png"
    ] and "testing has images and no mask" in caplog.text


def test_masks_in_other_subfolders_than_their_images_are_said_so(tmp_path):
    root = patient_folders(tmp_path / "d", patients=2, slices=2)
    shutil.rmtree(root / "masks")
    for n in range(2):  # the masks of p0 flat in masks/
        write_pair(tmp_path / "x.png", root / "masks" / f"{n}.png", n)
    with pytest.raises(ImageDataError, match=r"names match but not their subfolders \(e.g. p0/0"):
        find_pairs(root, None)


def test_images_beside_masks_named_by_the_image_rule(tmp_path):
    for n in range(2):
        write_pair(tmp_path / "all" / f"{n}_img.png", tmp_path / "all" / f"{n}.png", n)
    pairs = find_pairs(tmp_path, None, "all", "all", image_name="{id}_img", label_name="{id}")
    assert [(p.image.name, p.label.name) for p in pairs] == [("0_img.png", "0.png"),
                                                             ("1_img.png", "1.png")]  # fmt: skip


def test_no_image_with_a_mask_is_refused_even_when_skipping(tmp_path):
    write_pair(tmp_path / "images" / "0.png", tmp_path / "elsewhere.png", 0)
    (tmp_path / "labels").mkdir()
    with pytest.raises(ImageDataError, match="no image in .* has a mask"):
        find_pairs(tmp_path, None, skip_unlabelled=True)


def test_a_checkpoint_from_before_groups_draws_its_splits_case_by_case_again(monkeypatch):
    """A run from before drawn splits kept groups whole (its data config has no
    groups) is evaluated on the cases it was tested on: drawn one by one."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from segnet.commands.evaluate import data_config
    from segnet.data.images_datamodule import ImageFolderDataModule

    # what the checkpoint's dataset description fixes (normalisation) is not asked here
    monkeypatch.setattr(ImageFolderDataModule, "settings_from_info", lambda info: {})
    trained = {"_target_": "segnet.data.images_datamodule.ImageFolderDataModule", "root": "d",
               "class_names": ["background", "disc"]}  # fmt: skip
    module = SimpleNamespace(hparams={"data_cfg": trained}, data_info=None)
    cfg = OmegaConf.create({"data": {"root": None, "split": None}})
    data_cfg, _, _ = data_config(cfg, module, "old.ckpt")
    assert data_cfg.groups is False
    module.hparams["data_cfg"] = {**trained, "groups": True}
    assert data_config(cfg, module, "new.ckpt")[0].groups is True


def test_groups_read_from_names_keep_each_patient_whole(tmp_path):
    """Slices exported flat, the patient in the name: data.groups='{group}_slice*'."""
    for k in range(5):
        for n in range(3):
            write_pair(tmp_path / "images" / f"pat_{k}_slice{n}.png",
                       tmp_path / "masks" / f"pat_{k}_slice{n}.png", seed=10 * k + n)  # fmt: skip
    dm = prepared(tmp_path, val_fraction=0.2, test_fraction=0.2, groups="{group}_slice*", **TWO)
    held = [{n.rsplit("_slice", 1)[0] for n in names} for names in dm.split_names().values()]
    assert [len(h) for h in held] == [3, 1, 1] and len(set().union(*held)) == 5
    with pytest.raises(ValueError, match=r"does not fit the name 'pat_0_slice0.png'"):
        prepared(tmp_path, groups="{group}_frame*", **TWO)
    with pytest.raises(ValueError, match="a pattern with one {group}"):
        prepared(tmp_path, groups="patient", **TWO)


def test_names_numbered_within_groups_are_warned_of_with_the_pattern_that_keeps_them_whole(
    tmp_path, caplog
):
    """Slices exported flat with no group given: drawn case by case as before, warned,
    naming the data.groups pattern that keeps each patient whole; data.groups=false is
    the choice made, unwarned."""
    for k in range(5):
        for n in range(3):
            write_pair(tmp_path / "images" / f"pat_{k}_slice{n}.png",
                       tmp_path / "masks" / f"pat_{k}_slice{n}.png", seed=10 * k + n)  # fmt: skip
    with caplog.at_level(logging.WARNING):
        prepared(tmp_path, val_fraction=0.2, test_fraction=0.2, **TWO).info()
    assert "look numbered within groups" in caplog.text
    assert "5 groups of 3.0 on average" in caplog.text
    assert "data.groups='{group}_slice*'" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        dm = prepared(tmp_path, val_fraction=0.2, test_fraction=0.2, groups="{group}_*", **TWO)
    held = [{n.rsplit("_slice", 1)[0] for n in names} for names in dm.split_names().values()]
    assert [len(h) for h in held] == [3, 1, 1] and "numbered within" not in caplog.text
    with caplog.at_level(logging.WARNING):
        prepared(tmp_path, groups=False, **TWO).info()
    assert "numbered within" not in caplog.text


@pytest.mark.parametrize(
    "names",
    [
        [f"horse{k:03d}" for k in range(12)],  # numbered, no group
        [f"{breed}_{k}" for breed in ("Abyssinian", "Bengal") for k in range(6)],  # a word
        [f"ISIC_{k:07d}" for k in range(12)],
        [f"{k:02d}_{k}" for k in range(12)],  # a group per name
        [f"2007_{k:06d}" for k in range(12)],  # VOC: a year's running count
        [f"2019-05-{d:02d}" for d in range(1, 13)],  # dates
        [f"aachen_{k:06d}_000019_leftImg8bit" for k in range(12)],  # Cityscapes
        [f"{k}_training" for k in range(21, 33)],  # DRIVE
    ],
)
def test_names_that_name_no_group_are_not_warned_of(names):
    from segnet.data.splits import numbered_groups

    assert numbered_groups(names) is None


def test_names_numbered_after_a_dot_are_read_by_a_pattern_that_fits_them():
    from segnet.data.splits import groups_by_name, numbered_groups

    names = [f"pat{p}.{s}" for p in range(4) for s in range(5)]
    pattern, count = numbered_groups(names)
    assert count == 4 and len(set(groups_by_name(names, pattern))) == 4


def test_a_group_pattern_takes_the_longest_part_that_fits():
    from segnet.data.splits import groups_by_name

    names = ["TCGA_CS_4941_19960909_12.tif", "train/a/patient001_frame01_slice05.png", "b_1"]
    assert groups_by_name(names[:1], "{group}_*") == ["TCGA_CS_4941_19960909"]
    assert groups_by_name(names[1:2], "{group}_frame*") == ["patient001"]
    assert groups_by_name(names[2:], "{group}_*") == ["b"]  # a volume's name has no suffix


def test_beside_their_masks_a_patient_named_like_a_split_is_a_patient(tmp_path):
    for patient in ("A", "B", "Train"):
        write_pair(tmp_path / patient / "s0.png", tmp_path / patient / "s0_mask.png", 0)
    pairs = find_pairs(tmp_path, None, ".", ".", label_name="{id}_mask")
    assert [p.name for p in pairs] == ["A/s0.png", "B/s0.png", "Train/s0.png"]
    assert {p.split for p in pairs} == {None}


def test_one_folder_of_images_and_masks_under_two_names(tmp_path):
    write_pair(tmp_path / "data" / "s0.png", tmp_path / "data" / "s0_mask.png", 0)
    (tmp_path / "images").symlink_to(tmp_path / "data", target_is_directory=True)
    (tmp_path / "labels").symlink_to(tmp_path / "data", target_is_directory=True)
    (pair,) = find_pairs(tmp_path, None, label_name="{id}_mask")
    assert (pair.image.name, pair.label.name) == ("s0.png", "s0_mask.png")


def test_a_mask_folder_inside_the_image_folder_is_no_images(tmp_path):
    for patient in ("A", "B"):
        write_pair(tmp_path / patient / "0.png", tmp_path / "masks" / patient / "0.png", 0)
    pairs = find_pairs(tmp_path, None, ".", "masks")
    assert [p.name for p in pairs] == ["A/0.png", "B/0.png"]


def test_an_orphan_mask_beside_the_images_is_named_as_a_mask(tmp_path):
    write_pair(tmp_path / "s0.png", tmp_path / "s0_mask.png", 0)
    write_pair(tmp_path / "gone.png", tmp_path / "s1_mask.png", 1)
    (tmp_path / "gone.png").unlink()
    with pytest.raises(ImageDataError, match=r"mask .*s1_mask\.png has no image"):
        find_pairs(tmp_path, None, ".", ".", label_name="{id}_mask")


def test_images_without_a_region_of_interest_are_said(tmp_path, caplog):
    root = patient_folders(tmp_path / "d", patients=2, slices=2)
    (root / "fov").mkdir()
    Image.new("L", (32, 24), 255).save(root / "fov" / "0.png")  # flat: fits no patient's slice
    with caplog.at_level(logging.WARNING, logger="segnet.data.image_pairs"):
        pairs = find_pairs(root, None)
    assert all(p.roi is None for p in pairs)
    assert "4 of the 4 images have no region-of-interest mask" in caplog.text


def test_split_folders_with_their_masks_beside_them_carvana_and_camvid_style(tmp_path, caplog):
    carvana = tmp_path / "carvana"
    for k in range(4):
        write_pair(
            carvana / "train" / f"car{k}_01.jpg", carvana / "train_masks" / f"car{k}_01_mask.gif", k
        )
        write_pair(carvana / "test" / f"t{k}_01.jpg", tmp_path / "elsewhere" / f"{k}.png", k)
    with caplog.at_level(logging.INFO):
        dm = prepared(carvana, **TWO)  # the one rule that pairs every file, found
    names = dm.split_names()
    assert sorted(names["train"] + names["val"] + names["test"]) == [
        f"train/car{k}_01.jpg" for k in range(4)
    ]
    # train given alone sets nothing apart: val and test are drawn from it, said
    assert names["val"] and names["test"], names
    assert "every case is in the train split and none in val or test" in caplog.text
    assert "test has no mask folder beside it" in caplog.text
    assert "by 'data.label_name={id}_mask', the one rule" in caplog.text
    assert prepared(carvana, label_name="{id}_mask", **TWO).split_names() == dm.split_names()
    write_pair(carvana / "train" / "car9_01.jpg", carvana / "elsewhere" / "x.png", 9)
    with pytest.raises(ImageDataError, match=r"To pair them: 'data.label_name=\{id\}_mask'"):
        prepared(carvana, **TWO)  # not every image: nothing guessed, the rule shown
    camvid = tmp_path / "camvid"
    for split, n in (("train", 3), ("val", 2), ("test", 2)):
        for k in range(n):
            write_pair(camvid / split / f"{k}.png", camvid / f"{split}annot" / f"{k}.png", k)
    names = prepared(camvid, **TWO).split_names()
    assert [len(names[s]) for s in ("train", "val", "test")] == [3, 2, 2]
    assert names["test"] == ["test/0.png", "test/1.png"]


def test_split_image_and_mask_folders_named_together(tmp_path):
    root = tmp_path / "d"
    for split, n in (("train", 4), ("val", 2)):
        for k in range(n):
            write_pair(
                root / f"{split}_images" / f"{k}.png", root / f"{split}_labels" / f"{k}.png", k
            )
    names = prepared(root, **TWO).split_names()
    assert names["val"] == ["val/0.png", "val/1.png"] and len(names["train"]) == 4
    write_pair(root / "train" / "9.png", root / "elsewhere" / "9.png", 9)
    with pytest.raises(ImageDataError, match="train/, train_images/, train_labels/ are all named"):
        prepared(root, **TWO)


def test_an_image_folder_of_the_roots_own_wins_over_split_folders_with_masks_beside(tmp_path):
    root = tmp_path / "d"
    for k in range(4):
        write_pair(root / "images" / f"{k}.png", root / "labels" / f"{k}.png", k)
        write_pair(root / "test" / f"t{k}.png", root / "test_masks" / f"t{k}.png", k)
    assert sorted(sum(prepared(root, **TWO).split_names().values(), [])) == [
        f"{k}.png" for k in range(4)
    ]


def test_split_folders_holding_image_folders_are_read_as_before_beside_named_ones(tmp_path):
    root = tmp_path / "d"
    for k in range(4):
        write_pair(
            root / "train" / "images" / f"{k}.png", root / "train" / "labels" / f"{k}.png", k
        )
        write_pair(root / "test_images" / f"t{k}.png", root / "test_labels" / f"t{k}.png", k)
    names = prepared(root, **TWO).split_names()
    assert sorted(names["train"] + names["val"] + names["test"]) == [
        f"train/{k}.png" for k in range(4)
    ]


def test_the_suggested_name_rule_is_the_one_that_pairs_the_most(tmp_path):
    root = tmp_path / "d"
    for k in range(1, 13):
        write_pair(root / "images" / f"{k}.png", root / "masks" / f"{k}_mask.png", k)
    assert len(prepared(root, **TWO).pairs) == 12  # it pairs them all: used
    write_pair(root / "elsewhere" / "99.png", root / "masks" / "99_mask.png", 99)
    with pytest.raises(ImageDataError, match=r"To pair them: 'data.label_name=\{id\}_mask'\."):
        prepared(root, **TWO)  # a mask without its image: nothing guessed, the rule shown


def test_names_that_differ_in_case_alone_pair_as_windows_and_macos_disks_pair_them(
    tmp_path, caplog
):
    """HORSE0.jpg beside horse0.png: one name on Windows' and macOS' disks, where the
    folder was made; paired with the case aside, and said. A name matched exactly stays
    with its own mask."""
    import logging

    root = tmp_path / "d"
    for i in range(6):
        write_pair(root / "images" / f"SCAN_{i}.png", root / "masks" / f"scan_{i}.png", seed=i)
    write_pair(root / "images" / "Exact.png", root / "masks" / "Exact.png", seed=7)
    with caplog.at_level(logging.INFO):
        dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    pairs = {p.image.name: p.label.name for p in dm.pairs}
    assert pairs == {
        **{f"SCAN_{i}.png": f"scan_{i}.png" for i in range(6)},
        "Exact.png": "Exact.png",
    }
    assert "6 image(s) pair with their masks" in caplog.text and "case aside" in caplog.text
    # two images of one name with the case aside, one mask: neither takes it
    write_pair(root / "images" / "scan_0.png", tmp_path / "unused.png", seed=9)
    with pytest.raises(ImageDataError, match="has no mask"):
        prepared(root, class_names=["background", "disc"], label_values=[0, 255])
