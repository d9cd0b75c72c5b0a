"""VGG Image Annotator's files (each image's regions in one JSON file) train with no
conversion: the regions drawn into masks, their attribute the class."""

from __future__ import annotations

import csv
import json
import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data.errors import ImageDataError
from tests.data.test_coco import write_images
from tests.data.test_images import prepared, train_labels

H, W = 24, 32


def polygon(x: int, y: int, side: int, **attributes) -> dict:
    """A square region over pixels [x, x + side)."""
    xs, ys = [x, x + side, x + side, x], [y, y, y + side, y + side]
    shape = {"name": "polygon", "all_points_x": xs, "all_points_y": ys}
    return {"shape_attributes": shape, "region_attributes": attributes}


def via_file(folder, names, regions, project=None):
    """VIA 2's export of regions (a project file where ``project`` gives its attributes)."""
    write_images(folder, names)
    sizes = {n: (folder / n).stat().st_size for n in names}
    meta = {
        f"{n}{sizes[n]}": {
            "filename": n,
            "size": sizes[n],
            "regions": regions,
            "file_attributes": {},
        }
        for n in names
    }
    if project is not None:
        text = {"_via_settings": {}, "_via_img_metadata": meta, "_via_attributes": project}
        (folder / "via_project.json").write_text(json.dumps(text))
    else:
        (folder / "via_region_data.json").write_text(json.dumps(meta))


def mask_of(dm, name: str) -> np.ndarray:
    return np.array(Image.open(next(p.label for p in dm.pairs if p.name == name)))


def test_the_balloon_layout_trains_its_one_class_in_its_splits(tmp_path, caplog):
    root = tmp_path / "balloon"
    regions = [polygon(4, 4, 12), {"shape_attributes": {"name": "point", "cx": 1, "cy": 1}}]
    via_file(root / "train", [f"t{k}.jpg" for k in range(4)], regions)
    via_file(root / "val", ["v0.jpg", "v1.jpg"], regions)
    with caplog.at_level(logging.WARNING):
        dm = prepared(root)
    assert dm.info().class_names == ["background", "foreground"]
    assert {s: len(dm.splits[s]) for s in ("train", "val")} == {"train": 4, "val": 2}
    mask = mask_of(dm, "train/t0.jpg")
    assert (mask == 1).sum() == 144 and (mask[4:16, 4:16] == 1).all()
    assert "6 VIA region(s) of" in caplog.text and "outline no area" in caplog.text
    assert "past their image's edge" not in caplog.text
    assert set(np.unique(train_labels(dm))) == {0, 1}
    assert not list(root.rglob("*.png"))  # nothing written into the user's folder


def test_a_project_files_options_order_the_classes_and_shapes_are_drawn(tmp_path):
    root = tmp_path / "p"
    regions = [
        {"shape_attributes": {"name": "rect", "x": 2, "y": 2, "width": 20, "height": 10},
         "region_attributes": {"class": "leaf", "note": "x"}},
        {"shape_attributes": {"name": "circle", "cx": 10, "cy": 6, "r": 2},
         "region_attributes": {"class": "bug", "note": ""}},
        {"shape_attributes": {"name": "ellipse", "cx": 26, "cy": 18, "rx": 4, "ry": 2,
                              "theta": 0}, "region_attributes": {"class": "leaf"}},
    ]  # fmt: skip
    options = {"region": {"class": {"type": "dropdown", "options": {"leaf": "", "bug": ""}}}}
    via_file(root, [f"{k}.png" for k in range(5)], regions, project=options)
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "leaf", "bug"]  # the options' order
    mask = mask_of(dm, "0.png")
    assert mask[6, 10] == 2 and mask[3, 3] == 1 and mask[18, 26] == 1 and mask[18, 20] == 0
    assert 8 <= (mask == 2).sum() <= 16  # a circle of radius 2, drawn on the larger box


def test_via_1_regions_and_a_checkbox_class(tmp_path):
    root = tmp_path / "v1"
    regions = {"0": polygon(0, 0, 8, Class={"leaf": True, "bug": False}, note="one")}
    via_file(root, [f"{k}.png" for k in range(5)], regions)
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "leaf"]
    assert (mask_of(dm, "0.png") == 1).sum() == 64


