"""A folder of images and black-and-white masks (``images/`` + ``labels/``) rewritten as a
public dataset lays its files out, for checking that such a folder trains from its root
with no settings. Splits are a seeded draw (70/15/15 where the layout has three).

* ``drive``: DRIVE (retinal vessels): ``training/`` and ``test/``, each with
  ``images/<n>_training.tif``, ``1st_manual/<n>_manual1.gif`` and ``mask/<n>_training_mask.gif``,
  a field of view (white inside a disc, black outside);
* ``isic``: ISIC 2018 task 1: ``ISIC2018_Task1-2_Training_Input/ISIC_<n>.jpg`` with
  ``ISIC2018_Task1_Training_GroundTruth/ISIC_<n>_segmentation.png``, and the same for
  ``Validation`` and ``Test``;
* ``kvasir``: Kvasir-SEG: ``images/<n>.jpg`` with ``masks/<n>.jpg``, masks kept as JPEGs
  (0 and 255 with compression noise between);
* ``loveda``: LoveDA: ``Train/`` and ``Val/``, each with a folder per domain (``Urban/``,
  ``Rural/``) of ``images_png/`` and ``masks_png/``, and an unlabelled ``Test/``;
* ``deepglobe``: DeepGlobe land cover: ``train/<n>_sat.jpg`` beside ``train/<n>_mask.png``,
  colour masks (white mask pixels urban land, the rest agriculture) named by
  ``class_dict.csv``, and unlabelled ``valid/`` and ``test/``;
* ``busi``: BUSI: a folder per class (``benign/``, ``malignant/``, ``normal/``, images dealt
  in turn) of ``benign (<n>).png`` beside ``benign (<n>)_mask.png``, and for every tenth
  image the mask in two: its left half in ``_mask.png``, its right half in a second lesion's
  mask ``benign (<n>)_mask_1.png``, so that only both together are the whole mask;
* ``dsb``: the 2018 Data Science Bowl: a folder per image, named by a hash, holding
  ``images/<hash>.png`` and ``masks/<hash>.png``, a mask per object (each connected part of
  the mask), so that only all of them together are the image's mask;
* ``montgomery``: the Montgomery chest X-ray set: ``CXR_png/MCUCXR_<n>_<0|1>.png`` beside
  ``ManualMask/leftMask/`` and ``ManualMask/rightMask/`` of the same names (the mask's left
  and right halves: classes a left-right flip would swap), and ``ClinicalReadings/`` of text.

    python benchmarks/public_layouts.py drive ../shared/data/membrane /tmp/DRIVE
    python train.py experiment=images_quick data.root=/tmp/DRIVE train_minutes=3
"""

import hashlib
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def pairs_of(source: Path) -> list[tuple[Path, Path]]:
    images = sorted(p for p in (source / "images").iterdir() if not p.name.startswith("."))
    return [(image, next((source / "labels").glob(image.stem + ".*"))) for image in images]


def drawn(n: int, names: tuple[str, ...], fractions: tuple[float, ...]) -> dict[str, list[int]]:
    """Indices ``0..n-1`` drawn into the splits ``names`` (the first takes the rest)."""
    order = np.random.default_rng(0).permutation(n).tolist()
    out, start = {}, 0
    for name, fraction in zip(names[1:], fractions, strict=True):
        count = max(1, round(fraction * n))
        out[name], start = order[start : start + count], start + count
    out[names[0]] = order[start:]
    return out


def white(mask: Path) -> np.ndarray:
    return (np.asarray(Image.open(mask).convert("L")) > 127).astype(np.uint8) * 255


def save(array: np.ndarray | Image.Image, path: Path, **options) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = array if isinstance(array, Image.Image) else Image.fromarray(array)
    image.save(path, **options)


def drive(pairs, out: Path) -> None:
    for split, indices in drawn(len(pairs), ("training", "test"), (0.3,)).items():
        for k, i in enumerate(indices):
            image, mask = pairs[i]
            picture = Image.open(image).convert("RGB")
            h, w = picture.height, picture.width
            yy, xx = np.mgrid[:h, :w]
            fov = ((yy - h / 2) ** 2 + (xx - w / 2) ** 2 < (0.48 * min(h, w)) ** 2) * 255
            stem = f"{k + 1:02d}_{split}"
            save(picture, out / split / "images" / f"{stem}.tif")
            save(white(mask), out / split / "1st_manual" / f"{k + 1:02d}_manual1.gif")
            save(fov.astype(np.uint8), out / split / "mask" / f"{stem}_mask.gif")


