"""Folders as users bring them, each made from a folder of images and black-and-white
masks, then read as a user would (``python train.py experiment=images_quick
data.root=<folder> debug=fdr``: one batch through training and testing): a table of
which train and which are refused, with the first line each run's log gives for it.

    python benchmarks/quirky_folders.py ../shared/data/horses /tmp/quirky
    python benchmarks/quirky_folders.py --volumes ../shared/data/Task04_Hippocampus /tmp/quirky3d

Each folder holds one quirk: JPEG masks, masks with smoothed edges, masks painted on a
transparent layer, empty masks, masks of class numbers beside a void 255, a macOS zip's
leftovers, names that differ in case, a path outside ASCII, Kaggle's ``X/`` and ``y/``,
a CSV of other column names written on Windows, a downloaded archive, the layouts of
Oxford-IIIT Pet, ISIC, Carvana, BUSI and DRIVE, photos of megapixels, Kaggle's
run-length CSVs, SIIM's DICOM images with runs counted from the last, and so on. A
refusal is right where the folder cannot be read as meant (masks of another size); its
message must name the file and the way out.
"""

import argparse
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

QUIRKS = {}


def quirk(function):
    QUIRKS[function.__name__] = function
    return function


def pairs_of(source: Path, n: int):
    """The first ``n`` (stem, image, mask) of ``source``'s ``images/`` and ``labels/``, the
    mask black (0) and white (255)."""
    for image in sorted((source / "images").iterdir())[:n]:
        mask = next((source / "labels").glob(image.stem + ".*"))
        white = (np.asarray(Image.open(mask).convert("L")) > 127).astype(np.uint8) * 255
        yield image.stem, Image.open(image), Image.fromarray(white)


def folders(root: Path, *names: str) -> list[Path]:
    made = [root / name for name in names]
    for d in made:
        d.mkdir(parents=True, exist_ok=True)
    return made


@quirk
def jpeg_masks(root, pairs):
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.jpg")
        mask.save(masks / f"{stem}.jpg", quality=75)


@quirk
def smoothed_edges(root, pairs):  # masks blurred, as resizing with interpolation leaves them
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.jpg")
        mask.filter(ImageFilter.GaussianBlur(1.5)).save(masks / f"{stem}.png")


@quirk
def transparent_layer(root, pairs):  # white strokes on a transparent layer, white beneath
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        alpha = np.asarray(mask)
        rgba = np.dstack([np.full_like(alpha, 255)] * 3 + [alpha])
        image.save(images / f"{stem}.jpg")
        Image.fromarray(rgba, "RGBA").save(masks / f"{stem}.png")


@quirk
def empty_masks(root, pairs):
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.jpg")
        Image.new("L", mask.size).save(masks / f"{stem}.png")


@quirk
def void_outlines(root, pairs):  # class numbers 0/1 and 255 along the edges (VOC's void)
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        numbers = (np.asarray(mask) > 0).astype(np.uint8)
        numbers[np.asarray(mask.filter(ImageFilter.FIND_EDGES)) > 0] = 255
        image.save(images / f"{stem}.jpg")
        Image.fromarray(numbers).save(masks / f"{stem}.png")


@quirk
def mac_zip_leftovers(root, pairs):  # __MACOSX/, ._ files, .DS_Store, upper-case suffixes
    images, masks, mac = folders(root, "images", "masks", "__MACOSX/images")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.JPG", format="JPEG")
        mask.save(masks / f"{stem}.PNG", format="PNG")
        (images / f"._{stem}.JPG").write_bytes(b"\x00\x05\x16\x07")
        (mac / f"._{stem}.JPG").write_bytes(b"\x00\x05\x16\x07")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (images / "Thumbs.db").write_bytes(b"\x00")


@quirk
def names_in_other_case(root, pairs):  # HORSE001.jpg with horse001.png
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem.upper()}.jpg")
        mask.save(masks / f"{stem.lower()}.png")


@quirk
def path_outside_ascii(root, pairs):  # spaces, accents, brackets
    images, masks = folders(root, "Études (2024)/Original Images", "Études (2024)/Ground Truth")
    for stem, image, mask in pairs:
        image.save(images / f"photo {stem}.jpg")
        mask.save(masks / f"photo {stem}.png")
    return root / "Études (2024)"


@quirk
def kaggle_x_and_y(root, pairs):  # X/ and y/, masks as NumPy arrays of 0 and 1
    images, masks = folders(root, "X", "y")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.png")
        np.save(masks / f"{stem}.npy", (np.asarray(mask) > 0).astype(np.int64))