@pytest.mark.parametrize(
    "attributes, words",
    [
        ({"class": {"leaf": True, "bug": True}}, "a region is of one class"),
        ({"label": ["leaf", "bug"]}, "a region is of one class"),
    ],
)
def test_regions_of_two_classes_are_refused(tmp_path, attributes, words):
    root = tmp_path / "v"
    via_file(root, [f"{k}.png" for k in range(4)], [polygon(0, 0, 8, **attributes)])
    with pytest.raises(ImageDataError, match=words):
        prepared(root, val_fraction=0.25, test_fraction=0)


def test_which_attribute_is_the_class(tmp_path, caplog):
    """The only attribute the regions give (``species``), one named as a class in any
    spelling (``Class_Name``), none (one class, named as given); a lone note on some
    regions, or several attributes none named as a class, are refused."""
    names = [f"{k}.png" for k in range(4)]
    settings = {"val_fraction": 0.25, "test_fraction": 0}
    cases = [
        ([polygon(0, 0, 8, species="gull"), polygon(16, 8, 4, species="tern")], ["gull", "tern"]),
        ([polygon(0, 0, 8, Class_Name="gull", note="x"), polygon(16, 8, 4, Class_Name="")],
         ["gull"]),
    ]  # fmt: skip
    for k, (regions, classes) in enumerate(cases):
        via_file(tmp_path / str(k), names, regions)
        assert prepared(tmp_path / str(k), **settings).info().class_names == [
            "background",
            *classes,
        ]
    via_file(tmp_path / "bare", names, [polygon(0, 0, 8), polygon(16, 8, 4)])
    with caplog.at_level(logging.WARNING):
        dm = prepared(tmp_path / "bare", class_names=["background", "balloon"], **settings)
    assert (
        mask_of(dm, "0.png") == 1
    ).sum() == 64 + 16 and "is the one class balloon" in caplog.text
    for regions, words in (
        ([polygon(0, 0, 8, note="tied"), polygon(16, 8, 4)], "4 of its 8 regions give 'note'"),
        ([polygon(0, 0, 8, colour="red", size="big")], "none is named as a class"),
    ):
        via_file(tmp_path / "x", names, regions)
        with pytest.raises(ImageDataError, match=words):
            prepared(tmp_path / "x", **settings)


def test_images_listed_twice_are_refused_and_a_root_file_keeps_split_folders(tmp_path):
    root = tmp_path / "v"
    via_file(
        root / "train", ["t0.png", "t1.png", "t2.png"], [polygon(0, 0, 8, **{"class": "leaf"})]
    )
    via_file(root / "val", ["v0.png"], [polygon(0, 0, 8, **{"class": "leaf"})])
    meta = {}
    for folder in ("train", "val"):
        meta.update({
            k: {**e, "filename": f"{folder}/{e['filename']}"}
            for k, e in json.loads((root / folder / "via_region_data.json").read_text()).items()
        })  # fmt: skip
        (root / folder / "via_region_data.json").unlink()
    (root / "via_region_data.json").write_text(json.dumps(meta))
    dm = prepared(root)
    assert {p.name: p.split for p in dm.pairs}["val/v0.png"] == "val"
    (root / "annotations").mkdir()
    project = root / "annotations" / "via_project.json"
    project.write_text(json.dumps({"_via_img_metadata": meta, "_via_attributes": {}}))
    assert len(prepared(root).pairs) == 4  # the project and its export: read once
    other = {k: {**e, "regions": []} for k, e in meta.items()}
    project.write_text(json.dumps({"_via_img_metadata": other, "_via_attributes": {}}))
    with pytest.raises(ImageDataError, match="is listed in .* and again in .* with other regions"):
        prepared(root)


def test_files_in_an_annotations_folder_take_their_split_from_their_name(tmp_path):
    root = tmp_path / "v"
    for split, names in (("train", ["t0.png", "t1.png", "t2.png"]), ("val", ["v0.png"])):
        via_file(root / split, names, [polygon(0, 0, 8, **{"class": "leaf"})])
        (root / "annotations").mkdir(exist_ok=True)
        (root / split / "via_region_data.json").rename(root / "annotations" / f"via_{split}.json")
    dm = prepared(root)
    assert {p.name: p.split for p in dm.pairs} == {
        "train/t0.png": "train", "train/t1.png": "train", "train/t2.png": "train",
        "val/v0.png": "val",
    }  # fmt: skip


