"""A folder of images and black-and-white masks rewritten as a YOLO segmentation dataset,
for checking that such a dataset trains from its root with no settings: each mask's
white areas traced into polygons at the 0.5 level (``contourpy``), a line per polygon
(``0 x1 y1 x2 y2 ...``, fractions of the image's width and height) in ``labels/``
mirroring ``images/`` (images linked, not copied).

    python benchmarks/yolo_folder.py ../shared/data/horses /tmp/horses_yolo horse
    python train.py experiment=images_quick data.root=/tmp/horses_yolo train_minutes=3

``--splits`` writes Ultralytics' layout instead (``images/train``, ``images/val``, a
seeded fifth in val, and a ``data.yaml`` naming both); without it the folder is flat with
a ``classes.txt`` (labelImg's), so its splits are drawn as the mask folder's are.
"""

import argparse
import os
from pathlib import Path

import contourpy
import numpy as np
from PIL import Image


def polygons(mask: np.ndarray) -> list[np.ndarray]:
    """The outlines of the mask's white areas, in pixel-centre coordinates, x then y."""
    lines = contourpy.contour_generator(z=np.pad(mask.astype(float), 1)).lines(0.5)
    return [line - 1 + 0.5 for line in lines if len(line) >= 3]  # unpadded; centres at .5


def white_of(source: Path, image: Path) -> np.ndarray:
    """The white pixels of ``image``'s mask (``labels/`` of its stem), as a boolean array;
    the other folder writers read masks with it too."""
    mask_file = next((source / "labels").glob(image.stem + ".*"))
    return np.asarray(Image.open(mask_file).convert("L")) > 127


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("name")
    parser.add_argument("--splits", action="store_true")
    args = parser.parse_args()
    images = sorted(p for p in (args.source / "images").iterdir() if not p.name.startswith("."))
    val = set(np.random.default_rng(0).permutation(len(images))[: len(images) // 5].tolist())
    count = 0
    for k, image in enumerate(images):
        split = ("val" if k in val else "train") if args.splits else ""
        mask = white_of(args.source, image)
        height, width = mask.shape
        rows = []
        for line in polygons(mask):
            xy = np.clip(line / [width, height], 0, 1)
            rows.append("0 " + " ".join(f"{v:.6f}" for v in xy.ravel()))
        for folder in ("images", "labels"):
            (args.out / folder / split).mkdir(parents=True, exist_ok=True)
        os.symlink(image.resolve(), args.out / "images" / split / image.name)
        (args.out / "labels" / split / f"{image.stem}.txt").write_text(
            "".join(r + "\n" for r in rows)
        )
        count += len(rows)
    if args.splits:
        (args.out / "data.yaml").write_text(
            f"train: images/train\nval: images/val\nnames:\n  0: {args.name}\n"
        )
    else:
        (args.out / "classes.txt").write_text(f"{args.name}\n")
    print(f"{len(images)} images, {count} polygons in {args.out}")


if __name__ == "__main__":
    main()
