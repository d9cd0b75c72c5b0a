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


def test_a_mixed_black_and_white_folder_reads_as_it_looks_with_two_names(tmp_path):
    """1-bit and 8-bit masks, two names and no label_values: read as they look, black and
    white ([0,255], not the 1-bit files' 0 and 1 beside 8-bit 255), in every split."""
    root = folder_of_forms(tmp_path / "d", ["1", "1", "L"])
    dm = prepared(root, class_names=["background", "disc"])
    assert dm.settings_found()["label_values"] == [0, 255]
    given = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert np.array_equal(train_labels(dm), train_labels(given))
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
    odd[:10] = 128  # far from 0 and 255 and a fifth of the mask: a class of its own
    Image.fromarray(odd).save(val_mask)
    with pytest.raises(ImageDataError) as refused:
        prepared(root, class_names=["background", "disc"], label_values=[0, 255], seed=0)
    assert f"mask {val_mask} holds 128" in str(refused.value)
    assert "ignore_values" in str(refused.value)


def test_jpeg_masks_are_read_by_the_nearest_given_value(tmp_path, caplog):
    """A mask saved as JPEG holds compression noise around its values (1 and 254 beside 0
    and 255; a colour a few levels off): a value near a given one is read as it, as a
    viewer shows it, and the log sums such values up per class."""
    import logging

    grey = make_folder(tmp_path / "grey", n=8, label_ext=".jpg")
    noisy = {int(v) for p in (grey / "labels").iterdir() for v in np.unique(Image.open(p))}
    assert noisy - {0, 255}  # the JPEG's own noise, which no setting lists
    with caplog.at_level(logging.INFO):
        dm = prepared(grey, class_names=["background", "disc"], label_values=[0, 255])
        labels = train_labels(dm)
    assert (labels == drawn(dm)).mean() > 0.995  # edges may round either way
    assert "nearest" in caplog.text and "-> disc" in caplog.text
    colour = make_folder(
        tmp_path / "colour", n=8, mask_mode="RGB", palette=COLOURS[:2], label_ext=".jpg"
    )
    dm = prepared(colour, class_names=["background", "disc"], palette=COLOURS[:2])
    assert (train_labels(dm) == drawn(dm)).mean() > 0.99


def drawn(dm) -> np.ndarray:
    """The labels make_folder drew for the training images, in train_labels' order."""
    from pathlib import Path

    return np.concatenate(
        [blob_label(40, 48, int(Path(dm.pairs[i].name).stem)).ravel() for i in dm.splits["train"]]
    )


def test_values_off_the_given_ones_are_read_as_the_nearest_unless_a_class_of_their_own():
    """Noise and edges are read as the nearest given value; a value far from every given
    one (over a quarter of the way to the next) that holds a real share of the pixels is a
    class nobody named, and stays unmapped; index masks, whose values are class numbers,
    take no nearest."""
    from segnet.data.images import NAMED_SHARE, LabelMapping

    bw = LabelMapping.from_settings(["background", "disc"], [0, 255], None, None)
    assert bw.tolerance() == pytest.approx(63.75)
    noise = {0: 6000, 255: 3000, 1: 20, 63: 5, 192: 5, 254: 30, 128: 4}  # 128: an edge
    assert bw.near_values(noise) == {1: 0, 63: 0, 192: 1, 254: 1, 128: 1}
    unnamed = {**noise, 100: 4 * int(NAMED_SHARE * sum(noise.values())), 250: 200}
    # 100 holds 2% of the pixels and is far from 0 and 255: a third class, unmapped
    assert bw.near_values(unnamed) == {1: 0, 63: 0, 192: 1, 254: 1, 128: 1, 250: 1}
    colours = LabelMapping.from_settings(["background", "disc"], None, COLOURS[:2], [COLOURS[2]])
    red, grey = colour_code([250, 5, 3], "x"), colour_code([150, 150, 150], "x")
    dark = colour_code([90, 0, 0], "x")  # a black-red edge, a third of the way
    counts = {colour_code(c, "x"): 1000 for c in COLOURS} | {red: 50, grey: 50, dark: 10}
    assert colours.near_values(counts) == {red: 1, grey: colours.void, dark: 0}
    assert 0 not in colours.near_values({**counts, dark: 500})  # 10%: a class of its own
    index = LabelMapping.from_settings(["background", "disc"], None, None, None)
    assert index.tolerance() is None and index.near_values({0: 9, 2: 1, 254: 1}) == {}


def test_one_mask_is_read_as_the_folder_was_judged(tmp_path):
    """A value the check over every mask read as the nearest class is read so in each
    mask, even where it is a large share of that one mask."""
    root = make_folder(tmp_path / "d", n=12)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255], seed=0)
    mask = dm.pairs[dm.splits["val"][0]].label
    odd = np.asarray(Image.open(mask)).copy()
    odd[:2, :] = 120  # 4% of this mask; a fraction of a percent of the folder's pixels
    Image.fromarray(odd).save(mask)
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255], seed=0)
    dm.setup("fit")
    label = dm.load("val")[0].label.numpy()
    assert (label[:2] == 0).all()  # 120 is nearer black: background


