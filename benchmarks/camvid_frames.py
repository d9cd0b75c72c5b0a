"""What the CamVid folder makers share: the command line (a CamVid frame folder, the folder
to write) and each frame with its label map (label values 0..11, 11 unlabelled)."""

import argparse
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image


def frames_to_write(
    description: str, image_dir: str, mask_dir: str
) -> tuple[Path, Iterator[tuple[Path, np.ndarray]]]:
    """The folder to write (``image_dir`` and ``mask_dir`` made under it) and the frames of
    the folder given on the command line, each with its label map, in name order."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("frames", type=Path, help="a CamVid frame folder (its labels in <folder>annot)")
    p.add_argument("out", type=Path, help=f"the folder to write ({image_dir}/ and {mask_dir}/)")
    a = p.parse_args()
    labels = a.frames.with_name(a.frames.name + "annot")
    (a.out / image_dir).mkdir(parents=True, exist_ok=True)
    (a.out / mask_dir).mkdir(exist_ok=True)
    frames = sorted(a.frames.glob("*.png"))
    return a.out, ((f, np.asarray(Image.open(labels / f.name))) for f in frames)
