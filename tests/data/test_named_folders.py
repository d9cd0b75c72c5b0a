"""Folders whose names are not the layouts' own (``images/``, ``labels/``) but say what
they hold, as public datasets ship them: ``Image/`` and ``Mask/``, ISIC's ``_Input/`` and
``_GroundTruth/`` per split, DRIVE's ``1st_manual/`` beside its field-of-view ``mask/``,
LoveDA's folder per domain, ``annotations/trimaps/``, a zip's lone folder; and masks of 0
and one other value with no class named."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
from PIL import Image

from segnet.data import images as img
from segnet.data.folder_roles import role_of, split_of, split_of_file
from segnet.data.sides import sided_classes
from tests.data.test_image_layouts import write_pair
from tests.data.test_images import blob_label, prepared, train_labels

TWO = dict(class_names=["background", "disc"], label_values=[0, 255])


@pytest.mark.parametrize(
    ("name", "role", "split"),
    [
        ("Image", "images", None),
        ("masks_png", "labels", None),
        ("msk", "labels", None),
        ("label_images_semantic", "labels", None),  # a word of masks wins
        ("ISIC2018_Task1-2_Training_Input", "images", "train"),
        ("ISIC2018_Task1_Validation_GroundTruth", "labels", "val"),
        ("1st_manual", "labels", None),
        ("trainannot", "labels", "train"),
        ("ann_dir", "labels", None),
        ("JPEGImages", "images", None),
        ("fov", "roi", None),
        ("Urban", None, None),
        ("lightning_logs", None, None),
        ("train", None, "train"),
    ],
)
def test_what_a_folder_holds_is_read_from_the_words_of_its_name(name, role, split):
    assert (role_of(name), split_of(name)) == (role, split)


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("testA_12.bmp", "test"),
        ("train-003.png", "train"),
        ("Validation_7.png", "val"),
        ("trainee_1.png", None),  # a word that begins with a split's name is not one
        ("trainval_1.png", None),
        ("1_train.png", None),  # the first word alone
    ],
)
def test_the_split_a_file_names_is_its_first_word(name, split):
    assert split_of_file(name) == split


def test_images_whose_names_begin_with_their_split_are_in_it_glas_style(tmp_path, caplog):
    """train_<n>.bmp, testA_<n>.bmp and testB_<n>.bmp beside their _anno masks: train and
    test as named, val drawn from train."""
    root = tmp_path / "GlaS"
    for prefix, count in (("train", 8), ("testA", 3), ("testB", 2)):
        for k in range(1, count + 1):
            write_pair(root / f"{prefix}_{k}.bmp", root / f"{prefix}_{k}_anno.bmp", 10 * k + count)
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root, **TWO)
    names = dm.split_names()
    assert sorted(names["test"]) == sorted(
        [f"testA_{k}.bmp" for k in (1, 2, 3)] + ["testB_1.bmp", "testB_2.bmp"]
    )
    assert len(names["val"]) >= 1 and len(names["train"]) + len(names["val"]) == 8
    assert all(n.startswith("train_") for n in names["train"] + names["val"])
    assert "begin with their split (train 8, test 5)" in caplog.text


def test_names_that_all_begin_with_one_split_leave_the_splits_drawn(tmp_path):
    root = tmp_path / "scans"
    for k in range(10):
        write_pair(root / "images" / f"train_{k}.png", root / "masks" / f"train_{k}.png", k)
    names = prepared(root, **TWO).split_names()
    assert all(len(names[s]) >= 1 for s in ("train", "val", "test"))


def test_image_and_mask_folders_named_in_other_words(tmp_path, caplog):
    root = tmp_path / "flood"
    for k in range(6):
        write_pair(root / "Image" / f"{k}.jpg", root / "Mask" / f"{k}.png", k)
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root, **TWO)
    assert len(dm.pairs) == 6 and dm.pairs[0].label.parent.name == "Mask"
    assert "data.image_dir=Image data.label_dir=Mask" in caplog.text
    (root / "Masks_old").mkdir()
    write_pair(root / "images_png" / "0.png", root / "Masks_old" / "0.png", 0)
    with pytest.raises(FileNotFoundError, match="expected an image folder"):
        prepared(root, **TWO)  # two of each kind: nothing is guessed


def test_split_folders_named_for_their_split_and_what_they_hold_isic_style(tmp_path):
    root = tmp_path / "ISIC2018"
    for split, n in (("Training", 5), ("Validation", 2)):
        for k in range(n):
            write_pair(root / f"ISIC2018_Task1-2_{split}_Input" / f"ISIC_{split}{k}.jpg",
                       root / f"ISIC2018_Task1_{split}_GroundTruth" / f"ISIC_{split}{k}_segmentation.png",
                       k)  # fmt: skip
    names = prepared(root, **TWO).split_names()
    assert len(names["train"]) + len(names["val"]) == 7 and len(names["val"]) >= 2
    assert "val/ISIC_Validation0.jpg" in names["val"]


def drive(root, test_manual: bool = True):
    """DRIVE: images/21_training.tif, 1st_manual/21_manual1.gif, mask/21_training_mask.gif,
    the mask a field of view (white inside a disc), the manual masks the vessels."""
    for split, ids in (("training", range(21, 27)), ("test", range(1, 3))):
        for i in ids:
            write_pair(root / split / "images" / f"{i:02d}_{split}.tif",
                       root / split / "1st_manual" / f"{i:02d}_manual1.gif", i)  # fmt: skip
            fov = np.zeros((24, 32), np.uint8)
            fov[2:-2, 2:-2] = 255
            (root / split / "mask").mkdir(exist_ok=True)
            Image.fromarray(fov).save(root / split / "mask" / f"{i:02d}_{split}_mask.gif")
        if split == "test" and not test_manual:
            for f in (root / split / "1st_manual").iterdir():
                f.unlink()
            (root / split / "1st_manual").rmdir()
    return root


def test_drive_reads_its_hand_drawn_masks_and_its_field_of_view(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(drive(tmp_path / "DRIVE"), **TWO)
    pair = next(p for p in dm.pairs if p.name.endswith("21_training.tif"))
    assert pair.label.name == "21_manual1.gif" and pair.roi.name == "21_training_mask.gif"
    assert all(p.roi is not None for p in dm.pairs)
    assert "'data.image_name={id}_training' 'data.label_name={id}_manual1'" in caplog.text
    names = dm.split_names()
    assert [p.split("/")[0] for p in names["test"]] == ["test", "test"]


def test_drive_without_test_masks_leaves_the_test_images_out_not_scored_on_their_fov(
    tmp_path, caplog
):
    with caplog.at_level(logging.WARNING, logger="segnet.data.image_pairs"):
        dm = prepared(drive(tmp_path / "DRIVE", test_manual=False), **TWO)
    assert all(p.label.parent.name == "1st_manual" for p in dm.pairs)
    assert "test has images and no mask folder" in caplog.text
    # training's images alone are left: val and test are drawn from them
    test = dm.split_names()["test"]
    assert test and all(name.startswith("train/") for name in test), test


def test_a_folder_per_domain_each_with_its_image_and_mask_folders_loveda_style(tmp_path, caplog):
    root = tmp_path / "LoveDA"
    for split in ("Train", "Val"):
        for domain in ("Urban", "Rural"):
            for k in range(3):
                write_pair(root / split / domain / "images_png" / f"{k}.png",
                           root / split / domain / "masks_png" / f"{k}.png", k)  # fmt: skip
    write_pair(root / "Test" / "Urban" / "images_png" / "9.png", tmp_path / "x.png", 9)
    with caplog.at_level(logging.WARNING, logger="segnet.data.image_pairs"):
        dm = prepared(root, **TWO)
    names = dm.split_names()
    assert sorted(names["val"]) == [
        f"val/{d}/{k}.png" for d in ("Rural", "Urban") for k in range(3)
    ]
    assert {p.group for p in dm.pairs} == {"Urban", "Rural"}  # a name occurs in each
    assert names["test"] == [] and "Test has images and no mask folder" in caplog.text


def test_a_lone_folder_is_read_through_and_a_mask_folder_of_one_mask_folder(tmp_path, caplog):
    root = tmp_path / "roads"
    for k in range(4):
        write_pair(
            root / "tiff" / "train" / f"{k}.tiff", root / "tiff" / "train_labels" / f"{k}.tif", k
        )
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        assert len(prepared(root, **TWO).pairs) == 4
    assert "holds one folder alone" in caplog.text
    pets = tmp_path / "pets"
    for k in range(4):
        write_pair(
            pets / "images" / f"cat_{k}.jpg", pets / "annotations" / "trimaps" / f"cat_{k}.png", k
        )
    (pets / "annotations" / "xmls").mkdir()
    dm = prepared(pets, **TWO)
    assert dm.pairs[0].label.parent.name == "trimaps" and not dm.pairs[0].class_masks


def test_binary_jpeg_masks_with_no_class_named_train_as_background_and_foreground(tmp_path):
    """Kvasir-SEG keeps its masks as JPEGs: 0 and 255 with compression noise between."""
    root = tmp_path / "Kvasir-SEG"
    for k in range(6):
        write_pair(root / "images" / f"{k}.jpg", root / "masks" / f"{k}.png", k, size=(96, 128))
        mask = Image.open(root / "masks" / f"{k}.png").convert("RGB")
        (root / "masks" / f"{k}.png").unlink()
        mask.save(root / "masks" / f"{k}.jpg", quality=80)
    dm = prepared(root)
    assert dm.info().class_names == ["background", "foreground"]
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_two_observers_beside_the_images_the_first_is_read_chasedb1_style(tmp_path, caplog):
    root = tmp_path / "CHASEDB1"
    for k in range(4):
        write_pair(root / f"Image_0{k}L.jpg", root / f"Image_0{k}L_1stHO.png", k)
        write_pair(root / f"x{k}.jpg", root / f"Image_0{k}L_2ndHO.png", k)
        (root / f"x{k}.jpg").unlink()
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root, **TWO)
    assert sorted((p.image.name, p.label.name) for p in dm.pairs)[0] == (
        "Image_00L.jpg",
        "Image_00L_1stHO.png",
    )
    assert len(dm.pairs) == 4 and "'data.label_name={id}_2ndHO' reads them instead" in caplog.text
    second = prepared(root, image_dir=".", label_dir=".", label_name="{id}_2ndHO", **TWO)
    assert {p.label.name for p in second.pairs} == {f"Image_0{k}L_2ndHO.png" for k in range(4)}


@pytest.mark.parametrize(
    ("counts", "values"),
    [
        ({0: 800, 255: 200}, (0, 255)),
        ({0: 900, 1: 100}, (0, 1)),
        # thin structures as JPEGs: many noise values near 0 and 255, each over 0.5%
        ({255: 6650, 0: 1240, 253: 121, 254: 114, 252: 107, 1: 100, 2: 90, 250: 90}, (0, 255)),
        ({0: 7400, 255: 1950, 254: 41, 1: 37, 128: 30}, None),  # a rare value far from both
        ({0: 900, 1: 60, 2: 40}, None),  # class numbers
        ({0: 800, 7: 30, 8: 28, 9: 27, 10: 25}, None),  # instance masks
        ({200: 800, 255: 200}, None),  # no 0: which is the background is not guessed
    ],
)
def test_two_values_are_background_and_foreground_only_where_nothing_else_may_be_a_class(
    counts, values
):
    from segnet.data.images import background_and_foreground

    assert background_and_foreground(counts) == values


def test_folders_named_by_the_layouts_or_the_user_are_not_read_otherwise(tmp_path):
    """Where the layouts' own names or settings place the folders, nothing is read by
    words: a folder with "manual" in its name beside labels/ is not the masks, a lone
    folder given by data.image_dir is not entered, a mask-named folder beside images that
    have their masks beside them is no mask folder."""
    root = tmp_path / "own"
    for k in range(3):
        write_pair(root / "images" / f"{k}.png", root / "labels" / f"{k}.png", k)
        write_pair(root / "x" / f"{k}.png", root / "manual_corrections" / f"{k}.png", k)
    assert {p.label.parent.name for p in prepared(root, **TWO).pairs} == {"labels"}
    nested = tmp_path / "nested"
    for k in range(3):
        write_pair(
            nested / "dataset" / "scans" / f"{k}.png", nested / "dataset" / "segs" / f"{k}.png", k
        )
    dm = prepared(nested, image_dir="dataset/scans", label_dir="dataset/segs", **TWO)
    assert len(dm.pairs) == 3
    beside = tmp_path / "beside"
    for k in range(3):
        write_pair(beside / f"s{k}.png", beside / f"s{k}_mask.png", k)
    write_pair(beside / "overlays_masks" / "s0.png", tmp_path / "y.png", 0)
    assert {p.label.name for p in prepared(beside, **TWO).pairs} == {
        f"s{k}_mask.png" for k in range(3)
    }


def test_patient_folders_named_with_an_image_word_keep_their_masks_beside(tmp_path):
    root = tmp_path / "lgg"
    for split in ("train", "val"):
        for k in range(3):
            write_pair(
                root / split / f"img_00{k}" / "a.png", root / split / f"img_00{k}" / "a_mask.png", k
            )
    names = prepared(root, **TWO).split_names()
    assert len(names["train"]) == 3 and len(names["val"]) == 3


def test_an_image_named_as_another_with_text_added_is_an_image_beside_its_mask(tmp_path):
    root = tmp_path / "aug"
    for stem in ("img1", "img1_aug", "img2", "img2_aug"):
        write_pair(root / f"{stem}.png", root / f"{stem}_mask.png", len(stem))
    assert len(prepared(root, **TWO).pairs) == 4


def test_a_lone_folder_named_with_a_mask_word_is_entered_kvasir_style(tmp_path):
    root = tmp_path / "download"
    for k in range(3):
        write_pair(
            root / "Kvasir-SEG" / "images" / f"{k}.jpg",
            root / "Kvasir-SEG" / "masks" / f"{k}.png",
            k,
        )
    assert len(prepared(root, **TWO).pairs) == 3


def test_masks_of_0_1_beside_masks_of_0_255_are_refused_not_read_as_noise(tmp_path):
    from segnet.data.images import background_and_foreground

    assert background_and_foreground({0: 6000, 255: 2000, 1: 2000}) is None
    assert background_and_foreground({0: 6000, 255: 3000, 40: 1000}) is None


def test_an_image_and_mask_folder_beside_test_folders_are_the_training_pair(tmp_path):
    root = tmp_path / "kaggle"
    for k in range(4):
        write_pair(root / "Image" / f"{k}.jpg", root / "Mask" / f"{k}.png", k)
    for k in range(2):
        write_pair(root / "Test_Image" / f"t{k}.jpg", root / "Test_Mask" / f"t{k}.png", k)
    names = prepared(root, **TWO).split_names()
    assert names["test"] == ["test/t0.jpg", "test/t1.jpg"]
    assert sorted(names["train"] + names["val"]) == [f"train/{k}.jpg" for k in range(4)]


def test_split_folders_of_images_beside_masks_each_named_with_its_own_text_deepglobe_style(
    tmp_path, caplog
):
    """train/ of 119_sat.jpg beside 119_mask.png (colours named by class_dict.csv), and
    valid/ of images alone: train pairs by {id}_sat and {id}_mask; valid is left out."""
    root = tmp_path / "DeepGlobe"
    colours = np.array([[0, 255, 255], [255, 255, 0]], np.uint8)  # urban, agriculture
    for k in range(6):
        write_pair(root / "train" / f"{100 + k}_sat.jpg", root / "train" / f"{100 + k}_mask.png", k)
        grey = np.asarray(Image.open(root / "train" / f"{100 + k}_mask.png")) // 255
        Image.fromarray(colours[grey]).save(root / "train" / f"{100 + k}_mask.png")
    write_pair(root / "valid" / "200_sat.jpg", tmp_path / "x.png", 0)
    (root / "class_dict.csv").write_text(
        "name,r,g,b\nurban_land,0,255,255\nagriculture_land,255,255,0\n"
    )
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root)
    assert dm.info().class_names == ["urban_land", "agriculture_land"]
    assert {(p.image.name[:3], p.label.name[:3]) for p in dm.pairs} == {
        (str(100 + k), str(100 + k)) for k in range(6)
    }
    # train alone has masks: val and test drawn from it
    assert sorted(len(v) for s, v in dm.split_names().items() if s != "all") == [1, 1, 4]
    assert "'data.image_name={id}_sat' 'data.label_name={id}_mask'" in caplog.text
    assert "valid holds images and no mask beside them" in caplog.text
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_a_folder_per_class_of_images_beside_their_masks_busi_style(tmp_path, caplog):
    """benign/, malignant/, normal/ of 'benign (1).png' beside 'benign (1)_mask.png', a
    second lesion's mask beside as 'benign (1)_mask_1.png': read with no setting, the
    further mask laid over its image's mask and said, and the three folders drawn image by
    image (whole, val would be one class)."""
    root = tmp_path / "Dataset_BUSI_with_GT"
    for c, kind in enumerate(("benign", "malignant", "normal")):
        for k in range(1, 5):
            stem = root / kind / f"{kind} ({k})"
            write_pair(stem.with_name(stem.name + ".png"), stem.with_name(stem.name + "_mask.png"),
                       10 * c + k)  # fmt: skip
    second = root / "benign" / "benign (1)_mask_1.png"
    write_pair(tmp_path / "x.png", second, 0)
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert len(dm.pairs) == 12 and {p.label.stem[-5:] for p in dm.pairs} == {"_mask"}
    assert "1 further mask(s) named as a mask with a number added" in caplog.text
    assert "neither images nor their masks" not in caplog.text
    (first,) = [p for p in dm.pairs if p.further_masks]
    assert first.image.name == "benign (1).png" and first.further_masks == (second,)
    one, two = (np.asarray(Image.open(m)) > 0 for m in (first.label, second))
    assert (one != two).any()  # the lesions differ: the union is neither mask
    codes = img.read_codes(first, dm.reading())
    assert np.array_equal(codes != 0, one | two)
    names = dm.split_names()
    assert [len(names[s]) for s in ("train", "val", "test")] == [8, 2, 2]
    assert "3 folders of images (benign, malignant, normal): too few" in caplog.text


def test_a_numbered_mask_beside_most_masks_is_another_set_left_out_not_laid_over(tmp_path, caplog):
    """scan k_mask.png and scan k_mask2.png beside every image: a second observer's set,
    not further objects: left out with a warning, as before."""
    root = tmp_path / "observers"
    for k in range(6):
        write_pair(root / f"scan {k}.png", root / f"scan {k}_mask.png", k)
        write_pair(tmp_path / "x.png", root / f"scan {k}_mask2.png", k + 10)
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert not any(p.further_masks for p in dm.pairs)
    assert "neither images nor their masks" in caplog.text and "laid over" not in caplog.text


def test_a_folder_with_a_mask_named_after_its_one_image_is_paired_by_name_not_merged(tmp_path):
    """patient folders of one image whose masks folder holds its mask and a leftover mask of
    another slice: refused as unpaired, never merged as objects of the one image."""
    root = tmp_path / "patients"
    for k in range(4):
        case = root / f"p{k}"
        write_pair(case / "images" / "s0.png", case / "masks" / "s0_mask.png", k)
    write_pair(tmp_path / "x.png", root / "p0" / "masks" / "s1_mask.png", 9)
    with pytest.raises(img.ImageDataError, match=r"To pair them: 'data.label_name=\{id\}_mask'"):
        prepared(root)


def test_names_of_train_and_val_alone_leave_the_splits_drawn(tmp_path):
    """train_ and val_ names give no test split: every split is drawn, as before."""
    root = tmp_path / "scans"
    for k in range(12):
        prefix = "train" if k < 9 else "val"
        write_pair(root / "images" / f"{prefix}_{k}.png", root / "masks" / f"{prefix}_{k}.png", k)
    names = prepared(root, **TWO).split_names()
    assert all(len(names[s]) >= 1 for s in ("train", "val", "test"))


def test_a_folder_of_copies_of_the_masks_is_not_taken_for_the_images(tmp_path):
    root = tmp_path / "MontgomerySet"
    for k in range(6):
        write_pair(tmp_path / "x.png", root / "ManualMask" / f"case{k}.png", k)
    shutil.copytree(root / "ManualMask", root / "backup")
    with pytest.raises(FileNotFoundError, match="expected an image folder"):
        prepared(root)


def test_a_further_mask_of_another_size_is_refused_naming_both(tmp_path):
    root = tmp_path / "lesions"
    for k in range(6):
        write_pair(root / f"scan {k}.png", root / f"scan {k}_mask.png", k)
    write_pair(tmp_path / "x.png", root / "scan 2_mask_1.png", 9, size=(20, 32))
    with pytest.raises(img.ImageDataError, match=r"scan 2_mask_1.png is 32x20 and .*scan 2_mask"):
        train_labels(prepared(root))


def test_a_folder_per_image_with_a_mask_per_object_data_science_bowl_style(tmp_path, caplog):
    """<id>/images/<id>.png with <id>/masks/<hash>.png, one mask per nucleus and none named
    as the image: each image's masks are laid over one another, said."""
    root = tmp_path / "stage1_train"
    for k in range(6):
        case = root / f"c{k:02d}"
        write_pair(case / "images" / f"c{k:02d}.png", tmp_path / "x.png", k)
        whole = blob_label(24, 32, k).astype(bool)
        (case / "masks").mkdir()
        for n, half in enumerate((slice(0, 16), slice(16, 32))):  # a disc cut in two objects
            part = np.zeros_like(whole)
            part[:, half] = whole[:, half]
            Image.fromarray(part.astype(np.uint8) * 255).save(case / "masks" / f"{9 - n}f.png")
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root)
    assert sorted(p.name for p in dm.pairs) == [f"c{k:02d}/c{k:02d}.png" for k in range(6)]
    first = next(p for p in dm.pairs if p.name == "c00/c00.png")
    assert (first.label.name, [m.name for m in first.further_masks]) == ("8f.png", ["9f.png"])
    assert np.array_equal(img.read_codes(first, dm.reading()) != 0, blob_label(24, 32, 0) == 1)
    assert "6 of the 6 folders hold one image and a folder of masks not named as it" in caplog.text
    assert dm.info().class_names == ["background", "foreground"]