def test_a_far_value_read_as_the_nearest_is_named_and_class_numbers_take_no_nearest(
    tmp_path, caplog
):
    """A far value few pixels hold is read as the nearest class but named in a warning
    (a rare class nobody named would be among them); given values a level apart are class
    numbers, so a value off them is refused however few pixels hold it; and the settings
    suggested for a JPEG's noisy masks are the values that matter."""
    import logging

    from segnet.data.images import LabelMapping, suggestion

    numbers = LabelMapping.from_settings(["a", "b", "c"], [0, 1, 2], None, None)
    assert numbers.tolerance() is None and numbers.near_values({0: 900, 1: 90, 7: 1}) == {}
    root = make_folder(tmp_path / "d", n=12)
    mask = root / "labels" / "3.png"
    odd = np.asarray(Image.open(mask)).copy()
    odd[0, :3] = 120  # 3 pixels of 23,040: far from 0 and 255, too few to be a class
    Image.fromarray(odd).save(mask)
    with caplog.at_level(logging.INFO):
        train_labels(prepared(root, class_names=["background", "disc"], label_values=[0, 255]))
    assert "far from every given one" in caplog.text and "120 (0.01%, as background)" in caplog.text
    assert "120" in caplog.text.split("mask values over")[1]  # a line of its own in the table
    noisy = {0: 7400, 255: 1950, 254: 41, 1: 37, 3: 32, 250: 24}
    assert "'data.label_values=[0,255]'" in suggestion(noisy, None)


def test_suggested_settings_keep_a_rare_value_that_may_be_a_class():
    """Only noise is left out of a suggestion: a rare value among class numbers, or far
    from the other values, stays in, so following the suggestion neither loops back to
    the same refusal nor reads a rare class as another."""
    from segnet.data.images import suggestion

    numbers = {0: 9000, 1: 500, 2: 400, 3: 20}
    # class numbers need names alone: a line to paste, its names to replace
    said = suggestion(numbers, None)
    assert "'data.class_names=[background,class_1,class_2,class_3]'" in said
    assert "label_values" not in said
    rare_grey = {0: 7400, 255: 1950, 254: 41, 1: 37, 128: 30}
    said = suggestion(rare_grey, None)
    assert "'data.class_names=[background,class_128,class_255]'" in said
    assert "'data.label_values=[0,128,255]'" in said
    colours = {(1 << 24) + 255 * 65536: 500, (1 << 24) + 255: 400}  # red and blue
    said = suggestion(colours, None)
    assert "'data.class_names=[class_0,class_1]' 'data.palette=[[" in said
    assert "[255,0,0]" in said and "[0,0,255]" in said


def test_evaluation_judges_values_over_the_split_as_training_judges_its_folder(tmp_path):
    """With the normalisation given (evaluate.py), the values off the given ones are
    judged over the evaluated split, before anything is scored: a mask where a far value
    is a large share of that one mask is read as the split was judged."""
    root = make_folder(tmp_path / "d", n=12)
    mask = root / "labels" / "5.png"
    odd = np.asarray(Image.open(mask)).copy()
    odd[:2, :] = 120  # 4% of this mask, under 0.5% of the 12
    Image.fromarray(odd).save(mask)
    settings = dict(class_names=["background", "disc"], label_values=[0, 255])
    dm = prepared(root, mean=[100.0], std=[50.0], split="all", **settings)
    assert dm.mapping.decided is not None and dm.mapping.decided[120] == 0
    dm.setup("test")
    label = next(it for it in dm.load("all") if it.name == "5.png").label.numpy()
    assert (label[:2] == 0).all()


def test_masks_with_smoothed_edges_read_black_and_white_with_no_setting(tmp_path, caplog):
    """Masks resized with interpolation (or drawn anti-aliased) hold every level between
    black and white along their edges, each a sliver of the pixels: read as background and
    foreground, each level as the nearest, with no class named; they were refused with
    a suggestion to read them as instance masks."""
    import logging

    from PIL import ImageFilter

    from segnet.data.images import EDGE_RAMP, LabelMapping

    root = make_folder(tmp_path / "d", n=12, size=(64, 80))
    for mask in (root / "labels").iterdir():
        Image.open(mask).filter(ImageFilter.GaussianBlur(1.5)).save(mask)
    levels = {int(v) for p in (root / "labels").iterdir() for v in np.unique(Image.open(p))}
    assert len([v for v in levels if 64 <= v <= 191]) >= EDGE_RAMP  # far from 0 and 255
    with caplog.at_level(logging.INFO):
        dm = prepared(root)
        labels = train_labels(dm)
    assert dm.info().class_names == ["background", "foreground"]
    assert (labels == (drawn_blurred(dm) >= 128)).all()  # each level as the nearest
    assert "no class is named" in caplog.text  # said, with the settings that name them
    # with the values given, a far value is still named (it may be a class nobody named)
    bw = LabelMapping.from_settings(["background", "disc"], [0, 255], None, None)
    assert bw.far_values({0: 9000, 255: 3000, 120: 3}) == {120: 0}


