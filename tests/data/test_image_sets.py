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
