"""Volume file formats, by file name. Each reads a file as a NIfTI image in memory (its
voxels, and an affine that gives the voxel size and orientation) and writes a label map
back in its own form, so everything that finds, checks, resamples and scores volumes
(``segnet.data.nifti``) reads every format alike.

NIfTI is registered here. Every module in ``segnet/data/volume_formats/`` registers more
when this module is imported (multi-page TIFF stacks and NumPy arrays): adding a format is
adding a file there, with its config, tests and docs."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np

# a file's voxel size where it carries none, per axis of its own order: (z, y, x) for a
# stack of z pages of y rows and x columns (the ``data.stack_spacing`` setting)
Spacing = Sequence[float] | None


@dataclass(frozen=True)
class Header:
    """What a volume's header says: its shape and affine as :func:`read` would give them,
    voxels unread."""

    shape: tuple[int, ...]
    affine: np.ndarray


@dataclass(frozen=True)
class VolumeFileFormat:
    name: str
    suffixes: tuple[str, ...]  # lower case; the longest is matched first (.nii.gz)
    read: Callable[[Path, Spacing], nib.Nifti1Image]
    write: Callable[[nib.Nifti1Image, Path], None]  # a label map into a staged file
    # the shape and affine without the voxels, for a format whose read decodes them all
    # (None: read's image is asked, which for NIfTI reads the header alone)
    header: Callable[[Path, Spacing], Header] | None = None


FORMATS: list[VolumeFileFormat] = []


def register(fmt: VolumeFileFormat) -> VolumeFileFormat:
    taken = {s for f in FORMATS for s in f.suffixes} & set(fmt.suffixes)
    if taken:
        raise ValueError(f"{fmt.name}: the suffixes {sorted(taken)} are another format's.")
    FORMATS.append(fmt)
    return fmt


def suffixes() -> tuple[str, ...]:
    """Every registered suffix, longest first (``.nii.gz`` before ``.nii``)."""
    return tuple(sorted((s for f in FORMATS for s in f.suffixes), key=len, reverse=True))


def suffix_of(path: Path) -> str | None:
    name = path.name.lower()
    return next((s for s in suffixes() if name.endswith(s)), None)


def format_of(path: Path) -> VolumeFileFormat:
    suffix = suffix_of(path)
    fmt = next((f for f in FORMATS if suffix in f.suffixes), None)
    if fmt is None:
        raise ValueError(f"{path}: not a volume file this version reads ({', '.join(suffixes())}).")
    return fmt


def read(path: Path, spacing: Spacing = None) -> nib.Nifti1Image:
    """``path`` as a NIfTI image; ``spacing`` is the voxel size of a file that carries none."""
    return format_of(path).read(Path(path), spacing)


def header(path: Path, spacing: Spacing = None) -> Header:
    """``path``'s shape and affine as :func:`read` gives them, reading as little as its
    format allows (the checks before training read every training case's header)."""
    fmt = format_of(path)
    if fmt.header is not None:
        return fmt.header(Path(path), spacing)
    image = fmt.read(Path(path), spacing)
    return Header(tuple(image.shape), image.affine)


def write(image: nib.Nifti1Image, path: Path) -> None:
    """A label map into ``path`` (a staged file whose name keeps the target's suffixes),
    in the form that suffix names."""
    format_of(path).write(image, Path(path))


register(
    VolumeFileFormat(
        "NIfTI",
        (".nii.gz", ".nii"),
        read=lambda path, _: nib.load(str(path)),
        write=lambda image, path: nib.save(image, str(path)),
    )
)


def _load_format_modules() -> None:
    from segnet.data import volume_formats

    for module in pkgutil.iter_modules(volume_formats.__path__):
        importlib.import_module(f"{volume_formats.__name__}.{module.name}")


_load_format_modules()