def test_images_in_a_folder_named_otherwise_beside_masks_named_as_them_montgomery_style(
    tmp_path, caplog
):
    """CXR_png/ beside ManualMask/leftMask/ and ManualMask/rightMask/ (and ClinicalReadings/
    of text): CXR_png/ holds the images, as its files are named as the masks; one mask per
    class. A second such folder leaves the images unfound, not guessed."""
    root = tmp_path / "MontgomerySet"
    for k in range(6):
        stem = f"MCUCXR_{k:04d}_{k % 2}"
        write_pair(
            root / "CXR_png" / f"{stem}.png", root / "ManualMask" / "leftMask" / f"{stem}.png", k
        )
        write_pair(tmp_path / "x.png", root / "ManualMask" / "rightMask" / f"{stem}.png", k + 10)
        (root / "ClinicalReadings").mkdir(exist_ok=True)
        (root / "ClinicalReadings" / f"{stem}.txt").write_text("Patient's Sex: M\n")
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root)
    assert {p.image.parent.name for p in dm.pairs} == {"CXR_png"} and len(dm.pairs) == 6
    assert dm.mask_classes == ["leftMask", "rightMask"]
    assert "read as data.image_dir=CXR_png" in caplog.text
    shutil.copytree(root / "CXR_png", root / "CXR_copy")
    with pytest.raises(FileNotFoundError, match="expected an image folder"):
        prepared(root)


