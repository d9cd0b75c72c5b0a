"""A folder of images and black-and-white masks rewritten as Roboflow exports a dataset
("Semantic Segmentation Masks"), for checking that such an export trains from its root
with no settings: ``train/``, ``valid/``, ``test/`` (70/15/15 by a seeded draw), each image
saved as ``<name>_jpg.rf.<hash>.jpg`` beside ``<...>_mask.png`` holding class numbers
(0 background, 1 the white class), and a ``_classes.csv`` in each split folder:

    python benchmarks/roboflow_folder.py ../shared/data/horses /tmp/horses_roboflow horse
    python train.py experiment=images_quick data.root=/tmp/horses_roboflow train_minutes=3
"""

import hashlib
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def main():
    source, out, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    images = sorted(p for p in (source / "images").iterdir() if not p.name.startswith("."))
    order = np.random.default_rng(0).permutation(len(images))
    n_test = n_val = round(0.15 * len(images))
    splits = {"test": order[:n_test], "valid": order[n_test : n_test + n_val],
              "train": order[n_test + n_val :]}  # fmt: skip
    for split, indices in splits.items():
        folder = out / split
        folder.mkdir(parents=True, exist_ok=False)
        (folder / "_classes.csv").write_text(f"Pixel Value, Class\n0, background\n1, {name}\n")
        for i in indices:
            image = images[int(i)]
            mask = next((source / "labels").glob(image.stem + ".*"))
            digest = hashlib.md5(image.name.encode()).hexdigest()[:20]
            stem = f"{image.stem}_{image.suffix[1:]}.rf.{digest}"
            Image.open(image).convert("RGB").save(folder / f"{stem}.jpg", quality=95)
            values = (np.asarray(Image.open(mask).convert("L")) > 127).astype(np.uint8)
            Image.fromarray(values).save(folder / f"{stem}_mask.png")
        print(f"{split}: {len(indices)} images in {folder}")


if __name__ == "__main__":
    main()
