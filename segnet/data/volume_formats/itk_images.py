"""Volumes in ITK's file formats, read and written with SimpleITK: MetaImage (``.mha``, and
``.mhd`` with its data file beside it), as grand-challenge.org's challenges ship their
cases, and NRRD (``.nrrd``; 3D Slicer's volumes and ``.seg.nrrd`` label maps).

ITK places a voxel in LPS space (x to the patient's left, y to the back) where NIfTI uses
RAS (x to the right, y to the front): the affine made here turns the first two axes, as
ITK's own NIfTI writer does, so a case reads alike from ``.mha`` and from ``.nii.gz``. A
file of several components per voxel (a vector image) or of four axes is read as a
volume of channels, the last axis, as NIfTI's 4D files are. A label map is written back
in the form its name gives, with the geometry of its case; a ``.mhd`` prediction keeps
its voxels in the one file (MetaImage's ``ElementDataFile = LOCAL``), so that moving it
moves them."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nibabel as nib
import numpy as np

from segnet.data.volume_files import Header, Spacing, VolumeFileFormat, register

# ITK's LPS axes as NIfTI's RAS ones: x and y turned
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0])


def simpleitk():
    """SimpleITK, imported where an ITK file is read (it is large, and NIfTI alone needs
    none of it)."""
    try:
        import SimpleITK
    except ImportError as err:  # a package installed without its dependencies
        raise ImportError(
            "reading or writing .mha, .mhd and .nrrd volumes needs SimpleITK: pip install SimpleITK"
        ) from err
    return SimpleITK


def ras_affine(spacing, direction, origin) -> np.ndarray:
    """The NIfTI affine of ITK's geometry (3D; a fourth axis's is dropped: channels)."""
    spacing = np.asarray(spacing[:3], float)
    n = len(origin)
    rotation = np.asarray(direction, float).reshape(n, n)[:3, :3]
    affine = np.eye(4)
    affine[:3, :3] = LPS_TO_RAS @ rotation @ np.diag(spacing)
    affine[:3, 3] = LPS_TO_RAS @ np.asarray(origin[:3], float)
    return affine


def itk_geometry(affine: np.ndarray) -> tuple[tuple, tuple, tuple]:
    """ITK's spacing, direction (row-major) and origin of a NIfTI affine."""
    lps = LPS_TO_RAS @ affine[:3, :3]
    spacing = np.linalg.norm(lps, axis=0)
    direction = lps / spacing
    origin = LPS_TO_RAS @ affine[:3, 3]
    return (
        tuple(map(float, spacing)),
        tuple(map(float, direction.ravel())),
        tuple(map(float, origin)),
    )


def _shape(size, components: int, path: Path) -> tuple[int, ...]:
    """(x, y, z[, c]) of an ITK image of ``size`` (x fastest) and ``components``."""
    size = tuple(int(s) for s in size)
    if len(size) not in (3, 4) or (len(size) == 4 and components > 1):
        raise ValueError(
            f"{path} holds an image of {len(size)} axes ({'x'.join(map(str, size))}"
            f"{f', {components} components per voxel' if components > 1 else ''}): a volume "
            "has three, and channels as a fourth axis or as components per voxel."
        )
    return (*size, components) if components > 1 else size


def unreadable(path: Path, err: RuntimeError) -> ValueError:
    """SimpleITK's error for ``path`` as one line naming it (its last line says why)."""
    return ValueError(f"{path}: SimpleITK cannot read it ({str(err).strip().splitlines()[-1]}).")


def read_image(path: Path):
    """``path`` as a SimpleITK image; an unreadable file refused naming it (ValueError)."""
    sitk = simpleitk()
    try:
        return sitk.ReadImage(str(path))
    except RuntimeError as err:
        raise unreadable(path, err) from err


def read_itk(path: Path, _spacing: Spacing = None) -> nib.Nifti1Image:
    sitk = simpleitk()
    image = read_image(path)
    _shape(image.GetSize(), image.GetNumberOfComponentsPerPixel(), path)  # refused if not a volume
    voxels = sitk.GetArrayFromImage(image)  # the slowest axis first: (z, y, x[, c])
    order = (2, 1, 0, 3) if voxels.ndim == 4 and image.GetNumberOfComponentsPerPixel() > 1 else None
    voxels = voxels.transpose(order) if order else voxels.transpose()
    affine = ras_affine(image.GetSpacing(), image.GetDirection(), image.GetOrigin())
    return nib.Nifti1Image(np.ascontiguousarray(voxels), affine)


def read_information(path: Path):
    """A SimpleITK reader of ``path`` that has read its header alone (size, components,
    geometry); an unreadable file refused naming it (ValueError)."""
    reader = simpleitk().ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError as err:
        raise unreadable(path, err) from err
    return reader


def itk_header(path: Path, _spacing: Spacing = None) -> Header:
    reader = read_information(path)
    shape = _shape(reader.GetSize(), reader.GetNumberOfComponents(), path)
    return Header(shape, ras_affine(reader.GetSpacing(), reader.GetDirection(), reader.GetOrigin()))


def write_itk(image: nib.Nifti1Image, path: Path) -> None:
    """A label map (x, y, z) into ``path`` in the form its name gives, compressed, with
    the image's geometry; in one file whatever the name (no detached ``.raw``)."""
    sitk = simpleitk()
    labels = np.asarray(image.dataobj)
    out = sitk.GetImageFromArray(np.ascontiguousarray(labels.transpose()))
    spacing, direction, origin = itk_geometry(image.affine)
    out.SetSpacing(spacing)
    out.SetDirection(direction)
    out.SetOrigin(origin)
    if path.name.lower().endswith(".mhd"):  # ITK would write the voxels into a .raw beside
        with tempfile.TemporaryDirectory() as scratch:
            whole = Path(scratch) / "labels.mha"
            sitk.WriteImage(out, str(whole), True)
            path.write_bytes(whole.read_bytes())
        return
    sitk.WriteImage(out, str(path), True)


register(VolumeFileFormat("MetaImage", (".mha", ".mhd"), read_itk, write_itk, itk_header))
register(VolumeFileFormat("NRRD", (".nrrd",), read_itk, write_itk, itk_header))