@pytest.mark.parametrize(
    ("names", "sided"),
    [
        (["background", "leftMask", "rightMask"], ["leftMask", "rightMask"]),
        (["Left Kidney", "right_kidney", "liver"], ["Left Kidney", "right_kidney"]),
        (["background", "left lung"], []),  # one side alone is swapped with nothing
        (["bright", "lefty"], []),
    ],
)
def test_classes_that_name_a_side(names, sided):
    assert sided_classes(names) == sided


@pytest.mark.parametrize(("flip", "axes"), [(True, [0]), ([0, 1], [0, 1])])
def test_classes_of_both_sides_are_not_flipped_left_right_unless_asked(tmp_path, flip, axes):
    root = tmp_path / "lungs"
    for k in range(6):
        write_pair(root / "images" / f"{k}.png", root / "masks" / f"{k}.png", k)
    settings = dict(class_names=["background", "right lung"], label_values=[0, 255])
    assert prepared(root, **settings, flip=flip).info().mirror_axes == [0, 1]
    settings["class_names"] = ["left lung", "right lung"]
    assert prepared(root, **settings, flip=flip).info().mirror_axes == axes


def test_oxford_iiit_pet_reads_its_lists_and_trimap_classes_with_no_setting(tmp_path, caplog):
    """images/ with annotations/trimaps/ (1 pet, 2 background, 3 border) and the lists
    annotations/trainval.txt and test.txt: test is the test list, val is drawn from
    trainval, and an image in no list is left out."""
    root = tmp_path / "oxford-iiit-pet"
    for k in range(9):
        write_pair(
            root / "images" / f"cat_{k}.jpg", root / "annotations" / "trimaps" / f"cat_{k}.png", k
        )
        trimap = np.asarray(Image.open(root / "annotations" / "trimaps" / f"cat_{k}.png")) // 255
        trimap = np.where(trimap == 1, 1, 2).astype(np.uint8)
        trimap[0] = 3  # a border row
        Image.fromarray(trimap).save(root / "annotations" / "trimaps" / f"cat_{k}.png")
    (root / "annotations" / "trainval.txt").write_text(
        "".join(f"cat_{k} 1 1 1\n" for k in range(6))
    )
    (root / "annotations" / "test.txt").write_text("cat_6 1 1 1\ncat_7 1 1 1\n")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert dm.info().class_names == ["background", "pet", "border"]
    names = dm.split_names()
    assert sorted(names["test"]) == ["cat_6.jpg", "cat_7.jpg"]
    assert len(names["train"]) + len(names["val"]) == 6 and len(names["val"]) == 1
    assert "cat_8" not in str(dm.pairs)  # in no list: left out
    assert set(np.unique(train_labels(dm))) == {0, 1, 2}
    assert "trainval.txt 6 (train)" in caplog.text


