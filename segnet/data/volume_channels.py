"""A volume case's image in several files, one per channel (modality), each ending in a
word of its channel after the case's name:

* nnU-Net's numbered files, ``BRATS_001_0000.nii.gz``, ``BRATS_001_0001.nii.gz`` ... beside
  the label ``BRATS_001.nii.gz`` (the words ``0000``, ``0001``);
* files named by their modality in a folder per case (BraTS's
  ``BraTS2021_00000_flair.nii.gz``, ``_t1``, ``_t1ce``, ``_t2`` beside ``_seg``; the
  words ``flair``, ``t1``, ``t1ce``, ``t2``).

A model trained on such cases records its words (``channel_suffixes``), so that
prediction reads a case from the same files. Names only; no voxel is read here."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from segnet.data import volume_files
from segnet.data.errors import DataError

# what parts a channel's word from its case's name (BraTS 2023 writes -t1c, nnU-Net _0000)
SEPARATORS = "_-."
NUMBERED = re.compile(r"(?P<case>.+)_(?P<channel>\d{4})")


def name_of(path: Path) -> str:
    """A volume file's name without its kind (``case.nii.gz``: ``case``)."""
    suffix = volume_files.suffix_of(path)
    return path.name[: -len(suffix)] if suffix else path.stem


def kind_of(path: Path) -> str:
    """What follows a volume file's name (``case.nii.gz``: ``.nii.gz``)."""
    return path.name[len(name_of(path)) :]


def renamed(path: Path, name: str) -> Path:
    """``path`` with its name (kind kept) replaced by ``name``."""
    return path.with_name(name + kind_of(path))


def numbered(path: Path) -> tuple[str, int] | None:
    """(case, channel) of a file in nnU-Net's naming (``case_0001.nii.gz``: case, 1)."""
    found = NUMBERED.fullmatch(name_of(path))
    return (found["case"], int(found["channel"])) if found else None


def numbered_channels(first: Path) -> tuple[Path, ...]:
    """The files of ``first``'s case (``<case>_0000``) in nnU-Net's naming, ``first`` and
    ``<case>_0001`` on beside it as long as they go, each of ``first``'s kind."""
    case = numbered(first)[0]
    found = [first]
    while (path := renamed(first, f"{case}_{len(found):04d}")).is_file():
        found.append(path)
    return tuple(found)


def numbered_cases(
    images: Sequence[Path], has_label: Callable[[str], bool], where: Path
) -> dict[Path, tuple[str, tuple[Path, ...]]]:
    """The cases in nnU-Net's naming among ``images``: each case's channel 0000 file, with
    its case's name and every one of its files in channel order. A file is one case's
    channel where its own name has no label and its case's name has (``has_label``).
    Refused, naming the files, where a case's channels have a gap or cases have different
    numbers of channels."""
    channels: dict[str, dict[int, Path]] = {}
    for path in images:
        found = numbered(path)
        if found and not has_label(name_of(path)) and has_label(found[0]):
            channels.setdefault(found[0], {})[found[1]] = path
    cases, counts = {}, {}
    for case, files in sorted(channels.items()):
        if sorted(files) != list(range(len(files))):
            names = ", ".join(files[n].name for n in sorted(files))
            raise DataError(
                f"case {case} in {where} has the channel files {names}: nnU-Net numbers a "
                "case's channels 0000, 0001, ... without a gap; add the missing one or "
                "renumber them."
            )
        ordered = tuple(files[n] for n in range(len(files)))
        if len({kind_of(f) for f in ordered}) > 1:
            raise DataError(
                f"case {case} in {where} has the channel files "
                f"{', '.join(f.name for f in ordered)}: give a case's channels one kind of "
                "file (nnU-Net's file_ending)."
            )
        cases[ordered[0]] = (case, ordered)
        counts.setdefault(len(ordered), case)
    if len(counts) > 1:
        (few, case), (many, other) = sorted(counts.items())[:2]
        raise DataError(
            f"case {case} in {where} has {few} channel file(s) and case {other} {many}: "
            "give every case the same channels (one file each, numbered from _0000)."
        )
    return cases