@quirk
def windows_csv(root, pairs):  # image_path,mask_path with backslashes, splits in words
    images, masks = folders(root, "imgs", "gts")
    rows = ["image_path,mask_path,subset"]
    for k, (stem, image, mask) in enumerate(pairs):
        image.save(images / f"{stem}.jpg")
        mask.save(masks / f"{stem}.png")
        subset = "training" if k % 5 else "validation"
        rows.append(f"imgs\\{stem}.jpg,gts\\{stem}.png,{subset}")
    (root / "pairs.csv").write_text("\r\n".join(rows) + "\r\n")
    return root / "pairs.csv"


@quirk
def classes_txt(root, pairs):  # a list of names beside the masks
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.jpg")
        mask.save(masks / f"{stem}.png")
    (root / "classes.txt").write_text("background\nhorse\n")


@quirk
def metaimage_2d(root, pairs):  # grand-challenge's 2D .mha images, masks as a one-slice NRRD
    import SimpleITK as sitk

    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        grey = np.asarray(image.convert("L")).astype(np.int16) * 16  # 12-bit, as X-rays
        sitk.WriteImage(sitk.GetImageFromArray(grey), str(images / f"{stem}.mha"))
        one_slice = (np.asarray(mask) > 0).astype(np.uint8)[None]
        sitk.WriteImage(sitk.GetImageFromArray(one_slice), str(masks / f"{stem}.nrrd"))


@quirk
def oxford_pets(root, pairs):  # trimaps 1 pet, 2 background, 3 border; xmls and lists beside
    images, trimaps, xmls = folders(root, "images", "annotations/trimaps", "annotations/xmls")
    listed = ["#Image CLASS-ID SPECIES BREED ID"]
    for k, (_, image, mask) in enumerate(pairs):
        pet = np.asarray(mask) > 0
        trimap = np.where(pet, 1, 2).astype(np.uint8)
        trimap[np.asarray(mask.filter(ImageFilter.FIND_EDGES)) > 0] = 3
        image.convert("RGB").save(images / f"Abyssinian_{k + 1}.jpg")
        Image.fromarray(trimap).save(trimaps / f"Abyssinian_{k + 1}.png")
        (trimaps / f"._Abyssinian_{k + 1}.png").write_bytes(b"\x00\x05\x16\x07")
        (xmls / f"Abyssinian_{k + 1}.xml").write_text("<annotation></annotation>")
        listed.append(f"Abyssinian_{k + 1} 1 1 1")
    (root / "annotations/list.txt").write_text("\n".join(listed) + "\n")
    (root / "annotations/trainval.txt").write_text("\n".join(listed[1::2]) + "\n")
    (root / "annotations/test.txt").write_text("\n".join(listed[2::2]) + "\n")


@quirk
def isic_challenge(root, pairs):  # <id>.jpg with <id>_segmentation.png, licences beside
    images, masks = folders(
        root, "ISIC2018_Task1-2_Training_Input", "ISIC2018_Task1_Training_GroundTruth"
    )
    for k, (_, image, mask) in enumerate(pairs):
        image.convert("RGB").save(images / f"ISIC_{k:07d}.jpg")
        mask.save(masks / f"ISIC_{k:07d}_segmentation.png")
    for d in (images, masks):
        (d / "LICENSE.txt").write_text("CC-BY-NC")
        (d / "ATTRIBUTION.txt").write_text("ISIC")


@quirk
def carvana(root, pairs):  # train/ with train_masks/<id>_mask.gif of 0 and 1, CSVs beside
    images, masks = folders(root, "train", "train_masks")
    for k, (_, image, mask) in enumerate(pairs):
        image.convert("RGB").save(images / f"0cdf5b5d0ce1_{k + 1:02d}.jpg")
        gif = Image.fromarray((np.asarray(mask) > 0).astype(np.uint8), "L").convert("P")
        gif.putpalette([0, 0, 0, 255, 255, 255])
        gif.save(masks / f"0cdf5b5d0ce1_{k + 1:02d}_mask.gif")
    (root / "train_masks.csv").write_text("img,rle_mask\n")
    (root / "metadata.csv").write_text("id,year,make,model\n")


@quirk
def busi(root, pairs):  # images and <name>_mask.png in one folder per diagnosis
    (benign,) = folders(root, "Dataset_BUSI_with_GT/benign")
    for k, (_, image, mask) in enumerate(pairs):
        image.convert("RGB").save(benign / f"benign ({k + 1}).png")
        mask.convert("RGB").save(benign / f"benign ({k + 1})_mask.png")
    return root / "Dataset_BUSI_with_GT"


@quirk
def drive_retina(root, pairs):  # vessels in 1st_manual/, the field of view in mask/
    images, manual, fov = folders(root, "training/images", "training/1st_manual", "training/mask")
    for k, (_, image, mask) in enumerate(pairs):
        image.convert("RGB").save(images / f"{k + 21}_training.tif")
        mask.convert("L").save(manual / f"{k + 21}_manual1.gif")
        Image.new("L", mask.size, 255).save(fov / f"{k + 21}_training_mask.gif")
    return root / "training"