def test_a_split_of_masks_named_otherwise_beside_the_images_is_read_not_left_out(tmp_path):
    root = tmp_path / "d"
    for k in range(5):
        write_pair(root / "train" / f"a{k}.png", root / "train" / f"a{k}_mask.png", k)
    for k in range(2):
        write_pair(root / "val" / f"b{k}.png", root / "val" / f"b{k}_label.png", k)
    names = prepared(root, **TWO).split_names()
    assert sorted(names["val"]) == ["val/b0.png", "val/b1.png"]


def test_few_folders_in_a_given_train_split_are_drawn_image_by_image_for_val(tmp_path, caplog):
    """train/{benign,malignant,normal}/ beside test/: val drawn whole would be one class."""
    root = tmp_path / "d"
    for kind in ("benign", "malignant", "normal"):
        for k in range(4):
            write_pair(root / "train" / "images" / kind / f"{k}.png",
                       root / "train" / "masks" / kind / f"{k}.png", k)  # fmt: skip
    write_pair(root / "test" / "images" / "t.png", root / "test" / "masks" / "t.png", 9)
    with caplog.at_level(logging.WARNING, logger="segnet.data.splits"):
        names = prepared(root, **TWO).split_names()
    assert len({n.split("/")[1] for n in names["train"]}) == 3  # every folder trains
    assert "too few to draw val by whole folders" in caplog.text


