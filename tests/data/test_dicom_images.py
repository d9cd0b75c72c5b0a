"""DICOM images of one frame (``.dcm``: X-rays, mammograms, ultrasound frames) train
beside mask images, read with SimpleITK: their rescale applied, MONOCHROME1 turned so
that bright is dense in every image, a multi-frame file refused as a volume."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from segnet.data import bands
from segnet.data.errors import ImageDataError
from tests.data.test_images import prepared

H, W = 24, 32


# SimpleITK's files hold (implicit VR) bits stored 16 and high bit 15: an X-ray's 12 bits
SIXTEEN_BITS = (
    b"\x28\x00\x01\x01\x02\x00\x00\x00\x10\x00",
    b"\x28\x00\x02\x01\x02\x00\x00\x00\x0f\x00",
)
TWELVE_BITS = (
    b"\x28\x00\x01\x01\x02\x00\x00\x00\x0c\x00",
    b"\x28\x00\x02\x01\x02\x00\x00\x00\x0b\x00",
)


def write_dicom(path, pixels: np.ndarray, monochrome1: bool = False) -> None:
    """``pixels`` (uint16 of 12 bits, or (H, W, 3) uint8) as a DICOM file, as SimpleITK
    writes one, its 16-bit pixels said to hold 12 bits (MONOCHROME2; where
    ``monochrome1``, the file says MONOCHROME1 instead, as a system storing dark as
    dense writes it)."""
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(pixels, isVector=pixels.ndim == 3)
    sitk.WriteImage(image, str(path))
    data = path.read_bytes()
    if pixels.dtype == np.uint16:
        for sixteen, twelve in zip(SIXTEEN_BITS, TWELVE_BITS, strict=True):
            assert data.count(sixteen) == 1
            data = data.replace(sixteen, twelve)
    if monochrome1:
        assert data.count(b"MONOCHROME2 ") == 1
        data = data.replace(b"MONOCHROME2 ", b"MONOCHROME1 ")
    path.write_bytes(data)


def disc(k: int) -> np.ndarray:
    yy, xx = np.mgrid[:H, :W]
    return (yy - 12) ** 2 + (xx - 10 - k) ** 2 < 36


def dicom_folder(root, n=8, monochrome1=()):
    """images/<k>.dcm, 12-bit X-ray-like (a dense disc on a darker field), with
    masks/<k>.png; the images in ``monochrome1`` stored dark-dense."""
    for d in ("images", "masks"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for k in range(n):
        dense = disc(k)
        pixels = 800 + 2400 * dense + np.random.default_rng(k).integers(0, 50, (H, W))
        if k in monochrome1:
            pixels = 4095 - pixels
        write_dicom(root / "images" / f"{k}.dcm", pixels.astype(np.uint16), k in monochrome1)
        Image.fromarray(dense.astype(np.uint8) * 255).save(root / "masks" / f"{k}.png")
    return root


def test_dicom_images_train_beside_mask_images_in_their_own_units(tmp_path):
    root = dicom_folder(tmp_path / "xray")
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    info = dm.info()
    assert info.in_channels == 1 and info.class_names == ["background", "disc"]
    pixels = bands.itk_pixels(root / "images" / "3.dcm")
    assert pixels.shape == (H, W) and 3000 < pixels[disc(3)].mean() < 3300
    dm.setup("fit")
    item = dm.load("train")[0]
    image, label = item.image.numpy()[0], item.label.numpy()
    assert image[label == 1].mean() > image[label == 0].mean() + 1  # normalised, dense bright


def test_monochrome1_is_turned_so_that_dense_is_bright(tmp_path):
    root = dicom_folder(tmp_path / "xray", n=4, monochrome1={1})
    stored_dark = bands.itk_pixels(root / "images" / "1.dcm")
    as_shown = bands.itk_pixels(root / "images" / "0.dcm")
    assert stored_dark[disc(1)].mean() > stored_dark[~disc(1)].mean() + 2000
    assert abs(stored_dark[disc(1)].mean() - as_shown[disc(0)].mean()) < 60


def test_colour_dicom_reads_as_three_bands_and_a_multi_frame_file_is_refused(tmp_path):
    import SimpleITK as sitk

    write_dicom(tmp_path / "us.dcm", np.full((H, W, 3), 90, np.uint8))
    assert bands.itk_pixels(tmp_path / "us.dcm").shape == (H, W, 3)
    sitk.WriteImage(
        sitk.GetImageFromArray(np.zeros((3, H, W), np.uint16)), str(tmp_path / "ct.dcm")
    )
    with pytest.raises(ImageDataError, match="holds a volume of 32x24x3 voxels"):
        bands.itk_pixels(tmp_path / "ct.dcm")


def test_dicom_images_take_masks_drawn_from_run_lengths(tmp_path):
    """SIIM's layout in small: DICOM images below study and series folders, their masks
    as run lengths named by the file's name without its suffix; the size and the pixel
    order read from the DICOM files themselves."""
    from tests.data.test_run_length import encoded

    root = tmp_path / "siim"
    rows = ["ImageId,EncodedPixels"]
    for k in range(4):
        folder = root / "dicom-images-train" / f"1.2.{k}" / f"1.3.{k}"
        folder.mkdir(parents=True)
        dense = disc(k)
        write_dicom(folder / f"1.4.{k}.dcm", (800 + 2400 * dense).astype(np.uint16))
        rows.append(f"1.4.{k},{encoded(dense)}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    dm = prepared(root)
    pair = next(p for p in dm.pairs if p.name.endswith("1.4.2.dcm"))
    assert (np.array(Image.open(pair.label)) == disc(2)).all()
    assert dm.info().in_channels == 1


def test_dicom_originals_beside_their_png_exports_are_left_alone(tmp_path):
    """A folder of PNGs exported from DICOM originals kept beside them reads the PNGs,
    as it did before DICOM files were read."""
    root = dicom_folder(tmp_path / "xray", n=4)
    for k in range(4):
        Image.fromarray(disc(k).astype(np.uint8) * 200).save(root / "images" / f"{k}.png")
    dm = prepared(root, class_names=["background", "disc"], label_values=[0, 255])
    assert sorted(p.image.suffix for p in dm.pairs) == [".png"] * 4


def test_a_dicom_header_is_read_without_its_pixels(tmp_path, monkeypatch):
    import SimpleITK as sitk

    root = dicom_folder(tmp_path / "xray", n=1)
    monkeypatch.setattr(sitk, "ReadImage", lambda *a, **k: pytest.fail("decoded"))
    assert bands.header(root / "images" / "0.dcm") == bands.Bands(H, W, 1, False)
