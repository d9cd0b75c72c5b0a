"""Label Studio's JSON exports (a project's tasks, or JSON-MIN) train with no conversion:
polygons, rectangles, ellipses and brush strokes drawn into masks, the labels the classes."""

from __future__ import annotations

import base64
import io
import itertools
import json
import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data import label_studio
from segnet.data.errors import ImageDataError
from tests.data.test_coco import write_images
from tests.data.test_images import prepared, train_labels

H, W = 24, 32


def pct(x: float, y: float) -> list[float]:
    """A pixel position as Label Studio gives it: percentages of the width and height."""
    return [x * 100 / W, y * 100 / H]


def region(kind: str, label: str, **value) -> dict:
    key = f"{kind}labels"
    return {
        "type": key, "from_name": "label", "to_name": "image", "original_width": W,
        "original_height": H, "image_rotation": 0, "value": {**value, key: [label]},
    }  # fmt: skip


def square(x, y, side, label="leaf") -> dict:
    corners = [pct(x, y), pct(x + side, y), pct(x + side, y + side), pct(x, y + side)]
    return region("polygon", label, points=corners, closed=True)


def brush_rle(mask: np.ndarray, painted: int = 255) -> list[int]:
    """A mask as Label Studio's brush writes it: the run lengths of its RGBA values
    (alpha ``painted`` where painted) in a bit stream, the first two values given one by one,
    the others as runs of one value."""
    values = np.repeat(mask.ravel().astype(np.uint8) * painted, 4).tolist()
    sizes = [3, 6, 10, 16]
    bits: list[int] = []

    def put(v, n):
        bits.extend(int(b) for b in format(v, f"0{n}b"))

    put(len(values), 32)
    put(7, 5)  # words of 8 bits
    for s in sizes:
        put(s - 1, 4)
    put(0, 1), put(0, 2), put(1, sizes[0]), put(values[0], 8), put(values[1], 8)
    for value, run in itertools.groupby(values[2:]):
        count = len(list(run))
        while count:
            part = min(count, 1 << sizes[-1])
            k = next(k for k, s in enumerate(sizes) if part - 1 < 1 << s)
            put(1, 1), put(k, 2), put(part - 1, sizes[k]), put(value, 8)
            count -= part
    bits += [0] * (-len(bits) % 8)
    return np.packbits(np.array(bits, np.uint8)).tolist()


def task(k, image, results, **more) -> dict:
    annotation = {"id": k, "result": results, "was_cancelled": False, "ground_truth": False,
                  "updated_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    return {"id": k, "data": {"image": image}, "annotations": [annotation], "predictions": [],
            **more}  # fmt: skip


def export(path, tasks) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tasks))


def mask_of(dm, name: str) -> np.ndarray:
    return np.array(Image.open(next(p.label for p in dm.pairs if p.name == name)))


def test_brush_run_lengths_are_read_back():
    mask = np.random.default_rng(0).random((H, W)) > 0.7
    assert (label_studio.brush_pixels(brush_rle(mask), H, W) == mask).all()
    with pytest.raises(ValueError, match="its brush holds 3072 values"):
        label_studio.brush_pixels(brush_rle(mask), H, W + 1)
    with pytest.raises(ValueError, match="end early"):
        label_studio.brush_pixels(brush_rle(mask)[:20], H, W)


def test_an_export_of_uploads_trains_every_region_kind(tmp_path, caplog):
    root = tmp_path / "ls"
    names = [f"{k:04d}.jpg" for k in range(6)]
    write_images(root, names)
    stroke = np.zeros((H, W), bool)
    stroke[20:23, 2:12] = True
    results = [
        square(2, 2, 12),
        region("rectangle", "stem", **dict(zip("xy", pct(24, 2), strict=True)), width=4 * 100 / W,
               height=2 * 100 / H, rotation=90),
        region("ellipse", "bug", **dict(zip("xy", pct(6, 6), strict=True)), radiusX=2 * 100 / W,
               radiusY=2 * 100 / H, rotation=0),
        region("brush", "stem", format="rle", rle=brush_rle(stroke)),
        region("keypoint", "tip", **dict(zip("xy", pct(1, 1), strict=True)), width=0.5),
        {"type": "choices", "from_name": "quality", "value": {"choices": ["good"]}},
    ]  # fmt: skip
    tasks = [task(k, f"/data/upload/7/5a3b2c{k:02d}-{n}", results) for k, n in enumerate(names)]
    tasks[5]["annotations"] = [{**tasks[5]["annotations"][0], "was_cancelled": True}]
    tasks[5]["predictions"] = [{"result": results}]
    tasks[4]["annotations"] = [
        {**tasks[4]["annotations"][0], "result": [], "ground_truth": True},
        {**tasks[4]["annotations"][0], "updated_at": "2027-01-01T00:00:00Z"},
    ]
    export(root / "project-7-at-2026-11-29.json", tasks)
    with caplog.at_level(logging.INFO):
        dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert dm.info().class_names == ["background", "bug", "leaf", "stem"]  # tip: key points
    assert len(dm.pairs) == 5  # the cancelled one left out
    mask = mask_of(dm, "0000.jpg")
    assert (mask[2:14, 2:14] == 2).sum() == 144 - (mask[2:14, 2:14] == 1).sum()
    assert (mask[5:7, 5:7] == 1).all()  # the ellipse on the square: smaller, kept
    assert (mask[2:6, 22:24] == 3).all() and (mask[2:6, 24:26] != 3).all()  # turned about x, y
    assert (mask[20:23, 2:12] == 3).all()  # the brush stroke
    assert (mask_of(dm, "0004.jpg") == 0).all()  # the ground truth, not the latest
    assert "1 task(s) of" in caplog.text and "not annotated (1 with a model's" in caplog.text
    assert "4 Label Studio region(s) outline no area" in caplog.text  # 4 annotated
    assert set(np.unique(train_labels(dm))) <= {0, 1, 2, 3}