def drawn_blurred(dm) -> np.ndarray:
    """The smoothed masks' levels for the training images, in train_labels' order."""
    return np.concatenate(
        [np.asarray(Image.open(dm.pairs[i].label)).ravel() for i in dm.splits["train"]]
    )


def test_instance_masks_are_not_read_as_smoothed_black_and_white():
    """Instance masks also hold many values, each a small share: the objects' values hold
    shares alike, none a sliver beside the largest, so they are no smoothed edge."""
    from segnet.data.images import background_and_foreground, suggestion

    rng = np.random.default_rng(0)
    objects = {v: int(n) for v, n in zip(range(1, 200), rng.integers(300, 900, 199), strict=True)}
    counts = {0: 400_000, **objects}
    assert background_and_foreground(counts) is None
    assert "data.instance_masks=true" in suggestion(counts, None)
    # one clump far larger than every cell: the cells together are no thin band beside it
    clump = {0: 400_000, **{v: 300 for v in range(1, 100)}, 100: 8000}
    assert background_and_foreground(clump) is None
    whitest = {0: 400_000, **{v: 300 for v in range(1, 255)}, 255: 8000}
    assert background_and_foreground(whitest) is None


@pytest.mark.parametrize("form", ["RGBA", "LA"])
def test_a_transparent_pixel_of_a_mask_is_nothing_drawn(tmp_path, form):
    """A mask painted on a transparent layer (or a cut-out) keeps any colour under its
    wholly transparent pixels, here white: they are 0, so the mask reads as it looks (it
    read white everywhere: one value, refused). A pixel drawn at half opacity keeps its
    colour; a palette file's transparent colour reads as its colour, as before."""
    label = blob_label(40, 48, 3)
    path = tmp_path / "m.png"
    alpha = np.where(label > 0, 255, 0).astype(np.uint8)
    alpha[0, 0] = 128  # white at half opacity: white, drawn
    white = np.full_like(alpha, 255)
    if form == "RGBA":
        Image.fromarray(np.dstack([white, white, white, alpha]), "RGBA").save(path)
    else:
        Image.fromarray(np.dstack([white, alpha]), "LA").save(path)
    expected = np.where(label > 0, 255, 0)
    expected[0, 0] = 255
    assert (read_mask(path) == expected).all()
    voc = tmp_path / "voc.png"  # VOC's void (255) marked transparent: still its colour
    im = Image.fromarray(np.where(label > 0, 255, 1).astype(np.uint8), "P")
    im.putpalette([0, 0, 0, 128, 0, 0] + [0] * 759 + [224, 224, 192])
    im.save(voc, transparency=255)
    void = colour_code([224, 224, 192], "x")
    assert set(np.unique(read_mask(voc, palette_colours=True))) == {
        colour_code([128, 0, 0], "x"),
        void,
    }
    opaque = tmp_path / "o.png"  # an opaque mask reads as before
    Image.fromarray(np.dstack([white * 0 + 7, white, white, white]), "RGBA").save(opaque)
    assert (read_mask(opaque) == colour_code([7, 255, 255], "x")).all()


def test_a_folder_of_empty_masks_is_refused_as_nothing_to_learn(tmp_path):
    """Masks of one value in every pixel (exported empty, the wrong folder): no class
    setting helps, so the refusal says what is wrong rather than suggest naming the one
    value as a class."""
    root = make_folder(tmp_path / "d", n=6)
    for mask in (root / "labels").iterdir():
        Image.new("L", Image.open(mask).size).save(mask)
    with pytest.raises(ValueError, match="holds the one value 0 in every pixel") as refused:
        prepared(root)
    assert str(root / "labels") in str(refused.value)
    assert "class_names=[background]" not in str(refused.value)


def test_class_numbers_beside_255_are_suggested_with_255_void():
    """Masks of class numbers and 255 (Pascal VOC's outlines, pixels nobody
    labelled): 255 is suggested as void, not as a class of its own."""
    from segnet.data.images import suggestion

    said = suggestion({0: 9000, 1: 800, 2: 300, 255: 100}, None)
    assert said.startswith(
        "'data.class_names=[background,class_1,class_2]' 'data.ignore_values=[255]'"
    )
    assert "'data.label_values=[0,1,2,255]'" in said  # where 255 is a class after all
    assert "ignore_values" not in suggestion({0: 9000, 255: 800, 128: 300}, None).split("(")[0]
