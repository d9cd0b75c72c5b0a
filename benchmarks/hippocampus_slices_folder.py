"""A third 'your own images' dataset for checking experiment=images_quick away from membrane:
2D slices of the Hippocampus volumes as a user with small 16-bit scans might bring them.
Unlike membrane it is 16-bit TIFF, small (about 35x50 pixels, of varying sizes), has two
foreground classes in index masks (0, 1, 2), and names image and mask differently:

    python benchmarks/hippocampus_slices_folder.py ../shared/data/Task04_Hippocampus /tmp/hippo2d
    python train.py experiment=images_quick data.root=/tmp/hippo2d \
      data.image_name='{id}_t1' data.label_name='{id}_seg' \
      'data.class_names=[background,anterior,posterior]'

It writes ``images/<case>_<slice>_t1.tif`` (the volume's intensities scaled to 0-65535)
and ``labels/<case>_<slice>_seg.png`` for the ``--slices`` axial slices of each case with
the most labelled pixels. Slices of one case land in different splits: a check of a
recipe against another on the same split, not a clinical evaluation.
"""

import argparse
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", type=Path, help="a Decathlon folder (imagesTr/, labelsTr/)")
    p.add_argument("out", type=Path, help="the folder to write (images/ and labels/)")
    p.add_argument("--slices", type=int, default=8, help="slices per case (default 8)")
    a = p.parse_args()
    (a.out / "images").mkdir(parents=True, exist_ok=True)
    (a.out / "labels").mkdir(exist_ok=True)
    written = 0
    for path in sorted((a.task / "labelsTr").glob("*.nii.gz")):
        case = path.name.removesuffix(".nii.gz")
        label = np.asarray(nib.load(path).dataobj).round().astype(np.uint8)
        image = np.asarray(nib.load(a.task / "imagesTr" / path.name).dataobj, np.float64)
        image = (image - image.min()) / max(np.ptp(image), 1e-6) * 65535
        most = np.argsort(-(label > 0).sum((0, 1)), kind="stable")[: a.slices]
        for k in sorted(most.tolist()):
            name = f"{case}_{k:02d}"
            Image.fromarray(image[:, :, k].astype(np.uint16)).save(
                a.out / "images" / f"{name}_t1.tif"
            )
            Image.fromarray(label[:, :, k]).save(a.out / "labels" / f"{name}_seg.png")
            written += 1
    print(f"{written} slices in {a.out}")


if __name__ == "__main__":
    main()
