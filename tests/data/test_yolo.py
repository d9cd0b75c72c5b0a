"""YOLO segmentation datasets (a text file of polygons per image, in a ``labels/`` folder
mirroring ``images/``) train with no conversion: each image's objects drawn into its
mask, the classes named by the dataset's YAML file."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from PIL import Image

from segnet.data import yolo
from segnet.data.errors import ImageDataError
from tests.data.test_coco import write_images
from tests.data.test_images import prepared, train_labels

H, W = 24, 32


def square(x: int, y: int, side: int) -> str:
    """A square's corners as fractions of the image: pixels [x, x + side) drawn."""
    corners = [(x, y), (x + side, y), (x + side, y + side), (x, y + side)]
    return " ".join(f"{px / W:.6f} {py / H:.6f}" for px, py in corners)


LEAF_AND_BUG = f"1 {square(8, 8, 4)}\n0 {square(4, 4, 12)}\n"  # the smaller first


def labelled(images, labels, names, text=LEAF_AND_BUG):
    write_images(images, names)
    labels.mkdir(parents=True, exist_ok=True)
    for name in names:
        (labels / name).with_suffix(".txt").write_text(text)


def ultralytics_folder(root, yaml_text=None):
    """``images/{train,val}`` and ``labels/{train,val}``, with a data.yaml written on
    another machine."""
    labelled(root / "images" / "train", root / "labels" / "train", [f"{k}.jpg" for k in range(4)])
    labelled(root / "images" / "val", root / "labels" / "val", ["v0.jpg", "v1.jpg"])
    (root / "data.yaml").write_text(
        yaml_text
        or "path: /content/datasets/leaves\ntrain: images/train\nval: images/val\n"
        "names:\n  0: leaf\n  1: bug\n"
    )
    return root


def mask_of(dm, name: str) -> np.ndarray:
    return np.array(Image.open(next(p.label for p in dm.pairs if p.name == name)))


def test_an_ultralytics_dataset_trains_with_its_yaml_names_and_splits(tmp_path, caplog):
    root = ultralytics_folder(tmp_path / "y")
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert dm.info().class_names == ["background", "leaf", "bug"]
    assert {s: len(dm.splits[s]) for s in ("train", "val")} == {"train": 4, "val": 2}
    mask = mask_of(dm, "train/0.jpg")
    # the smaller bug lies on the leaf and keeps its class, as Ultralytics overlaps them
    assert (mask == 2).sum() == 16 and (mask[8:12, 8:12] == 2).all()
    assert (mask == 1).sum() == 12 * 12 - 16 and (mask[4:16, 4:16] > 0).all()
    assert (mask == 0).sum() == H * W - 144
    assert "objects of two classes overlap" in caplog.text
    assert set(np.unique(train_labels(dm))) == {0, 1, 2}
    assert not list(root.rglob("*.png"))  # nothing written into the user's folder


def test_a_roboflow_yolo_export_reads_its_split_folders(tmp_path):
    root = tmp_path / "rf"
    for split, n in (("train", 3), ("valid", 2), ("test", 1)):
        names = [f"{split}_{k}.jpg" for k in range(n)]
        labelled(root / split / "images", root / split / "labels", names)
    (root / "data.yaml").write_text(
        "train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\nnc: 2\n"
        "names: ['leaf', 'bug']\n\nroboflow:\n  workspace: w\n  version: 1\n"
    )
    dm = prepared(root)
    assert dm.info().class_names == ["background", "leaf", "bug"]
    assert {s: len(dm.splits[s]) for s in ("train", "val", "test")} == {
        "train": 3, "val": 2, "test": 1,
    }  # fmt: skip
    assert (mask_of(dm, "val/images/valid_0.jpg") == 2).sum() == 16


def test_split_folders_without_a_yaml_file_are_the_splits(tmp_path):
    root = tmp_path / "y"
    ultralytics_folder(root)
    (root / "data.yaml").unlink()
    (root / "classes.txt").write_text("leaf\nbug\n")
    dm = prepared(root)
    assert dm.info().class_names == ["background", "leaf", "bug"]
    assert {s: len(dm.splits[s]) for s in ("train", "val")} == {"train": 4, "val": 2}


