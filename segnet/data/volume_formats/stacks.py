"""3D microscopy and research volumes: multi-page TIFF stacks (``.tif``, ``.tiff``) and
NumPy arrays (``.npy``, ``.npz``).

A stack's pages are its slowest axis: a file holds (pages, rows, columns), a NumPy array
(z, y, x), or (channels, z, y, x) for several channels; it is read as a volume whose
first axis runs along the columns, the second along the rows and the third across the
pages, which is the order the rest of the package works in, and a label map is written
back in the file's own order and form. Voxel sizes come from the file where it carries
them (an ImageJ TIFF's ``spacing=`` with its X/Y resolution; an ``.npz``'s ``spacing``
array, in (z, y, x) order), else from ``data.stack_spacing`` (the same order), else 1.
A TIFF page holds one grey channel (8, 16 or 32 bits, or float)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import nibabel as nib
import numpy as np

from segnet.data.volume_files import Header, Spacing, VolumeFileFormat, register

GREY_MODES = ("1", "L", "I;16", "I;16B", "I;16L", "I;16N", "I", "F")


def as_header(shape: tuple[int, ...], dtype: np.dtype, spacing_zyx: Spacing, path: Path) -> Header:
    """The volume (x, y, z[, c]) that (z, y, x) or (c, z, y, x) voxels of ``dtype`` make,
    with its affine: the diagonal of the voxel sizes (right, anterior, superior)."""
    if len(shape) not in (3, 4):
        raise ValueError(
            f"{path} holds an array of shape {shape}: a volume is (z, y, x), or "
            "(channels, z, y, x) for several channels."
        )
    if not np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.complexfloating):
        raise ValueError(f"{path} holds {dtype} values; a volume holds real numbers.")
    sizes = [float(s) for s in (spacing_zyx if spacing_zyx is not None else (1.0, 1.0, 1.0))]
    if len(sizes) != 3 or not all(np.isfinite(s) and s > 0 for s in sizes):
        raise ValueError(
            f"{path}: voxel size {sizes}: three sizes above 0, between pages, rows and "
            "columns (z, y, x); set data.stack_spacing=[z,y,x] for files that carry none."
        )
    return Header(tuple(shape[::-1]), np.diag([sizes[2], sizes[1], sizes[0], 1.0]))


def as_volume(array: np.ndarray, spacing_zyx: Spacing, path: Path) -> nib.Nifti1Image:
    """(z, y, x) or (c, z, y, x) voxels with their voxel size as an in-memory NIfTI image
    (x, y, z[, c]), as :func:`as_header` describes it."""
    header = as_header(array.shape, array.dtype, spacing_zyx, path)
    return nib.Nifti1Image(np.ascontiguousarray(array.transpose()), header.affine)


def spacing_of(image: nib.Nifti1Image) -> list[float]:
    """The (z, y, x) voxel size of an image made by :func:`as_volume`."""
    x, y, z = (float(s) for s in nib.affines.voxel_sizes(image.affine)[:3])
    return [z, y, x]


def file_order(image: nib.Nifti1Image) -> np.ndarray:
    """A label map's voxels back in the file's (z, y, x) order, in the smallest type."""
    data = np.asarray(image.dataobj)
    return data.transpose(2, 1, 0).astype(np.uint8 if data.max() < 256 else np.uint16)


# -- TIFF stacks -------------------------------------------------------------------------
def tiff_spacing(im) -> list[float] | None:
    """(z, y, x) from an ImageJ TIFF (``spacing=`` in its description, X/Y resolution in
    pixels per unit); None for a TIFF without them (a plain TIFF's 72 dpi says nothing)."""
    description = str(im.tag_v2.get(270) or "")
    fields = dict(line.split("=", 1) for line in description.splitlines() if "=" in line)
    x_res, y_res = im.tag_v2.get(282), im.tag_v2.get(283)
    if "spacing" not in fields or not x_res or not y_res:
        return None
    return [float(fields["spacing"]), 1 / float(y_res), 1 / float(x_res)]


def check_page(page, path: Path) -> None:
    if page.mode not in GREY_MODES:
        raise ValueError(
            f"{path}: a page of mode {page.mode}; a stack's pages hold one grey channel each "
            "(8, 16 or 32 bits, or float)."
        )


def tiff_header(path: Path, spacing: Spacing) -> Header:
    """From the first page's tags and the page count, no page decoded."""
    from PIL import Image

    with Image.open(path) as im:
        check_page(im, path)
        shape = (getattr(im, "n_frames", 1), im.size[1], im.size[0])
        return as_header(shape, np.dtype(np.float32), tiff_spacing(im) or spacing, path)


def read_tiff(path: Path, spacing: Spacing) -> nib.Nifti1Image:
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        found = tiff_spacing(im)  # the first page's tags, as tiff_header reads them
        pages = []
        for page in ImageSequence.Iterator(im):
            check_page(page, path)
            pages.append(np.asarray(page))
        if len({p.shape for p in pages}) > 1:
            raise ValueError(f"{path}: pages of different sizes; a stack's pages are alike.")
    return as_volume(np.stack(pages), found or spacing, path)


def write_tiff(image: nib.Nifti1Image, path: Path) -> None:
    from PIL import Image

    z, y, x = spacing_of(image)
    pages = [Image.fromarray(page) for page in file_order(image)]
    description = f"ImageJ=1.11a\nimages={len(pages)}\nslices={len(pages)}\nspacing={z}\n"
    pages[0].save(
        path,
        format="TIFF",
        save_all=True,
        append_images=pages[1:],
        tiffinfo={270: description},
        x_resolution=1 / x,
        y_resolution=1 / y,
        resolution_unit=1,
    )


# -- NumPy arrays ------------------------------------------------------------------------
def volume_name(arrays, path: Path) -> str:
    """The array of an ``.npz`` that holds its volume."""
    names = [n for n in arrays.files if n != "spacing"]
    name = next((n for n in ("image", "label", "data", "arr_0") if n in names), None)
    if name is None and len(names) != 1:
        raise ValueError(
            f"{path} holds the arrays {names}: name the volume 'image' (or 'label'), beside "
            "an optional 'spacing' (z, y, x)."
        )
    return name or names[0]


def read_numpy(path: Path, spacing: Spacing) -> nib.Nifti1Image:
    if path.name.lower().endswith(".npy"):
        return as_volume(np.load(path, allow_pickle=False), spacing, path)
    with np.load(path, allow_pickle=False) as arrays:
        array = arrays[volume_name(arrays, path)]
        found = arrays["spacing"].tolist() if "spacing" in arrays.files else None
    return as_volume(array, found or spacing, path)


def numpy_header(path: Path, spacing: Spacing) -> Header:
    """From the array's own header (an ``.npz``'s member read to its header only)."""
    if path.name.lower().endswith(".npy"):
        array = np.load(path, mmap_mode="r", allow_pickle=False)
        return as_header(array.shape, array.dtype, spacing, path)
    with np.load(path, allow_pickle=False) as arrays:
        name = volume_name(arrays, path)
        found = arrays["spacing"].tolist() if "spacing" in arrays.files else None
    with zipfile.ZipFile(path) as archive, archive.open(f"{name}.npy") as member:
        version = np.lib.format.read_magic(member)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(member)
    return as_header(shape, dtype, found or spacing, path)


def write_numpy(image: nib.Nifti1Image, path: Path) -> None:
    buffer = io.BytesIO()  # np.save would add .npy to a name that lacks it
    if path.name.lower().endswith(".npy"):
        np.save(buffer, file_order(image))
    else:
        np.savez_compressed(
            buffer, label=file_order(image), spacing=np.array(spacing_of(image), np.float32)
        )
    path.write_bytes(buffer.getvalue())


register(VolumeFileFormat("TIFF stack", (".tif", ".tiff"), read_tiff, write_tiff, tiff_header))
register(VolumeFileFormat("NumPy array", (".npy", ".npz"), read_numpy, write_numpy, numpy_header))
