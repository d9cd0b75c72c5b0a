"""Images of any number of channels: multi-band TIFFs (16-bit, 2 or 5 bands), ImageJ's
pages of channels and NumPy arrays train, evaluate, export and predict with every band as
the file holds it; kinds that cannot be read together are refused, named."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
from PIL import Image

from segnet.data import formats
from segnet.data import images as img
from segnet.data.images import ImageDataError
from tests.conftest import compose
from tests.data.test_images import blob_label, prepared

TWO = dict(class_names=["background", "disc"], label_values=[0, 255])


def band_image(label: np.ndarray, bands: int, seed: int) -> np.ndarray:
    """(H, W, bands) uint16: the disc bright in band 0 and dark in band 1, noise beyond."""
    rng = np.random.default_rng(seed)
    planes = [label * 30000.0 + 5000, (1 - label) * 20000.0 + 3000]
    planes += [rng.uniform(0, 60000, label.shape) for _ in range(bands - 2)]
    noisy = np.stack(planes[:bands], -1) + rng.normal(0, 500, (*label.shape, bands))
    return noisy.clip(0, 65535).astype(np.uint16)


def band_folder(root, n: int = 6, bands: int = 5, kind: str = "tiff", size=(24, 32)):
    """``images/<k>`` of ``bands`` bands (``tiff``: samples last; ``imagej``: one page per
    band; ``npy``: an array) with ``labels/<k>.png`` (0/255)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    for k in range(n):
        label = blob_label(*size, seed=k)
        image = band_image(label, bands, seed=k)
        if kind == "tiff":
            tifffile.imwrite(root / "images" / f"{k}.tif", image, photometric="minisblack",
                             planarconfig="contig")  # fmt: skip
        elif kind == "imagej":
            tifffile.imwrite(root / "images" / f"{k}.tif", np.moveaxis(image, -1, 0),
                             imagej=True, metadata={"axes": "CYX"})  # fmt: skip
        else:
            np.save(root / "images" / f"{k}.npy", image.astype(np.float32))
        Image.fromarray(label * 255).save(root / "labels" / f"{k}.png")
    return root


@pytest.mark.parametrize(("kind", "bands"), [("tiff", 5), ("imagej", 3), ("npy", 2)])
def test_every_band_is_a_channel_in_the_files_own_units(tmp_path, kind, bands):
    root = band_folder(tmp_path / "d", bands=bands, kind=kind)
    dm = prepared(root, **TWO)
    info = dm.info()
    assert info.in_channels == bands
    norm = info.normalization
    assert norm["color_mode"] == f"bands:{bands}" and len(norm["mean"]) == bands
    assert norm["mean"][0] > 5000  # 16-bit values as they are, not scaled to 8 bits
    raw = img.read_image(
        root / "images" / f"0.{'npy' if kind == 'npy' else 'tif'}", norm["color_mode"]
    )
    label = blob_label(24, 32, seed=0)
    assert raw.shape == (24, 32, bands)
    assert np.allclose(raw, band_image(label, bands, seed=0), atol=1)
    dm.setup("fit")
    assert dm.load("train")[0].image.shape[0] == bands


def test_eight_bit_colour_tiffs_are_read_as_before_and_16_bit_colour_keeps_its_bits(tmp_path):
    eight = (np.random.default_rng(0).uniform(0, 255, (8, 9, 3))).astype(np.uint8)
    tifffile.imwrite(tmp_path / "rgb8.tif", eight, photometric="rgb")
    assert img.header(tmp_path / "rgb8.tif").mode == "RGB"
    wide = eight.astype(np.uint16) * 257
    tifffile.imwrite(tmp_path / "rgb16.tif", wide, photometric="rgb")
    assert img.header(tmp_path / "rgb16.tif").mode == "bands:3"
    assert np.array_equal(img.read_image(tmp_path / "rgb16.tif", "bands:3"), wide)
    # a checkpoint trained when such files were read as 8-bit RGB reads them so still
    assert img.read_image(tmp_path / "rgb16.tif", "RGB").shape == (8, 9, 3)