def test_a_folder_per_case_of_image_and_lesion_folders_ph2_style(tmp_path, caplog):
    """PH2: PH2Dataset/ holds 'PH2 Dataset images/' beside the files it ships for people
    to read; each case's folder holds <id>_Dermoscopic_Image/<id>.bmp and
    <id>_lesion/<id>_lesion.bmp, and some an <id>_roi/ of colour regions inside the lesion
    (no region of interest to score in). Read with no setting; the rule that pairs each
    case's files is said once, not once per case."""
    root = tmp_path / "PH2Dataset"
    cases = root / "PH2 Dataset images"
    for k in range(6):
        case = cases / f"IMD{k:03d}"
        write_pair(case / f"{case.name}_Dermoscopic_Image" / f"{case.name}.bmp",
                   case / f"{case.name}_lesion" / f"{case.name}_lesion.bmp", k)  # fmt: skip
        if k % 2:
            write_pair(tmp_path / "x.png", case / f"{case.name}_roi" / f"{case.name}_R1.bmp", k)
    (root / "PH2_dataset.txt").write_text("|| Name || Histological Diagnosis ||\n")
    (root / "PH2_dataset.xlsx").write_bytes(b"PK")
    with caplog.at_level(logging.INFO, logger="segnet.data.image_pairs"):
        dm = prepared(root, **TWO)
    assert sorted(p.name for p in dm.pairs) == [f"IMD{k:03d}/IMD{k:03d}.bmp" for k in range(6)]
    assert all(p.label.parent.name.endswith("_lesion") and p.roi is None for p in dm.pairs)
    assert "holds one folder alone" in caplog.text
    assert caplog.text.count("'data.label_name={id}_lesion', the one rule") == 1
    # a class list beside the lone folder is data: the root is read as it is, and refused
    (root / "labelmap.txt").write_text("# label:color_rgb:parts:actions\nlesion:255,255,255::\n")
    with pytest.raises(FileNotFoundError, match="PH2 Dataset images/"):
        prepared(root, **TWO)


