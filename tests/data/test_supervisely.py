"""Supervisely projects (``meta.json`` beside datasets of ``img/`` and ``ann/``) train
with no conversion: polygons, bitmaps and rectangles drawn into masks, the project's
classes the classes, its datasets' names or its images' tags the splits."""

from __future__ import annotations

import base64
import io
import json
import logging
import zlib

import numpy as np
import pytest
from PIL import Image

from segnet.data import image_pairs, supervisely
from segnet.data.errors import ImageDataError
from tests.data.test_coco import write_images
from tests.data.test_images import prepared, train_labels

H, W = 24, 32
CLASSES = [
    {"title": "leaf", "shape": "polygon", "color": "#00FF00"},
    {"title": "bug", "shape": "bitmap", "color": "#FF0000"},
    {"title": "stem", "shape": "rectangle", "color": "#0000FF"},
    {"title": "tip", "shape": "point", "color": "#FFFFFF"},
]


def square(x: int, y: int, side: int, title: str = "leaf", holes=()) -> dict:
    """A polygon over pixels [x, x + side) (``holes``: [x, y, side] each, left out): its
    corners are pixels, as Supervisely draws them."""

    def ring(x, y, side):
        far = side - 1
        return [[x, y], [x + far, y], [x + far, y + far], [x, y + far]]

    points = {"exterior": ring(x, y, side), "interior": [ring(*h) for h in holes]}
    return {"classTitle": title, "geometryType": "polygon", "points": points, "tags": []}


def bitmap(x: int, y: int, pixels: np.ndarray, title: str = "bug", compress=True) -> dict:
    """A bitmap at column ``x``, row ``y``, encoded as Supervisely writes it."""
    im = Image.fromarray(pixels.astype(np.uint8), mode="P")
    im.putpalette([0, 0, 0, 255, 255, 255])
    buffer = io.BytesIO()
    im.save(buffer, format="PNG", transparency=0)
    raw = zlib.compress(buffer.getvalue()) if compress else buffer.getvalue()
    data = {"data": base64.b64encode(raw).decode(), "origin": [x, y]}
    return {"classTitle": title, "geometryType": "bitmap", "bitmap": data}


def box(left, top, right, bottom, title="stem") -> dict:
    points = {"exterior": [[left, top], [right, bottom]], "interior": []}
    return {"classTitle": title, "geometryType": "rectangle", "points": points}


def dataset(folder, names, objects, tags=()):
    """A dataset: the images in ``img/``, each one's annotation in ``ann/``."""
    write_images(folder / "img", names)
    (folder / "ann").mkdir(parents=True, exist_ok=True)
    for name in names:
        annotation = {
            "description": "",
            "tags": [{"name": t, "value": v} for t, v in tags],
            "size": {"height": H, "width": W},
            "objects": objects,
        }
        (folder / "ann" / f"{name}.json").write_text(json.dumps(annotation))


def project(root, classes=CLASSES):
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta.json").write_text(json.dumps({"classes": classes, "tags": []}))
    return root


def mask_of(dm, name: str) -> np.ndarray:
    return np.array(Image.open(next(p.label for p in dm.pairs if p.name == name)))


def test_a_project_trains_its_classes_in_its_datasets_splits(tmp_path, caplog):
    root = project(tmp_path / "leaves")
    blob = np.zeros((4, 6), np.uint8)
    blob[1:3, 1:5] = 1
    objects = [
        square(2, 2, 16, holes=[(6, 6, 4)]),
        bitmap(20, 4, blob),
        box(24, 16, 29, 19),
        {"classTitle": "tip", "geometryType": "point", "points": {"exterior": [[1, 1]]}},
    ]
    dataset(root / "train", [f"t{k}.jpg" for k in range(4)], objects)
    dataset(root / "val", ["v0.jpg", "v1.jpg"], objects)
    dataset(root / "test", ["s0.jpg"], objects)
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert dm.info().class_names == ["background", "leaf", "bug", "stem"]  # tip: a point
    assert {s: len(dm.splits[s]) for s in ("train", "val", "test")} == {
        "train": 4,
        "val": 2,
        "test": 1,
    }
    mask = mask_of(dm, "train/img/t0.jpg")
    assert (mask[2:18, 2:18] == 1).sum() == 16 * 16 - 16  # the hole left out
    assert (mask[6:10, 6:10] == 0).all()
    assert (mask[5:7, 21:25] == 2).all() and (mask == 2).sum() == 8  # at its origin
    assert (mask[16:20, 24:30] == 3).all() and (mask == 3).sum() == 4 * 6  # corners inside
    assert "7 Supervisely object(s)" in caplog.text and "outline no area" in caplog.text
    assert "Supervisely's files meta.json, test/ann/s0.jpg.json" in caplog.text
    assert set(np.unique(train_labels(dm))) == {0, 1, 2, 3}
    assert not list(root.rglob("*.png"))  # nothing written into the user's folder