def test_labelimgs_classes_txt_in_the_labels_folder_names_the_classes(tmp_path):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", [f"{k}.png" for k in range(5)])
    (root / "labels" / "classes.txt").write_text("leaf\nbug\n")
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "leaf", "bug"]
    assert all(p.split is None for p in dm.pairs) and len(dm.pairs) == 5  # drawn
    assert (mask_of(dm, "0.png") == 2).sum() == 16


def test_unnamed_classes_are_numbered_or_named_by_the_class_names_given(tmp_path, caplog):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", [f"{k}.png" for k in range(5)])
    settings = {"val_fraction": 0.2, "test_fraction": 0.2}
    with caplog.at_level(logging.WARNING):
        assert prepared(root, **settings).info().class_names == ["background", "class0", "class1"]
    assert "no data.yaml nor classes.txt names the classes" in caplog.text
    dm = prepared(root, class_names=["background", "leaf", "bug"], **settings)
    assert dm.info().class_names == ["background", "leaf", "bug"]
    assert (mask_of(dm, "0.png") == 2).sum() == 16


def test_images_without_objects_train_as_background_unless_skipped(tmp_path, caplog):
    root = ultralytics_folder(tmp_path / "y")
    (root / "labels" / "train" / "0.txt").unlink()  # no label file: no object
    (root / "labels" / "train" / "1.txt").write_text("")
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert len(dm.pairs) == 6 and (mask_of(dm, "train/0.jpg") == 0).all()
    assert "2 of 6 images have no object outlined" in caplog.text
    assert len(prepared(root, skip_unlabelled=True).pairs) == 4


def test_a_box_line_is_void_and_boxes_alone_are_refused(tmp_path, caplog):
    root = ultralytics_folder(tmp_path / "y")
    box = f"1 {20 / W:.6f} {12 / H:.6f} {4 / W:.6f} {4 / H:.6f}\n"  # centre x y, width, height
    (root / "labels" / "train" / "0.txt").write_text(f"0 {square(0, 0, 8)}\n{box}")
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    void = dm.info().ignore_index
    mask = mask_of(dm, "train/0.jpg")
    assert (mask[10:14, 18:22] == 255).all() and (mask == 255).sum() == 16
    assert "1 YOLO label line(s) are boxes with no outline" in caplog.text
    assert void in np.unique(train_labels(dm))
    for f in (root / "labels").rglob("*.txt"):
        f.write_text(box)
    with pytest.raises(ImageDataError, match="as a detection dataset's are"):
        prepared(root)


@pytest.mark.parametrize(
    "label, words",
    [
        ("0 0.1 0.2 0.3 0.4 0.5\n", r"0.txt, line 1: .* is not a YOLO label"),
        ("0 4 4 16 4 16 16\n", "these look like pixels"),
        (f"2 {square(0, 0, 8)}\n", r"0.txt, line 1: class 2, and the names of .*data.yaml name"),
    ],
)
def test_a_label_that_cannot_be_drawn_is_refused_naming_its_line(tmp_path, label, words):
    root = ultralytics_folder(tmp_path / "y")
    (root / "labels" / "train" / "0.txt").write_text(label)
    with pytest.raises(ImageDataError, match=words):
        prepared(root)


@pytest.mark.parametrize(
    "yaml_text, words",
    [
        ("train: images/train\nnames: [person]\nkpt_shape: [17, 3]\n", "pose dataset"),
        ("train: images/train\nnames:\n  0: leaf\n  2: bug\n", "with none left out"),
        ("train: images/train\nnc: 3\nnames: [leaf, bug]\n", "nc: 3 and 2 names"),
        ("train: images/train\nnames:\n", "names: and nc: are both empty"),
    ],
)
def test_a_yaml_file_of_another_kind_or_miscounted_is_refused(tmp_path, yaml_text, words):
    root = ultralytics_folder(tmp_path / "y", yaml_text)
    with pytest.raises(ImageDataError, match=words):
        prepared(root)