def test_names_sharing_all_but_their_own_last_text_pair_potsdam_style(tmp_path):
    """top_potsdam_2_10_RGB.tif with top_potsdam_2_10_label.tif: the part they share runs
    to their last separator, not their first (top_), which every file shares."""
    root = tmp_path / "potsdam"
    for k in range(10, 14):
        write_pair(root / "2_Ortho_RGB" / f"top_potsdam_2_{k}_RGB.tif",
                   root / "5_Labels_all" / f"top_potsdam_2_{k}_label.tif", k)  # fmt: skip
    dm = prepared(root, image_dir="2_Ortho_RGB", label_dir="5_Labels_all", **TWO)
    assert {(p.image.stem[:-4], p.label.stem[:-6]) for p in dm.pairs} == {
        (f"top_potsdam_2_{k}", f"top_potsdam_2_{k}") for k in range(10, 14)
    }
    (root / "5_Labels_all" / "top_potsdam_2_13_label.tif").rename(
        root / "5_Labels_all" / "top_potsdam_2_99_label.tif"
    )
    with pytest.raises(
        img.ImageDataError, match=r"'data.image_name=\{id\}_RGB' 'data.label_name=\{id\}_label'"
    ):
        prepared(root, image_dir="2_Ortho_RGB", label_dir="5_Labels_all", **TWO)


