"""A folder of images and black-and-white masks rewritten as a Label Studio JSON export,
for checking that such an export trains from its root with no settings: each image as an
upload (``/data/upload/1/<8 hex>-<name>``, the prefix Label Studio adds), its mask's white
areas as polygons (traced as ``yolo_folder.py`` traces them, in percentages) for every
other image and as one brush stroke (Label Studio's run lengths) for the rest. Images are
linked, not copied.

    python benchmarks/label_studio_folder.py ../shared/data/horses /tmp/horses_ls horse
    python train.py experiment=images_quick data.root=/tmp/horses_ls train_minutes=3
"""

import argparse
import itertools
import json
import os
from pathlib import Path

import numpy as np
from yolo_folder import polygons, white_of


def brush_rle(mask: np.ndarray) -> list[int]:
    """The mask as Label Studio's brush writes it: its RGBA values (alpha 255 where
    painted) as runs of one value in a bit stream (count, word size, run-length sizes)."""
    values = np.repeat(mask.ravel().astype(np.uint8) * 255, 4)
    sizes, bits = [4, 8, 12, 16], []

    def put(v, n):
        bits.extend(int(b) for b in format(int(v), f"0{n}b"))

    put(len(values), 32), put(7, 5)
    for s in sizes:
        put(s - 1, 4)
    for value, run in itertools.groupby(values.tolist()):
        count = len(list(run))
        while count:
            part = min(count, 1 << sizes[-1])
            k = next(k for k, s in enumerate(sizes) if part - 1 < 1 << s)
            put(1, 1), put(k, 2), put(part - 1, sizes[k]), put(value, 8)
            count -= part
    bits += [0] * (-len(bits) % 8)
    return np.packbits(np.array(bits, np.uint8)).tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("name")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    images = sorted(p for p in (args.source / "images").iterdir() if not p.name.startswith("."))
    tasks, regions = [], 0
    for k, image in enumerate(images):
        mask = white_of(args.source, image)
        height, width = mask.shape
        size = {"original_width": width, "original_height": height, "image_rotation": 0}
        base = {"from_name": "label", "to_name": "image", **size}
        if k % 2 and mask.any():
            value = {"format": "rle", "rle": brush_rle(mask), "brushlabels": [args.name]}
            result = [{**base, "type": "brushlabels", "value": value}]
        else:
            result = [
                {**base, "type": "polygonlabels", "value": {
                    "points": (line / [width, height] * 100).tolist(), "closed": True,
                    "polygonlabels": [args.name]}}
                for line in polygons(mask)
            ]  # fmt: skip
        regions += len(result)
        os.symlink(image.resolve(), args.out / image.name)
        annotation = {"id": k, "result": result, "was_cancelled": False, "ground_truth": False}
        upload = f"{k:08x}-{image.name}"
        tasks.append({
            "id": k, "annotations": [annotation], "predictions": [], "file_upload": upload,
            "data": {"image": f"/data/upload/1/{upload}"},
        })  # fmt: skip
    (args.out / "project-1-at-export.json").write_text(json.dumps(tasks))
    print(f"{len(images)} images, {regions} regions in {args.out}")


if __name__ == "__main__":
    main()