def test_val_given_as_the_train_folder_is_kept_in_train(tmp_path, caplog):
    text = "path: .\ntrain: images/train\nval: images/train\nnames: [leaf, bug]\n"
    root = ultralytics_folder(tmp_path / "y", text)
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert "4 image(s) of val: are train's already" in caplog.text
    train_images = {p.image for p in dm.pairs if p.split == "train"}
    assert {p.image for p in dm.pairs if p.image.parent.name == "train"} == train_images


def test_a_cvat_export_lists_its_split_images_in_text_files(tmp_path):
    root = ultralytics_folder(
        tmp_path / "y", "path: .\ntrain: train.txt\nval: val.txt\nnames:\n  0: leaf\n  1: bug\n"
    )
    (root / "train.txt").write_text("images/train/0.jpg\nimages/train/1.jpg\n")
    (root / "val.txt").write_text("./images/val/v0.jpg\n")
    dm = prepared(root)
    splits = {p.name: p.split for p in dm.pairs}
    assert splits["train/0.jpg"] == "train" and splits["val/v0.jpg"] == "val"
    assert splits["train/2.jpg"] == "train" and splits["val/v1.jpg"] == "val"  # by folder


def test_text_files_that_are_not_yolo_labels_leave_the_folder_as_it_was(tmp_path):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", ["0.png", "1.png"], text="a leaf on a branch\n")
    assert yolo.annotation_files(root) == []
    with pytest.raises(ImageDataError, match="has no mask"):
        prepared(root)