def test_a_later_object_lies_over_an_earlier_and_bitmaps_reach_past_the_edge(tmp_path):
    root = project(tmp_path / "p")
    blob = np.ones((10, 10), np.uint8)
    objects = [bitmap(-4, 18, blob, compress=False), square(0, 0, 20), square(4, 4, 4, "bug")]
    dataset(root / "ds0", [f"{k}.png" for k in range(5)], objects)
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    mask = mask_of(dm, "0.png")  # named below the one dataset's img/
    assert (mask[4:8, 4:8] == 2).all()  # drawn on the larger square
    assert (mask[20:24, 0:6] == 2).all() and mask.shape == (H, W)  # clipped at the edges


def test_image_tags_give_the_splits_where_the_datasets_do_not(tmp_path, caplog):
    root = project(tmp_path / "p")
    for k, (tag, value) in enumerate([("train", None)] * 3 + [("split", "val"), ("test", None)]):
        dataset(root / "ds0", [f"{k}.png"], [square(0, 0, 8)], tags=[(tag, value)])
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
    assert {s: len(dm.splits[s]) for s in ("train", "val", "test")} == {
        "train": 3,
        "val": 1,
        "test": 1,
    }
    assert "5 image(s) in the split their tag names" in caplog.text
    dataset(root / "ds0", ["0.png"], [square(0, 0, 8)], tags=[("train", None), ("test", None)])
    with pytest.raises(ImageDataError, match=r"0.png.json: its image is tagged as of 2 splits"):
        prepared(root)


def test_a_dataset_folder_alone_takes_its_objects_classes(tmp_path):
    root = tmp_path / "ds"
    objects = [square(0, 0, 8, "weed"), square(10, 10, 4, "crop")]
    dataset(root, [f"{k}.png" for k in range(5)], objects)
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "crop", "weed"]  # in name order
    assert (mask_of(dm, "0.png") == 2).sum() == 64


def test_given_class_names_and_refusals(tmp_path, caplog):
    root = project(tmp_path / "p")
    dataset(root / "ds0", [f"{k}.png" for k in range(4)], [square(0, 0, 8), box(10, 10, 12, 12)])
    settings = {"val_fraction": 0.25, "test_fraction": 0}
    with caplog.at_level(logging.INFO):
        dm = prepared(root, class_names=["background", "stem"], **settings)
    mask = mask_of(dm, "0.png")
    assert (mask == 1).sum() == 9 and (mask[:8, :8] == 0).all()  # leaf: background, said
    assert "data.class_names does not name are background: bug, leaf" in caplog.text
    # an object of a class meta.json does not list
    dataset(root / "ds0", ["0.png"], [square(0, 0, 8, "weed")])
    with pytest.raises(ImageDataError, match="its class 'weed' is not in meta.json"):
        prepared(root, **settings)
    # nothing with an area: points only
    point = {"classTitle": "tip", "geometryType": "point", "points": {"exterior": [[1, 1]]}}
    for k in range(4):
        dataset(root / "ds0", [f"{k}.png"], [point])
    with pytest.raises(ImageDataError, match="outlines no area"):
        prepared(root, **settings)


def test_boxes_alone_are_said_and_a_missing_image_left_out(tmp_path, caplog):
    root = project(tmp_path / "p")
    dataset(root / "ds0", [f"{k}.png" for k in range(5)], [box(2, 2, 9, 9)])
    (root / "ds0" / "img" / "4.png").unlink()
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert len(dm.pairs) == 4
    assert "every object of" in caplog.text and "is a rectangle" in caplog.text
    assert "1 Supervisely annotation(s) have no image in img/" in caplog.text