def test_json_min_of_local_files_in_split_folders(tmp_path):
    root = tmp_path / "ls"
    for split, count in (("train", 4), ("val", 2)):
        names = [f"{split}{k}.png" for k in range(count)]
        write_images(root / split / "images", names)
        items = [
            {"image": f"/data/local-files/?d=ls/{split}/images/{n}", "id": k,
             "label": [{**square(0, 0, 8)["value"], "original_width": W, "original_height": H}],
             "annotator": 1, "annotation_id": k, "updated_at": "2026-01-01"}
            for k, n in enumerate(names)
        ]  # fmt: skip
        export(root / split / "export.json", items)
    dm = prepared(root)
    assert dm.info().class_names == ["background", "leaf"]
    assert {s: len(dm.splits[s]) for s in ("train", "val")} == {"train": 4, "val": 2}
    assert (mask_of(dm, "train/images/train0.png") == 1).sum() == 64


def test_refusals_name_the_file_and_what_to_do(tmp_path):
    root = tmp_path / "ls"
    names = [f"{k}.png" for k in range(4)]
    write_images(root, names)
    settings = {"val_fraction": 0.25, "test_fraction": 0}
    two = square(0, 0, 8)
    two["value"]["polygonlabels"] = ["leaf", "bug"]
    export(root / "export.json", [task(k, n, [two]) for k, n in enumerate(names)])
    with pytest.raises(ImageDataError, match="a region is of one class"):
        prepared(root, **settings)
    export(root / "export.json", [task(k, n, [square(0, 0, 8)]) for k, n in enumerate(names)])
    (root / "export.json").write_text(
        json.dumps(
            [{**t, "annotations": []} for t in json.loads((root / "export.json").read_text())]
        )
    )
    with pytest.raises(ImageDataError, match="no task of .* is annotated"):
        prepared(root, **settings)
    export(root / "export.json", [task(0, "0.png", [square(0, 0, 8)])] * 2)
    with pytest.raises(ImageDataError, match="is the image of two tasks"):
        prepared(root, **settings)


def test_other_json_lists_are_not_label_studio(tmp_path):
    export(tmp_path / "a" / "list.json", [{"name": "x"}, {"data": 1}])
    assert label_studio.annotation_files(tmp_path / "a") == []


def test_regions_are_read_whole_from_the_results_of_their_controls(tmp_path):
    """A shape's own labels win over a second ``<Labels>`` control's on the same region; a
    ``<Rectangle>`` labelled by ``<Labels>`` is one region; deselected labels are void;
    a brush of alpha 1 (as converters write predictions) and a bitmask are drawn."""
    root = tmp_path / "ls"
    names = [f"{k}.png" for k in range(4)]
    write_images(root, names)
    leaf = {**square(0, 0, 8), "id": "a"}
    condition = {"id": "a", "type": "labels", "from_name": "condition",
                 "value": {"points": leaf["value"]["points"], "labels": ["damaged"]}}  # fmt: skip
    box = {"id": "b", "type": "rectangle", "from_name": "box", "original_width": W,
           "original_height": H, "value": {"x": 50, "y": 0, "width": 25, "height": 25}}  # fmt: skip
    box_label = {"id": "b", "type": "labels", "from_name": "kind",
                 "value": {**box["value"], "labels": ["stem"]}}  # fmt: skip
    unlabelled = {**square(0, 16, 4), "id": "c"}
    unlabelled["value"]["polygonlabels"] = []
    faint = np.zeros((H, W), bool)
    faint[20:22, 20:30] = True
    weak = region("brush", "bug", format="rle", rle=brush_rle(faint, painted=1))
    png = io.BytesIO()
    dot = np.zeros((H, W, 4), np.uint8)
    dot[10:12, 28:30, 3] = 1
    Image.fromarray(dot, mode="RGBA").save(png, format="PNG")
    bitmask = region("bitmask", "bug", imageDataURL="data:image/png;base64,"
                     + base64.b64encode(png.getvalue()).decode())  # fmt: skip
    results = [leaf, condition, box, box_label, unlabelled, weak, bitmask]
    export(root / "export.json", [task(k, n, results) for k, n in enumerate(names)])
    dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert dm.info().class_names == ["background", "bug", "leaf", "stem"]
    mask = mask_of(dm, "0.png")
    assert (mask[0:8, 0:8] == 2).all() and (mask[0:6, 16:24] == 3).all()
    assert (mask[16:20, 0:4] == 255).all()  # void: its labels deselected
    assert (mask[20:22, 20:30] == 1).all() and (mask[10:12, 28:30] == 1).all()
    twice = {**condition, "type": "polygonlabels", "from_name": "other",
             "value": {**leaf["value"], "polygonlabels": ["bug"]}}  # fmt: skip
    export(root / "export.json", [task(k, n, [leaf, twice]) for k, n in enumerate(names)])
    with pytest.raises(ImageDataError, match="labelled by the controls label, other"):
        prepared(root, val_fraction=0.25, test_fraction=0)