def test_16_bit_colour_tiffs_read_as_8_bit_rgb_where_the_colour_mode_says_so(tmp_path):
    """What evaluation asks of a checkpoint trained before such files became bands."""
    root = tmp_path / "d"
    for k in range(4):
        label = blob_label(24, 32, seed=k)
        colour = np.stack([label.astype(np.uint16) * 40000 + 10000] * 3, -1)
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "labels").mkdir(exist_ok=True)
        tifffile.imwrite(root / "images" / f"{k}.tif", colour, photometric="rgb")
        Image.fromarray(label * 255).save(root / "labels" / f"{k}.png")
    assert prepared(root, **TWO).info().normalization["color_mode"] == "bands:3"
    as_rgb = prepared(root, color_mode="RGB", **TWO).info()
    assert as_rgb.in_channels == 3 and max(as_rgb.normalization["mean"]) < 256


def test_array_masks_hold_their_values_and_boolean_ones_read_as_black_and_white(tmp_path):
    np.save(tmp_path / "m.npy", np.array([[0, 2], [1, 0]], np.int32))
    assert img.read_mask(tmp_path / "m.npy").tolist() == [[0, 2], [1, 0]]
    np.save(tmp_path / "b.npy", np.array([[True, False]]))
    assert img.read_mask(tmp_path / "b.npy").tolist() == [[255, 0]]
    np.save(tmp_path / "f.npy", np.array([[0.5, 1.0]]))
    with pytest.raises(ImageDataError, match="holds fractions"):
        img.read_mask(tmp_path / "f.npy")


def test_a_folder_of_arrays_with_array_masks_trains(tmp_path):
    root = band_folder(tmp_path / "d", bands=4, kind="npy")
    for png in (root / "labels").glob("*.png"):
        np.save(png.with_suffix(".npy"), (np.array(Image.open(png)) > 0).astype(np.uint8))
        png.unlink()
    dm = prepared(root, class_names=["background", "disc"])
    dm.setup("fit")
    assert set(np.unique(dm.load("train")[0].label.numpy())) == {0, 1}


def test_images_of_other_kinds_or_band_counts_are_refused_naming_a_file_of_each(tmp_path):
    root = band_folder(tmp_path / "d", n=4, bands=5)
    Image.fromarray(np.zeros((24, 32), np.uint8)).save(root / "images" / "9.png")
    Image.fromarray(np.zeros((24, 32), np.uint8)).save(root / "labels" / "9.png")
    with pytest.raises(ImageDataError, match=r"several kinds: .*0.tif is of 5 band.*9.png is L"):
        prepared(root, **TWO)
    (root / "images" / "9.png").unlink()
    tifffile.imwrite(root / "images" / "9.tif", np.zeros((24, 32, 2), np.uint16),
                     photometric="minisblack", planarconfig="contig")  # fmt: skip
    with pytest.raises(ImageDataError, match=r"0.tif is of 5 band.*9.tif is of 2 band"):
        prepared(root, **TWO)
    with pytest.raises(ImageDataError, match="has 2 band"):
        img.read_image(root / "images" / "9.tif", "bands:5")
    with pytest.raises(ImageDataError, match="has 5 bands, which do not read as RGB"):
        prepared(band_folder(tmp_path / "e", n=4), color_mode="RGB", **TWO)


def test_a_volume_is_no_image_and_says_which_recipe_trains_it(tmp_path):
    np.save(tmp_path / "vol.npy", np.zeros((30, 40, 80), np.float32))
    with pytest.raises(ImageDataError, match="a volume trains with a volume recipe"):
        img.header(tmp_path / "vol.npy")
    formats.decode_whole(tmp_path / "vol.npy")  # predict's check: it decodes as a volume