def test_a_folder_of_lesion_photos_beside_a_mask_folder_is_the_image_folder(tmp_path):
    """lesion says mask only where nothing else does (PH2): skin_lesions/ beside masks/
    holds the photos, found as the folder named as the masks are."""
    root = tmp_path / "derm"
    for k in range(4):
        write_pair(root / "skin_lesions" / f"{k}.jpg", root / "masks" / f"{k}.png", k)
    dm = prepared(root, **TWO)
    assert {p.image.parent.name for p in dm.pairs} == {"skin_lesions"} and len(dm.pairs) == 4


def test_two_observers_mask_folders_are_named_in_the_refusal_stare_style(tmp_path):
    """STARE: stare-images/im0001.ppm beside labels-ah/im0001.ah.ppm and
    labels-vk/im0001.vk.ppm (Netpbm files). Two folders say masks, so neither is read by
    its name: the refusal names them and the settings that read the first; given those,
    the masks pair by the text added to their names."""
    root = tmp_path / "STARE"
    for k in range(1, 5):
        write_pair(root / "stare-images" / f"im{k:04d}.ppm",
                   root / "labels-ah" / f"im{k:04d}.ah.ppm", k)  # fmt: skip
        shutil.copy(root / "labels-ah" / f"im{k:04d}.ah.ppm", tmp_path / "x.ppm")
        (root / "labels-vk").mkdir(exist_ok=True)
        shutil.copy(tmp_path / "x.ppm", root / "labels-vk" / f"im{k:04d}.vk.ppm")
    with pytest.raises(FileNotFoundError) as refused:
        prepared(root, **TWO)
    assert "stare-images/ says images; labels-ah/, labels-vk/ each say masks" in str(
        refused.value
    ) and "data.image_dir=stare-images data.label_dir=labels-ah" in str(refused.value)
    dm = prepared(root, image_dir="stare-images", label_dir="labels-ah", **TWO)
    assert {(p.image.name, p.label.name) for p in dm.pairs} == {
        (f"im{k:04d}.ppm", f"im{k:04d}.ah.ppm") for k in range(1, 5)
    }
    assert set(np.unique(train_labels(dm))) == {0, 1}


