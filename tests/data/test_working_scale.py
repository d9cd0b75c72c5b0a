"""The scale your own images are trained at (data.downscale, segnet.data.working_scale):
planned from the data, trained smaller, scored and predicted at native size."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from PIL import Image

from segnet.data import working_scale as ws
from segnet.data.formats import OwnImages
from segnet.data.images_datamodule import ImageFolderDataModule
from tests.data.test_images import make_folder, prepared


def disc(h: int, w: int, r: int) -> np.ndarray:
    yy, xx = np.mgrid[:h, :w]
    return (((yy - h / 2) ** 2 + (xx - w / 2) ** 2) < r * r).astype(np.uint8)


def test_thickness_is_a_strips_width_and_a_discs_radius():
    strip = np.zeros((200, 200), np.uint8)
    strip[20:180, 98:104] = 1  # 6 wide, 160 long
    assert ws.thickness([ws.area_and_boundary(strip)])[1] == pytest.approx(6, rel=0.1)
    thick = ws.thickness([ws.area_and_boundary(disc(200, 200, 40))])[1]
    assert thick == pytest.approx(40, rel=0.15)


def test_thickness_leaves_out_void_and_where_values_are_raw_a_few_stray_pixels():
    mask = disc(200, 200, 60)
    mask[5:8, 5:8] = 7  # a JPEG-like stray level: 9 pixels of 40,000
    mask[100, :] = 255  # a void line
    counted = [ws.area_and_boundary(mask)]
    assert set(ws.thickness(counted, void=[255], min_share=ws.MIN_SHARE)) == {0, 1}
    assert set(ws.thickness(counted, void=[255])) == {0, 1, 7}  # classes: a thin one counts


def test_small_images_stay_at_native_size_and_large_ones_shrink_to_about_8_patches():
    assert ws.plan_downscale([(360, 480)], 128 * 128, None)[0] == 1.0  # CamVid's size
    factor, why = ws.plan_downscale([(2000, 3000), (2400, 3200)], 128 * 128, 100.0)
    h, w = ws.scaled_size(2200, 3100, factor)
    assert 7 <= h * w / (128 * 128) <= 9 and "8 patches" in why


def test_a_thin_class_limits_the_factor_or_keeps_native_size():
    factor, why = ws.plan_downscale([(3000, 4000)], 128 * 128, 16.0)
    assert factor == 2.0 and "thinnest class" in why
    factor, why = ws.plan_downscale([(3000, 4000)], 128 * 128, 6.0)  # vessels, roads
    assert factor == 1.0 and "native size" in why


@pytest.mark.parametrize("setting", [0.5, 0, "big", True, [2]])
def test_a_factor_below_one_or_not_a_number_is_refused_naming_the_setting(setting):
    with pytest.raises(ValueError, match="data.downscale"):
        ws.check_downscale(setting)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_downscaled_images_keep_their_type_and_prediction_reads_them_alike(dtype):
    rng = np.random.default_rng(0)
    top = np.iinfo(dtype).max
    raw = rng.integers(0, top, (97, 131, 3), endpoint=True).astype(dtype)
    held = ws.downscale_array(raw, 2.5)
    assert held.dtype == dtype and held.shape == (39, 52, 3)
    # prediction decodes the same file to float32: the same values after resizing
    read = ws.downscale_array(raw.astype(np.float32), 2.5, whole=True)
    assert np.array_equal(read, held.astype(np.float32))


def big_folder(root, n=8, size=(240, 320)):
    return make_folder(root, n=n, size=size)


def test_a_folder_of_large_images_trains_smaller_and_scores_at_native_size(tmp_path, caplog):
    root = big_folder(tmp_path / "big")
    with caplog.at_level(logging.INFO):
        dm = prepared(root, max_patch=32, class_names=["bg", "disc"], label_values=[0, 255])
    info = dm.info()
    factor = info.normalization["downscale"]
    assert factor == pytest.approx(np.sqrt(240 * 320 / (8 * 32 * 32)), abs=0.01)
    assert "read 3.06 times smaller" in caplog.text and "8 patches" in caplog.text
    dm.setup("fit")
    small = ws.scaled_size(240, 320, factor)
    patch = dm.datasets["train"][0]
    assert tuple(patch["image"].shape[1:]) == (32, 32)
    train = dm.load("train")[0]
    assert tuple(train.raw.shape[1:]) == small and tuple(train.label.shape) == small
    val = dm.datasets["val"][0]
    assert tuple(val["image"].shape[1:]) == small and tuple(val["label"].shape) == (240, 320)
    # the label scored is the mask as it is on disk
    name = dm.datasets["val"].names[0]
    pair = next(p for p in dm.pairs if p.name == name)
    on_disk = (np.asarray(Image.open(pair.masks[0])) > 0).astype(np.int64)
    assert np.array_equal(val["label"].numpy(), on_disk)


@pytest.mark.parametrize("image_mode", ["L", "I;16"])
def test_prediction_feeds_the_network_what_validation_fed_it(tmp_path, image_mode):
    root = make_folder(tmp_path / "big", n=8, size=(240, 320), image_mode=image_mode)
    dm = prepared(root, max_patch=32, class_names=["bg", "disc"], label_values=[0, 255])
    dm.setup("fit")
    val = dm.datasets["val"]
    name = val.names[0]
    pair = next(p for p in dm.pairs if p.name == name)
    given = OwnImages().read(pair.image, dm.info())
    assert given.size == (240, 320)
    torch.testing.assert_close(given.x[0], val[0]["image"], atol=1e-5, rtol=0)


def test_a_thin_class_keeps_a_large_folder_at_native_size_and_says_why(tmp_path, caplog):
    root = tmp_path / "lines"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(6):
        label = np.zeros((240, 320), np.uint8)
        label[:, 40 + 30 * i : 44 + 30 * i] = 255  # a vessel 4 pixels wide
        Image.fromarray(label // 2 + 40).save(root / "images" / f"{i}.png")
        Image.fromarray(label).save(root / "labels" / f"{i}.png")
    with caplog.at_level(logging.INFO):
        dm = prepared(root, max_patch=32, class_names=["bg", "vessel"], label_values=[0, 255])
    assert "downscale" not in dm.info().normalization
    assert "native size, which keeps the thinnest class 8 pixels thick" in caplog.text


def test_a_factor_given_is_used_and_1_keeps_native_size(tmp_path):
    root = big_folder(tmp_path / "big", n=6)
    names = dict(max_patch=32, class_names=["bg", "disc"], label_values=[0, 255])
    assert prepared(root, downscale=3, **names).info().normalization["downscale"] == 3.0
    assert "downscale" not in prepared(root, downscale=1, **names).info().normalization


def test_evaluation_reads_at_the_checkpoints_scale_and_older_ones_at_native_size():
    from segnet.data.info import DataInfo
    from tests.helpers import data_info

    info = data_info()
    norm = {"kind": "image_mean_std", "color_mode": "L", "mean": [1.0], "std": [2.0]}
    older = DataInfo.from_dict({**info, "normalization": norm})
    assert ImageFolderDataModule.settings_from_info(older)["downscale"] == 1.0
    newer = DataInfo.from_dict({**info, "normalization": {**norm, "downscale": 2.5}})
    assert ImageFolderDataModule.settings_from_info(newer)["downscale"] == 2.5
