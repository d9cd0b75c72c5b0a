"""Finding a user's own 2D images and their masks (:func:`find_pairs`), in the layouts
folders come in, with errors that name the folder and the setting.

* a folder with an image folder and a mask folder (``images/`` + ``labels/`` or ``masks/``,
  or ``data.image_dir`` / ``data.label_dir``), paired by name: ``data.image_name`` and
  ``data.label_name`` are patterns with one ``{id}`` (``{id}_training`` and
  ``{id}_manual1`` pair ``21_training.tif`` with ``21_manual1.gif``); extensions are
  ignored; masks beside their images where both folders are one (``scan_1.tif`` and
  ``scan_1_mask.tif``);
* the same under ``train/``, ``val/`` and ``test/`` (or ``training/``, ``validation/``,
  ...): given splits; or split folders inside the image folder (``images/training/`` with
  ``annotations/training/``, as ADE20K lays them out);
* an image folder that holds no images itself but subfolders of them
  (``images/<patient>/<n>.png``, ``leftImg8bit/<city>/...``): each pairs with the same
  subfolder of the mask folder, and its first folder is the image's group, which drawn
  splits keep whole; an image folder that holds images reads them alone, as it always did;
* split folders of images with their masks beside them: ``train/`` and ``trainannot/``
  (SegNet's CamVid), ``train/`` and ``train_masks/`` (Carvana), ``train_images/`` and
  ``train_labels/``;
* Cityscapes' (``leftImg8bit/``, ``gtFine/``; :func:`cityscapes_pairs`);
* nnU-Net v2's layout of 2D images: ``imagesTr/<case>_0000.png`` with
  ``labelsTr/<case>.png`` (and ``imagesTs/`` with ``labelsTs/``, the test split, where
  both are there); its ``dataset.json`` names the classes;
* a CSV with ``image`` and ``label`` columns, optional ``roi``, ``split`` and ``group``; a
  relative path is relative to the CSV's folder.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from segnet.data import via
from segnet.data.annotation_formats import described, format_of
from segnet.data.case_table import read_case_table, resolve
from segnet.data.class_files import is_cityscapes_layout, is_class_file
from segnet.data.dataset_json import file_ending
from segnet.data.drawn_masks import forget_parsed_files
from segnet.data.errors import ImageDataError
from segnet.data.file_kinds import MASK_VALUES, SAMPLED, distinct_values, masks_among, suffix_rules
from segnet.data.folder_roles import (
    MASK_WORDS,
    SPLIT_FOLDERS,
    name_words,
    role_of,
    split_named,
    split_of,
    splits_of_file_names,
    weak_mask_name,
)
from segnet.data.image_sets import ImageSets, image_sets
from segnet.data.name_rules import (
    DEFAULT_RULE,
    IMAGE_SUFFIXES,
    BesideRules,
    affix_rules,
    beside_rule,
    file_named,
    inferred_rules,
    keyed,
    name_match,
    name_pattern,
    unpaired_message,
    without_suffix,
)
from segnet.data.volume_channels import numbered_channels

IMAGE_DIRS = ("images", "image", "imgs", "img", "JPEGImages")
# Pascal VOC's mask folder first: a case-blind disk finds its Annotations/ (boxes) as annotations/
LABEL_DIRS = (
    "SegmentationClass", "labels", "label", "masks", "mask", "annotations", "gt", "groundtruth"
)  # fmt: skip
ROI_DIRS = ("roi", "rois", "fov")
# archives a dataset is downloaded as (Kaggle's, Zenodo's): read once unpacked
ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".7z", ".rar")
HIDDEN = (".", "__MACOSX")  # .ipynb_checkpoints/, ._0.png, a zip's __MACOSX/
# nnU-Net v2: the image and label folders of training cases and of test cases, and the
# name of an image file, its case and its channel (``<case>_0000.png``)
NNUNET_FOLDERS = {"train": ("imagesTr", "labelsTr"), "test": ("imagesTs", "labelsTs")}
NNUNET_CHANNEL = re.compile(r"^(?P<case>.+)_(?P<channel>\d{4})$")
# Cityscapes' name rules of a frame and of its mask of label ids
CITYSCAPES_NAMES = ("{id}_leftImg8bit", "{id}_gtFine_labelIds")
# a further mask of an image: its mask's name with a number added (BUSI's ``_mask_1``)
FURTHER_MASK = re.compile(r"^(?P<mask>.+?)[ _-]?\(?(?P<number>\d+)\)?$")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    # the image's path in its image folder (``<group>/<file>``), under its split's name
    # where a split folder holds it: the name splits.json lists and predictions follow
    name: str
    image: Path
    label: Path | None
    roi: Path | None = None
    split: str | None = None  # a given split (folder or CSV column); None: drawn
    # one mask per class instead of ``label``: (class, mask) in the outputs' order
    class_masks: tuple[tuple[str, Path], ...] = ()
    # the first subfolder the image sits in, or a CSV's group column: drawn splits keep a
    # group's images together (one patient's slices are never both trained and tested on)
    group: str | None = None
    # nnU-Net's further channel files of the image (``<case>_0001.png`` ...), in order:
    # ``image`` is channel 0000, and each file one grey channel
    channels: tuple[Path, ...] = ()
    # further masks of the image beside ``label``, numbered after its name (BUSI's
    # ``_mask_1`` of a second lesion): their objects are laid over ``label``'s
    further_masks: tuple[Path, ...] = ()

    @property
    def image_files(self) -> tuple[Path, ...]:
        """Every file of the image: the image, and its further channels."""
        return (self.image, *self.channels)

    def output_stem(self, keep_split: bool = False) -> str:
        """What its prediction files are named after: the name without the file's suffix
        (``aachen/aachen_000000_000019_leftImg8bit``), within its split unless
        ``keep_split`` (every split written into one folder: train/0 and test/0 differ)."""
        name = self.name
        if self.split and not keep_split:
            name = name.removeprefix(f"{self.split}/")
        return str(PurePosixPath(name).with_suffix(""))

    @property
    def masks(self) -> tuple[Path, ...]:
        """The mask file(s) of this image."""
        if self.class_masks:
            return tuple(p for _, p in self.class_masks)
        return (self.label, *self.further_masks) if self.label else ()


class Naming(NamedTuple):
    """How images and masks pair by name (``data.image_name``, ``data.label_name``), and
    whether an image without a mask is left out (``data.skip_unlabelled``)."""

    image_name: str = "{id}"
    label_name: str = "{id}"
    skip_unlabelled: bool = False
    # the lists of images (Pascal VOC's ImageSets): the images they name, and their splits
    lists: ImageSets | None = None

    @property
    def rules_given(self) -> bool:
        """A name rule is set: nothing is guessed or assumed of the names."""
        return (self.image_name, self.label_name) != (DEFAULT_RULE, DEFAULT_RULE)


# -- files and folders ------------------------------------------------------------------
def is_image_file(path: Path) -> bool:
    return (
        path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".") and path.is_file()
    )


def image_files(folder: Path) -> list[Path]:
    """The image files directly in ``folder`` (:func:`without_side_arrays`)."""
    return without_side_arrays(sorted(p for p in folder.iterdir() if is_image_file(p)))


def without_side_arrays(files: list[Path]) -> list[Path]:
    """``files`` without their NumPy arrays where pictures are among them (an array beside
    pictures is something kept with them: features, a cache), and without DICOM files
    of a picture's name (the original a PNG was exported from)."""
    arrays = {f for f in files if f.suffix.lower() == ".npy"}
    files = [f for f in files if f not in arrays] if len(arrays) < len(files) else files
    pictures = {f.stem for f in files if f.suffix.lower() not in (".dcm", ".dicom")}
    return [
        f for f in files if f.suffix.lower() not in (".dcm", ".dicom") or f.stem not in pictures
    ]