def test_mask_images_beside_label_files_are_what_is_read(tmp_path):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", ["0.png", "1.png", "2.png", "3.png"])
    for k in range(4):
        mask = np.zeros((H, W), np.uint8)
        mask[:, : W // 2] = 255
        Image.fromarray(mask).save(root / "labels" / f"{k}.png")
    dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert {p.label.suffix for p in dm.pairs} == {".png"}
    assert all(p.label.is_relative_to(root) for p in dm.pairs)  # the user's masks
    assert dm.info().class_names == ["background", "foreground"]


def test_masks_are_drawn_again_when_the_yaml_renames_the_numbers(tmp_path, monkeypatch):
    root = ultralytics_folder(tmp_path / "y")
    first = prepared(root, class_names=["background", "leaf", "bug"])
    drawn = []
    monkeypatch.setattr(yolo, "write_mask", lambda path, mask: drawn.append(path))
    prepared(root, class_names=["background", "leaf", "bug"])
    assert drawn == []
    monkeypatch.undo()
    text = (
        (root / "data.yaml").read_text().replace("0: leaf", "0: bugx").replace("1: bug", "1: leaf")
    )
    (root / "data.yaml").write_text(text.replace("bugx", "bug"))
    os.utime(root / "data.yaml", ns=(1, 1))
    swapped = prepared(root, class_names=["background", "leaf", "bug"])
    assert (mask_of(swapped, "train/0.jpg") == 1).sum() == 16  # the small square: now a leaf
    assert (mask_of(first, "train/0.jpg") == 2).sum() == 16


def test_evaluation_reads_another_export_by_the_checkpoints_class_names(tmp_path):
    from segnet.data.images_datamodule import ImageFolderDataModule

    root = ultralytics_folder(tmp_path / "y")
    assert ImageFolderDataModule.class_names_in_data({"root": str(root)}) is None
    dm = prepared(root, class_names=["background", "bug", "leaf"], mean=[0.5] * 3, std=[0.2] * 3)
    assert (mask_of(dm, "train/0.jpg") == 1).sum() == 16


def test_a_drawn_run_records_no_void_of_its_own_for_other_folders(tmp_path):
    """The drawing's void (255) is added wherever masks are drawn; recorded as the run's
    setting, it would void the white class of a folder of 0/255 mask images."""
    root = ultralytics_folder(tmp_path / "y")
    dm = prepared(root)
    assert dm.settings_found()["class_names"] == ["background", "leaf", "bug"]
    assert dm.settings_found()["ignore_values"] is None
    assert 255 in dm.ignore_values  # still void in its own masks


def test_evaluation_drops_mask_values_only_where_masks_are_drawn(tmp_path):
    from omegaconf import OmegaConf

    from segnet.commands.evaluate import drop_mask_encoding
    from segnet.data.images_datamodule import ImageFolderDataModule
    from tests.data.test_images import make_folder

    drawn = ultralytics_folder(tmp_path / "y")
    masks = make_folder(tmp_path / "m")
    for root, kept in ((drawn, None), (masks, [0, 255])):
        cfg = OmegaConf.create({"root": str(root), "label_values": [0, 255], "palette": None})
        drop_mask_encoding(cfg, {"root": str(root)}, ImageFolderDataModule, tmp_path / "x.ckpt")
        assert cfg.label_values == kept
    cfg = OmegaConf.create({"root": str(drawn), "label_values": [0, 255]})
    given = {"root": str(drawn), "label_values": [0, 255]}  # typed by the user: kept, refused
    drop_mask_encoding(cfg, given, ImageFolderDataModule, tmp_path / "x.ckpt")
    assert cfg.label_values == [0, 255]


def test_black_and_white_masks_foreground_is_a_single_label_and_a_mismatch_refused(tmp_path):
    from segnet.data.drawn_masks import values_by_name

    values = values_by_name(["horse"], ["background", "foreground"], "an export")
    assert values == {"horse": 1}
    with pytest.raises(ImageDataError, match=r"name none of the labels of an export \(horse\)"):
        values_by_name(["horse"], ["background", "zebra"], "an export")
    with pytest.raises(ImageDataError, match="name none of the labels"):
        values_by_name(["horse", "rider"], ["background", "foreground"], "an export")
    assert values_by_name(["horse", "rider"], ["background", "rider"], "x") == {
        "horse": 0, "rider": 1,
    }  # fmt: skip


def test_a_void_recorded_by_an_older_drawn_run_is_not_void_in_mask_images(tmp_path):
    from omegaconf import OmegaConf

    from segnet.commands.evaluate import drop_drawn_void
    from segnet.data.images_datamodule import ImageFolderDataModule
    from tests.data.test_images import make_folder

    drawn = ultralytics_folder(tmp_path / "y")
    masks = make_folder(tmp_path / "m")
    as_trained = {"root": str(drawn), "ignore_values": [255]}
    for root, kept in ((masks, None), (drawn, [255])):
        cfg = OmegaConf.create({"root": str(root), "ignore_values": [255]})
        drop_drawn_void(cfg, {"root": str(root)}, ImageFolderDataModule, as_trained)
        assert cfg.ignore_values == kept


def test_masks_follow_the_label_files_and_images_actually_read(tmp_path):
    """The cache is keyed by the label files and images read, wherever they lie: a
    linked labels folder's edit, and images resized in place, are drawn again."""
    root = ultralytics_folder(tmp_path / "y")
    real = tmp_path / "elsewhere"
    (root / "labels" / "train").rename(real)
    (root / "labels" / "train").symlink_to(real, target_is_directory=True)
    before = mask_of(prepared(root), "train/0.jpg")
    assert (before == 2).sum() == 16
    (real / "0.txt").write_text(f"1 {square(0, 0, 20)}\n")
    os.utime(real / "0.txt", ns=(1, 1))
    assert (mask_of(prepared(root), "train/0.jpg") == 2).sum() == 400
    for image in (root / "images" / "val").iterdir():  # the same labels, twice the size
        Image.open(image).resize((2 * W, 2 * H)).save(image)
    assert (mask_of(prepared(root), "val/v0.jpg") == 2).sum() == 4 * 16


def test_images_the_yaml_does_not_name_or_no_labels_mirror_are_left_out(tmp_path, caplog):
    root = ultralytics_folder(
        tmp_path / "y",
        "path: .\ntrain: [images/train, images/bg]\nval: images/val\nnames: [leaf, bug]\n",
    )
    write_images(root / "images" / "train" / "cam2", ["c0.jpg"])  # labels/train: background
    write_images(root / "images" / "bg", ["b0.jpg"])  # no labels/bg: not known, left out
    write_images(root / "images" / "test", ["t0.jpg"])  # an unlabelled test folder: too
    labelled(root / "images" / "extra", root / "labels" / "extra", ["e0.jpg"])  # named nowhere
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    splits = {p.name: p.split for p in dm.pairs}
    assert splits["train/cam2/c0.jpg"] == "train" and (mask_of(dm, "train/cam2/c0.jpg") == 0).all()
    assert not {"bg/b0.jpg", "test/t0.jpg", "extra/e0.jpg"} & set(splits)
    assert "1 labelled image(s)" in caplog.text and "e0.jpg" in caplog.text
    assert (
        "2 image(s) in" in caplog.text
        and "no images/ folder a labels/ folder mirrors" in caplog.text
    )


def test_split_folders_for_some_images_alone_are_refused_as_other_layouts_are(tmp_path):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", [f"{k}.png" for k in range(4)])
    labelled(root / "images" / "test", root / "labels" / "test", ["t0.png", "t1.png"])
    with pytest.raises(ValueError, match="some cases name a split and others do not"):
        prepared(root)


def test_a_label_file_not_fetched_leaves_its_image_out(tmp_path, caplog):
    root = ultralytics_folder(tmp_path / "y")
    (root / "labels" / "train" / "0.txt").unlink()
    (root / "labels" / "train" / "0.txt").symlink_to(tmp_path / "annex-object")
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert "train/0.jpg" not in {p.name for p in dm.pairs} and len(dm.pairs) == 5
    assert "1 label file(s) are links to nothing" in caplog.text


def test_a_yaml_entry_is_not_matched_by_its_last_folder_alone(tmp_path, caplog):
    text = "path: .\ntrain: images/train\nval: ../valid/images\nnames: [leaf, bug]\n"
    root = ultralytics_folder(tmp_path / "y", text)
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert "val: ../valid/images is not found" in caplog.text
    assert {p.name: p.split for p in dm.pairs}["val/v0.jpg"] == "val"  # by its folder


@pytest.mark.parametrize(
    "label, accepted",
    [
        ("0 0.1 nan 0.2 0.1 0.2 0.2\n", False),  # no position: refused, not drawn
        ("nan 0.1 0.1 0.2 0.1 0.2 0.2\n", False),
        (f"0 {square(0, 0, 8)} 1.005 0.5\n", True),  # past the edge as Ultralytics allows
    ],
)
def test_non_numbers_are_refused_and_a_hair_past_the_edge_clipped(tmp_path, label, accepted):
    root = ultralytics_folder(tmp_path / "y")
    (root / "labels" / "train" / "0.txt").write_text(label)
    if accepted:
        assert (mask_of(prepared(root), "train/0.jpg") == 1).sum() > 64
    else:
        with pytest.raises(ImageDataError, match=r"0.txt, line 1: .* is not a YOLO label"):
            prepared(root)


def test_a_broken_link_among_label_files_breaks_no_layout(tmp_path):
    root = tmp_path / "m"
    write_images(root / "images", [f"{k}.png" for k in range(4)])
    (root / "labels").mkdir()
    for k in range(4):
        Image.fromarray(np.zeros((H, W), np.uint8)).save(root / "labels" / f"{k}.png")
    (root / "labels" / "README.txt").symlink_to(tmp_path / "not-fetched")
    assert yolo.annotation_files(root) == []
    ultralytics_folder(tmp_path / "y")
    (tmp_path / "y" / "labels" / "train" / "9.txt").symlink_to(tmp_path / "not-fetched")
    assert len(prepared(tmp_path / "y").pairs) == 6


def test_several_datasets_numbering_classes_their_own_way_are_refused(tmp_path):
    root = tmp_path / "all"
    ultralytics_folder(root / "a")
    ultralytics_folder(
        root / "b", "path: .\ntrain: images/train\nval: images/val\nnames: [bug, leaf]\n"
    )
    with pytest.raises(ImageDataError, match="holds 2 YOLO datasets"):
        prepared(root)
    assert prepared(root / "a").info().class_names == ["background", "leaf", "bug"]
    for name, listed in (("a", "leaf\nbug\n"), ("b", "bug\nleaf\n")):
        (root / name / "data.yaml").unlink()
        (root / name / "labels" / "classes.txt").write_text(listed)
    with pytest.raises(ImageDataError, match="name other classes"):
        prepared(root)
    (root / "b" / "labels" / "classes.txt").unlink()  # one dataset names its classes: a's
    with pytest.raises(ImageDataError, match="the labels of more than one dataset"):
        prepared(root)
    (root / "classes.txt").write_text("leaf\nbug\n")  # one list for all: one dataset
    (root / "a" / "labels" / "classes.txt").unlink()
    assert len(prepared(root).pairs) == 12


@pytest.mark.parametrize(
    "yaml_text, classes",
    [
        ("train: images/train\nnames:\n  '0': leaf\n  '1': bug\n", ["leaf", "bug"]),
        ("train: images/train\nval: images/val\nnc: 2\n", ["class0", "class1"]),
        ("train: images/train\nnc: '2'\nnames: [leaf, bug]\n", ["leaf", "bug"]),
    ],
)
def test_yaml_names_as_ultralytics_reads_them(tmp_path, yaml_text, classes):
    root = ultralytics_folder(tmp_path / "y", yaml_text)
    assert prepared(root).info().class_names == ["background", *classes]


def test_a_classes_txt_with_a_byte_order_mark_names_its_first_class(tmp_path):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", [f"{k}.png" for k in range(5)])
    (root / "classes.txt").write_bytes("leaf\r\nbug\r\n".encode("utf-8-sig"))
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "leaf", "bug"]


