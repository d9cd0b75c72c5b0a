"""Small generated datasets in the real layouts, for tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def camvid_like(
    root: Path,
    counts: dict[str, int] | None = None,
    size: tuple[int, int] = (45, 61),
    list_files: bool = True,
    seed: int = 0,
) -> Path:
    """A CamVid-layout folder whose images are learnable from their labels: each class has
    its own colour plus noise, on blocky label maps with all 11 classes and some void."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(0, 256, size=(12, 3))
    h, w = size
    for split, n in (counts or {"train": 6, "val": 3, "test": 3}).items():
        (root / split).mkdir(parents=True, exist_ok=True)
        (root / f"{split}annot").mkdir(exist_ok=True)
        lines = []
        for i in range(n):
            blocks = rng.integers(0, 12, size=(h // 8 + 1, w // 8 + 1))
            blocks.flat[:11] = np.arange(11)  # every class present
            label = np.kron(blocks, np.ones((8, 8), dtype=np.int64))[:h, :w].astype(np.uint8)
            image = colours[label] + rng.integers(-20, 21, size=(h, w, 3))
            name = f"{split}_{i:03d}.png"
            Image.fromarray(image.clip(0, 255).astype(np.uint8)).save(root / split / name)
            Image.fromarray(label).save(root / f"{split}annot" / name)
            # absolute paths from another machine, as in the real list files
            lines.append(f"/SegNet/CamVid/{split}/{name} /SegNet/CamVid/{split}annot/{name}")
        if list_files:
            (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return root
