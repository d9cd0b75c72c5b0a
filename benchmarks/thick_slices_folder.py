"""A volume folder of thick slices, for checking experiment=volumes_quick on the kind of
cases a clinical MRI or CT series gives (slices a few millimetres apart, sub-millimetre
pixels within them): the Decathlon's Hippocampus cases with every three slices along
the down-up axis made one, 3 mm thick (the image averaged over the three, as a thick
slice integrates its slab; the label taken from the middle one), the other axes kept:

    python benchmarks/thick_slices_folder.py ../shared/data/Task04_Hippocampus /tmp/hippo_thick
    python train.py experiment=volumes_quick data.root=/tmp/hippo_thick

It writes the Decathlon layout (``dataset.json``, ``imagesTr/``, ``labelsTr/``), each
case's affine scaled along that axis so that it keeps its place in space.
"""

import argparse
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np

FACTOR = 3


def thick(path: Path, out: Path, is_label: bool) -> None:
    img = nib.load(path)
    data = np.asanyarray(img.dataobj)
    axis = int(np.argmax(np.abs(img.affine[:3, :3])[2]))  # the voxel axis running down-up
    n = data.shape[axis] // FACTOR * FACTOR
    data = np.moveaxis(np.take(data, range(n), axis=axis), axis, -1)
    slabs = data.reshape(*data.shape[:-1], n // FACTOR, FACTOR)
    slabs = slabs[..., FACTOR // 2] if is_label else slabs.mean(-1).astype(np.float32)
    affine = img.affine.copy()
    affine[:3, axis] *= FACTOR
    # the first thick voxel's centre: the middle of the first slab
    affine[:3, 3] += img.affine[:3, axis] * (FACTOR - 1) / 2
    nib.save(nib.Nifti1Image(np.moveaxis(slabs, -1, axis), affine), out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a Decathlon task folder")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    for folder, is_label in (("imagesTr", False), ("labelsTr", True)):
        (args.out / folder).mkdir(parents=True, exist_ok=True)
        for path in sorted((args.source / folder).glob("*.nii.gz")):
            if not path.name.startswith("._"):
                thick(path, args.out / folder / path.name, is_label)
    shutil.copy(args.source / "dataset.json", args.out / "dataset.json")
    print(f"wrote {args.out}: slices {FACTOR}x thicker along the down-up axis")


if __name__ == "__main__":
    main()