def test_two_images_of_one_label_file_are_refused(tmp_path):
    root = tmp_path / "y"
    labelled(root / "images", root / "labels", ["0.png", "1.png", "2.png", "3.png"])
    write_images(root / "images", ["0.jpg"])  # labels/0.txt would be its labels too
    with pytest.raises(ImageDataError, match=r"0.jpg and .*0.png share the label file"):
        prepared(root, class_names=["background", "leaf", "bug"], val_fraction=0.2)


def test_a_recorded_void_is_kept_and_said_where_the_training_data_is_gone(tmp_path, caplog):
    from omegaconf import OmegaConf

    from segnet.commands.evaluate import drop_drawn_void
    from segnet.data.images_datamodule import ImageFolderDataModule
    from tests.data.test_images import make_folder

    masks = make_folder(tmp_path / "m")
    cfg = OmegaConf.create({"root": str(masks), "ignore_values": [255]})
    with caplog.at_level(logging.WARNING):
        drop_drawn_void(
            cfg, {"root": str(masks)}, ImageFolderDataModule, {"root": str(tmp_path / "gone")}
        )
    assert cfg.ignore_values == [255] and "+data.ignore_values=[]" in caplog.text


def test_four_corners_alone_are_said_to_be_oriented_boxes(tmp_path, caplog):
    """Ultralytics' OBB labels (four corners a line) read as polygons: the masks are
    boxes, said; one outline of more corners and nothing is said."""
    with caplog.at_level(logging.WARNING):
        prepared(ultralytics_folder(tmp_path / "obb"))
    assert "has four corners, as an oriented-box (OBB) dataset's" in caplog.text
    caplog.clear()
    root = ultralytics_folder(tmp_path / "seg")
    (root / "labels" / "train" / "0.txt").write_text("0 0.1 0.1 0.5 0.1 0.6 0.4 0.3 0.6 0.1 0.4\n")
    with caplog.at_level(logging.WARNING):
        prepared(root)
    assert "oriented-box" not in caplog.text
