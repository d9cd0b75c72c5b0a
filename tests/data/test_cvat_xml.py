"""CVAT's own format (annotations.xml, *CVAT for images 1.1*) trains with no conversion:
each image's shapes drawn into its mask in CVAT's order, the labels its classes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from PIL import Image

from segnet.data import cvat_xml
from segnet.data.errors import ImageDataError
from tests.data.test_coco import write_images
from tests.data.test_images import prepared, train_labels

H, W = 24, 32
META = """<meta><task><labels>
  <label><name>road</name><color>#ff0000</color><type>any</type></label>
  <label><name>car</name><color>#00ff00</color><type>any</type></label>
</labels></task></meta>"""


def cvat_file(path, images: dict[str, str], subsets: dict[str, str] | None = None):
    """``images``: each image's name and the XML of its shapes."""
    subsets = subsets or {}
    body = ""
    for k, (name, shapes) in enumerate(images.items()):
        subset = f' subset="{subsets[name]}"' if name in subsets else ""
        body += f'<image id="{k}" name="{name}" width="{W}" height="{H}"{subset}>{shapes}</image>'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<annotations><version>1.1</version>{META}{body}</annotations>")


def polygon(label: str, points, z: int = 0) -> str:
    text = ";".join(f"{x},{y}" for x, y in points)
    return f'<polygon label="{label}" occluded="0" points="{text}" z_order="{z}"></polygon>'


def test_a_cvat_export_trains_with_its_labels_in_cvat_order(tmp_path, caplog):
    root = tmp_path / "task"
    names = [f"frame_{k:06d}.png" for k in range(5)]
    write_images(root / "images", names)
    car = '<box label="car" occluded="0" xtl="4" ytl="4" xbr="12" ybr="8" z_order="1"></box>'
    road = polygon("road", [(0, 0), (20, 0), (20, 20), (0, 20)])
    line = '<polyline label="road" points="0,23;31,23" z_order="0"></polyline>'
    cvat_file(root / "annotations.xml", {n: car + road + line for n in names})
    with caplog.at_level(logging.WARNING):
        dm = prepared(root, val_fraction=0.2, test_fraction=0.2)
    assert dm.info().class_names == ["background", "road", "car"]  # <meta>'s order
    mask = np.array(Image.open(next(p.label for p in dm.pairs if p.name == names[0])))
    # the car's z_order puts it over the road listed after it
    assert (mask == 2).sum() == 32 and (mask[4:8, 4:12] == 2).all()
    assert (mask == 1).sum() == 400 - 32 and (mask[20:, :] == 0).all()
    assert "5 shape(s) are polylines, points or skeletons" in caplog.text
    assert set(np.unique(train_labels(dm))) == {0, 1, 2}


def test_masks_ellipses_rotated_boxes_and_subsets(tmp_path):
    root = tmp_path / "project"  # a project's export: images/<subset>/<name>
    write_images(root / "images" / "Train", ["a.png", "b.png"])
    write_images(root / "images" / "Test", ["a.png"])
    runs = "5, 3, 1, 3"  # over a 4x3 box at (10, 2): off 5, on 3, off 1, on 3
    mask = f'<mask label="car" rle="{runs}" left="10" top="2" width="4" height="3" z_order="0"/>'
    ellipse = '<ellipse label="road" cx="8" cy="12" rx="4" ry="2" rotation="90" z_order="0"/>'
    xml = (
        f'<image id="0" name="a.png" width="{W}" height="{H}" subset="Train">{mask}</image>'
        f'<image id="1" name="b.png" width="{W}" height="{H}" subset="Train">{ellipse}</image>'
        f'<image id="2" name="a.png" width="{W}" height="{H}" subset="Test">{mask}</image>'
    )  # one name in two subsets
    (root / "annotations.xml").write_text(
        f"<annotations><version>1.1</version>{META}{xml}</annotations>"
    )
    dm = prepared(root, val_fraction=0.5)
    assert {p.name: p.split for p in dm.pairs} == {
        "train/a.png": "train", "train/b.png": "train", "test/a.png": "test",
    }  # fmt: skip  # named by their split, as split folders name them
    drawn = np.array(Image.open(dm.pairs[0].label))
    expected = np.zeros((H, W), np.uint8)
    expected[3:5, 11:14] = 2  # rows 1 and 2 of the box, columns 1 to 3
    assert (drawn == expected).all()
    ellipse_mask = np.array(Image.open(dm.pairs[1].label))
    rows, cols = np.nonzero(ellipse_mask == 1)
    # turned a quarter, as CVAT draws it: rows 8 to 16 and columns 6 to 10 about (8, 12)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (8, 16, 6, 10)


def test_video_tracks_are_refused_naming_the_format(tmp_path):
    root = tmp_path / "v"
    write_images(root / "images", ["frame_000000.png"])
    (root / "annotations.xml").write_text(
        f'<annotations><version>1.1</version>{META}<track id="0" label="car">'
        '<box frame="0" xtl="1" ytl="1" xbr="4" ybr="4" outside="0" occluded="0" keyframe="1"/>'
        "</track></annotations>"
    )
    with pytest.raises(ImageDataError, match="CVAT for images 1.1"):
        cvat_xml.annotation_files(root)


def test_video_frames_skeleton_points_and_a_mask_astride_the_edge(tmp_path):
    root = tmp_path / "video_task"
    write_images(root / "images", ["frame_000000.PNG", "frame_000001.PNG"])
    skeleton = (
        "<label><name>person</name><type>skeleton</type></label>"
        "<label><name>head</name><type>points</type><parent>person</parent></label>"
    )
    meta = META.replace("</labels>", skeleton + "</labels>")
    edge = '<mask label="car" rle="0, 6" left="-1" top="-1" width="3" height="2" z_order="0"/>'
    images = "".join(
        f'<image id="{k}" name="frame_00000{k}" width="{W}" height="{H}">{edge}</image>'
        for k in range(2)
    )  # a video's frames: named with no suffix
    (root / "annotations.xml").write_text(
        f"<annotations><version>1.1</version>{meta}{images}</annotations>"
    )
    assert cvat_xml.cvat_classes(root).class_names == ["background", "road", "car", "person"]
    found = cvat_xml.cvat_images(root, sorted((root / "images").iterdir()))
    assert [a.image.name for a in found] == ["frame_000000.PNG", "frame_000001.PNG"]
    mask = np.array(Image.open(found[0].mask))
    assert (mask[0, 0:2] == 2).all() and (mask == 2).sum() == 2  # the box's part inside


def test_a_cvat_file_cut_short_is_refused_naming_it(tmp_path):
    root = tmp_path / "task"
    write_images(root / "images", ["0.png"])
    (root / "annotations.xml").write_text(f"<annotations><version>1.1</version>{META}<image id=")
    with pytest.raises(
        ImageDataError, match="annotations.xml is CVAT's annotation file and cannot"
    ):
        cvat_xml.annotation_files(root)
