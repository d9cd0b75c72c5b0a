"""The loss's class weights: one median-frequency definition for every format, and one
check of data.class_weights / data.class_weights_power."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.data import camvid
from segnet.data.class_weights import check_class_weights, from_option, median_frequency
from segnet.data.images_datamodule import ImageFolderDataModule


def test_median_frequency_by_hand_counts_void_in_an_images_size():
    # class 0 in both images: 5 of their 8 pixels -> freq 0.625; class 1 only in image 0:
    # 2 of its 4 pixels -> 0.5; class 2 absent: weight 0. The void pixel is no class's,
    # but it is part of image 1's size. median(0.625, 0.5) = 0.5625.
    labels = torch.tensor([[[0, 0], [1, 1]], [[0, 0], [0, 0]]], dtype=torch.uint8)
    labels[1, 1, 1] = camvid.VOID
    w = median_frequency(*camvid.class_pixel_counts(labels, num_classes=3))
    freq0, freq1 = 5 / 8, 2 / 4
    median = (freq0 + freq1) / 2
    np.testing.assert_allclose(w, [median / freq0, median / freq1, 0.0])


def test_no_class_present_gives_no_weights_rather_than_nan():
    assert median_frequency(np.zeros((2, 3)), [4, 4]).tolist() == [0.0, 0.0, 0.0]


def test_your_own_images_are_weighed_by_the_same_definition_as_camvid(tmp_path):
    """The same label maps as CamVid frames and as an image folder (void as an ignored
    mask value) give the same weights."""
    rng = np.random.default_rng(0)
    maps = [rng.choice([0, 0, 0, 0, 1, 1, 2, 9], size=(32, 40)).astype(np.uint8) for _ in range(6)]
    maps[0][:, :] = 0  # an image holding only class 0
    for folder in ("images", "labels"):
        (tmp_path / folder).mkdir()
    for i, m in enumerate(maps):
        Image.fromarray((m * 20).astype(np.uint8)).save(tmp_path / "images" / f"{i}.png")
        Image.fromarray(m).save(tmp_path / "labels" / f"{i}.png")
    dm = ImageFolderDataModule(
        str(tmp_path), class_names=["a", "b", "c"], label_values=[0, 1, 2], ignore_values=[9],
        class_weights="median_frequency", num_workers=0, val_fraction=0.2, test_fraction=0.0,
    )  # fmt: skip
    dm.prepare_data()
    dm.setup("fit")
    train = torch.from_numpy(np.stack([maps[i] for i in dm.splits["train"]]))
    train[train == 9] = 3  # void, after the three classes
    expected = median_frequency(*camvid.class_pixel_counts(train, num_classes=3))
    np.testing.assert_allclose(dm.class_weights, expected, rtol=1e-6)
    assert dm.class_weights[0] < dm.class_weights[1] < dm.class_weights[2]  # rarest most


def test_rules_and_powers():
    calls = []

    def weights():
        calls.append(1)
        return [4.0, 1.0, 0.25]

    assert from_option("none", 1.0, weights) is None and not calls  # nothing read
    assert from_option([1, 2, 3], 1.0, weights) == [1.0, 2.0, 3.0] and not calls
    assert from_option("median_frequency_sqrt", 1.0, weights) == [2.0, 1.0, 0.5]
    assert from_option("median_frequency", 0.5, weights) == [2.0, 1.0, 0.5]


@pytest.mark.parametrize(
    ("option", "classes", "power", "message"),
    [
        ("median", 3, 1.0, r"data.class_weights='median': use 'median_frequency'"),
        ([1, 2], 3, 1.0, r"has 2 entries; the data has 3 classes"),
        ([0, 0, 0], 3, 1.0, r"not all 0"),
        ([1, -1, 1], None, 1.0, r"each 0 or above"),
        ("none", 3, 0.5, r"class_weights_power=0.5 applies to class_weights='median_frequency'"),
        ("median_frequency", 3, 5, r"class_weights_power=5: use a number in \(0, 4\]"),
    ],
)
def test_bad_settings_are_refused_naming_them(option, classes, power, message):
    with pytest.raises(ValueError, match=message):
        check_class_weights(option, classes, power)