def visible_folders(folder: Path) -> list[Path]:
    """The folders directly in ``folder``, hidden ones left out, in name order."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(HIDDEN))


def folders_below(folder: Path) -> list[Path]:
    """Every folder below ``folder`` (hidden ones and theirs left out), each once: a link
    back up the tree is not followed round again. In path order."""
    seen = {folder.resolve()}
    found: list[Path] = []

    def walk(parent: Path) -> None:
        for sub in visible_folders(parent):
            real = sub.resolve()
            if real not in seen:
                seen.add(real)
                found.append(sub)
                walk(sub)

    walk(folder)
    return found


def files_below(folder: Path) -> list[Path]:
    """The image files in the folders below ``folder`` (:func:`folders_below`)."""
    return sorted(f for sub in folders_below(folder) for f in image_files(sub))


def split_folders(folder: Path) -> dict[str, Path]:
    """The split folders directly in ``folder`` (``train/``, ``Validation/``, ...) by the
    split each holds, in the order train, val, test; two folders for one split are
    refused."""
    found: dict[str, Path] = {}
    for d in visible_folders(folder) if folder.is_dir() else ():
        split = split_named(d.name)
        if split in found:
            raise ImageDataError(
                f"{folder} has both {found[split].name}/ and {d.name}/, two folders for the "
                f"{split!r} split: merge them, or rename one."
            )
        if split:
            found[split] = d
    return {split: found[split] for split in SPLIT_FOLDERS if split in found}


def only_split_folders(folder: Path) -> dict[str, Path]:
    """:func:`split_folders` where ``folder`` holds those alone (no images, no other
    folder): else none, and its subfolders are groups of images (a patient named Val)."""
    splits = split_folders(folder)
    if image_files(folder) or len(splits) != len(visible_folders(folder)):
        return {}
    return splits


# Files a dataset ships for people to read (PH2's PH2_dataset.txt and .xlsx, a README, a
# licence): beside a lone folder they do not keep it from being read through
DOCUMENT_SUFFIXES = (".txt", ".md", ".pdf", ".xlsx", ".xls", ".doc", ".docx", ".rtf", ".html")


def is_document(path: Path) -> bool:
    """A file for people to read, not data: a document kind, or no suffix (``LICENSE``),
    and no class list (``labelmap.txt``, which the data is read with)."""
    return path.suffix.lower() in (*DOCUMENT_SUFFIXES, "") and not is_class_file(path)


def unwrapped(root: Path | None, say: bool = True) -> Path | None:
    """``root``, or where it holds one folder alone (and files for people to read at
    most, :func:`is_document`) that holds no image itself and is no split folder
    (``massachusetts-roads/tiff/``, a zip's extra level such as ``Kvasir-SEG/``, PH2's
    ``PH2 Dataset images/`` beside ``PH2_dataset.txt``), the folder inside, said: what
    the data's layout is read from. Only where no folder setting is given (those are
    relative to ``root``)."""
    inner, seen = root, set()
    while inner is not None and inner.is_dir() and inner.resolve() not in seen:
        seen.add(inner.resolve())
        folders = visible_folders(inner)
        files = [f for f in inner.iterdir() if f.is_file() and not f.name.startswith(HIDDEN)]
        data_files = [f for f in files if not is_document(f)]
        lone = folders[0] if len(folders) == 1 and not data_files else None
        if lone is not None and files and any(role_of(d.name) for d in visible_folders(lone)):
            break  # a group folder (Urban/ of images_png/, masks_png/) beside a README: as before
        if lone is None or split_named(lone.name) or image_files(lone):
            break
        inner = lone
    if inner != root and say:
        log.info("%s holds one folder alone: its data is read from %s", root, inner)
    return inner


def find_folder(root: Path, given: str | None, choices: Sequence[str]) -> Path | None:
    """``root/given``, or the first of ``root/choices`` that is a folder; None if none is."""
    for name in [given] if given else choices:
        if (root / name).is_dir():
            return root / name
    return None


def subfolder(root: Path, given: str | None, choices: Sequence[str], what: str) -> Path | None:
    """:func:`find_folder`, refusing a ``data.<what>_dir`` that names no folder."""
    if given and not (root / given).is_dir():
        raise FileNotFoundError(f"data.{what}_dir={given}: no folder {root / given}.")
    return find_folder(root, given, choices)


# -- pairing ------------------------------------------------------------------------------
def find_pairs(
    root: Path,
    csv_file: str | None,
    image_dir: str | None = None,
    label_dir: str | None = None,
    roi_dir: str | None = None,
    image_name: str = "{id}",
    label_name: str = "{id}",
    skip_unlabelled: bool = False,
    class_names: Sequence[str] | None = None,
    drawn: bool | None = None,
    rle_order: str = "auto",
    trained_mask_classes: Sequence[str] | None = None,
) -> list[Pair]:
    """Every (image, mask) pair of the data, each with its given split if any; masks
    drawn from annotation files are drawn for ``class_names`` where given (``drawn``:
    :func:`drawn_masks_root` of it where the caller has asked already), with the
    settings their format takes (``rle_order``: a run-length CSV's pixel order;
    ``trained_mask_classes``: a checkpoint's classes of a mask each)."""
    naming = Naming(image_name, label_name, skip_unlabelled)
    dirs = (image_dir, label_dir, roi_dir)
    if csv_file:
        pairs = csv_pairs(Path(csv_file).expanduser())
    elif root.is_file() and root.name.lower().endswith(ARCHIVES):
        raise FileNotFoundError(
            f"data.root={root} is an archive: unpack it first ({unpack_command(root, root.parent)}), "
            "then point data.root at the folder it makes."
        )
    elif not root.is_dir():
        raise FileNotFoundError(
            f"data.root={root}: no such folder. Point data.root at the folder holding your "
            "images and masks, or data.csv at a CSV listing them."
        )
    elif is_nnunet_layout(root, dirs):
        pairs = nnunet_pairs(root, naming)
    elif is_cityscapes_layout(root) and not any(dirs) and not naming.rules_given:
        pairs = cityscapes_pairs(root, naming)
    elif (
        not any(dirs)
        and not naming.rules_given
        and (drawn if drawn is not None else drawn_masks_root(root, skip_unlabelled))
    ):
        settings = {"rle_order": rle_order, "trained_mask_classes": trained_mask_classes}
        pairs = annotation_pairs(root, class_names, skip_unlabelled, settings)
    else:
        pairs = layout_pairs(root, dirs, naming)
    check_pairs(pairs)
    return pairs


def layout_pairs(root: Path, dirs: tuple, naming: Naming) -> list[Pair]:
    """The pairs of a folder of images and mask images, in the layouts :func:`find_pairs`
    reads after nnU-Net's and Cityscapes'."""
    if siblings := (
        {} if any(dirs) or find_folder(root, None, IMAGE_DIRS) else sibling_split_folders(root)
    ):
        return sibling_split_pairs(siblings, naming)
    if split_folders_at_root(root, dirs[0]):
        return root_split_pairs(root, dirs, naming)
    if lists := image_sets(root):  # Pascal VOC's, CVAT's: the images read, their splits
        return lists.check_splits(folder_pairs(root, dirs, naming._replace(lists=lists)))
    return splits_of_names(folder_pairs(root, dirs, naming), root)


@contextmanager
def logs_silenced() -> Iterator[None]:
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


def drawn_masks_root(root: Path | None, skip_unlabelled: bool = False) -> bool:
    """Whether ``root``'s masks are drawn from annotation files (:func:`annotation_files`):
    it holds some, and no mask images (masks, where a folder holds both, are what is
    read, the annotation files left alone; and a layout of masks that is refused, a mask
    missing, is refused as before, not read from the annotation files instead); the
    mask folders a format exports itself (Supervisely's) are no masks here."""
    if root is None or not root.is_dir():
        return False
    found = format_of(root)
    if found is None:
        forget_parsed_files()
        if via.via3_files(root) and not masks_read(root, skip_unlabelled):
            raise ImageDataError(
                f"{via.via3_files(root)[0]} is a VGG Image Annotator 3 project, which is not "
                "read, and no masks are found beside it: export its annotations as COCO from "
                "VIA 3 (read with no setting), or annotate with VIA 2 (via_region_data.json)."
            )
        return False
    return not masks_read(root, skip_unlabelled, found[0].own_masks)


def masks_read(root: Path, skip_unlabelled: bool, unread: Sequence[str] = ()) -> bool:
    """Whether a layout of mask images reads ``root`` (tried silently), or refuses it for
    what its mask images lack (an image without its mask): either way, masks are what
    the folder holds; masks in folders named as ``unread`` are not counted."""
    try:
        with logs_silenced():  # a layout's own words, said where it is read
            pairs = layout_pairs(root, (None, None, None), Naming(skip_unlabelled=skip_unlabelled))
        if not unread:
            return bool(pairs)
        # a pair of masks one per class has no label: its masks are the user's
        return any(
            not p.label or not set(p.label.parts[len(root.parts) :]) & set(unread) for p in pairs
        )
    except (ValueError, OSError):  # refused: for want of masks, or for what its masks lack
        return holds_mask_images(root, unread)


def holds_mask_images(root: Path, unread: Sequence[str] = ()) -> bool:
    """Whether an image below ``root`` is a mask by its folder's name (``masks/``,
    ``GroundTruth/``) or by its own last word (``0001_mask.png``), those in folders
    named as ``unread`` aside."""
    for f in [*image_files(root), *files_below(root)]:
        folders = f.relative_to(root).parts[:-1]
        if set(folders) & set(unread):
            continue
        words = [w for w in re.split(r"[_\-. ]+", f.stem.lower()) if w]
        if any(role_of(d) == "labels" for d in folders) or (words and words[-1] in MASK_WORDS):
            return True
    return False


def splits_of_names(pairs: list[Pair], root: Path) -> list[Pair]:
    """``pairs`` each in the split its image's name begins with, where none has a split
    yet, every name begins with one and train and test are among them (GlaS's
    ``train_1``, ``testA_1``: :func:`~segnet.data.folder_roles.splits_of_file_names`);
    said."""
    splits = None if any(p.split for p in pairs) else splits_of_file_names([p.name for p in pairs])
    if splits is None:
        return pairs
    counts = {s: splits.count(s) for s in SPLIT_FOLDERS if s in splits}
    log.info(
        "the names of the images in %s begin with their split (%s): read as given splits, "
        "so data.test_fraction is not used%s; to draw every split instead, list the images "
        "in a CSV without a split column (data.csv=)", root,
        ", ".join(f"{s} {n}" for s, n in counts.items()),
        "" if "val" in counts else " (val is drawn from train by data.val_fraction)",
    )  # fmt: skip
    return [replace(p, split=s) for p, s in zip(pairs, splits, strict=True)]


def sibling_split_folders(root: Path) -> dict[str, tuple[Path, Path | None]]:
    """Split folders of images with their masks beside them, by split: ``train/`` with
    ``trainannot/`` (SegNet's CamVid), ``train/`` with ``train_masks/`` (Carvana),
    ``train_images/`` with ``train_labels/``, ``..._Training_Input/`` with
    ``..._Training_GroundTruth/`` (ISIC): a folder whose name gives a split and says
    images or masks (:mod:`segnet.data.folder_roles`), or is a split's name alone (images);
    a split folder of images whose masks are not there (an unlabelled ``test/``) has None.
    Empty unless some split has both."""
    if any(find_folder(d, None, IMAGE_DIRS) for d in split_folders(root).values()):
        return {}  # split folders holding images/ and labels/: that layout, not this
    named: dict[str, dict[str, list[Path]]] = {
        s: {"images": [], "labels": []} for s in SPLIT_FOLDERS
    }
    unsplit: dict[str, list[Path]] = {"images": [], "labels": []}
    for d in visible_folders(root) if root.is_dir() else ():
        split = split_of(d.name)
        role = "images" if split_named(d.name) else role_of(d.name)
        if role in ("images", "labels") and image_files(d):
            (named[split] if split else unsplit)[role].append(d)
    # Image/ and Mask/ beside Test_Image/ and Test_Mask/: the unnamed pair is train
    others = any(roles["images"] for roles in named.values())
    if others and not any(named["train"].values()) and all(len(v) == 1 for v in unsplit.values()):
        named["train"] = unsplit
    found: dict[str, tuple[Path, Path | None]] = {}
    for split, roles in named.items():
        images, masks = roles["images"], roles["labels"]
        if len(images) > 1 or len(masks) > 1:
            raise ImageDataError(
                f"{root}: {', '.join(d.name + '/' for d in images + masks)} are all "
                f"named for the {split!r} split: set data.image_dir and data.label_dir "
                "to the two to pair, or list the pairs in a CSV (data.csv=)."
            )
        if images:
            found[split] = (images[0], masks[0] if masks else None)
    return found if any(masks for _, masks in found.values()) else {}


def sibling_split_pairs(
    siblings: dict[str, tuple[Path, Path | None]], naming: Naming
) -> list[Pair]:
    """The pairs of each split's image folder and the mask folder beside it
    (:func:`sibling_split_folders`), in that split; one without masks is left out, said."""
    pairs = []
    for split, (images, masks) in siblings.items():
        if masks is None:
            log.warning(
                "%s has no mask folder beside it (%s_masks/, %s_labels/, %sannot/, ...): it is "
                "left out; python -m segnet.predict segments its images.",
                images, split, split, split,
            )  # fmt: skip
            continue
        pairs += paired(images, masks, None, naming, split)
    return pairs


def annotation_files(root: Path) -> list[Path]:
    """The annotation files ``root``'s masks are drawn from: those of the first format
    (:data:`~segnet.data.annotation_formats.FORMATS`) it holds files of."""
    found = format_of(root)
    return found[1] if found else []


def annotation_pairs(
    root: Path,
    class_names: Sequence[str] | None,
    skip_unlabelled: bool = False,
    settings: dict[str, Any] | None = None,
) -> list[Pair]:
    """The images ``root``'s annotation files name (:func:`annotation_files`), each with
    the mask drawn from its objects (of ``class_names``, else the files' own classes),
    in the split its file gives; those with no object left out where
    ``skip_unlabelled``. ``settings`` are data settings by name, each passed to the
    format that takes it."""
    images = [*image_files(root), *files_below(root)]
    if (found_format := format_of(root)) is None:
        raise ImageDataError(f"{root} holds no annotation files of the formats read.")
    fmt, files = found_format
    taken = {k: v for k, v in (settings or {}).items() if k in fmt.settings}
    found = fmt.images(root, images, class_names, **taken)
    what = described(root, fmt, files)
    found = without_empty(found, skip_unlabelled)
    log.info(
        "the masks of %d image(s) drawn from %s (kept in %s)", len(found), what,
        os.path.commonpath([a.mask.parent for a in found]) if found else "-",
    )  # fmt: skip
    # named below the folder holding them all, as a folder of images names its images
    # (0001.png, not images/0001.png; train/0001.png where split folders hold them)
    base = Path(os.path.commonpath([a.image.parent for a in found])) if found else root
    base = base if base.is_relative_to(root) else root
    forget_parsed_files()  # drawn: what the files hold is in the masks now
    return [
        Pair(
            pair_name(base, a.image, a.name, a.split),
            a.image,
            None if a.class_masks else a.mask,
            split=a.split,
            class_masks=a.class_masks,
        )
        for a in found
    ]


def without_empty(found: list, skip_unlabelled: bool) -> list:
    """``found`` without the images no object is outlined on where ``skip_unlabelled``;
    else all of them, those counted in a warning: an annotation tool lists every image
    of a task, annotated or not yet, and a blank one trains as background throughout."""
    empty = [a for a in found if not a.objects]
    if empty and skip_unlabelled:
        log.info("%d image(s) with no object left out (data.skip_unlabelled)", len(empty))
        return [a for a in found if a.objects]
    if empty:
        log.warning(
            "%d of %d images have no object outlined (e.g. %s): they train as background "
            "throughout. Where they are not annotated yet, data.skip_unlabelled=true leaves "
            "them out.", len(empty), len(found), empty[0].image,
        )  # fmt: skip
    return found


def pair_name(base: Path, image: Path, otherwise: str, split: str | None) -> str:
    """The image's path below ``base``, its split folder named as its split (Roboflow's
    ``valid/x.jpg`` as ``val/x.jpg``, as split folders of images and masks name it)."""
    if not image.is_relative_to(base):
        return otherwise
    parts = list(image.relative_to(base).parts)
    if split and len(parts) > 1 and split_named(parts[0]) == split:
        parts[0] = split
    return "/".join(parts)


def cityscapes_pairs(root: Path, naming: Naming) -> list[Pair]:
    """Cityscapes' ``leftImg8bit/<split>/<city>/<frame>_leftImg8bit.png``, each with its
    ``gtFine/<split>/<city>/<frame>_gtFine_labelIds.png`` (its other mask files match no
    rule and are not read), in train and val; its test split (whose masks hold no class:
    Cityscapes' server scores the test images) and ``train_extra/`` (coarse masks only)
    are left out, said."""
    names = naming._replace(image_name=CITYSCAPES_NAMES[0], label_name=CITYSCAPES_NAMES[1])
    log.info(
        "%s is laid out as Cityscapes: read as data.image_dir=leftImg8bit data.label_dir=gtFine "
        "'data.image_name=%s' 'data.label_name=%s'", root, *CITYSCAPES_NAMES,
    )  # fmt: skip
    images, masks = root / "leftImg8bit", root / "gtFine"
    splits = ("train", "val")
    missing = [f"{folder / s}/" for folder in (masks, images) for s in splits
               if not (folder / s).is_dir()]  # fmt: skip
    if missing:
        raise ImageDataError(
            f"{root} is laid out as Cityscapes and has no {' and no '.join(missing)}: "
            "unpack leftImg8bit_trainvaltest.zip and gtFine_trainvaltest.zip into it."
        )
    left_out = [f"{d.name}/" for d in visible_folders(images) if d.name not in splits]
    if left_out:
        log.warning(
            "%s: %s left out (Cityscapes' test masks hold no class; its server scores them), "
            "so the run tests on val", images, ", ".join(left_out),
        )  # fmt: skip
    pairs = []
    for split in splits:
        pairs += paired(images / split, masks / split, None, names, split)
    return pairs


def is_nnunet_layout(root: Path, dirs: tuple) -> bool:
    """``root`` is laid out as nnU-Net v2 lays out a dataset (``imagesTr/``, ``labelsTr/``),
    and no folder setting says otherwise."""
    train_images, train_labels = NNUNET_FOLDERS["train"]
    return not any(dirs) and (root / train_images).is_dir() and (root / train_labels).is_dir()


def nnunet_pairs(root: Path, naming: Naming) -> list[Pair]:
    """The pairs of an nnU-Net v2 dataset of 2D images: ``imagesTr/<case>_0000.png`` with
    ``labelsTr/<case>.png``. Its test cases (``imagesTs/``) are the test split where they
    have labels (``labelsTs/``), and are left out, said, where they have none; the
    training cases are then drawn into splits."""
    refuse_volumes(root)
    # nnU-Net's naming, unless data.image_name says another
    by_case = naming.image_name in ("{id}", "{id}_0000")
    counts = {}
    if by_case:
        naming = naming._replace(image_name="{id}_0000")
        for images, _ in NNUNET_FOLDERS.values():
            if (root / images).is_dir():
                counts[images] = check_channel_files(root / images)
    if len(set(counts.values())) > 1:
        raise ImageDataError(
            f"{root}: its cases have {' and '.join(f'{n} channel(s) in {d}/' for d, n in counts.items())}"
            ": give every case the same channels."
        )
    labelled_test = all((root / d).is_dir() for d in NNUNET_FOLDERS["test"])
    pairs = []
    for split, (image_dir, label_dir) in NNUNET_FOLDERS.items():
        images, labels = root / image_dir, root / label_dir
        if not images.is_dir():
            continue
        if not labels.is_dir():
            log.warning(
                "%s has no labels (no %s/ beside it): its images are left out; python -m "
                "segnet.predict segments them.", images, label_dir,
            )  # fmt: skip
            continue
        pairs += paired(images, labels, None, naming, split if labelled_test else None)
    if not by_case:
        return pairs
    # named by case, as nnU-Net names them (its predictions too): em002.png, not em002_0000.png
    return [
        replace(p, name=case_file_name(p.name), channels=further_channels(p.image)) for p in pairs
    ]


def further_channels(first: Path) -> tuple[Path, ...]:
    """The channel files after ``first`` (``<case>_0000.png``) beside it: ``<case>_0001.png``
    and on, as long as they go (as a volume's: :mod:`segnet.data.volume_channels`)."""
    return numbered_channels(first)[1:]


def case_file_name(name: str) -> str:
    """``test/em002_0000.png`` as its case's file: ``test/em002.png``."""
    path = PurePosixPath(name)
    return str(path.with_stem(NNUNET_CHANNEL.match(path.stem)["case"]))


def refuse_volumes(root: Path) -> None:
    """An nnU-Net dataset of volumes (``file_ending`` ``.nii.gz``, or TIFF stacks with their
    spacing files) is refused, pointing at the volume recipes."""
    images = root / NNUNET_FOLDERS["train"][0]
    ending = file_ending(root, ImageDataError)
    stacks = ending in (".tif", ".tiff") and any(images.glob("*.json"))
    if stacks or (ending and ending not in IMAGE_SUFFIXES) or not image_files(images):
        raise ImageDataError(
            f"{root} is an nnU-Net dataset of volumes ({ending or 'no 2D images in imagesTr/'}"
            "), and this is a 2D image recipe: train it with a volume recipe "
            f"(experiment=hippocampus_unet3d data.root={root})."
        )


def check_channel_files(images: Path) -> int:
    """Every image file of an nnU-Net folder is named ``<case>_<channel>``, and every case
    has the same channels, 0000 and on without a gap, in files of one kind (an RGB image
    holds its three channels in one file); their number."""
    channels: dict[str, list[str]] = {}
    for path in image_files(images):
        found = NNUNET_CHANNEL.match(path.stem)
        if not found:
            raise ImageDataError(
                f"{path}: nnU-Net names each image file <case>_0000{path.suffix} (the case, "
                "then its channel), and this one has no channel number. Rename it, or set "
                "data.image_name (e.g. '{id}') for files named otherwise."
            )
        channels.setdefault(found["case"], []).append(path.name)
    counts: dict[int, str] = {}
    for case, files in sorted(channels.items()):
        numbers = sorted(int(NNUNET_CHANNEL.match(Path(f).stem)["channel"]) for f in files)
        if numbers != list(range(len(numbers))) or len({Path(f).suffix for f in files}) > 1:
            raise ImageDataError(
                f"case {case} in {images} has the channel files {', '.join(sorted(files))}: "
                "nnU-Net numbers a case's channels 0000, 0001, ... without a gap, in files of "
                "one kind."
            )
        counts.setdefault(len(numbers), case)
    if len(counts) > 1:
        (few, case), (many, other) = sorted(counts.items())[:2]
        raise ImageDataError(
            f"case {case} in {images} has {few} channel file(s) and case {other} {many}: "
            "give every case the same channels."
        )
    return next(iter(counts), 1)


def split_folders_at_root(root: Path, image_dir: str | None) -> dict[str, Path]:
    """``root``'s split folders (``train/``, ``val/``, ...), each holding images and masks;
    none where ``root`` has an image folder of its own (then a ``training/`` beside it is
    something else, such as a run's logs)."""
    images = find_folder(root, image_dir, IMAGE_DIRS)
    if images is None:
        return split_folders(root)
    # images beside their masks in the root: its folders are splits only where all are
    return only_split_folders(root) if images.resolve() == root.resolve() else {}


def root_split_pairs(root: Path, dirs: tuple, naming: Naming) -> list[Pair]:
    """The pairs of each split folder of ``root``, in its split; a split folder with
    images and no mask folder (an unlabelled ``test/``) is left out, and said."""
    image_dir, label_dir, _ = dirs
    pairs = []
    splits = split_folders(root)
    # DRIVE: where a split has hand-drawn masks (1st_manual/), a mask/ alone is a field of view
    drawn = {split: hand_drawn(folder) for split, folder in splits.items()}
    manual = not label_dir and any(drawn.values())
    beside = None if any(dirs) or naming.rules_given else rules_beside(splits.values())
    for split, folder in splits.items():
        images = find_folder(folder, image_dir, IMAGE_DIRS)
        masks = drawn[split] if manual else find_folder(folder, label_dir, LABEL_DIRS)
        named = {role_of(d.name) for d in role_folders(folder)} if not any(dirs) else set()
        if beside is not None and images_alone(folder, beside):
            log.warning(
                "%s holds images and no mask beside them (named %r): it is left out; python "
                "-m segnet.predict segments its images.", folder, beside.label,
            )  # fmt: skip
            continue
        if (images is not None and not masks) or named == {"images"}:
            log.warning(
                "%s has images and no mask folder (%s): it is left out; python -m "
                "segnet.predict segments its images.",
                folder, "/, ".join(["1st_manual"] if manual else [label_dir] if label_dir
                                   else LABEL_DIRS) + "/",
            )  # fmt: skip
            continue
        pairs += folder_pairs(folder, dirs, naming, split)
    if not pairs:
        raise ImageDataError(f"{root}: none of its split folders holds masks.")
    return pairs


def rules_beside(folders) -> BesideRules | None:
    """The rules of the first of ``folders`` that holds images with their masks beside
    them (:func:`segnet.data.name_rules.beside_rule`), if any does."""
    for folder in folders:
        files = image_files(folder)
        found = rule_beside(files) if files and not visible_folders(folder) else None
        if found is not None:
            return found
    return None


def rule_beside(files: list[Path]) -> BesideRules | None:
    """The rules of images with their masks beside them: named apart
    (:func:`~segnet.data.name_rules.beside_rule`), else of one name and two kinds of file
    (:func:`~segnet.data.file_kinds.suffix_rules`)."""
    return beside_rule(files) or suffix_rules(files)


def images_alone(folder: Path, rules: BesideRules) -> bool:
    """Whether ``folder`` holds files alone with no masks beside them, where another split
    folder's ``rules`` found some: no rule of its own pairs them, every name fits the
    image rule and none the mask rule (DeepGlobe's ``valid/`` of ``_sat.jpg`` files beside
    ``train/``)."""
    files = image_files(folder)
    if not files or visible_folders(folder) or rule_beside(files) is not None:
        return False
    image_re, label_re = (name_pattern(r, "") for r in (rules.image, rules.label))
    return all(name_match(image_re, f) and not name_match(label_re, f) for f in files)


def folder_pairs(root: Path, dirs: tuple, naming: Naming, split: str | None = None) -> list[Pair]:
    """The pairs of ``root``'s image and mask folders; where the image folder holds split
    folders alone (``images/training/``, ``images/validation/``), the pairs of each, in its
    split, with the masks of the mask folder's split folder of the same split."""
    image_dir, label_dir, roi_dir = dirs
    images = subfolder(root, image_dir, IMAGE_DIRS, "image")
    labels = subfolder(root, label_dir, LABEL_DIRS, "label")
    rois = subfolder(root, roi_dir, ROI_DIRS if roi_dir is None else (), "roi")
    images, labels, rois = named_by_words(root, dirs, images, labels, rois)
    unplaced = images is None and labels is None and rois is None and not any(dirs)
    if unplaced and not naming.rules_given:  # masks beside their images, by one rule
        found = rule_beside(image_files(root) or files_below(root))
        if found:
            return paired(root, root, None, beside_naming(root, found, naming), split)
    if unplaced and (groups := grouped_folders(root)):
        return group_pairs(groups, naming, split)
    if unplaced and (by_content := told_apart(root)):
        images, labels = by_content
    if images is None or labels is None:
        raise FileNotFoundError(missing_folders_message(root, images))
    inner = only_split_folders(images) if split is None else {}
    if inner:
        return inner_split_pairs(inner, labels, rois, naming)
    return paired(images, labels, rois, naming, split)


def beside_naming(root: Path, found: BesideRules, naming: Naming) -> Naming:
    """``naming`` with the rules of the masks beside their images in ``root``, said."""
    rules = f"'data.label_name={found.label}'"
    if found.image != DEFAULT_RULE:
        rules = f"'data.image_name={found.image}' {rules}"
    log.info("%s holds images with their masks beside them: read as data.image_dir=. "
             "data.label_dir=. %s", root, rules)  # fmt: skip
    if found.others:
        log.warning(
            "%s: the masks named by %s beside them (another observer's) are not read; "
            "'data.label_name=%s' reads them instead", root,
            ", ".join(f"'{r}'" for r in found.others), found.others[0],
        )  # fmt: skip
    return naming._replace(image_name=found.image, label_name=found.label)


def named_by_words(
    root: Path,
    dirs: tuple,
    images: Path | None,
    labels: Path | None,
    rois: Path | None,
    quiet: bool = False,
) -> tuple[Path | None, Path | None, Path | None]:
    """The image, mask and region-of-interest folders of ``root`` where their names are not
    the layouts' own but say what they hold (:mod:`segnet.data.folder_roles`: ``Image/``
    and ``Mask/``, ``images_png/`` and ``masks_png/``), each the one folder of its kind
    (folders named for a split are not); hand-drawn masks (DRIVE's ``1st_manual/``) over a
    ``mask/`` beside them, which is then the field of view; a mask folder that holds one
    folder of masks alone (``annotations/trimaps/``), that folder. Said where any is read
    so; a setting given is kept."""
    found = {"image": images, "label": labels, "roi": rois}
    given = dict(zip(found, dirs, strict=True))
    by_role: dict[str, list[Path]] = {"images": [], "labels": [], "roi": []}
    # listed only where a folder is missing: a folder of the layouts' own names costs nothing
    missing = any(found[w] is None and not given[w] for w in ("image", "label"))
    weak = []
    for d in visible_folders(root) if root.is_dir() and missing else ():
        role = "weak" if weak_mask_name(d.name) else role_of(d.name)
        if role and not split_of(d.name) and (image_files(d) or files_below(d)):
            (weak if role == "weak" else by_role[role]).append(d)
    if labels is None and not by_role["labels"]:  # PH2's IMD002_lesion/, no masks/ beside
        by_role["labels"] = weak
    manual = hand_drawn(root)
    read: dict[str, Path] = {}
    fov = labels is not None and labels.name.lower() == "mask"  # DRIVE's names, none other
    if manual and not given["label"] and (labels is None or fov):
        if fov and not given["roi"] and rois is None:
            read["roi"] = labels  # DRIVE: mask/ is the field of view of the manual masks
        read["label"] = manual[0]  # 1st_manual/ before 2nd_manual/: the first observer's
    for what, role in (("image", "images"), ("label", "labels"), ("roi", "roi")):
        alone = by_role[role][0] if len(by_role[role]) == 1 else None
        unset = found[what] is None and not given[what] and what not in read
        if unset and alone is not None and alone not in read.values():
            read[what] = alone
    label_folder = read.get("label", labels)
    no_images = read.get("image", images) is None and not given["image"]
    if (
        no_images
        and label_folder is not None
        and (other := images_named_as_masks(root, label_folder, quiet))
    ):
        read["image"] = other
    if read.get("image", images) is None or read.get("label", labels) is None:
        read = {}  # half a pair by words: the masks may lie beside the images instead
    label_folder = read.get("label", labels)
    if label_folder is not None and not given["label"] and not image_files(label_folder):
        inner = [d for d in visible_folders(label_folder) if image_files(d)]
        if len(inner) == 1 and role_of(inner[0].name) == "labels":
            read["label"] = inner[0]
    if read and not quiet:
        log.info(
            "%s: read as %s, by what their names say", root,
            " ".join(f"data.{w}_dir={read[w].relative_to(root)}" for w in found if w in read),
        )  # fmt: skip
    found.update(read)
    return found["image"], found["label"], found["roi"]


def images_named_as_masks(root: Path, labels: Path, quiet: bool = False) -> Path | None:
    """The one folder of ``root`` whose name says nothing of what it holds, holding
    pictures (not files of a mask's few values: a copy of the masks) most of which are
    named as masks in ``labels`` are (or in its folders: one per class), or as the start
    of their names before a separator (Montgomery's ``CXR_png/`` beside
    ``ManualMask/leftMask/``); said. None where no folder does; where two do, both are
    named in a warning and neither is read."""
    masks = image_files(labels) or [f for d in visible_folders(labels) for f in image_files(d)]

    def named_as_masks(files: list[Path]) -> bool:
        return mostly_named_as(files, masks)

    def pictures(files: list[Path]) -> bool:
        return any((distinct_values(f) or 0) > MASK_VALUES for f in files[:SAMPLED])

    found = [
        d for d in visible_folders(root)
        if d != labels and labels not in d.parents and d not in labels.parents
        and not role_of(d.name) and not split_of(d.name)
        and named_as_masks(files := image_files(d)) and pictures(files)
    ]  # fmt: skip
    if len(found) > 1:
        log.warning("%s and %s both hold images named as the masks in %s: name the image "
                    "folder with data.image_dir=", found[0], found[1], labels)  # fmt: skip
    if len(found) != 1:
        return None
    if not quiet:
        log.info("%s holds the images, named as the masks in %s are: read as data.image_dir=%s",
                 found[0], labels, found[0].relative_to(root))  # fmt: skip
    return found[0]


def mostly_named_as(files: list[Path], others: list[Path]) -> bool:
    """Whether most of the first of ``files`` are named as one of ``others`` is, or as the
    start of its name before a separator (``CXR_0001`` for ``CXR_0001_mask``)."""
    stems = sorted({f.stem for f in others})

    def named(stem: str) -> bool:
        i = bisect.bisect_left(stems, stem)
        return i < len(stems) and (stems[i] == stem or (
            stems[i].startswith(stem) and not stems[i][len(stem)].isalnum()))  # fmt: skip

    sampled = files[:20]
    return bool(sampled) and 2 * sum(named(f.stem) for f in sampled) > len(sampled)


def told_apart(root: Path) -> tuple[Path, Path] | None:
    """The image folder and the mask folder of a ``root`` of two folders whose names say
    neither (Kaggle's ``X/`` and ``y/``, ``A/`` and ``B/``), files of one name in each: the
    one whose first files hold a mask's few values holds the masks (said); None for any
    other ``root``."""
    folders = [d for d in visible_folders(root) if image_files(d) and not split_of(d.name)]
    if len(folders) != 2 or len(visible_folders(root)) != 2 or image_files(root):
        return None
    files = [image_files(d) for d in folders]
    if not mostly_named_as(files[0], files[1]) and not mostly_named_as(files[1], files[0]):
        return None
    masks = masks_among(*files)
    if masks is None:
        return None
    images, labels = folders[1 - masks], folders[masks]
    log.info(
        "%s: read as data.image_dir=%s data.label_dir=%s, by what their files hold (a mask's "
        "few values in %s/, pictures in %s/)", root, images.name, labels.name, labels.name,
        images.name,
    )  # fmt: skip
    return images, labels


def role_folders(root: Path) -> list[Path]:
    """The folders in the group folders of ``root`` (LoveDA's ``Test/Urban/``) whose names
    say they hold images, masks or regions of interest (:mod:`segnet.data.folder_roles`)
    and that hold images; none where a folder of ``root`` itself says what it holds."""
    groups = visible_folders(root)
    if any(role_of(d.name) for d in groups):
        return []
    found = [s for d in groups for s in visible_folders(d) if role_of(s.name)]
    return [d for d in found if image_files(d) or files_below(d)]


def grouped_folders(root: Path) -> dict[str, tuple[Path, Path]]:
    """A folder per group (a domain, a site, a patient), each holding an image folder and a
    mask folder (LoveDA's ``Urban/images_png/`` and ``Urban/masks_png/``): the two of each,
    by group; empty unless every subfolder of ``root`` is such a group."""
    groups = {}
    for d in visible_folders(root):
        images = find_folder(d, None, IMAGE_DIRS)
        labels = find_folder(d, None, LABEL_DIRS)
        images, labels, _ = named_by_words(d, (None, None, None), images, labels, None, quiet=True)
        if images is None or labels is None:
            return {}
        groups[d.name] = (images, labels)
    return groups


def group_pairs(
    groups: dict[str, tuple[Path, Path]], naming: Naming, split: str | None
) -> list[Pair]:
    """The pairs of each group's image and mask folders (:func:`grouped_folders`), named
    and grouped by their group (``Urban/1366.png``), so that a name may occur in each; a
    group of one image beside the masks of its objects (:func:`object_masks`) is that
    image with all of them."""
    names = list(groups)
    log.info("%s holds a folder of images and masks per group (%d: %s): each read, its images "
             "named after it", next(iter(groups.values()))[0].parent.parent, len(names),
             ", ".join(names[:5]) + (", ..." if len(names) > 5 else ""))  # fmt: skip
    prefix = f"{split}/" if split else ""
    pairs, of_objects, rules_said = [], [], set()
    for group, (images, labels) in groups.items():
        if objects := object_masks(images, labels, naming):
            image, masks = objects
            pairs.append(Pair(f"{prefix}{group}/{image.name}", image, masks[0], split=split,
                              group=group, further_masks=masks[1:]))  # fmt: skip
            of_objects.append(labels)
            continue
        for p in paired(images, labels, None, naming, split, rules_said):
            name = f"{prefix}{group}/{p.name.removeprefix(prefix)}"
            pairs.append(replace(p, name=name, group=group))
    if of_objects:
        log.info(
            "%d of the %d folders hold one image and a folder of masks not named as it, "
            "one per object (e.g. %s, %d masks): each image's masks are laid over one "
            "another (their pixels that are not 0)", len(of_objects), len(groups),
            of_objects[0], len(image_files(of_objects[0])),
        )  # fmt: skip
    return pairs


def object_masks(
    images: Path, labels: Path, naming: Naming
) -> tuple[Path, tuple[Path, ...]] | None:
    """The image of an image folder holding one, and the masks of its mask folder, where
    none is named as it and no name rule is set: a mask per object of the image (the 2018
    Data Science Bowl's ``<id>/images/<id>.png`` with ``<id>/masks/<hash>.png``, one per
    nucleus), in the order of their names; None otherwise."""
    found = image_files(images)
    masks = image_files(labels)
    if naming.rules_given or len(found) != 1 or not masks:
        return None
    if any(found[0].stem in m.stem for m in masks):  # a mask named after it: paired by name
        return None
    return found[0], tuple(sorted(masks))


def hand_drawn(root: Path) -> list[Path]:
    """The folders of masks drawn by hand, as DRIVE names them (``1st_manual/``,
    ``2nd_manual/``), in name order: the first observer's first."""
    return [d for d in visible_folders(root) if "manual" in name_words(d.name)
            and role_of(d.name) == "labels" and image_files(d)]  # fmt: skip


def unpack_command(archive: Path, into: Path) -> str:
    """The command that unpacks ``archive`` into ``into``, by its kind."""
    name = archive.name.lower()
    if name.endswith(".zip"):
        return f"python -m zipfile -e {archive} {into}"
    if name.endswith(".7z"):
        return f"7z x {archive} -o{into}"
    if name.endswith(".rar"):
        return f"unrar x {archive} {into}/"
    return f"tar -xf {archive} -C {into}"


def missing_folders_message(root: Path, images: Path | None) -> str:
    have = sorted(p.name + "/" for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    packed = (
        [p for p in sorted(root.iterdir()) if p.name.lower().endswith(ARCHIVES)]
        if root.is_dir()
        else []
    )
    if packed and not have:
        return (
            f"{root} holds {', '.join(p.name for p in packed[:3])}{' ...' * (len(packed) > 3)} "
            f"and no folders: unpack the dataset first ({unpack_command(packed[0], root)}), then "
            "train on the folder it makes."
        )
    tables = sorted(root.glob("*.csv")) if root.is_dir() else []
    # a case list already there (a Kaggle competition's train.csv): read with data.csv=
    csv_setting = f"data.csv={tables[0]}, the one beside them" if len(tables) == 1 else "data.csv="
    message = (
        f"{root}: expected an image folder ({'/, '.join(IMAGE_DIRS)}/) and a mask folder "
        f"({'/, '.join(LABEL_DIRS)}/), or train/ val/ test/ holding them; it has "
        f"{', '.join(have) or 'no folders'}. Name them with data.image_dir= and "
        f"data.label_dir=, or list the pairs in a CSV ({csv_setting})."
    )
    hint = roles_hint(root)
    if hint:
        return message + hint
    holds_images = root.is_dir() and (
        image_files(root) or any(image_files(d) for d in visible_folders(root))
    )
    if images is None and holds_images:
        message += (
            " Where each mask lies beside its image (scan_1.tif and scan_1_mask.tif, in one "
            "folder or one per patient): data.image_dir=. data.label_dir=. and "
            "data.label_name set to the rule that names a mask ('data.label_name={id}_mask')."
        )
    return message


def roles_hint(root: Path) -> str:
    """What the names of ``root``'s folders of images say where more than one says the
    same (STARE's ``labels-ah/`` and ``labels-vk/``, two observers' masks), so none was
    read: the settings that read the first of each kind; empty where no kind has two."""
    by_role: dict[str, list[str]] = {}
    for d in visible_folders(root) if root.is_dir() else ():
        role = role_of(d.name)
        if role in ("images", "labels") and not split_of(d.name) and image_files(d):
            by_role.setdefault(role, []).append(d.name)
    if not any(len(names) > 1 for names in by_role.values()):
        return ""
    kinds = sorted(by_role.items(), key=lambda kv: kv[0] != "images")  # images first
    said = "; ".join(
        f"{', '.join(n + '/' for n in names)} {'each say' if len(names) > 1 else 'says'} "
        f"{'masks' if role == 'labels' else 'images'}"
        for role, names in kinds
    )
    setting = " ".join(
        f"data.{'label' if role == 'labels' else 'image'}_dir={names[0]}" for role, names in kinds
    )
    return (
        f" By their names, {said}, and a folder read by its name must be the one of its "
        f"kind (two sets of masks are often two observers': the benchmark's is usually the "
        f"first). Choose, e.g. {setting}."
    )


def inner_split_pairs(
    inner: dict[str, Path], labels: Path, rois: Path | None, naming: Naming
) -> list[Pair]:
    """The pairs of each split folder of the image folder with the same split's folder of
    the mask folder (and of the region-of-interest folder, or that folder for every split);
    an image split folder without masks (an unlabelled ``testing/``) is left out, and said."""
    mask_splits = split_folders(labels)
    roi_splits = only_split_folders(rois) if rois else {}
    if not mask_splits:
        names = ", ".join(f"{f.name}/" for f in inner.values())
        raise ImageDataError(
            f"the images are in split folders ({names}) and the masks in {labels} are not: "
            f"give {labels} the same split folders ({labels / next(iter(inner.values())).name}"
            "/ ...), or list the pairs in a CSV (data.csv=) with a split column."
        )
    pairs = []
    for split, folder in inner.items():
        if split not in mask_splits:
            log.warning(
                "%s has no masks (%s holds no %s/ folder): it is left out; python -m "
                "segnet.predict segments its images.", folder, labels, folder.name,
            )  # fmt: skip
            continue
        if roi_splits and split not in roi_splits:
            raise ImageDataError(
                f"{rois} holds split folders, and none for {folder.name}/: give it one, or "
                "one folder of regions of interest for every split."
            )
        roi = roi_splits.get(split) if roi_splits else rois
        pairs += paired(folder, mask_splits[split], roi, naming, split)
    if not pairs:
        raise ImageDataError(f"{labels}: none of its split folders holds masks.")
    return pairs


def paired(
    images: Path,
    labels: Path,
    rois: Path | None,
    naming: Naming,
    split: str | None,
    rules_said: set[str] | None = None,
) -> list[Pair]:
    """Each image of ``images`` with the mask its name rule names, in the same place
    under ``labels``: directly where ``images`` holds images (its subfolders are not
    read), else in the same subfolder; or one mask per class, a folder of them for each
    class under ``labels``. With ``naming.skip_unlabelled``, an image without a mask is
    left out (counted in a warning) rather than refused. A rule found to pair the files
    is said, once only for calls given one ``rules_said`` (a folder per group)."""
    image_re = name_pattern(naming.image_name, "data.image_name")
    label_re = name_pattern(naming.label_name, "data.label_name")
    nested = not image_files(images)  # a folder per patient or city
    if images.resolve() == labels.resolve():
        labels = images  # one folder, however spelled: keys relative to one path
    found, mask_files, further = listing(images, labels, rois, nested, naming)
    by_id = keyed(found, image_re, images, "data.image_name")
    listed = naming.lists.listed if naming.lists else None
    if listed is not None:
        by_id = only_listed(by_id, listed, images)
    if not by_id:
        raise ImageDataError(
            f"{images}: no image files ({', '.join(IMAGE_SUFFIXES)}) whose names match "
            f"data.image_name={naming.image_name!r}."
        )
    class_dirs = class_mask_folders(labels) if not nested else []
    masks = {} if class_dirs else keyed(mask_files, label_re, labels, "data.label_name")
    if listed is not None:  # a mask of an image left out is left out with it
        masks = {k: v for k, v in masks.items() if k in listed}
    if masks and not set(masks) & set(by_id) and not naming.rules_given:
        rules = inferred_rules(by_id, masks, images, labels)
        if rules:
            given = f"'data.label_name={rules[1]}'"
            if rules[0] != DEFAULT_RULE:
                given = f"'data.image_name={rules[0]}' {given}"
            if rules_said is None or given not in rules_said:
                log.info("the masks in %s pair with their images in %s by %s, the one rule "
                         "that pairs every file%s", labels, images, given,
                         "" if rules_said is None else " (and in the other groups' folders "
                         "where it pairs every file)")  # fmt: skip
            if rules_said is not None:
                rules_said.add(given)
            named = naming._replace(image_name=rules[0], label_name=rules[1])
            return paired(images, labels, rois, named, split)
    masks = case_aside(by_id, masks, labels)
    roi_re = name_pattern(without_suffix(naming.image_name), "data.image_name")
    roi_masks = regions_of_interest(rois, by_id, roi_re, images) if rois is not None else {}
    # under split folders the name keeps its split: train/0.png and test/0.png differ
    prefix = f"{split}/" if split else ""

    def pair(key: str, label: Path | None, masks: tuple = ()) -> Pair:
        name = by_id[key].relative_to(images)
        group = name.parts[0] if len(name.parts) > 1 else None  # the patient, not its series
        # a split folder's split, else the one a list of images gives by the image's id
        in_split = split or (naming.lists.split_of.get(key) if naming.lists else None)
        return Pair(prefix + name.as_posix(), by_id[key], label, roi_masks.get(key), in_split,
                    masks, group, further_masks=further.get(label, ()))  # fmt: skip

    ids = sorted(by_id, key=lambda k: by_id[k].relative_to(images).as_posix())
    if class_dirs:  # one mask per class: a folder of masks for each class
        per_class = {
            d.name: {k: v for k, v in keyed(image_files(d), label_re, d, "data.label_name").items()
                     if listed is None or k in listed}
            for d in class_dirs
        }  # fmt: skip
        skipped = set().union(*(check_paired(images, d, by_id, per_class[d.name], naming)
                                for d in class_dirs))  # fmt: skip
        kept = [k for k in ids if k not in skipped]
        return [pair(k, None, tuple((c, m[k]) for c, m in per_class.items())) for k in kept]
    skipped = check_paired(images, labels, by_id, masks, naming)
    return [pair(k, masks[k]) for k in ids if k not in skipped]


def case_aside(by_id: dict[str, Path], masks: dict[str, Path], labels: Path) -> dict[str, Path]:
    """``masks`` with the images' names that no mask has but one alone has with its case
    aside (``HORSE001.jpg`` and ``horse001.png``, which Windows' and macOS' disks take for
    one name) keyed as the image, said; as they are where no such name is there."""
    unmatched: dict[str, list[str]] = {}
    for key in masks.keys() - by_id.keys():
        unmatched.setdefault(key.casefold(), []).append(key)
    alone: dict[str, list[str]] = {}  # images no mask has, by the name with its case aside
    for key in by_id.keys() - masks.keys():
        alone.setdefault(key.casefold(), []).append(key)
    renamed = {  # image's key -> mask's key: one of each, or neither is paired so
        keys[0]: unmatched[folded][0]
        for folded, keys in alone.items()
        if len(keys) == 1 and len(unmatched.get(folded, ())) == 1
    }
    if not renamed:
        return masks
    key = min(renamed)
    log.info("%d image(s) pair with their masks in %s by name with its case aside (e.g. %s "
             "and %s)", len(renamed), labels, by_id[key].name, masks[renamed[key]].name)  # fmt: skip
    taken = set(renamed.values())
    return {**{k: v for k, v in masks.items() if k not in taken},
            **{k: masks[m] for k, m in renamed.items()}}  # fmt: skip


def only_listed(by_id: dict[str, Path], listed: frozenset[str], images: Path) -> dict[str, Path]:
    """The images a list names; the count of those left out said."""
    kept = {k: v for k, v in by_id.items() if k in listed}
    if len(kept) < len(by_id):
        log.info(
            "%d of the %d images in %s are in no list of images: left out",
            len(by_id) - len(kept), len(by_id), images,
        )  # fmt: skip
    if not kept:
        raise ImageDataError(
            f"no image in {images} is named in the lists of images ({', '.join(sorted(listed)[:3])}"
            ", ...): the lists name images by their file name without its suffix."
        )
    return kept


def listing(
    images: Path, labels: Path, rois: Path | None, nested: bool, naming: Naming
) -> tuple[list[Path], list[Path], dict[Path, tuple[Path, ...]]]:
    """The image files and the mask files to pair: those directly in their folders, and
    where the images are nested those below too (a mask folder's own files included, to
    be named if they pair with nothing); the mask and region-of-interest folders are not
    image folders, where they lie inside the image folder (``data.image_dir=.``). And the
    further masks of masks beside their images, by mask (:func:`beside`)."""

    def listed(folder: Path) -> list[Path]:
        return image_files(folder) + (files_below(folder) if nested else [])

    if images == labels:  # scan_1.tif beside scan_1_mask.tif
        return beside(listed(images), images, naming)
    if not nested:
        note_unread_subfolders(images)
    others = [d.resolve() for d in (labels, rois) if d is not None]
    found = [f for f in listed(images) if not any(d in f.resolve().parents for d in others)]
    return found, listed(labels), {}


def regions_of_interest(
    rois: Path, by_id: dict[str, Path], image_re: re.Pattern, images: Path
) -> dict:
    """The region-of-interest mask of each image, by its key: named as the image, or, where
    none is, as the image with text added (DRIVE's ``21_training_mask`` of
    ``21_training``) where that pairs some; where the folder holds none for some images,
    they are said (trained and scored whole)."""
    files = image_files(rois) or files_below(rois)
    found = keyed(files, image_re, rois, "data.image_name")
    if by_id and files and not set(found) & set(by_id):
        found = rois_named_with_text_added(files, by_id, images, rois) or found
    missing = [k for k in by_id if k not in found]
    if missing:
        log.warning(
            "%d of the %d images have no region-of-interest mask in %s (e.g. %s): every "
            "pixel of those is trained and scored", len(missing), len(by_id), rois, missing[0],
        )  # fmt: skip
    return found


def rois_named_with_text_added(
    files: list[Path], by_id: dict[str, Path], images: Path, rois: Path
) -> dict[str, Path]:
    """The region-of-interest masks named as their image's file with text added, by the
    image's key; none where no such rule pairs any."""
    key_of_stem = {by_id[k].relative_to(images).with_suffix("").as_posix(): k for k in by_id}
    by_stem = {s: by_id[k] for s, k in key_of_stem.items()}
    plain = keyed(files, name_pattern(DEFAULT_RULE, ""), rois, "")
    rules = affix_rules(by_id[min(by_id)].stem, by_stem, plain, images, rois)
    if rules is None:
        return {}
    log.info("the regions of interest in %s are named as their images with text added: "
             "paired by '%s'", rois, rules[1])  # fmt: skip
    found = keyed(files, name_pattern(rules[1], ""), rois, "data.roi_dir")
    return {key_of_stem[s]: path for s, path in found.items() if s in key_of_stem}


def beside(
    files: list[Path], folder: Path, naming: Naming
) -> tuple[list[Path], list[Path], dict[Path, tuple[Path, ...]]]:
    """The images and the masks of one folder holding both, and the further masks of
    some masks (:func:`further_masks`). A file only one rule fits is what that rule names;
    one both fit (``scan_1_mask`` fits ``{id}`` and ``{id}_mask``) is what the more
    particular rule names (more fixed text: a mask here)."""
    if naming.image_name == naming.label_name:
        raise ImageDataError(
            f"{folder} holds the images and the masks: set data.label_name to the rule that "
            "names a mask after its image (e.g. '{id}_mask'), so that they are told apart."
        )
    image_re = name_pattern(naming.image_name, "data.image_name")
    label_re = name_pattern(naming.label_name, "data.label_name")
    mask_first = len(naming.label_name) > len(naming.image_name)

    def is_mask(f: Path) -> bool:
        fits_mask, fits_image = bool(name_match(label_re, f)), bool(name_match(image_re, f))
        return fits_mask and (mask_first or not fits_image)

    masks = [f for f in files if is_mask(f)]
    mask_set = set(masks)
    others = [f for f in files if f not in mask_set]
    # the files named as an image with text added that are not its mask (a second
    # observer's masks, _2ndHO beside _1stHO) and have no mask of their own: not images
    ids = {(m.parent, name_match(label_re, m)["id"]) for m in masks}

    def own_id(f: Path) -> str | None:
        found = name_match(image_re, f)
        return found["id"] if found else None

    extra = [
        f for f in others
        if (f.parent, own_id(f)) not in ids
        and any((f.parent, f.stem[:n]) in ids and re.search("[A-Za-z]", f.stem[n:])
                for n in range(1, len(f.stem)))
    ]  # fmt: skip
    further = further_masks(extra, masks, folder)
    laid = set().union(*further.values())
    extra = [f for f in extra if f not in laid]
    if extra:
        log.warning(
            "%s: %d file(s) named as an image with text added are neither images nor their "
            "masks by data.label_name=%r (e.g. %s): not read", folder, len(extra),
            naming.label_name, extra[0].name,
        )  # fmt: skip
    left_out = set(extra) | laid
    return [f for f in others if f not in left_out], masks, further


def further_masks(
    files: list[Path], masks: list[Path], folder: Path
) -> dict[Path, tuple[Path, ...]]:
    """Of ``files``, those named as a mask with a number added (BUSI's ``benign
    (4)_mask_1.png`` of a second lesion beside ``benign (4)_mask.png``), by that mask, in
    the order of their numbers; said. Their objects are laid over the mask's. None where
    half the masks or more have one: that is another set of masks (a second observer's
    ``_mask2``), not read (:func:`beside` says so)."""
    by_stem = {(m.parent, m.stem): m for m in masks}
    found: dict[Path, list[tuple[int, Path]]] = {}
    for f in files:
        numbered = FURTHER_MASK.match(f.stem)
        mask = by_stem.get((f.parent, numbered["mask"])) if numbered else None
        if mask is not None:
            found.setdefault(mask, []).append((int(numbered["number"]), f))
    if 2 * len(found) >= len(masks):
        return {}
    if found:
        count = sum(map(len, found.values()))
        example = next(iter(found.values()))[0][1]
        log.info(
            "%s: %d further mask(s) named as a mask with a number added (e.g. %s), of %d "
            "image(s): each is laid over its image's mask (its pixels that are not 0)",
            folder, count, example.name, len(found),
        )  # fmt: skip
    return {m: tuple(f for _, f in sorted(fs)) for m, fs in found.items()}


def note_unread_subfolders(images: Path) -> None:
    """Say where a folder that holds images has subfolders of images too: they are not
    read (as before folders of subfolders were), so nothing is taken in unasked."""
    unread = [d.name + "/" for d in visible_folders(images) if image_files(d)]
    if unread:
        log.info(
            "%s holds images, so its subfolders (%s) are not read; a folder that holds "
            "subfolders alone is read subfolder by subfolder", images, ", ".join(unread[:3]),
        )  # fmt: skip


def class_mask_folders(labels: Path) -> list[Path]:
    """The folders of a mask folder that holds no masks itself but a folder of them per
    class (``masks/vessel/``, ``masks/artery/``), in the order of their names."""
    if image_files(labels):
        return []
    return [d for d in visible_folders(labels) if image_files(d)]


def check_paired(
    images: Path, labels: Path, by_id: dict[str, Path], masks: dict[str, Path], naming: Naming
) -> set[str]:
    """Every image of ``images`` has its mask in ``labels`` and every mask its image; with
    ``naming.skip_unlabelled``, the images without a mask are said and returned (to leave
    out), and none with a mask is refused."""
    if masks and not set(masks) & set(by_id):
        raise ImageDataError(unpaired_message(images, labels, by_id, masks))
    lonely_masks = sorted(set(masks) - set(by_id))
    if lonely_masks:
        raise ImageDataError(
            f"mask {masks[lonely_masks[0]]} has no image in {images} (looked for "
            f"{file_named(naming.image_name, lonely_masks[0])}); {len(lonely_masks)} "
            "mask(s) in all have none. Add the images, remove the masks, or set "
            "data.image_name / data.label_name to the rule that pairs their names."
        )
    unlabelled = sorted(set(by_id) - set(masks))
    if unlabelled and not naming.skip_unlabelled:
        raise ImageDataError(
            f"image {by_id[unlabelled[0]]} has no mask in {labels} (looked for "
            f"{file_named(naming.label_name, unlabelled[0])}); {len(unlabelled)} "
            "image(s) in all have none. Add the masks, remove the images, or set "
            "data.label_name (e.g. '{id}_mask') to the rule that pairs their names; where "
            "only some images have masks (Pascal VOC's JPEGImages/), "
            "data.skip_unlabelled=true leaves the others out."
        )
    if unlabelled:
        log.warning(
            "%d of the %d images in %s have no mask in %s (e.g. %s): left out "
            "(data.skip_unlabelled=true)", len(unlabelled), len(by_id), images, labels,
            by_id[unlabelled[0]].relative_to(images),
        )  # fmt: skip
    if len(unlabelled) == len(by_id):
        raise ImageDataError(f"no image in {images} has a mask in {labels}.")
    return set(unlabelled)


def csv_pairs(path: Path) -> list[Pair]:
    """Rows of ``image,label[,roi][,split][,group]``, or ``image,label_<class>,...`` with
    one mask per class (overlapping classes, in the columns' order); relative paths are
    relative to the CSV."""
    rows = read_case_table(path, required=("image",), error=ImageDataError)
    columns = [c for c in (rows[0] if rows else {}) if c != "line"]
    per_class = [c for c in columns if c.startswith("label_")]
    if ("label" in columns) == bool(per_class):
        raise ImageDataError(
            f"data.csv={path}: give the masks in a 'label' column (one mask per image), or in "
            "'label_<class>' columns (one black-and-white mask per class, e.g. label_vessel, "
            f"label_artery); it has {'both' if per_class else 'neither'} (its columns: "
            f"{', '.join(map(repr, columns)) or 'none'})."
        )
    pairs = []
    for row in rows:
        n = row["line"]
        missing = [c for c in ("image", *(per_class or ["label"])) if not row[c]]
        if missing:
            raise ImageDataError(f"data.csv={path}, line {n}: no {' and no '.join(missing)}.")
        split = row.get("split") or None
        image = resolve(path, row["image"])
        label = resolve(path, row["label"]) if not per_class else None
        masks = tuple((c.removeprefix("label_"), resolve(path, row[c])) for c in per_class)
        roi = resolve(path, row["roi"]) if row.get("roi") else None
        pairs.append(Pair(image.name, image, label, roi, split, masks, row.get("group") or None))
    return pairs


def check_pairs(pairs: list[Pair]) -> None:
    """Every file there, masks of one kind in every split, and no image name twice."""
    for pair in pairs:
        for what, path in (("image", pair.image), *(("mask", m) for m in pair.masks),
                           ("roi", pair.roi)):  # fmt: skip
            if path is not None and not path.is_file():
                raise FileNotFoundError(f"{what} {path}: no such file.")
    kinds = {tuple(c for c, _ in p.class_masks) for p in pairs}
    if len(kinds) > 1:
        a, b = sorted(kinds)[:2]
        raise ImageDataError(
            "the masks are not of one kind in every split: "
            + " and ".join(f"classes {', '.join(k)}" if k else "one mask per image" for k in (a, b))
            + ". Give every split the same mask folders (or CSV columns)."
        )
    counts = Counter(p.name for p in pairs)
    twice = sorted(n for n, count in counts.items() if count > 1)
    if twice:
        raise ImageDataError(
            f"{len(twice)} image name(s) occur twice, e.g. {twice[0]}: predictions and the "
            "per-image scores are named after the image, so give each image its own name."
        )
