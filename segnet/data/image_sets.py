"""Lists of images: Pascal VOC's (``ImageSets/Segmentation/train.txt``, ``val.txt``; CVAT
writes ``default.txt``) and Oxford-IIIT Pet's (``annotations/trainval.txt`` and
``test.txt`` beside ``annotations/trimaps/``): which images of the folder are read, and
the split a list names.

A list named for a split gives its images that split (``train``, ``val``, ``test`` and
their other names; ``trainaug``, the train list of VOC with SBD's masks, is train too);
``trainval`` beside a ``test`` list is train where no list is named for train or val
(Oxford-IIIT Pet's: val is then drawn from it); any other list (VOC's ``trainval`` beside its ``train`` and ``val``,
``default``) names images without a split. Images that no list names are left out (VOC's
``JPEGImages/`` holds some 17,000, 2,913 of them with masks), and said.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from segnet.data.errors import ImageDataError

LISTS = Path("ImageSets") / "Segmentation"
# Oxford-IIIT Pet's lists, beside its masks (annotations/trimaps/)
PET_LISTS = Path("annotations")
PET_LIST_NAMES = ("trainval.txt", "test.txt")
SPLIT_LISTS = {
    "train": ("train", "training"),
    "val": ("val", "valid", "validation"),
    "test": ("test", "testing"),
}
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageSets:
    """The lists of a folder: every image id they name, and the split of those a split's
    list names."""

    folder: Path
    listed: frozenset[str]
    split_of: dict[str, str]

    def check_splits(self, pairs: list) -> list:
        """``pairs`` (:class:`~segnet.data.image_pairs.Pair`), each given its split by the
        image's id where a list names one; refused where lists name splits and no image
        read got one (the ids name other files), rather than drawn instead."""
        if self.split_of and not any(p.split for p in pairs):
            raise ImageDataError(
                f"the lists in {self.folder} name splits, and no image read is in them (e.g. "
                f"{pairs[0].name}): they name an image by its id, the part of its name that "
                "data.image_name's {id} stands for."
            )
        unsplit = [p.name for p in pairs if not p.split]
        if self.split_of and unsplit:
            named = ", ".join(sorted(set(self.split_of.values())))
            raise ImageDataError(
                f"{unsplit[0]} ({len(unsplit)} image(s) in all) is in a list of {self.folder} "
                f"but in none of its split lists (of {named}): add it to one, or remove the "
                "list that names it."
            )
        return pairs


def split_of_list(stem: str) -> str | None:
    """The split a list's file name names; None for one of images of several splits."""
    name = stem.lower()
    for split, names in SPLIT_LISTS.items():
        if name in names:
            return split
    return "train" if name.startswith("train") and not name.startswith("trainval") else None


def listed_ids(path: Path) -> list[str]:
    """The image ids a list names, one a line; a line may carry more than the id (VOC's
    classification lists: ``2008_000002  1``; Oxford-IIIT Pet's ``Abyssinian_100 1 1 1``)
    and ``#`` starts a comment line."""
    lines = path.read_text().splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


def list_files(root: Path) -> list[Path]:
    """The lists in ``root/ImageSets/Segmentation``, else Oxford-IIIT Pet's in
    ``root/annotations`` (where ``annotations/trimaps/`` holds its masks), in the order of
    their names."""
    folder = root / LISTS
    if folder.is_dir():
        return sorted(folder.glob("*.txt"))
    pets = root / PET_LISTS
    if (pets / "trimaps").is_dir():
        return sorted(pets / name for name in PET_LIST_NAMES if (pets / name).is_file())
    return []


def image_sets(root: Path) -> ImageSets | None:
    """The lists of ``root`` (:func:`list_files`); None where it has none. An image two
    split lists name is refused, naming both."""
    files = list_files(root)
    if not files:
        return None
    folder = files[0].parent
    named = {split_of_list(f.stem) for f in files}
    listed: set[str] = set()
    split_of: dict[str, str] = {}
    named_by: dict[str, Path] = {}
    counts = []
    for path in files:
        ids = listed_ids(path)
        split = split_of_list(path.stem)
        if path.stem.lower() == "trainval" and "test" in named and not named & {"train", "val"}:
            split = "train"  # Oxford-IIIT Pet's: val is drawn from it
        listed.update(ids)
        counts.append(f"{path.name} {len(ids)}" + (f" ({split})" if split else ""))
        for i in ids if split else ():
            if split_of.get(i, split) != split:
                raise ImageDataError(
                    f"{i} is in {named_by[i].name} and {path.name} of {folder}, lists of two "
                    "splits: keep it in one."
                )
            split_of[i], named_by[i] = split, path
    log.info("the images listed in %s: %s", folder, ", ".join(counts))
    return ImageSets(folder, frozenset(listed), split_of)