def test_images_are_found_as_label_studio_names_them(tmp_path, caplog):
    """An upload stored under Django's name (spaces as ``_``), a local storage's path whose
    name only looks like an upload's, an import file never taken for an image, a task of
    two images refused, and JSON-MIN's unannotated items left out."""
    root = tmp_path / "ls"
    write_images(root, ["img 0.png", "img 1.png", "20240101-0002.png", "3.png"])
    (root / "tasks.json").write_text("[]")
    tasks = [
        task(0, "/data/upload/1/5a3b2c1d-img_0.png", [square(0, 0, 8)]),
        task(1, "/data/upload/1/5a3b2c1e-img_1.png", [square(0, 0, 8)]),
        task(2, "/data/local-files/?d=cams/20240101-0002.png", [square(0, 0, 8)]),
        task(3, "/data/local-files/?d=cams/20240101-0003.png", [square(0, 0, 8)],
             file_upload="1a2b3c4d-tasks.json"),
        task(4, "3.png", [square(0, 0, 8)]),
    ]  # fmt: skip
    export(root / "export.json", tasks)
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert sorted(p.name for p in dm.pairs) == [
        "20240101-0002.png",
        "3.png",
        "img 0.png",
        "img 1.png",
    ]
    assert "1 of its 5 images are not in the folder" in caplog.text
    export(root / "export.json", [{**tasks[4], "data": {"left": "3.png", "right": "img 0.png"}}])
    with pytest.raises(ImageDataError, match="task 4 names 2 images"):
        prepared(root, val_fraction=0.25, test_fraction=0)
    items = [
        {"image": n, "id": k, "annotation_id": k if k < 3 else None,
         "label": [{**square(0, 0, 8)["value"], "original_width": W, "original_height": H}]}
        for k, n in enumerate(["img 0.png", "img 1.png", "3.png", "20240101-0002.png"])
    ]  # fmt: skip
    items[3].pop("label")
    export(root / "export.json", items)
    assert len(prepared(root, val_fraction=0.34, test_fraction=0).pairs) == 3


def test_each_export_file_is_checked_for_its_own_images(tmp_path):
    """A local storage's image under a key other than ``image`` is found; a polygon of two
    points draws nothing and is said; a second export none of whose images is there is
    refused, whatever the first found."""
    root = tmp_path / "ls"
    write_images(root / "train", [f"{k}.png" for k in range(4)])
    line = region("polygon", "leaf", points=[pct(0, 0), pct(8, 8)])
    tasks = [
        {**task(k, None, [square(0, 0, 8), line]), "data": {"img": f"/data/local-files/?d=ls/train/{k}.png"}}
        for k in range(4)
    ]  # fmt: skip
    export(root / "train" / "export.json", tasks)
    dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert len(dm.pairs) == 4 and all((mask_of(dm, p.name) == 1).sum() == 64 for p in dm.pairs)
    export(root / "val" / "export.json", [task(0, "elsewhere/v0.png", [square(0, 0, 8)])])
    with pytest.raises(ImageDataError, match=r"val/export.json lists 1 images and none is in"):
        prepared(root, val_fraction=0.25, test_fraction=0)


def test_regions_whose_labels_are_all_deselected_are_refused(tmp_path):
    root = tmp_path / "ls"
    write_images(root, [f"{k}.png" for k in range(4)])
    bare = square(0, 0, 8)
    bare["value"]["polygonlabels"] = []
    export(root / "export.json", [task(k, f"{k}.png", [bare]) for k in range(4)])
    with pytest.raises(ImageDataError, match="every region of .* has its labels deselected"):
        prepared(root, val_fraction=0.25, test_fraction=0)


def test_mask_images_beside_an_export_are_read_whatever_it_holds(tmp_path):
    """Mask images win over an export beside them, even one that would be refused."""
    from tests.data.test_images import make_folder

    root = make_folder(tmp_path / "d")
    two = square(0, 0, 8)
    two["value"]["polygonlabels"] = ["leaf", "bug"]
    export(root / "export.json", [task(0, "images/0.png", [two])])
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert all(p.label.parent.name == "labels" for p in dm.pairs)
