"""Images and masks beside each other under one name, told apart by their kind of file
(``0001.jpg`` beside ``0001.png``, as many exports and Kaggle folders keep them): the
rules ``{id}.jpg`` and ``{id}.png`` (:func:`~segnet.data.name_rules.name_pattern`), the
masks' kind found by what the files hold, a few values (a mask's classes) against the
many of a picture."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from segnet.data.name_rules import BesideRules

# a mask holds a value per class: at most this many in each of its first files, where
# every picture among the first files holds more than twice as many
MASK_VALUES = 64
SAMPLED = 3  # files of each kind read to judge them
log = logging.getLogger(__name__)


def distinct_values(path: Path) -> int | None:
    """How many values the file holds (channels together); None where it cannot be read."""
    try:
        array = np.load(path, mmap_mode="r") if path.suffix.lower() == ".npy" else Image.open(path)
        return len(np.unique(np.asarray(array)))
    except (OSError, ValueError, UnidentifiedImageError):
        return None


def suffix_rules(files: list[Path]) -> BesideRules | None:
    """The rules of images and masks of one name and two kinds of file beside each other
    (two suffixes in all, and most names once of each: a missing mask or image is then
    named by the pairing): ``{id}.jpg`` for the pictures, ``{id}.png`` for the masks. None
    where the files are otherwise, or where what they hold does not say which kind is the
    masks (then the log says how to name them)."""
    return _suffix_rules(tuple(files))


@functools.lru_cache(maxsize=8)
def _suffix_rules(files: tuple[Path, ...]) -> BesideRules | None:
    by_name: dict[tuple[Path, str], set[str]] = {}
    for f in files:
        by_name.setdefault((f.parent, f.stem), set()).add(f.suffix.lower())
    suffixes = sorted(set().union(*by_name.values()))
    both = {name for name, kinds in by_name.items() if len(kinds) == 2}
    if len(suffixes) != 2 or len(files) != len(by_name) + len(both) or 2 * len(both) < len(by_name):
        return None  # not every file counted by name and kind: two files of one kind and name
    paired = sorted(f for f in files if (f.parent, f.stem) in both)
    masks = masks_among(*([f for f in paired if f.suffix.lower() == s] for s in suffixes))
    if masks is not None:
        return BesideRules("{id}" + suffixes[1 - masks], "{id}" + suffixes[masks], [])
    folder = files[0].parent
    log.warning(
        "%s holds files of one name in two kinds (%s and %s), and what they hold does not "
        "say which are the masks: 'data.image_dir=.' 'data.label_dir=.' "
        "'data.image_name={id}%s' 'data.label_name={id}%s' reads the %s files as masks",
        folder, *suffixes, *suffixes, suffixes[1],
    )  # fmt: skip
    return None


def masks_among(first: list[Path], second: list[Path]) -> int | None:
    """Which of two lists of files holds the masks, by what their first files hold: 0 or
    1 where that one's hold a mask's few values (``MASK_VALUES`` at most) and the other's
    more than twice as many each (pictures); None where they do not say so, or a file
    cannot be read."""
    held = [[distinct_values(f) for f in files[:SAMPLED]] for files in (first, second)]
    if any(not values or None in values for values in held):
        return None
    for masks, pictures in ((0, 1), (1, 0)):
        if max(held[masks]) <= MASK_VALUES and min(held[pictures]) > 2 * max(held[masks]):
            return masks
    return None
