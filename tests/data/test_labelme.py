"""LabelMe's files (a JSON file of shapes per image) train with no conversion: each image's
shapes drawn into its mask in the file's order, the labels its classes."""

from __future__ import annotations

import base64
import io
import json
import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data import labelme
from segnet.data.drawn_masks import VOID
from segnet.data.errors import ImageDataError
from tests.data.test_coco import write_images
from tests.data.test_images import prepared, train_labels

H, W = 24, 32


def shape(label: str, points, kind: str = "polygon", **more) -> dict:
    return {"label": label, "points": points, "shape_type": kind, "group_id": None, **more}


def labelme_file(path, image_path: str, shapes, size=(H, W)):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "version": "5.5.0", "flags": {}, "shapes": shapes, "imagePath": image_path,
        "imageData": None, "imageHeight": size[0], "imageWidth": size[1],
    }))  # fmt: skip


def rect(x: int, y: int, side: int) -> list[list[float]]:
    """A rectangle's two corners, drawn over pixels [x, x + side] (PIL draws both ends)."""
    return [[x, y], [x + side, y + side]]


def annotated_folder(root, n: int = 6):
    """Images with a JSON file beside each: a leaf rectangle, a bug circle on it, and a
    point; one image with no file."""
    names = [f"{k}.jpg" for k in range(n + 1)]
    write_images(root, names)
    for k in range(n):
        labelme_file(root / f"{k}.json", names[k], [
            shape("leaf", rect(2, 2, 15), "rectangle"),
            shape("bug", [[10, 10], [10, 13]], "circle"),
            shape("bug", [[30, 20]], "point"),
        ])  # fmt: skip
    return root


def test_a_folder_of_labelme_files_trains_with_their_labels(tmp_path, caplog):
    root = annotated_folder(tmp_path / "lm")
    with caplog.at_level(logging.INFO):
        dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    info = dm.info()
    assert info.class_names == ["background", "bug", "leaf"]  # labels in name order
    assert len(dm.pairs) == 6  # the image with no file is left out, said
    assert "1 image(s) in" in caplog.text and "have no LabelMe file" in caplog.text
    assert "6 shape(s) outline no area" in caplog.text
    mask = np.array(Image.open(next(p.label for p in dm.pairs if p.name == "0.jpg")))
    assert (mask[2:18, 2:18] > 0).all() and (mask == 2).sum() + (mask == 1).sum() == 16 * 16
    # the circle, drawn later, lies over the rectangle: radius 3 about (10, 10)
    assert mask[10, 10] == 1 and mask[10, 13] == 1 and mask[10, 14] == 2 and mask[15, 15] == 2
    assert (mask[20:, 20:] == 0).all()  # a point outlines nothing
    assert set(np.unique(train_labels(dm))) == {0, 1, 2}
    assert not list(root.rglob("*.png"))  # nothing written into the user's folder


def test_labels_txt_orders_the_classes_and_ignore_is_void(tmp_path):
    root = tmp_path / "lm"
    write_images(root / "images", ["a.png", "b.png"])
    (root / "labels.txt").write_text("__ignore__\n_background_\nleaf\nbug\n")
    for name in ("a", "b"):
        labelme_file(root / "annotations" / f"{name}.json", f"../images/{name}.png", [
            shape("_background_", rect(0, 0, 31), "rectangle"),
            shape("leaf", [[2, 2], [12, 2], [12, 12], [2, 12]]),
            shape("__ignore__", rect(20, 0, 3), "rectangle"),
        ])  # fmt: skip
    found = labelme.labelme_classes(root)
    assert found.class_names == ["background", "leaf", "bug"]
    assert found.settings()["ignore_values"] == [VOID]
    dm = prepared(root, val_fraction=0.5, test_fraction=0)
    assert [p.name for p in dm.pairs] == ["a.png", "b.png"]  # as a folder of images names them
    mask = np.array(Image.open(dm.pairs[0].label))
    assert (mask[2:13, 2:13] == 1).all() and (mask == 1).sum() == 121
    assert (mask[0:4, 20:24] == VOID).all() and (mask == VOID).sum() == 16
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 1, dm.info().ignore_index}


def test_split_folders_give_the_splits_and_a_labelme_mask_is_drawn(tmp_path):
    root = tmp_path / "lm"
    part = np.zeros((4, 5), bool)
    part[1:3, 1:4] = True
    buffer = io.BytesIO()
    Image.fromarray(part).save(buffer, format="PNG")
    encoded = base64.b64encode(buffer.getvalue()).decode()
    for split in ("train", "valid", "test"):
        write_images(root / split, ["0.png", "1.png"])
        for k in range(2):
            labelme_file(root / split / f"{k}.json", f"{k}.png",
                         [shape("cell", [[6, 8], [10, 11]], "mask", mask=encoded)])  # fmt: skip
    dm = prepared(root)
    assert {s: len(dm.splits[s]) for s in ("train", "val", "test")} == {
        "train": 2, "val": 2, "test": 2,
    }  # fmt: skip
    mask = np.array(Image.open(dm.pairs[0].label))
    assert (mask[9:11, 7:10] == 1).all() and (mask == 1).sum() == 6


def test_a_label_labels_txt_lacks_is_refused_naming_the_file(tmp_path):
    root = annotated_folder(tmp_path / "lm", n=2)
    (root / "labels.txt").write_text("_background_\nleaf\n")
    with pytest.raises(ImageDataError, match="does not list bug") as err:
        prepared(root)
    assert "0.json" in str(err.value)


def test_files_naming_no_image_there_are_refused(tmp_path):
    root = tmp_path / "lm"
    write_images(root, ["other.png"])
    labelme_file(
        root / "0.json", "C:\\Users\\me\\pictures\\0.png", [shape("a", rect(0, 0, 2), "rectangle")]
    )
    with pytest.raises(ImageDataError, match="name no image that is there"):
        prepared(root)


def test_x_anylabeling_rectangles_and_files_without_sizes_are_drawn(tmp_path, caplog):
    root = tmp_path / "lm"
    write_images(root, ["0.png"])
    (root / "_meta.json").write_text("{}")  # a stray JSON file first in path order
    corners = [[2, 2], [9, 2], [9, 9], [2, 9]]  # X-AnyLabeling: a rectangle's four corners
    path = root / "0.json"
    labelme_file(
        path, "0.png", [shape("leaf", corners, "rectangle"), shape("x", [[1, 1]], "point")]
    )
    old = json.loads(path.read_text())
    del old["imageHeight"], old["imageWidth"]  # LabelMe 3 wrote no size
    path.write_text(json.dumps(old))
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, val_fraction=0, test_fraction=0)
    mask = np.array(Image.open(dm.pairs[0].label))
    assert mask.shape == (H, W) and (mask == 1).sum() == 64  # leaf 1, x 2: in name order
    assert "1 shape(s) outline no area" in caplog.text


def test_masks_beside_labelme_files_are_what_is_read(tmp_path):
    root = annotated_folder(tmp_path / "lm", n=3)
    (root / "3.jpg").unlink()  # the image with no LabelMe file
    for k in range(3):
        Image.fromarray(np.zeros((H, W), np.uint8)).save(root / f"{k}_mask.png")
    dm = prepared(root, class_names=["background", "leaf"], val_fraction=0.34, test_fraction=0)
    assert sorted(p.label.name for p in dm.pairs) == ["0_mask.png", "1_mask.png", "2_mask.png"]
