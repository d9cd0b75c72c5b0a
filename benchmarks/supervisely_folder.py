"""A folder of images and black-and-white masks rewritten as a Supervisely project, for
checking that such a project trains from its root with no settings: ``meta.json``
naming the one class, and a dataset whose ``ann/<image>.json`` holds each mask's white
pixels as one bitmap object (cropped to them, encoded as Supervisely encodes it), beside
``img/`` (images linked, not copied).

    python benchmarks/supervisely_folder.py ../shared/data/horses /tmp/horses_sly horse
    python train.py experiment=images_quick data.root=/tmp/horses_sly train_minutes=3

``--splits`` puts a seeded fifth of the images in a dataset named ``val`` and the rest in
``train`` (the splits the project gives); without it the one dataset is ``ds0``, so its
splits are drawn as the mask folder's are.
"""

import argparse
import base64
import io
import json
import os
import zlib
from pathlib import Path

import numpy as np
from PIL import Image
from yolo_folder import white_of


def bitmap(mask: np.ndarray) -> dict:
    """The mask's white pixels as a Supervisely bitmap: a 1-bit PNG of their bounding
    box, zlib-compressed and base64-encoded, and the box's top-left column and row."""
    rows, cols = np.nonzero(mask)
    top, left = int(rows.min()), int(cols.min())
    crop = mask[top : rows.max() + 1, left : cols.max() + 1].astype(np.uint8)
    im = Image.fromarray(crop, mode="P")
    im.putpalette([0, 0, 0, 255, 255, 255])
    buffer = io.BytesIO()
    im.save(buffer, format="PNG", transparency=0)
    return {
        "data": base64.b64encode(zlib.compress(buffer.getvalue())).decode(),
        "origin": [left, top],
    }


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
        dataset = args.out / (("val" if k in val else "train") if args.splits else "ds0")
        for folder in ("img", "ann"):
            (dataset / folder).mkdir(parents=True, exist_ok=True)
        mask = white_of(args.source, image)
        objects = []
        if mask.any():
            objects.append(
                {"classTitle": args.name, "geometryType": "bitmap", "bitmap": bitmap(mask)}
            )
        annotation = {
            "description": "",
            "tags": [],
            "size": {"height": mask.shape[0], "width": mask.shape[1]},
            "objects": objects,
        }
        os.symlink(image.resolve(), dataset / "img" / image.name)
        (dataset / "ann" / f"{image.name}.json").write_text(json.dumps(annotation))
        count += len(objects)
    meta = {"classes": [{"title": args.name, "shape": "bitmap", "color": "#FF0000"}], "tags": []}
    (args.out / "meta.json").write_text(json.dumps(meta))
    print(f"{len(images)} images, {count} bitmaps in {args.out}")


if __name__ == "__main__":
    main()