def test_a_via_3_project_is_refused_only_where_no_masks_are_found(tmp_path):
    from tests.data.test_images import make_folder

    via3 = {"project": {"pid": "x"}, "config": {}, "attribute": {}, "file": {"1": {}},
            "view": {}, "metadata": {}}  # fmt: skip
    root = tmp_path / "v"
    write_images(root, ["0.png"])
    (root / "via3.json").write_text(json.dumps(via3))
    with pytest.raises(ImageDataError, match="VGG Image Annotator 3 project"):
        prepared(root)
    masks = make_folder(tmp_path / "m")  # masks beside such a file: read as before
    (masks / "via3.json").write_text(json.dumps(via3))
    assert len(prepared(masks, class_names=["background", "cell"], label_values=[0, 255]).pairs)


def test_one_label_is_not_the_class_of_a_list_whose_background_is_not_first():
    from segnet.data.drawn_masks import values_by_name

    with pytest.raises(ImageDataError, match="name none of the labels"):
        values_by_name(["foreground"], ["cat", "background"], "an export")
    assert values_by_name(["foreground"], ["background", "cat"], "an export") == {"foreground": 1}


def test_the_csv_export_reads_as_the_json_one(tmp_path):
    """VIA's CSV export (a row per region, JSON in its cells; an image of no region a
    row of ``{}``) is read as its JSON export."""
    root = tmp_path / "csv"
    names = [f"{k}.png" for k in range(5)]
    write_images(root, names)
    header = ["filename", "file_size", "file_attributes", "region_count", "region_id",
              "region_shape_attributes", "region_attributes"]  # fmt: skip
    rows = []
    for n in names:
        size = (root / n).stat().st_size
        labels = ("leaf", "bug") if n != names[-1] else ()
        for k, label in enumerate(labels):
            shape = json.dumps(polygon(4 + 10 * k, 4, 8)["shape_attributes"])
            rows.append([n, size, "{}", len(labels), k, shape, json.dumps({"class": label})])
        rows += [] if labels else [[n, size, "{}", 0, 0, "{}", "{}"]]
    with open(root / "via_export_csv.csv", "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "bug", "leaf"]
    mask = mask_of(dm, "0.png")
    assert (mask[4:12, 4:12] == 2).all() and (mask[4:12, 14:22] == 1).all()
    assert (mask_of(dm, "4.png") == 0).all() and len(dm.pairs) == 5


def test_csv_exports_as_via_writes_them(tmp_path, caplog):
    """A file name holding a comma (VIA leaves it unquoted), VIA 1's ``#filename``
    header, and a CSV beside a JSON export of the same project (the JSON read)."""
    root = tmp_path / "csv"
    names = ["a,b.png", "c.png", "d.png", "e.png"]
    write_images(root, names)
    lines = ["#filename,file_size,file_attributes,region_count,region_id,"
             "region_shape_attributes,region_attributes"]  # fmt: skip
    for n in names:
        cells = [json.dumps(polygon(4, 4, 8 + k)["shape_attributes"]) for k in range(2)]
        quoted = ['"' + c.replace('"', '""') + '"' for c in cells]
        lines += [f'{n},{(root / n).stat().st_size},"{{}}",2,{k},{q},"{{}}"'
                  for k, q in enumerate(quoted)]  # fmt: skip
    (root / "via_export_csv.csv").write_text("\n".join(lines) + "\n")
    dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert len(dm.pairs) == 4 and dm.info().class_names == ["background", "foreground"]
    assert (mask_of(dm, "a,b.png") == 1).sum() == 81
    via_file(root, names, [polygon(0, 0, 4)])  # a JSON export made later, beside it
    with caplog.at_level(logging.INFO):
        dm = prepared(root, val_fraction=0.25, test_fraction=0)
    assert (mask_of(dm, "c.png") == 1).sum() == 16
    assert "a VIA JSON file lies beside it, and is read instead" in caplog.text
