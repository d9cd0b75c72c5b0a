"""COCO annotation files (Roboflow's, CVAT's, COCO's own) train with no mask files and no
class settings: each image's objects drawn into its mask, the categories its classes."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as coco_mask

from segnet.data import coco
from segnet.data.errors import ImageDataError
from tests.data.test_images import prepared, train_labels

H, W = 24, 32
# Roboflow lists its dataset's name as a category, the others' supercategory
CATEGORIES = [
    {"id": 0, "name": "shapes", "supercategory": "none"},
    {"id": 1, "name": "leaf", "supercategory": "shapes"},
    {"id": 2, "name": "bug", "supercategory": "shapes"},
]


def square(x: int, y: int, side: int) -> list[float]:
    """A polygon of the square of pixels [x, x + side) x [y, y + side)."""
    return [x, y, x + side, y, x + side, y + side, x, y + side]


def obj(image_id: int, category: int, segmentation, bbox=None, oid: int = 0) -> dict:
    return {
        "id": oid, "image_id": image_id, "category_id": category,
        "segmentation": segmentation, "bbox": bbox or [0, 0, 0, 0], "iscrowd": 0,
    }  # fmt: skip


def write_images(folder, names, size=(H, W)):
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        pixels = np.full((*size, 3), 40 + 10 * k, np.uint8)
        Image.fromarray(pixels).save(folder / name)


def coco_file(path, names, objects, categories=CATEGORIES, size=(H, W)):
    images = [
        {"id": k, "file_name": n, "height": size[0], "width": size[1]} for k, n in enumerate(names)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"images": images, "annotations": objects, "categories": categories})
    )
    return path


def roboflow_folder(root, n: int = 4):
    """train/, valid/, test/, each of images and _annotations.coco.json: in each image a
    leaf square, and a bug square lying on it."""
    for split in ("train", "valid", "test"):
        names = [f"{split}_{k}.jpg" for k in range(n)]
        write_images(root / split, names)
        objects = []
        for k in range(n):
            objects.append(obj(k, 1, [square(4, 4, 12)], oid=2 * k))
            objects.append(obj(k, 2, [square(8, 8, 4)], oid=2 * k + 1))
        coco_file(root / split / "_annotations.coco.json", names, objects)
    return root


def mask_of(dm, name: str) -> np.ndarray:
    pair = next(p for p in dm.pairs if p.name == name)
    return np.array(Image.open(pair.label))


def test_a_roboflow_export_trains_with_its_categories_and_splits(tmp_path, caplog):
    root = roboflow_folder(tmp_path / "rf")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    info = dm.info()
    assert info.class_names == ["background", "leaf", "bug"]  # no class of the dataset's name
    assert {s: len(dm.splits[s]) for s in ("train", "val", "test")} == {
        "train": 4, "val": 4, "test": 4,
    }  # fmt: skip
    mask = mask_of(dm, "train/train_0.jpg")
    assert mask.shape == (H, W)
    # the smaller bug lies on the leaf and keeps its class; polygons cover their pixels
    assert (mask == 2).sum() == 16 and (mask[8:12, 8:12] == 2).all()
    assert (mask == 1).sum() == 12 * 12 - 16 and (mask[4:16, 4:16] > 0).all()
    assert (mask == 0).sum() == H * W - 144
    assert "objects of two classes overlap" in caplog.text
    assert set(np.unique(train_labels(dm))) == {0, 1, 2}
    assert not list(root.rglob("*.png"))  # nothing written into the user's folder


def test_masks_are_drawn_once_and_again_when_the_file_changes(tmp_path, monkeypatch):
    root = roboflow_folder(tmp_path / "rf", n=2)
    first = prepared(root)
    drawn = []
    monkeypatch.setattr(coco, "write_mask", lambda path, mask: drawn.append(path))
    again = prepared(root)
    assert drawn == [] and [p.label for p in again.pairs] == [p.label for p in first.pairs]
    path = root / "train" / "_annotations.coco.json"
    text = json.loads(path.read_text())
    text["annotations"] = text["annotations"][:1]  # one object less: other masks
    path.write_text(json.dumps(text))
    os.utime(path, ns=(1, 1))  # a time of its own, however fast the disk's clock
    monkeypatch.undo()
    edited = prepared(root)
    train = [p.label for p in edited.pairs if p.split == "train"]
    assert set(train).isdisjoint(p.label for p in first.pairs)
    assert (np.array(Image.open(train[1])) == 0).all()  # its objects were edited away


def test_one_cvat_file_of_images_elsewhere_draws_its_splits(tmp_path, caplog):
    root = tmp_path / "cvat"
    names = [f"{k}.png" for k in range(10)]
    write_images(root / "images", names[:9])  # one image the file lists is not there
    objects = [obj(k, 1, [square(2, 2, 6)], oid=k) for k in range(10)]
    coco_file(root / "annotations" / "instances_default.json", names, objects,
              categories=[{"id": 1, "name": "leaf", "supercategory": ""}])  # fmt: skip
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "leaf"]
    assert len(dm.pairs) == 9 and all(p.split is None for p in dm.pairs)  # drawn
    assert len(dm.splits["train"]) + len(dm.splits["val"]) + len(dm.splits["test"]) == 9
    assert "1 of its 10 images are not in the folder (e.g. 9.png)" in caplog.text


def test_coco_image_folders_are_found_by_name_and_split_by_file_name(tmp_path):
    root = tmp_path / "coco"
    write_images(root / "train2017", ["a.jpg", "b.jpg"])
    write_images(root / "val2017", ["c.jpg"])
    cats = [{"id": 7, "name": "person"}, {"id": 3, "name": "car"}]
    coco_file(
        root / "annotations" / "instances_train2017.json",
        ["a.jpg", "b.jpg"],
        [obj(0, 7, [square(0, 0, 4)]), obj(1, 3, [square(0, 0, 4)], oid=1)],
        cats,
    )
    coco_file(root / "annotations" / "instances_val2017.json", ["c.jpg"],
              [obj(0, 7, [square(0, 0, 4)], oid=2)], cats)  # fmt: skip
    files = coco.annotation_files(root)
    assert [(f.path.name, f.split) for f in files] == [
        ("instances_train2017.json", "train"), ("instances_val2017.json", "val"),
    ]  # fmt: skip
    found = coco.annotated_images(root, sorted(root.rglob("*.jpg")))
    assert [(a.name, a.split) for a in found] == [
        ("train2017/a.jpg", "train"), ("train2017/b.jpg", "train"), ("val2017/c.jpg", "val"),
    ]  # fmt: skip
    # classes in the order of the categories' ids: car (3) before person (7)
    assert coco.coco_classes(root).class_names == ["background", "car", "person"]
    assert np.array(Image.open(found[0].mask))[0, 0] == 2  # a's person
    assert np.array(Image.open(found[1].mask))[0, 0] == 1  # b's car


def test_crowds_as_run_lengths_are_drawn_and_a_box_alone_is_void(tmp_path, caplog):
    root = tmp_path / "d"
    write_images(root / "images", ["0.png", "1.png"])
    pixels = np.zeros((H, W), np.uint8, order="F")
    pixels[2:6, 3:9] = 1
    compressed = coco_mask.encode(np.asfortranarray(pixels))
    compressed["counts"] = compressed["counts"].decode()  # as a JSON file holds it
    # uncompressed run lengths, column by column: 20 off, 4 on, the rest off
    runs = {"size": [H, W], "counts": [20, 4, H * W - 24]}
    objects = [
        obj(0, 1, compressed, oid=0),
        obj(1, 1, runs, oid=1),
        obj(1, 2, [], bbox=[10.5, 2.2, 5, 3], oid=2),  # a box alone: no outline
    ]
    coco_file(root / "annotations.json", ["0.png", "1.png"], objects)
    with caplog.at_level(logging.WARNING):
        found = coco.annotated_images(root, sorted((root / "images").iterdir()))
    first = np.array(Image.open(found[0].mask))
    assert (first == 1).sum() == 24 and (first[2:6, 3:9] == 1).all()
    second = np.array(Image.open(found[1].mask))
    assert (second[20:24, 0] == 1).all() and (second == 1).sum() == 4
    assert (second[2:6, 10:16] == coco.VOID).all() and (second == coco.VOID).sum() == 24
    assert "1 object(s) have a box and no outline" in caplog.text
    assert coco.coco_classes(root).settings()["ignore_values"] == [coco.VOID]


@pytest.mark.parametrize(
    "images, masks",
    [
        ("images", "masks"),
        ("images", "GroundTruth"),
        ("images", "SegmentationClassPNG"),
        ("img_dir", "ann_dir"),
        ("train/images", "train/masks"),
    ],
)
def test_masks_beside_a_coco_file_are_what_is_read(tmp_path, images, masks):
    root = tmp_path / "d"
    for k in range(3):
        write_images(root / images, [f"{k}.png"])
        (root / masks).mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((H, W), k % 2, np.uint8)).save(root / masks / f"{k}.png")
    names = [f"{k}.png" for k in range(3)]
    coco_file(root / "annotations.json", names, [obj(0, 1, [square(0, 0, 4)])])
    dm = prepared(root, class_names=["background", "leaf"], val_fraction=0.34, test_fraction=0)
    assert all(p.label.parent == root / masks for p in dm.pairs)  # not drawn


@pytest.mark.parametrize(
    "problem, words",
    [
        ("size", "gives 0.png the size 32x24, and"),
        ("category", "its category_id 9 is no category listed"),
        ("none", "lists 1 images and none is in the folder (the first: 0.png)"),
        ("categories", "list different categories"),
    ],
)
def test_what_cannot_be_drawn_is_refused_naming_the_file(tmp_path, problem, words):
    root = tmp_path / "d"
    write_images(root / "train", ["0.png"], size=(H + 1, W) if problem == "size" else (H, W))
    if problem == "none":
        (root / "train" / "0.png").rename(root / "train" / "elsewhere.png")
    category = 9 if problem == "category" else 1
    coco_file(root / "train" / "a.json", ["0.png"], [obj(0, category, [square(0, 0, 4)])])
    if problem == "categories":
        write_images(root / "test", ["1.png"])
        coco_file(root / "test" / "b.json", ["1.png"], [obj(0, 1, [square(0, 0, 4)])],
                  categories=[{"id": 1, "name": "car"}])  # fmt: skip
    with pytest.raises(ImageDataError, match="json") as err:
        prepared(root)
    assert words in str(err.value)


def test_a_category_named_background_is_the_background(tmp_path):
    cats = [{"id": 1, "name": "Background"}, {"id": 2, "name": "leaf"}]
    root = tmp_path / "d"
    write_images(root, ["0.png"])
    coco_file(root / "a.json", ["0.png"],
              [obj(0, 1, [square(0, 0, 8)]), obj(0, 2, [square(0, 0, 2)], oid=1)], cats)  # fmt: skip
    assert coco.coco_classes(root).class_names == ["background", "leaf"]
    mask = np.array(Image.open(coco.annotated_images(root, [root / "0.png"])[0].mask))
    assert (mask == 1).sum() == 4 and set(np.unique(mask)) == {0, 1}


def test_class_names_choose_and_order_the_categories_drawn(tmp_path, caplog):
    root = roboflow_folder(tmp_path / "rf", n=2)
    dm = prepared(root, class_names=["background", "bug", "leaf"])  # another order
    mask = mask_of(dm, "train/train_0.jpg")
    assert (mask == 1).sum() == 16 and (mask == 2).sum() == 128  # bug 1, leaf 2
    with caplog.at_level(logging.INFO):
        dm = prepared(root, class_names=["background", "bug"])
    mask = mask_of(dm, "train/train_0.jpg")
    assert (mask == 1).sum() == 16 and set(np.unique(mask)) == {0, 1}  # the leaf background
    assert "does not name are background: leaf" in caplog.text


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"class_names": ["leaf", "bug"]}, "put the background first"),
        (
            {"class_names": ["background", "leaf"], "label_values": [0, 1]},
            "leave data.label_values out",
        ),
    ],
)
def test_class_settings_that_would_misread_drawn_masks_are_refused(tmp_path, settings, words):
    root = roboflow_folder(tmp_path / "rf", n=2)
    with pytest.raises(ValueError, match=words):
        prepared(root, **settings)


def test_only_an_unused_supercategory_of_others_is_no_class():
    listed = [
        {"id": 0, "name": "cells", "supercategory": "none"},  # Roboflow's dataset name
        {"id": 1, "name": "person", "supercategory": "person"},  # COCO's: its own
        {"id": 2, "name": "cell", "supercategory": "cells"},
        {"id": 3, "name": "rare", "supercategory": "cells"},
    ]
    assert coco.kept_categories(listed, used={2}) == [(1, "person"), (2, "cell"), (3, "rare")]
    assert coco.kept_categories(listed, used={0, 2}) == [
        (0, "cells"),
        (1, "person"),
        (2, "cell"),
        (3, "rare"),
    ]


def test_images_with_no_object_train_as_background_unless_skipped(tmp_path, caplog):
    root = tmp_path / "cvat"
    names = [f"{k}.png" for k in range(6)]
    write_images(root / "images", names)
    objects = [obj(k, 1, [square(2, 2, 6)], oid=k) for k in range(4)]  # 4 and 5 not yet
    coco_file(root / "annotations" / "instances_default.json", names, objects,
              categories=[{"id": 1, "name": "leaf"}])  # fmt: skip
    with caplog.at_level(logging.WARNING):
        assert len(prepared(root, val_fraction=0.2, test_fraction=0.2).pairs) == 6
    assert "2 of 6 images have no object outlined" in caplog.text
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2, skip_unlabelled=True)
    assert sorted(p.name for p in dm.pairs) == names[:4]


def test_a_file_of_boxes_alone_is_refused_as_a_detection_dataset(tmp_path):
    root = tmp_path / "d"
    write_images(root / "images", ["0.png"])
    coco_file(root / "annotations.json", ["0.png"], [obj(0, 1, [], bbox=[1, 1, 4, 4])])
    with pytest.raises(ImageDataError, match="boxes with no outline, as a detection dataset"):
        prepared(root)


def test_coco_folders_as_coco_ships_them_read_the_instances_files(tmp_path, caplog):
    root = tmp_path / "coco2017"
    write_images(root / "train2017", ["0.jpg"])
    person = [{"id": 1, "name": "person", "supercategory": "person"}]
    things = [*person, {"id": 2, "name": "dog", "supercategory": "animal"}]
    stuff = [{"id": 92, "name": "grass", "supercategory": "plant"}]
    coco_file(
        root / "annotations" / "instances_train2017.json",
        ["0.jpg"],
        [obj(0, 2, [square(0, 0, 4)])],
        things,
    )
    keypoints = obj(0, 1, [square(4, 4, 4)], oid=1) | {"keypoints": [5, 5, 2], "num_keypoints": 1}
    coco_file(
        root / "annotations" / "person_keypoints_train2017.json", ["0.jpg"], [keypoints], person
    )
    coco_file(root / "annotations" / "stuff_train2017.json", ["0.jpg"],
              [obj(0, 92, [square(8, 8, 4)], oid=2)], stuff)  # fmt: skip
    with caplog.at_level(logging.INFO):
        dm = prepared(root, val_fraction=0, test_fraction=0)
    assert dm.info().class_names == ["background", "person", "dog"]
    assert "the others are not: stuff_train2017.json" in caplog.text
    assert (mask_of(dm, "0.jpg") == 2).sum() == 16


def test_a_void_category_is_void_and_two_of_one_name_are_refused(tmp_path):
    root = tmp_path / "d"
    write_images(root, ["0.png"])
    cats = [{"id": 1, "name": "ignore"}, {"id": 2, "name": "dog"}]
    coco_file(root / "a.json", ["0.png"],
              [obj(0, 1, [square(0, 0, 8)]), obj(0, 2, [square(10, 10, 4)], oid=1)], cats)  # fmt: skip
    found = coco.coco_classes(root)
    assert found.class_names == ["background", "dog"]
    assert found.settings()["label_values"] is None  # class numbers: dog 1
    mask = mask_of(prepared(root, val_fraction=0, test_fraction=0), "0.png")
    assert (mask == coco.VOID).sum() == 64 and (mask == 1).sum() == 16
    twice = [{"id": 1, "name": "leaf", "supercategory": "tomato"},
             {"id": 2, "name": "Leaf", "supercategory": "potato"}]  # fmt: skip
    coco_file(root / "a.json", ["0.png"], [obj(0, 1, [square(0, 0, 8)])], twice)
    with pytest.raises(ImageDataError, match="two categories named leaf .ids 1 and 2."):
        prepared(root)


def test_a_roboflow_valid_folder_is_named_val_as_split_folders_are(tmp_path):
    dm = prepared(roboflow_folder(tmp_path / "rf", n=1))
    assert sorted(p.name for p in dm.pairs) == [
        "test/test_0.jpg",
        "train/train_0.jpg",
        "val/valid_0.jpg",
    ]


def test_evaluation_reads_another_export_by_the_checkpoints_class_names(tmp_path):
    """Classes recorded at training are compared with no class list of the data: its
    masks are drawn for them by name, whatever ids its categories have."""
    from segnet.data.images_datamodule import ImageFolderDataModule

    root = roboflow_folder(tmp_path / "rf", n=1)
    assert ImageFolderDataModule.class_names_in_data({"root": str(root)}) is None
    dm = prepared(root, class_names=["background", "bug", "leaf"], mean=[0.5] * 3, std=[0.2] * 3)
    assert (mask_of(dm, "test/test_0.jpg") == 1).sum() == 16


def test_a_layout_of_masks_missing_one_is_refused_as_before_not_drawn(tmp_path):
    root = tmp_path / "d"
    write_images(root / "images", [f"{k}.png" for k in range(4)])
    (root / "masks").mkdir()
    for k in range(3):  # 3.png has no mask
        Image.fromarray(np.zeros((H, W), np.uint8)).save(root / "masks" / f"{k}.png")
    coco_file(root / "annotations.json", ["0.png"], [obj(0, 1, [square(0, 0, 4)])])
    with pytest.raises(ImageDataError, match="3.png"):
        prepared(root, class_names=["background", "leaf"])


def test_given_class_names_keep_boxes_void_and_a_shipped_colour_list_is_not_read(tmp_path):
    from segnet.data import drawn_masks

    root = tmp_path / "d"
    names = [f"{k}.png" for k in range(4)]
    write_images(root / "images", names)
    (root / "labelmap.txt").write_text("background:0,0,0::\nleaf:250,50,83::\n")  # CVAT's
    objects = [obj(k, 1, [square(0, 0, 8)], oid=2 * k) for k in range(4)]
    objects += [obj(k, 2, [], bbox=[12, 2, 4, 4], oid=2 * k + 1) for k in range(4)]
    coco_file(root / "annotations.json", names, objects)
    settings = {"val_fraction": 0.25, "test_fraction": 0}
    dm = prepared(root, class_names=["background", "leaf", "bug"], **settings)
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 1, dm.info().ignore_index}  # the box: neither
    assert prepared(root, **settings).info().class_names == [
        "background", "leaf", "bug",
    ]  # fmt: skip
    assert drawn_masks._parsed.cache_info().currsize == 0  # let go once drawn


def test_an_image_in_two_files_is_refused_naming_both(tmp_path):
    """An image in train's file and in val's (a leak between splits) is refused naming
    the two files, not as an image name that occurs twice."""
    root = tmp_path / "c"
    write_images(root / "images", [f"{k}.png" for k in range(4)])
    box = {"id": 1, "image_id": 0, "category_id": 1, "area": 64, "bbox": [0, 0, 8, 8],
           "segmentation": [[0, 0, 8, 0, 8, 8, 0, 8]], "iscrowd": 0}  # fmt: skip
    coco_file(root / "annotations" / "instances_train.json", ["0.png", "1.png", "2.png"], [box])
    coco_file(root / "annotations" / "instances_val.json", ["2.png", "3.png"], [box])
    with pytest.raises(
        ImageDataError, match=r"2.png is listed in .*instances_train.json and again"
    ):
        prepared(root, val_fraction=0.25, test_fraction=0)