@pytest.mark.parametrize(("pictures", "masks"), [("X", "y"), ("B", "A")])
def test_two_folders_whose_names_say_nothing_are_told_apart_by_what_they_hold(
    tmp_path, caplog, pictures, masks
):
    """Kaggle's X/ and y/: files of one name in each, pictures in one and a mask's few
    values in the other; which is which is read from the files (not from the folders'
    order), and said. Two folders of pictures are refused as before."""
    root = tmp_path / "d"
    for i in range(8):
        write_pair(root / pictures / f"{i}.png", root / masks / f"{i}.png", seed=i)
    with caplog.at_level(logging.INFO):
        dm = prepared(root, **TWO)
    assert {p.image.parent.name for p in dm.pairs} == {pictures}
    assert {p.label.parent.name for p in dm.pairs} == {masks}
    assert set(np.unique(train_labels(dm))) == {0, 1}
    said = f"data.image_dir={pictures} data.label_dir={masks}, by what their files hold"
    assert said in caplog.text
    both = tmp_path / "pictures"
    for i in range(4):
        for d in ("left", "right"):
            write_pair(both / d / f"{i}.png", tmp_path / "unused" / f"{d}{i}.png", seed=i)
    with pytest.raises(FileNotFoundError, match="it has left/, right/"):
        prepared(both, **TWO)


def test_a_downloaded_archive_is_refused_with_how_to_unpack_it(tmp_path):
    """Kaggle's and Zenodo's downloads are archives: a folder holding one alone, or the
    archive given as data.root, is refused saying to unpack it (not "no folders")."""
    import zipfile

    root = tmp_path / "d"
    root.mkdir()
    with zipfile.ZipFile(root / "horses.zip", "w") as z:
        z.writestr("horses/images/0.png", b"")
    with pytest.raises(FileNotFoundError, match="holds horses.zip and no folders: unpack"):
        prepared(root, **TWO)
    with pytest.raises(FileNotFoundError, match="horses.zip is an archive: unpack it first"):
        prepared(root / "horses.zip", **TWO)
