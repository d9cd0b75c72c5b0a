"""Images of any number of channels ("bands"), as remote sensing and microscopy keep them:
multi-band TIFFs (a satellite's four or thirteen bands, 16-bit colour), multi-page TIFFs
(one page per channel, as ImageJ saves a fluorescence image), NumPy arrays (``.npy``,
``(H, W)`` or ``(H, W, C)``), 2D MetaImage and NRRD files (``.mha``, ``.nrrd``, as
grand-challenge.org ships its 2D tasks; read with SimpleITK, a slice of one stored as a
volume included) and DICOM files of one frame (``.dcm``, ``.dicom``: an X-ray, a
mammogram, an ultrasound frame; read with SimpleITK, which applies the file's rescale
and shows a MONOCHROME1 image turned over its stored bits, dense as bright, as viewers
show it). What Pillow reads as grey, RGB or RGBA is read by
:mod:`segnet.data.images`; these are the files it cannot, read with ``tifffile``.

A dataset's images share one mode, ``bands:<C>``: C channels, each normalised with its own
mean and std, in the file's own units (no scaling to 0-255).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from segnet.data.errors import ImageDataError

PREFIX = "bands:"
# 2D images in ITK's formats, read with SimpleITK (VinDr's DICOM files end in .dicom)
ITK_SUFFIXES = (".mha", ".nrrd", ".dcm", ".dicom")
ARRAY_SUFFIXES = (".npy", *ITK_SUFFIXES)
TIFF_SUFFIXES = (".tif", ".tiff")
# more channels than this on the last axis of an array is a volume, not an image
MAX_BANDS = 64
SPATIAL_AXES = ("Y", "X")  # tifffile's names of an image's rows and columns


class Bands(NamedTuple):
    """A multi-band file's size and channels, read from its header."""

    height: int
    width: int
    channels: int
    eight_bit: bool


def mode_of(channels: int) -> str:
    return f"{PREFIX}{channels}"


def count_of(mode: str) -> int | None:
    """The channels of a ``bands:<C>`` mode; None for another mode (or a malformed one)."""
    count = mode.removeprefix(PREFIX)
    return int(count) if mode.startswith(PREFIX) and count.isdigit() and int(count) else None


def is_array_file(path: Path) -> bool:
    return path.suffix.lower() in ARRAY_SUFFIXES


def tifffile_module():
    try:
        import tifffile
    except ImportError:  # a dependency; said, rather than a bare ImportError
        raise ImageDataError(
            "reading multi-band TIFF files needs the tifffile package: pip install tifffile"
        ) from None
    return tifffile


def multi_band(path: Path) -> Bands | None:
    """The bands of an array, or of a TIFF of more than one channel (which Pillow may or
    may not read whole: :func:`segnet.data.images.band_file` asks it); None for a TIFF of
    one channel, another file, or a TIFF tifffile is missing for or cannot read (Pillow
    then says what is wrong)."""
    if is_array_file(path):
        return header(path)
    if path.suffix.lower() not in TIFF_SUFFIXES:
        return None
    try:
        found = header(path)
    except ImageDataError:
        return None
    return None if found.channels == 1 else found


def header(path: Path) -> Bands:
    """The size and channels of a multi-band TIFF or an array, without decoding it."""
    if path.suffix.lower() in ITK_SUFFIXES:
        return itk_header(path)
    array, axes = _open(path, decode=False)
    return _as_bands(path, array.shape, axes, array.dtype)


