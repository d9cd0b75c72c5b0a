"""Masks mean what they look like: every mask form in one folder is read as a viewer
shows it, so one settings line serves a folder whose masks were saved in several forms
(1-bit, 8-bit and 16-bit grey, grey and colour palettes, RGB and RGBA), and the check
before the first step covers the masks of every split."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from segnet.data.images import ImageDataError, colour_code, read_mask
from tests.data.test_images import blob_label, make_folder, prepared, train_labels

COLOURS = [[0, 0, 0], [255, 0, 0], [155, 155, 155]]  # background, disc, a grey "unlabeled"


def save_mask(path, label: np.ndarray, form: str, colours=COLOURS) -> None:
    """``label`` (0, 1, 2 per pixel) saved as ``form`` shows it: black/white, or the
    colours of ``colours``."""
    bw = np.array([0, 255, 255], np.uint8)[label]
    if form == "1":
        Image.fromarray(bw > 0).save(path)
    elif form == "L":
        Image.fromarray(bw).save(path)
    elif form == "I;16":
        Image.fromarray(bw.astype(np.uint16) * 257).save(path)
    elif form == "grey-palette":
        im = Image.fromarray((bw > 0).astype(np.uint8), "P")
        im.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
        im.save(path)
    elif form == "RGB":
        Image.fromarray(np.array(colours, np.uint8)[label], "RGB").save(path)
    elif form == "RGBA":
        rgba = np.concatenate(
            [np.array(colours, np.uint8)[label], np.full_like(bw, 255)[..., None]], -1
        )
        Image.fromarray(rgba, "RGBA").save(path)
    elif form == "colour-palette":
        im = Image.fromarray(label.astype(np.uint8), "P")
        im.putpalette([c for rgb in colours for c in rgb] + [0] * (768 - 3 * len(colours)))
        im.save(path)
    else:
        raise ValueError(form)


def folder_of_forms(root, forms: list[str], with_void: bool = False):
    """A folder whose i-th mask is saved as ``forms[i % len(forms)]``; with a grey void
    band (label 2) where ``with_void``."""
    make_folder(root, n=12)
    for i, path in enumerate(sorted((root / "labels").iterdir(), key=lambda p: int(p.stem))):
        label = blob_label(40, 48, int(path.stem)).astype(np.int64)
        if with_void:
            label[:3] = 2
        path.unlink()
        save_mask(path.with_suffix(".png"), label, forms[i % len(forms)])
    return root


@pytest.mark.parametrize("forms", [["1", "L"], ["1", "I;16"], ["L", "grey-palette", "1"]])
def test_black_and_white_masks_of_any_kind_train_with_0_255(tmp_path, forms):
    root = folder_of_forms(tmp_path / "d", forms)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert set(np.unique(train_labels(dm))) == {0, 1}
    assert dm.load("val") and all(set(np.unique(it.label)) <= {0, 1} for it in dm.load("val"))


def test_a_mixed_black_and_white_folder_is_refused_with_settings_that_fit_every_mask(tmp_path):
    """1-bit and 8-bit masks, no label_values: the refusal suggests [0,255] (what the
    masks look like), which then maps the masks of every split."""
    root = folder_of_forms(tmp_path / "d", ["1", "1", "L"])
    with pytest.raises(ImageDataError) as refused:
        prepared(root, class_names=["background", "disc"])
    assert "'data.label_values=[0,255]'" in str(refused.value)
    assert "'data.label_values=[0,1" not in str(refused.value)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert set(np.unique(train_labels(dm))) == {0, 1}


def test_index_masks_and_1_bit_masks_still_need_no_setting(tmp_path):
    root = folder_of_forms(tmp_path / "d", ["1"])
    assert set(np.unique(train_labels(prepared(root, class_names=["bg", "disc"])))) == {0, 1}
    index = make_folder(tmp_path / "i", values=(0, 1))
    for path in list((index / "labels").iterdir())[:3]:  # some saved as 16-bit values
        Image.fromarray(np.asarray(Image.open(path)).astype(np.uint16)).save(path)
    assert set(np.unique(train_labels(prepared(index, class_names=["bg", "disc"])))) == {0, 1}


@pytest.mark.parametrize("forms", [["RGB", "colour-palette"], ["RGBA", "colour-palette", "RGB"]])
def test_colour_masks_of_several_kinds_map_through_one_palette(tmp_path, forms):
    """RGB, RGBA and palette files holding the same colours, and a grey colour given as
    void: one palette line maps them all."""
    root = folder_of_forms(tmp_path / "d", forms, with_void=True)
    dm = prepared(
        root, class_names=["background", "disc"], palette=COLOURS[:2],
        ignore_values=[[155, 155, 155]],
    )  # fmt: skip
    labels = train_labels(dm)
    assert set(np.unique(labels)) == {0, 1, 2}  # 2: void
    assert (labels == 2).mean() == pytest.approx(3 / 40, abs=0.01)


def test_a_mixed_colour_folder_is_refused_with_a_palette_of_its_colours(tmp_path):
    root = folder_of_forms(tmp_path / "d", ["RGB", "colour-palette"], with_void=True)
    with pytest.raises(ImageDataError) as refused:
        prepared(root, class_names=["background", "disc", "unlabeled"])
    message = str(refused.value)
    assert "'data.palette=[[0,0,0],[155,155,155],[255,0,0]]'" in message, message


def test_a_grey_colour_is_the_same_code_in_a_setting_and_in_any_mask(tmp_path):
    """[128,128,128] (CamVid's Sky) in a colourful mask is the colour given as a setting."""
    sky = np.zeros((4, 4, 3), np.uint8)
    sky[:2] = 128
    sky[2:] = (128, 0, 0)
    Image.fromarray(sky, "RGB").save(tmp_path / "m.png")
    codes = read_mask(tmp_path / "m.png")
    assert codes[0, 0] == colour_code([128, 128, 128], "data.palette") == 128
    assert codes[3, 0] == colour_code([128, 0, 0], "data.palette") != 128
    # a dark blue is no grey level: [0,0,5] is not the value 5
    assert colour_code([0, 0, 5], "data.palette") != 5


def test_a_validation_mask_no_setting_maps_stops_the_run_before_training(tmp_path):
    """The check covers every split: a value only a validation mask holds is named before
    the first step, with settings that fit every mask."""
    root = make_folder(tmp_path / "d", n=12)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255], seed=0)
    dm.setup("fit")
    val_mask = dm.pairs[dm.splits["val"][0]].label
    odd = np.asarray(Image.open(val_mask)).copy()
    odd[0, :5] = 7
    Image.fromarray(odd).save(val_mask)
    with pytest.raises(ImageDataError) as refused:
        prepared(root, class_names=["background", "disc"], label_values=[0, 255], seed=0)
    assert f"mask {val_mask} holds 7" in str(refused.value)
    assert "ignore_values" in str(refused.value)