@quirk
def large_photos(root, pairs):  # photos of megapixels: read smaller, scored at native size
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        size = (image.width * 6, image.height * 6)
        image.resize(size, Image.BICUBIC).save(images / f"{stem}.jpg", quality=90)
        mask.resize(size, Image.NEAREST).save(masks / f"{stem}.png")


def run_lengths(mask: Image.Image, order: str) -> str:
    """A mask's white pixels as Kaggle writes them: ``start length`` pairs from pixel 1,
    column by column (``columns``) or row by row."""
    white = np.asarray(mask) > 127
    flat = (white.T if order == "columns" else white).reshape(-1).astype(np.int8)
    change = np.diff(np.concatenate([[0], flat, [0]]))
    starts, ends = np.flatnonzero(change == 1), np.flatnonzero(change == -1)
    return " ".join(f"{a + 1} {b - a}" for a, b in zip(starts, ends, strict=True))


@quirk
def kaggle_run_lengths(root, pairs):  # Severstal's train.csv: class numbers, defects only
    (images,) = folders(root, "train_images")
    rows = ["ImageId,ClassId,EncodedPixels"]
    for k, (stem, image, mask) in enumerate(pairs):
        image.convert("RGB").save(images / f"{stem}.jpg")
        if k % 4:  # every fourth image listed in no row: no defect on it
            rows.append(f"{stem}.jpg,1,{run_lengths(mask, 'columns')}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    (root / "sample_submission.csv").write_text("ImageId,EncodedPixels,ClassId\nx.jpg,1 1,1\n")


@quirk
def run_lengths_by_rows(root, pairs):  # square images, runs row by row, ids without suffix
    (images,) = folders(root, "train/images")
    rows = ["id,rle_mask"]
    for stem, image, mask in pairs:
        side = min(image.size)
        image.crop((0, 0, side, side)).save(images / f"{stem}.png")
        rows.append(f"{stem},{run_lengths(mask.crop((0, 0, side, side)), 'rows')}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")


@quirk
def siim_dicom(root, pairs):  # DICOM in study/series folders, SIIM's relative runs, square
    import SimpleITK as sitk

    rows = ["ImageId, EncodedPixels"]
    for k, (stem, image, mask) in enumerate(pairs):
        (series,) = folders(root, f"dicom-images-train/1.2.{k}/1.3.{k}")
        side = min(image.size)
        grey = np.asarray(image.convert("L").crop((0, 0, side, side))).astype(np.uint16) * 16
        sitk.WriteImage(sitk.GetImageFromArray(grey), str(series / f"1.4.{stem}.dcm"))
        runs = np.asarray(run_lengths(mask.crop((0, 0, side, side)), "columns").split(), int)
        runs = runs.reshape(-1, 2) - [1, 0]  # from 0, each start after the last run's end
        ends = np.concatenate([[0], (runs[:, 0] + runs[:, 1])[:-1]])
        cells = " ".join(f"{s - e} {n}" for (s, n), e in zip(runs, ends, strict=True))
        rows.append(f"1.4.{stem}, {cells or '-1'}")
    (root / "train-rle.csv").write_text("\n".join(rows) + "\n")


@quirk
def downloaded_archive(root, pairs):
    images, masks = folders(root / "unpacked", "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.jpg")
        mask.save(masks / f"{stem}.png")
    with zipfile.ZipFile(root / "dataset.zip", "w") as z:
        for f in sorted((root / "unpacked").rglob("*")):
            z.write(f, f.relative_to(root / "unpacked"))
    shutil.rmtree(root / "unpacked")


@quirk
def masks_half_size(root, pairs):  # refused: a mask must be the size of its image
    images, masks = folders(root, "images", "masks")
    for stem, image, mask in pairs:
        image.save(images / f"{stem}.jpg")
        mask.resize((mask.width // 2, mask.height // 2), Image.NEAREST).save(masks / f"{stem}.png")


VOLUME_QUIRKS = {}
THREE = "data.class_names=[background,anterior,posterior]"


def volume_quirk(*settings: str):
    def registered(function):
        VOLUME_QUIRKS[function.__name__] = (function, settings)
        return function

    return registered


def cases_of(source: Path, n: int):
    """The first ``n`` (name, image, label) of a Decathlon folder, as nibabel images."""
    import nibabel as nib

    for path in sorted((source / "imagesTr").glob("*.nii.gz"))[:n]:
        yield (
            path.name[: -len(".nii.gz")],
            nib.load(path),
            nib.load(source / "labelsTr" / path.name),
        )


def save_cases(root: Path, cases, label_of, suffix=".nii.gz") -> None:
    import nibabel as nib

    images, labels = folders(root, "images", "labels")
    for name, image, label in cases:
        nib.save(image, images / f"{name}{suffix}")
        nib.save(
            nib.Nifti1Image(label_of(np.asarray(label.dataobj)), label.affine),
            labels / f"{name}.nii.gz",
        )


@volume_quirk()  # no class named: two values are background and foreground
def binary_labels_0_255(root, cases):  # as ImageJ saves binary masks
    save_cases(root, cases, lambda a: (a > 0).astype(np.uint8) * 255)


@volume_quirk()
def binary_labels_0_1(root, cases):
    save_cases(root, cases, lambda a: (a > 0).astype(np.uint8))


@volume_quirk(THREE)
def label_of_four_axes(root, cases):  # (x, y, z, 1)
    save_cases(root, cases, lambda a: a[..., None])


@volume_quirk(THREE)
def uncompressed_images(root, cases):  # .nii images beside .nii.gz labels
    save_cases(root, cases, lambda a: a, suffix=".nii")


@volume_quirk(THREE)
def metaimage_and_nrrd(root, cases):  # grand-challenge's .mha images, Slicer's .nrrd labels
    import SimpleITK as sitk

    sitk.ProcessObject_SetGlobalWarningDisplay(False)  # NIfTI's header words MetaImage lacks
    images, labels = folders(root, "images", "labels")
    for name, image, label in cases:
        sitk.WriteImage(
            sitk.ReadImage(str(image.get_filename())), str(images / f"{name}.mha"), True
        )
        sitk.WriteImage(
            sitk.ReadImage(str(label.get_filename())), str(labels / f"{name}.nrrd"), True
        )


@volume_quirk(THREE)
def labels_resampled_linearly(root, cases):  # refused: fractions are no class
    save_cases(root, cases, lambda a: a.astype(np.float32) - 1e-4 * (a > 0))


def outcome(log: str, returncode: int) -> str:
    """What a user reads first: the refusal, or the test Dice and the line that says how
    the folder was read."""
    lines = log.splitlines()
    refused = next((line for line in lines if line.startswith("training refused")), None)
    if returncode or refused:
        way_out = next((line for line in lines if line.startswith("For example:")), "")
        return (
            (refused or (lines[-1] if lines else "no output"))[:220] + " " + way_out[:200]
        ).strip()
    said = next(  # a downscale first: a large folder's other lines are as any folder's
        (line.split(" - ", 1)[1] for words in (("times smaller", "number the pixels"), (
            "read as", "case aside", "classes of", "far from", "no class is", "hold 0 and 255"))
         for line in lines if " - " in line and any(w in line for w in words)),
        "",
    )  # fmt: skip
    dice = next((line.split("test/dice")[1].split(",")[0].strip() for line in lines
                 if "tested on" in line and "test/dice" in line), "?")  # fmt: skip
    return f"trained, test Dice {dice} (one batch); {said[:160]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a folder of images/ and labels/ (0/255)")
    parser.add_argument("out", type=Path, help="where the folders and their runs go")
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--only", nargs="*", choices=[*QUIRKS, *VOLUME_QUIRKS])
    parser.add_argument("--volumes", action="store_true",
                        help="source is a Decathlon folder: volume quirks, the 3D recipe")  # fmt: skip
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: name a new folder")
    if args.volumes:
        return volumes(args)
    for name in args.only or list(QUIRKS):
        folder = args.out / "folders" / name
        folder.mkdir(parents=True)
        given = QUIRKS[name](folder, pairs_of(args.source, args.images)) or folder
        setting = f"data.csv={given}" if given.suffix == ".csv" else f"data.root={given}"
        run = subprocess.run(
            [sys.executable, "train.py", "experiment=images_quick", setting, "debug=fdr",
             f"hydra.run.dir={args.out / 'runs' / name}"],
            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1],
        )  # fmt: skip
        print(f"{name:22} {outcome(run.stdout + run.stderr, run.returncode)}", flush=True)


def volumes(args) -> None:
    for name in args.only or list(VOLUME_QUIRKS):
        make, settings = VOLUME_QUIRKS[name]
        folder = args.out / "folders" / name
        folder.mkdir(parents=True)
        make(folder, cases_of(args.source, min(args.images, 24)))
        run = subprocess.run(
            [sys.executable, "train.py", "experiment=hippocampus_unet3d", f"data.root={folder}",
             *settings, "debug=fdr", f"hydra.run.dir={args.out / 'runs' / name}"],
            capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1],
        )  # fmt: skip
        print(f"{name:26} {outcome(run.stdout + run.stderr, run.returncode)}", flush=True)


if __name__ == "__main__":
    main()
