"""Pascal VOC's layout (``JPEGImages/``, ``SegmentationClass/``, ``ImageSets/Segmentation``)
and CVAT's export of it: the lists say which images are read and in which split; without a
class list the masks hold VOC's classes, 255 void."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from segnet.data.image_pairs import ImageDataError, find_pairs
from tests.data.test_images import blob_label, prepared, train_labels


def voc(root, n_images: int = 12, n_masks: int = 8, lists=None, outline: bool = True):
    """``n_images`` JPEGs, the first ``n_masks`` with a palette mask (a dog, 12, outlined
    with 255), and the lists given (name -> indices)."""
    for d in ("JPEGImages", "SegmentationClass", "SegmentationObject", "Annotations",
              "ImageSets/Segmentation"):  # fmt: skip
        (root / d).mkdir(parents=True, exist_ok=True)
    for k in range(n_images):
        label = blob_label(24, 32, seed=k)
        name = f"2007_{k:06d}"
        Image.fromarray((label * 100 + 20).astype(np.uint8)).convert("RGB").save(
            root / "JPEGImages" / f"{name}.jpg"
        )
        if k < n_masks:
            mask = label * 12
            mask[0] = 255 if outline else mask[0]
            im = Image.fromarray(mask, "P")
            im.putpalette([v for i in range(256) for v in (i, 255 - i, i // 2)])
            im.save(root / "SegmentationClass" / f"{name}.png")
    lists = lists or {"train": range(0, 6), "val": range(6, 8), "trainval": range(0, 8)}
    for list_name, ks in lists.items():
        text = "".join(f"2007_{k:06d}\n" for k in ks)
        (root / "ImageSets" / "Segmentation" / f"{list_name}.txt").write_text(text)
    return root


def test_voc_trains_from_its_folder_with_its_lists_and_classes(tmp_path):
    root = voc(tmp_path / "VOC2012")
    dm = prepared(root)
    names = dm.split_names()
    assert (len(names["train"]), len(names["val"])) == (6, 2)
    assert sorted(names["val"]) == ["2007_000006.jpg", "2007_000007.jpg"]
    info = dm.info()
    assert len(info.class_names) == 21 and info.class_names[12] == "dog"
    assert set(np.unique(train_labels(dm))) == {0, 12, info.ignore_index}  # 255 is void


def test_a_cvat_export_lists_its_images_in_default_and_splits_are_drawn(tmp_path):
    root = voc(tmp_path / "task", 10, 10, lists={"default": range(10)}, outline=False)
    # the masks' palette shows value 0 as (0, 255, 0) and 12 as (12, 243, 6)
    (root / "labelmap.txt").write_text("background:0,255,0::\ndog:12,243,6::\n")
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert sum(len(v) for k, v in dm.split_names().items() if k != "all") == 10
    assert dm.info().class_names == ["background", "dog"]


def test_an_image_in_two_split_lists_is_refused_naming_both(tmp_path):
    root = voc(tmp_path / "v", lists={"train": range(0, 6), "val": range(5, 8)})
    with pytest.raises(ImageDataError, match=r"2007_000005 is in train.txt and val.txt"):
        find_pairs(root, None)


def test_a_listed_image_without_a_mask_is_refused_named(tmp_path):
    root = voc(tmp_path / "v", lists={"train": range(0, 9)})  # 8 has no mask
    with pytest.raises(ImageDataError, match="2007_000008.jpg has no mask"):
        find_pairs(root, None)


def test_lists_that_name_no_image_are_refused_saying_how_they_name_them(tmp_path):
    root = voc(tmp_path / "v", lists={"train": range(0, 4)})
    (root / "ImageSets" / "Segmentation" / "train.txt").write_text("a.jpg\nb.jpg\n")
    with pytest.raises(ImageDataError, match="without its suffix"):
        find_pairs(root, None)


def cityscapes(root, cities=("aachen", "bremen"), splits=("train", "val", "test")):
    """Two frames per city and split, each with the mask files Cityscapes ships: label ids
    (road 7, car 26, ego vehicle 1), colours and instance ids."""
    for split in splits:
        for city in cities:
            for k in range(2):
                frame = f"{city}_{k:06d}_000019"
                images = root / "leftImg8bit" / split / city
                masks = root / "gtFine" / split / city
                images.mkdir(parents=True, exist_ok=True)
                masks.mkdir(parents=True, exist_ok=True)
                disc = blob_label(24, 32, seed=k)
                ids = np.where(disc == 1, 26, 7).astype(np.uint8)
                ids[-3:] = 1
                ids = ids if split != "test" else np.zeros_like(ids)  # withheld
                Image.fromarray((disc * 100 + 20).astype(np.uint8)).convert("RGB").save(
                    images / f"{frame}_leftImg8bit.png"
                )
                Image.fromarray(ids).save(masks / f"{frame}_gtFine_labelIds.png")
                Image.fromarray(ids * 3).save(masks / f"{frame}_gtFine_instanceIds.png")
                Image.fromarray(ids).convert("RGB").save(masks / f"{frame}_gtFine_color.png")
    return root


def test_cityscapes_trains_from_its_root_with_its_19_classes_and_splits(tmp_path, caplog):
    import logging

    root = cityscapes(tmp_path / "cityscapes")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    names = dm.split_names()
    assert len(names["train"]) == 4 and len(names["val"]) == 4 and not names.get("test")
    assert "test/ left out" in caplog.text
    assert names["val"][0].startswith("val/aachen/aachen_000000_000019")
    info = dm.info()
    assert len(info.class_names) == 19 and info.class_names[13] == "car"
    assert info.monitor == "val/miou"  # no class is the background
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 13, info.ignore_index}  # road, car, ego vehicle void


def test_ade20k_names_its_classes_from_objectinfo150_and_0_is_void(tmp_path):
    root = tmp_path / "ADEChallengeData2016"
    for split in ("training", "validation"):
        for k in range(4):
            for folder in ("images", "annotations"):
                (root / folder / split).mkdir(parents=True, exist_ok=True)
            disc = blob_label(24, 32, seed=k)
            name = f"ADE_{split[:5]}_{k:08d}"
            Image.fromarray((disc * 100 + 20).astype(np.uint8)).convert("RGB").save(
                root / "images" / split / f"{name}.jpg"
            )
            mask = (disc * 2 + 1).astype(np.uint8)
            mask[0] = 0  # other objects
            Image.fromarray(mask).save(root / "annotations" / split / f"{name}.png")
    (root / "objectInfo150.txt").write_text(
        "Idx\tRatio\tTrain\tVal\tName\n1\t0.15\t11664\t1172\twall\n"
        "2\t0.10\t6046\t612\tbuilding, edifice\n3\t0.09\t8265\t796\tsky\n"
    )
    dm = prepared(root)
    info = dm.info()
    assert info.class_names == ["wall", "building", "sky"] and info.monitor == "val/miou"
    assert len(dm.split_names()["val"]) == 4
    assert set(np.unique(train_labels(dm))) == {0, 2, info.ignore_index}


def test_lists_give_splits_by_the_id_a_name_rule_reads(tmp_path):
    root = voc(tmp_path / "v", n_images=6, n_masks=6, lists={"train": range(4), "val": [4, 5]})
    for f in (root / "JPEGImages").iterdir():
        f.rename(f.with_stem(f.stem + "_rgb"))
    voc_named = {"class_names": [f"c{k}" for k in range(21)], "ignore_values": [255]}
    names = prepared(root, image_name="{id}_rgb", **voc_named).split_names()
    assert names["val"] == ["2007_000004_rgb.jpg", "2007_000005_rgb.jpg"]


def test_a_dataset_in_vocs_layout_with_other_ids_is_not_given_vocs_classes(tmp_path):
    root = voc(tmp_path / "mine", n_images=4, n_masks=4, lists={"default": range(4)})
    for f in [*(root / "JPEGImages").iterdir(), *(root / "SegmentationClass").iterdir()]:
        f.rename(f.with_stem(f.stem.replace("2007_", "leaf")))
    (root / "ImageSets/Segmentation/default.txt").write_text("leaf000000\nleaf000001\n")
    with pytest.raises(ValueError, match="data.class_names is not set"):
        prepared(root).info()


def test_cityscapes_extra_folders_are_left_out_and_settings_given_read_it_otherwise(tmp_path):
    root = cityscapes(tmp_path / "cs")
    (root / "leftImg8bit" / "train_extra" / "erlangen").mkdir(parents=True)
    names = prepared(root).split_names()
    assert (len(names["train"]), len(names["val"])) == (4, 4)
    # read by the user's own rules, the masks are not Cityscapes' label ids for this tool
    with pytest.raises(ValueError, match="data.class_names is not set"):  # none assumed
        prepared(
            root, image_dir="leftImg8bit", label_dir="gtFine", image_name="{id}_leftImg8bit",
            label_name="{id}_gtFine_labelIds",
        )  # fmt: skip


def test_an_image_listed_outside_every_split_list_is_refused_naming_the_lists(tmp_path):
    root = voc(tmp_path / "v", lists={"train": range(4), "val": [4, 5], "default": range(8)})
    with pytest.raises(ImageDataError, match=r"2007_000006.jpg .* none of its split lists"):
        find_pairs(root, None)


def test_a_trainval_list_alone_names_images_without_a_split_so_test_is_drawn(tmp_path):
    """trainval is train only beside a test list (Oxford-IIIT Pet's): alone it names the
    images read, and val and test are drawn from them."""
    root = voc(tmp_path / "VOC2012", 10, 10, lists={"trainval": range(10)})
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert [len(dm.split_names()[s]) for s in ("train", "val", "test")] == [6, 2, 2]