def test_a_band_model_trains_exports_and_predicts_the_same_masks(tmp_path):
    """The exported weights (read without the training stack) and the checkpoint give the
    same masks; the card says what the input is (every export format reads inputs alike)."""
    from segnet.commands.train import train
    from segnet.serving.export import export_checkpoint
    from segnet.serving.predict import Predictor
    from tests.commands.test_train_images import QUICK

    root = band_folder(tmp_path / "d", n=8, bands=5)
    classes = ["data.class_names=[background,disc]", "data.label_values=[0,255]"]
    train(compose("train", [*QUICK, f"data.root={root}", *classes], tmp_path / "run"))
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    export_checkpoint(best, tmp_path / "export", formats=("safetensors",))
    card = json.loads((tmp_path / "export" / "model.json").read_text())
    assert card["input"]["channels"] == 5
    assert card["input"]["normalization"]["color_mode"] == "bands:5"
    image = root / "images" / "3.tif"
    masks = []
    for model, out in ((best, "ckpt"), (tmp_path / "export" / "model.safetensors", "st")):
        written = Predictor(model, postprocess=False).predict_file(image, tmp_path / out)
        masks.append(np.array(Image.open(written[0])))
    assert masks[0].shape == (24, 32) and np.mean(masks[0] == masks[1]) > 0.99


def test_pages_of_channels_are_bands_at_8_bits_too_and_samples_of_one_page_colour(tmp_path):
    pages = (np.random.default_rng(0).uniform(0, 255, (3, 8, 9))).astype(np.uint8)
    tifffile.imwrite(tmp_path / "ij.tif", pages, imagej=True, metadata={"axes": "CYX"})
    assert img.header(tmp_path / "ij.tif").mode == "bands:3"
    assert np.array_equal(img.read_image(tmp_path / "ij.tif", "bands:3"), np.moveaxis(pages, 0, -1))
    tifffile.imwrite(tmp_path / "planar.tif", pages, photometric="rgb", planarconfig="separate")
    assert img.header(tmp_path / "planar.tif").mode == "RGB"


def test_a_colour_mode_given_reads_every_file_through_pillow_as_before(tmp_path):
    headers = [img.Header("bands:2", 8, 9, 1), img.Header("L", 8, 9, 1)]
    pairs = [img.Pair(f"{k}.tif", tmp_path / f"{k}.tif", None) for k in range(2)]
    assert img.dataset_mode(headers, pairs, "L") == "L"  # a checkpoint from before bands


def test_arrays_beside_pictures_are_not_images(tmp_path):
    root = band_folder(tmp_path / "d", n=4, bands=2, kind="npy")
    for k in range(4):  # pictures of the same names: the arrays are kept beside them
        Image.fromarray(np.zeros((24, 32), np.uint8)).save(root / "images" / f"{k}.png")
    names = sum(prepared(root, **TWO).split_names().values(), [])
    assert sorted(names) == [f"{k}.png" for k in range(4)]


def test_a_file_that_reads_neither_as_image_nor_volume_says_both(tmp_path):
    volume = np.zeros((10, 10, 80), np.float32)
    volume[0, 0, 0] = np.nan
    np.save(tmp_path / "vol.npy", volume)
    with pytest.raises(formats.DataError, match="reads neither way.*NaN"):
        formats.decode_whole(tmp_path / "vol.npy")


@pytest.mark.parametrize(
    ("samples", "extra", "mode"),
    [(2, None, "bands:2"), (4, "unspecified", "bands:4"), (4, "unassalpha", "RGBA"),
     (2, "unassalpha", "L")],
    ids=["two_bands", "rgb_and_near_infrared", "rgba", "grey_and_alpha"],
)  # fmt: skip
def test_8_bit_bands_pillow_would_drop_are_bands(tmp_path, samples, extra, mode):
    pixels = (np.random.default_rng(0).uniform(0, 255, (8, 9, samples))).astype(np.uint8)
    photometric = "rgb" if samples == 4 else "minisblack"
    tifffile.imwrite(tmp_path / "x.tif", pixels, photometric=photometric, planarconfig="contig",
                     extrasamples=[extra] if extra else None)  # fmt: skip
    assert img.header(tmp_path / "x.tif").mode == mode
    if mode.startswith("bands"):
        assert np.array_equal(img.read_image(tmp_path / "x.tif", mode), pixels)
        formats.decode_whole(tmp_path / "x.tif")  # predict's check reads it the same way