def isic(pairs, out: Path) -> None:
    splits = drawn(len(pairs), ("Training", "Validation", "Test"), (0.15, 0.15))
    for split, indices in splits.items():
        for i in indices:
            image, mask = pairs[i]
            stem = f"ISIC_{i:07d}"
            save(Image.open(image).convert("RGB"), out / f"ISIC2018_Task1-2_{split}_Input" / f"{stem}.jpg",
                 quality=95)  # fmt: skip
            save(
                white(mask),
                out / f"ISIC2018_Task1_{split}_GroundTruth" / f"{stem}_segmentation.png",
            )


def kvasir(pairs, out: Path) -> None:
    for image, mask in pairs:
        save(Image.open(image).convert("RGB"), out / "images" / f"{image.stem}.jpg", quality=95)
        save(Image.fromarray(white(mask)).convert("RGB"), out / "masks" / f"{image.stem}.jpg",
             quality=75)  # fmt: skip


def loveda(pairs, out: Path) -> None:
    splits = drawn(len(pairs), ("Train", "Val", "Test"), (0.15, 0.15))
    for split, indices in splits.items():
        for k, i in enumerate(indices):
            image, mask = pairs[i]
            domain = ("Urban", "Rural")[k % 2]
            save(Image.open(image).convert("RGB"), out / split / domain / "images_png" / f"{k}.png")
            if split != "Test":  # LoveDA withholds its test masks
                save(white(mask) // 255 + 1, out / split / domain / "masks_png" / f"{k}.png")


DEEPGLOBE_CLASSES = """name,r,g,b
urban_land,0,255,255
agriculture_land,255,255,0
rangeland,255,0,255
forest_land,0,255,0
water,0,0,255
barren_land,255,255,255
unknown,0,0,0
"""


def deepglobe(pairs, out: Path) -> None:
    out.mkdir(parents=True)
    (out / "class_dict.csv").write_text(DEEPGLOBE_CLASSES)
    colours = np.array([[255, 255, 0], [0, 255, 255]], np.uint8)  # agriculture, urban
    splits = drawn(len(pairs), ("train", "valid", "test"), (0.15, 0.15))
    for split, indices in splits.items():
        for i in indices:
            image, mask = pairs[i]
            save(Image.open(image).convert("RGB"), out / split / f"{i}_sat.jpg", quality=95)
            if split == "train":  # DeepGlobe withholds its valid and test masks
                save(colours[white(mask) // 255], out / split / f"{i}_mask.png")


def busi(pairs, out: Path) -> None:
    kinds = ("benign", "malignant", "normal")
    for i, (image, mask) in enumerate(pairs):
        kind = kinds[i % 3]
        stem = f"{kind} ({i // 3 + 1})"
        save(Image.open(image).convert("RGB"), out / kind / f"{stem}.png")
        first, second = white(mask), white(mask)
        if i % 10 == 0:  # two lesions: the mask's left half in _mask, its right in _mask_1
            half = first.shape[1] // 2
            first[:, half:], second[:, :half] = 0, 0
            save(second, out / kind / f"{stem}_mask_1.png")
        save(first, out / kind / f"{stem}_mask.png")


def dsb(pairs, out: Path) -> None:
    from scipy import ndimage

    for image, mask in pairs:
        case = hashlib.sha1(image.stem.encode()).hexdigest()[:16]
        save(Image.open(image).convert("RGBA"), out / case / "images" / f"{case}.png")
        objects, count = ndimage.label(white(mask) > 0)
        for k in range(1, count + 1):
            name = hashlib.sha1(f"{case}{k}".encode()).hexdigest()[:16]
            save(((objects == k) * 255).astype(np.uint8), out / case / "masks" / f"{name}.png")


def montgomery(pairs, out: Path) -> None:
    for k, (image, mask) in enumerate(pairs):
        stem = f"MCUCXR_{k:04d}_{k % 2}"
        save(Image.open(image).convert("L"), out / "CXR_png" / f"{stem}.png")
        left, right = white(mask), white(mask)
        half = left.shape[1] // 2
        left[:, half:], right[:, :half] = 0, 0  # the image's left half is the left "lung"
        save(left, out / "ManualMask" / "leftMask" / f"{stem}.png")
        save(right, out / "ManualMask" / "rightMask" / f"{stem}.png")
        (out / "ClinicalReadings").mkdir(exist_ok=True)
        (out / "ClinicalReadings" / f"{stem}.txt").write_text("Patient's Sex: M\n")


LAYOUTS = {
    "drive": drive,
    "isic": isic,
    "kvasir": kvasir,
    "loveda": loveda,
    "deepglobe": deepglobe,
    "busi": busi,
    "dsb": dsb,
    "montgomery": montgomery,
}


def main():
    layout, source, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if out.exists():
        sys.exit(f"{out} exists: give a new folder")
    LAYOUTS[layout](pairs_of(source), out)
    print(f"{layout}: {sum(1 for _ in out.rglob('*.*'))} files in {out}")


if __name__ == "__main__":
    main()