def test_other_folders_are_not_supervisely(tmp_path):
    (tmp_path / "a" / "ann").mkdir(parents=True)
    (tmp_path / "a" / "img").mkdir()
    (tmp_path / "a" / "ann" / "x.png.json").write_text(json.dumps({"shapes": []}))
    assert supervisely.annotation_files(tmp_path / "a") == []
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "meta.json").write_text(json.dumps({"name": "a model card"}))
    assert supervisely.annotation_files(tmp_path / "b") == []


def test_supervisely_own_mask_exports_beside_are_not_read(tmp_path):
    """A project exported with its masks (``masks_machine/``, ``masks_human/``: colours
    that name no class) is drawn from its annotations, not read as mask images."""
    root = project(tmp_path / "p")
    names = [f"{k}.png" for k in range(4)]
    for split in ("train", "val"):
        dataset(root / split, names, [square(0, 0, 8)])
        for folder in ("masks_machine", "masks_human"):
            write_images(root / split / folder, names)
    dm = prepared(root)
    assert dm.info().class_names == ["background", "leaf", "bug", "stem"]
    assert (mask_of(dm, "train/img/0.png") == 1).sum() == 64


def test_objects_are_drawn_in_their_order_with_their_edges(tmp_path):
    """A noisy bitmap after a plain one lies on it; a polygon one pixel wide is drawn;
    a bitmap wholly past the edge draws nothing; a rotated box is turned about its
    centre; a palette bitmap's transparent colour is no object, whatever its grey."""
    root = project(tmp_path / "p", [*CLASSES, {"title": "cut", "shape": "oriented_bbox"}])
    road = np.ones((H, W), np.uint8)
    crack = (np.random.default_rng(0).random((8, 8)) > 0.5).astype(np.uint8)
    crack[0, 0] = 1
    vein = {"classTitle": "stem", "geometryType": "polygon",
            "points": {"exterior": [[20, 2], [20, 12], [20, 2]], "interior": []}}  # fmt: skip
    turned = {"classTitle": "cut", "geometryType": "oriented_bbox", "angle": np.pi / 2,
              "points": {"exterior": [[22, 16], [30, 18]], "interior": []}}  # fmt: skip
    inverse = Image.fromarray(np.ones((3, 4), np.uint8), mode="P")  # index 1 black, 0 white
    inverse.putpalette([255, 255, 255, 0, 0, 0])
    buffer = io.BytesIO()
    inverse.save(buffer, format="PNG", transparency=0)
    dark = {
        "classTitle": "bug",
        "geometryType": "bitmap",
        "bitmap": {
            "data": base64.b64encode(zlib.compress(buffer.getvalue())).decode(),
            "origin": [12, 19],
        },
    }
    hidden = square(1, 1, 4, "stem")  # under the road, drawn after it
    objects = [
        hidden, bitmap(0, 0, road, "leaf"), bitmap(2, 2, crack), vein, turned,
        bitmap(40, 2, np.ones((4, 4), np.uint8)), dark,
    ]  # fmt: skip
    dataset(root / "ds0", [f"{k}.png" for k in range(5)], objects)
    mask = mask_of(prepared(root, val_fraction=0.2, test_fraction=0.2), "0.png")
    assert (mask[2:10, 2:10] == 2).sum() == crack.sum()  # the crack kept on the road
    assert (mask[2:13, 20] == 3).all()  # a line of pixels, as Supervisely draws it
    assert (mask[13:22, 25:28] == 4).all() and (mask[16:19, 22] != 4).all()  # turned upright
    assert (mask[19:22, 12:16] == 2).all() and (mask == 2).sum() == crack.sum() + 12
    assert (mask[1, 1] == 1) and set(np.unique(mask)) == {1, 2, 3, 4}
    pixels, (rows, cols) = supervisely.object_pixels(square(100, 200, 4), 2000, 3000)
    assert pixels.shape == (4, 4) and (rows, cols) == (slice(200, 204), slice(100, 104))


def test_nested_datasets_are_read_at_any_depth_and_once(tmp_path):
    """Datasets nested at any depth, and one named as a dataset's own folders (``meta``),
    are read; a link to a dataset read already is not read again."""
    root = project(tmp_path / "p")
    deep = root / "farm" / "datasets" / "field" / "datasets" / "plot"
    for k, folder in enumerate((root / "farm", deep.parent.parent, deep, root / "meta")):
        dataset(folder, [f"{k}{j}.png" for j in range(2)], [square(0, 0, 8)])
    (root / "latest").symlink_to(root / "farm")
    (deep / "up").symlink_to(root)
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert len(dm.pairs) == 8