def _open(path: Path, decode: bool) -> tuple[np.ndarray, str]:
    """An array file's or a TIFF's pixels with tifffile's names of their axes (``YXS``,
    ``CYX``); without ``decode``, an array that only knows its shape and type (memory-mapped
    for ``.npy``, tifffile's series for a TIFF)."""
    if is_array_file(path):
        if path.suffix.lower() in ITK_SUFFIXES:
            array = itk_pixels(path)
            return array, "YX" if array.ndim == 2 else "YXC"
        try:
            array = np.load(path, mmap_mode=None if decode else "r", allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ImageDataError(f"cannot read {path}: {err}") from None
        return array, "YX" if array.ndim == 2 else "YXC"
    tifffile = tifffile_module()
    try:
        with tifffile.TiffFile(path) as tif:
            series = tif.series[0]
            return (series.asarray() if decode else series), series.axes
    except Exception as err:  # many kinds for a bad file; a codec it lacks (LZW: imagecodecs)
        raise ImageDataError(f"cannot read {path}: {err}") from None


def _as_bands(path: Path, shape: tuple, axes: str, dtype: np.dtype) -> Bands:
    if len(shape) != len(axes) or not set(SPATIAL_AXES) <= set(axes):
        raise ImageDataError(f"{path}: its axes {axes!r} hold no image of rows and columns.")
    extra = [(a, n) for a, n in zip(axes, shape, strict=True) if a not in SPATIAL_AXES and n > 1]
    if len(extra) > 1 or (extra and extra[0][1] > MAX_BANDS):
        raise ImageDataError(
            f"{path} has shape {tuple(shape)} (axes {axes}): a 2D image is rows, columns and "
            f"at most one axis of up to {MAX_BANDS} channels. A stack of slices or a volume "
            "trains with a volume recipe (experiment=hippocampus_unet3d)."
        )
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or np.iscomplexobj(
        np.empty(0, dtype)
    ):
        raise ImageDataError(f"{path} holds {dtype} values, not numbers an image is made of.")
    height, width = (shape[axes.index(a)] for a in SPATIAL_AXES)
    return Bands(height, width, extra[0][1] if extra else 1, dtype == np.uint8)


def read(path: Path, compact: bool = False) -> np.ndarray:
    """(H, W, C) in the file's own units: float32, or uint8 with ``compact`` where the file
    is 8-bit (a quarter of the memory)."""
    array, axes = _open(path, decode=True)
    _as_bands(path, array.shape, axes, array.dtype)  # refused as the header would be
    # rows, columns, then the one axis of channels (or of length one)
    order = [axes.index("Y"), axes.index("X")] + [
        i for i, a in enumerate(axes) if a not in SPATIAL_AXES
    ]
    array = np.transpose(array, order).reshape(array.shape[order[0]], array.shape[order[1]], -1)
    if not np.isfinite(array).all():
        raise ImageDataError(
            f"{path} holds NaN or infinite values; replace them (e.g. with 0) before training."
        )
    keep = np.uint8 if compact and array.dtype == np.uint8 else np.float32
    return np.ascontiguousarray(array, dtype=keep)


def itk_pixels(path: Path) -> np.ndarray:
    """A 2D MetaImage or NRRD file's pixels, (H, W) or (H, W, C) for several components
    per pixel; a volume of one slice is that slice. A volume of more is refused, pointing
    at the volume recipes."""
    from segnet.data.volume_formats import itk_images  # SimpleITK, as the volumes read it

    try:
        image = itk_images.read_image(path)
    except (ImportError, ValueError) as err:  # SimpleITK missing, or the file unreadable
        raise ImageDataError(str(err)) from None
    if one_slice(path, image.GetSize()) and len(image.GetSize()) == 3:
        image = image[:, :, 0]
    return itk_images.simpleitk().GetArrayFromImage(image)


def one_slice(path: Path, size: Sequence[int]) -> bool:
    """That an ITK file of ``size`` (x, y[, z]) is an image: 2D, or a volume of one slice;
    a volume of more is refused, pointing at the volume recipes."""
    if len(size) == 2 or (len(size) == 3 and size[2] == 1):
        return True
    raise ImageDataError(
        f"{path} holds a volume of {'x'.join(map(str, size))} voxels, and this is a 2D "
        "image recipe: train it with a volume recipe (experiment=hippocampus_unet3d)."
    )


def itk_header(path: Path) -> Bands:
    """A MetaImage, NRRD or DICOM file's size and channels from its header alone (a
    mammogram decodes in a second; its header in milliseconds)."""
    from segnet.data.volume_formats import itk_images

    sitk = itk_images.simpleitk()
    try:
        reader = itk_images.read_information(path)
    except ValueError as err:
        raise ImageDataError(str(err)) from None
    size = reader.GetSize()
    one_slice(path, size)
    size = size[:2]
    channels = reader.GetNumberOfComponents()
    if channels > MAX_BANDS:
        raise ImageDataError(f"{path} has {channels} components per pixel: at most {MAX_BANDS}.")
    eight_bit = reader.GetPixelID() in (sitk.sitkUInt8, sitk.sitkVectorUInt8)
    return Bands(size[1], size[0], channels, eight_bit)


def read_mask(path: Path, one_bit_white: int = 255) -> np.ndarray:
    """An array mask (``.npy``, 2D ``.mha`` or ``.nrrd``, ``(H, W)``): its values, whole
    and not negative, as codes; a boolean one as a 1-bit file is read (True white:
    ``one_bit_white``)."""
    itk = path.suffix.lower() in ITK_SUFFIXES
    values = itk_pixels(path) if itk else np.load(path, allow_pickle=False)
    if values.ndim != 2:
        raise ImageDataError(
            f"mask {path} has shape {values.shape}: a mask array is (H, W), one class value "
            "per pixel."
        )
    if values.dtype == np.bool_:
        return values.astype(np.int64) * one_bit_white
    if (
        not np.issubdtype(values.dtype, np.number)
        or not np.array_equal(values, np.round(values))
        or values.min(initial=0) < 0
    ):
        raise ImageDataError(
            f"mask {path} holds fractions, negative numbers or non-numbers ({values.dtype}): "
            "save it with whole class values."
        )
    return values.astype(np.int64)