def named_channels(files: Sequence[Path], case: str) -> dict[str, Path] | None:
    """A case's channel files by their words, each file named as its case, a separator and
    its channel's word (``BraTS2021_00000_flair``, ``_t1``, ``_t1ce`` in the folder
    ``BraTS2021_00000``: ``flair``, ``t1``, ``t1ce``), all of one kind; one file has no
    word (``{"": file}``). None where the files are not so named: a folder of ``imaging``
    beside ``tumor`` is not read as two channels."""
    if len(files) == 1:
        return {"": files[0]}
    words = {}
    for file in files:
        word = word_after(name_of(file), case)
        if word is None or kind_of(file) != kind_of(files[0]):
            return None
        words[word] = file
    return words


def word_after(name: str, case: str) -> str | None:
    """What follows ``case`` and a separator in ``name`` (``BraTS_001_t1ce``: ``t1ce``);
    None where ``name`` is not so named."""
    if len(name) > len(case) + 1 and name.startswith(case) and name[len(case)] in SEPARATORS:
        return name[len(case) + 1 :]
    return None


def listed_channels(files: Sequence[Path]) -> tuple[str, tuple[str, ...]]:
    """The case and each channel's word of a case listed as its channel files (a MONAI
    datalist's ``"image": [".../c1_t1.nii.gz", ".../c1_t2.nii.gz"]``): the case the text
    the names share up to a separator (``c1``), the words what follows it (``t1``,
    ``t2``); where the names share no such text and the files one folder, the folder's
    name and the files' (``c1/flair.nii.gz``, ``c1/t1.nii.gz``); else the first file's
    name and the files' places (``0000``, ``0001`` ...).

    >>> listed_channels([Path("a/c1_t1.nii.gz"), Path("a/c1_t2.nii.gz")])
    ('c1', ('t1', 't2'))
    >>> listed_channels([Path("c1/flair.nii"), Path("c1/t1.nii")])
    ('c1', ('flair', 't1'))
    >>> listed_channels([Path("a/x.nii"), Path("b/y.nii")])
    ('x', ('0000', '0001'))
    """
    names = [name_of(f) for f in files]
    shared = os.path.commonprefix(names)
    cut = max((i for i, c in enumerate(shared) if c in SEPARATORS), default=-1)
    words = tuple(word_after(n, shared[:cut]) or "" for n in names) if cut > 0 else ()
    if cut > 0 and all(words) and len(set(words)) == len(words):
        return shared[:cut], words
    folders = {f.parent for f in files}
    if len(folders) == 1 and files[0].parent.name and len(set(names)) == len(names):
        return files[0].parent.name, tuple(names)
    return names[0], tuple(f"{k:04d}" for k in range(len(files)))


def case_of(path: Path, words: Sequence[str]) -> tuple[str, str] | None:
    """(case, word) where ``path``'s name is a case's name, a separator and one of
    ``words`` (``BraTS2021_00000_t1ce``: ``BraTS2021_00000``, ``t1ce``), or the word alone
    (the case then named by its folder); None otherwise. The longest word that fits
    wins, so ``t1ce`` is never read as ``t1``."""
    name = name_of(path)
    for word in sorted(words, key=len, reverse=True):
        if name == word:
            return path.parent.name, word
        if len(name) > len(word) + 1 and name.endswith(word) and name[-len(word) - 1] in SEPARATORS:
            return name[: -len(word) - 1], word
    return None


def files_of_case(path: Path, words: Sequence[str]) -> tuple[Path, ...] | None:
    """Every channel file of the case ``path`` is the first channel's file of (its word
    the first of ``words``), in the order of ``words``; None where ``path`` is no such
    file. Refused, naming the missing file, where one is not beside it."""
    found = case_of(path, words)
    if found is None or found[1] != words[0]:
        return None
    name = name_of(path)
    start = name[: len(name) - len(words[0])]
    files = tuple(renamed(path, start + word) for word in words)
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise DataError(
            f"{path} is channel {words[0]!r} of case {found[0]}, and the model takes "
            f"{len(words)} channel files ({', '.join(words)}): {missing[0]} is missing. "
            "Give each case all its channels."
        )
    return files


def first_file(path: Path, words: Sequence[str]) -> Path | None:
    """For a further channel's file (its word not the first of ``words``), its case's
    first channel's file, which reads it; None otherwise."""
    found = case_of(path, words)
    if found is None or found[1] == words[0]:
        return None
    name = name_of(path)
    return renamed(path, name[: len(name) - len(found[1])] + words[0])