def test_masks_a_user_keeps_beside_win_over_the_annotations(tmp_path):
    """Mask images of the user's own (``masks/``) are read, as in any folder; only the
    masks Supervisely exports (``masks_machine/``) are not masks here."""
    root = project(tmp_path / "p")
    names = [f"{k}.png" for k in range(5)]
    dataset(root, names, [square(0, 0, 8)])
    (root / "masks").mkdir()
    for name in names:
        own = np.zeros((H, W), np.uint8)
        own[:, 16:] = 1
        Image.fromarray(own).save(root / "masks" / name)
    dm = prepared(root, class_names=["background", "leaf"], val_fraction=0.2, test_fraction=0.2)
    assert all(p.label.parent == root / "masks" for p in dm.pairs)


def test_a_broken_meta_json_is_refused_and_stray_files_are_passed_over(tmp_path):
    root = project(tmp_path / "p")
    names = [f"{k}.png" for k in range(4)]
    dataset(root / "ds0", names, [square(0, 0, 8)])
    (root / "ds0" / "ann" / "._0.png.json").write_bytes(b"\x00\x05\x16\x07")  # a Mac's
    (root / "ds0" / "ann" / "!0.png.json").write_text("{")  # sorts first, cannot be read
    files = supervisely.annotation_files(root)
    assert len(files) == 6 and files[0].name == "meta.json"  # the stray ._ one passed over
    (root / "meta.json").write_text('{"classes": ')
    with pytest.raises(ImageDataError, match="meta.json holds no class list"):
        prepared(root, val_fraction=0.25, test_fraction=0)
    project(root)
    with pytest.raises(ImageDataError, match=r"cannot read .*!0.png.json"):
        prepared(root, val_fraction=0.25, test_fraction=0)
    for f in (root / "ds0" / "ann").glob("*.json"):  # files not fetched (git-annex, LFS)
        f.write_text("version https://git-lfs.github.com/spec/v1")
    with pytest.raises(ImageDataError, match=r"cannot read .*\.png\.json"):
        prepared(root, val_fraction=0.25, test_fraction=0)


def test_a_project_without_its_images_is_refused_naming_them(tmp_path):
    root = project(tmp_path / "p")
    dataset(root / "ds0", ["0.png", "1.png"], [square(0, 0, 8)])
    for f in (root / "ds0" / "img").iterdir():
        f.unlink()
    (root / "ds0" / "img").rmdir()
    with pytest.raises(ImageDataError, match="download the project with its images"):
        prepared(root, val_fraction=0.5, test_fraction=0)


def test_a_dataset_alone_takes_only_the_classes_drawn(tmp_path):
    root = tmp_path / "ds"
    point = {"classTitle": "tip", "geometryType": "point", "points": {"exterior": [[1, 1]]}}
    dataset(root, [f"{k}.png" for k in range(5)], [square(0, 0, 8, "weed"), point])
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "weed"]


def test_annotations_are_read_once_then_kept(tmp_path, monkeypatch):
    """A second run reads no annotation file: their splits and classes are kept in the
    cache, their masks drawn there."""
    root = tmp_path / "ds"
    dataset(root, [f"{k}.png" for k in range(5)], [square(0, 0, 8, "weed")])
    first = prepared(root, val_fraction=0.2, test_fraction=0.2)

    def unread(path):
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(supervisely, "_read", unread)
    again = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert [p.label for p in again.pairs] == [p.label for p in first.pairs]
    assert again.info().class_names == ["background", "weed"]


def test_masks_one_per_class_beside_a_project_are_the_users(tmp_path):
    """A folder of one mask per class (pairs with no single mask) beside Supervisely's
    files: its masks are read, as in any folder; a meta.json of no object is no project."""
    from tests.data.test_class_masks import class_folders

    root = class_folders(tmp_path / "p", n=4)
    project(root)
    dataset(root / "ds0", ["0.png"], [square(0, 0, 8)])
    assert image_pairs.masks_read(root, False, supervisely.OWN_MASKS)
    assert not image_pairs.drawn_masks_root(root)
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "meta.json").write_text('["a list"]')
    assert supervisely.annotation_files(tmp_path / "q") == []
