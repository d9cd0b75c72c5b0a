"""Train/val/test splits drawn from a list of cases by fraction and seed, or into folds
for cross-validation: shared by every DataModule whose data comes without given splits."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)
# the splits a dataset has, and what data.split (testing, evaluate.py) may name
SPLITS = ("train", "val", "test")
SPLIT_CHOICES = (*SPLITS, "all")


class DrawnSplits:
    """For a DataModule whose splits are drawn from its list of cases (``self.splits``:
    split -> indices into it; ``case_names()``: their names): which splits exist, and the
    cases of each by name, which checkpoints record."""

    splits: dict[str, list[int]]
    split_args: dict  # val_fraction, test_fraction, seed, fold, num_folds, groups

    def case_names(self) -> list[str]:
        raise NotImplementedError

    def has_split(self, split: str) -> bool:
        return bool(self.splits.get(split))

    def split_names(self) -> dict[str, list[str]] | None:
        if not self.splits:
            return None
        names = self.case_names()
        return {
            split: [names[i] for i in indices]
            for split, indices in self.splits.items()
            if split != "all"
        }


def split_settings(
    val_fraction: float,
    test_fraction: float,
    seed: int,
    fold: int | None,
    num_folds: int,
    groups: bool | str = True,
) -> dict:
    """``data.val_fraction``, ``data.test_fraction``, ``data.seed``, ``data.fold``,
    ``data.num_folds`` and ``data.groups`` checked (before any case is read) and
    kept together, as :func:`given_or_drawn` takes them."""
    if not isinstance(groups, bool):
        group_pattern(groups)
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise ValueError(f"data.{name}={value}: a share of the cases, from 0 to below 1.")
    if val_fraction + test_fraction >= 1:
        raise ValueError(
            f"data.val_fraction={val_fraction} and data.test_fraction={test_fraction} leave "
            "no case to train on: keep their sum below 1."
        )
    for name, value, minimum in (("num_folds", num_folds, 2), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"data.{name}={value!r}: expected a whole number >= {minimum}.")
    if fold is not None and (isinstance(fold, bool) or not isinstance(fold, int)):
        raise ValueError(f"data.fold={fold!r}: a fold number, 0 to {num_folds - 1}, or null.")
    return dict(
        val_fraction=val_fraction,
        test_fraction=test_fraction,
        seed=seed,
        fold=fold,
        num_folds=num_folds,
        groups=groups,
    )


def group_pattern(setting: object) -> re.Pattern:
    """``data.groups='{group}_slice*'`` as a regular expression over a case's name (its
    extension aside): ``{group}`` the longest part that fits, ``*`` anything."""
    if not isinstance(setting, str) or setting.count("{group}") != 1:
        raise ValueError(
            f"data.groups={setting!r}: true (each case's subfolder, or a CSV's group "
            "column), false (cases drawn one by one), or the part of a name that names its "
            "group: a pattern with one {group} and * for any text, e.g. "
            "'{group}_slice*' (patient007_slice12.png is in group patient007)."
        )
    head, tail = (re.escape(part).replace(r"\*", ".*") for part in setting.split("{group}"))
    return re.compile(f"^{head}(?P<group>.+){tail}(?:\\.[^.]*)*$")


def groups_by_name(names: Sequence[str], setting: str) -> list[str]:
    """Each case's group read from its name (the last part of its path) by the
    ``data.groups`` pattern; a name it does not fit is refused, named."""
    pattern = group_pattern(setting)
    groups = []
    for name in names:
        match = pattern.match(name.rsplit("/", 1)[-1])
        if match is None:
            raise ValueError(
                f"data.groups={setting!r} does not fit the name {name!r}: give a pattern "
                "every case's name fits, true (subfolders) or false."
            )
        groups.append(match["group"])
    return groups


# a name's last part, its extension aside; the separators of its parts
EXTENSION = re.compile(r"(\.[A-Za-z][A-Za-z0-9]{0,4})+$")
SEPARATOR = re.compile(r"[_\-. ]+")
# a group named by a year or a date is a time, not one patient's or one object's
DATE = re.compile(r"^(19|20)\d\d([_\-.]?\d\d){0,2}$")


def numbered_part(name: str) -> tuple[str, str, str, str] | None:
    """A name numbered within a group: the first part (up to a separator) that holds a
    number, the separator, the word before the rest's first number, and the number the
    name ends in; None where it is not so.

    Example:
        >>> numbered_part("train/patient007_frame01_slice12.png")
        ('patient007', '_', 'frame', '12')
    """
    stem = EXTENSION.sub("", re.split(r"[\\/]", name)[-1])
    last = re.search(r"\d+$", stem)
    if last is None:
        return None
    for sep in SEPARATOR.finditer(stem):
        group, rest = stem[: sep.start()], stem[sep.end() :]
        if any(c.isdigit() for c in group) and re.match(r"[A-Za-z]*\d", rest):
            word = re.match(r"[A-Za-z]*", rest)[0]
            return group, sep[0], word, last[0]
    return None


def numbered_groups(names: Sequence[str]) -> tuple[str, int] | None:
    """Where every name is numbered within a group (:func:`numbered_part`) alike (one
    separator, one word), the groups hold two or more names on average, and the numbers
    start again in each (slices 0.., a car's views 01..16; not a year's running count):
    the ``data.groups`` pattern that reads those groups, and how many there are; else None.

    Example:
        >>> numbered_groups([f"patient{p:03d}_slice{s}" for p in range(3) for s in range(4)])
        ('{group}_slice*', 3)
        >>> numbered_groups(["Abyssinian_1", "Abyssinian_2", "Bengal_1", "Bengal_2"]) is None
        True
    """
    parts = [numbered_part(name) for name in names]
    if any(p is None for p in parts) or len({(p[1], p[2]) for p in parts}) != 1:
        return None
    groups = {p[0] for p in parts}
    numbers = [p[3] for p in parts]
    if not 2 <= len(groups) <= len(names) / 2 or len(set(numbers)) == len(numbers):
        return None
    if any(DATE.match(g) for g in groups):
        return None
    pattern = "{group}" + parts[0][1] + parts[0][2] + "*"
    try:  # the pattern must read the same groups, or it is no advice
        read = groups_by_name(names, pattern)
    except ValueError:
        return None
    return (pattern, len(groups)) if set(read) == groups else None


def say_numbered_groups(names: Sequence[str], where: str) -> None:
    """Warn where cases drawn one by one look like several per group (:func:`numbered_groups`):
    near copies would be trained on and scored alike."""
    found = numbered_groups(names) if len(names) >= 4 else None
    if found is None:
        return
    pattern, count = found
    log.warning(
        "the names of %s look numbered within groups (%s, %s, ...: %d groups of %.1f on "
        "average), and the splits are drawn case by case: one group's cases (one patient's "
        "slices, one object's views) fall in training and in test alike, and the scores "
        "flatter the model. data.groups='%s' keeps each group whole in one split; "
        "data.groups=false draws case by case without this warning.",
        where, names[0], names[1], count, len(names) / count, pattern,
    )  # fmt: skip


def given_or_drawn(
    names: Sequence[str],
    given: Sequence[str | None],
    where: str,
    case_groups: Sequence[str | None] | None = None,
    groups_of_folders: bool = False,
    **split_args,
) -> dict[str, list[int]]:
    """The splits of cases whose list may give each its split (a ``split`` column, split
    folders): all given are kept, none given are drawn (:func:`split_cases`), and a list
    that gives train and test but no val has val drawn from train by fraction and seed
    (or the fold); a list that gives train alone (Carvana's ``train/`` beside
    ``train_masks/``, its ``test/`` unmasked) holds nothing apart, so val and test are
    drawn as where none is given, said. Some given and others not is refused, naming
    ``where``. Where
    ``case_groups`` names each case's group (a patient, a subfolder), a drawn split takes whole
    groups (:func:`split_groups`); ``data.groups`` (in ``split_args``) false draws case
    by case, and a pattern reads each case's group from its name instead. Groups read
    from folders (``groups_of_folders``, not a CSV's column nor a pattern) too few for a
    split's fraction are drawn case by case (:func:`split_groups`)."""
    setting = split_args.pop("groups", True)
    groups = None if setting is False else case_groups
    if isinstance(setting, str):
        groups = groups_by_name(names, setting)
        where += f", data.groups={setting!r}"
    few_case_by_case = groups_of_folders and setting is True
    drawn = not any(given) or set(given) == {"train"} or "val" not in given
    if setting is True and not any(groups or ()) and drawn:
        say_numbered_groups(names, where)  # a split is drawn, and nothing keeps groups whole
    if not any(given):
        return split_groups(names, groups, where, few_case_by_case, **split_args)
    if set(given) == {"train"}:
        log.info(
            "%s: every case is in the train split and none in val or test: both are drawn "
            "from it, as for data without splits (data.test_fraction=0 keeps the test cases "
            "for training, and the run tests on val)", where,
        )  # fmt: skip
        return split_groups(names, groups, where, few_case_by_case, **split_args)
    if not all(given):
        raise ValueError(
            f"{where}: some cases name a split and others do not; give every case a split "
            f"({', '.join(SPLITS)}), or none (drawn by data.val_fraction, "
            "data.test_fraction and data.seed)."
        )
    splits = {s: [i for i, g in enumerate(given) if g == s] for s in SPLITS}
    if not splits["val"] and splits["train"]:
        train = splits["train"]
        drawn = split_groups(
            [names[i] for i in train],
            [groups[i] for i in train] if groups else None,
            f"the train split of {where}",
            few_case_by_case,
            **{**split_args, "test_fraction": 0.0},
        )
        splits["val"] = [train[i] for i in drawn["val"]]
        splits["train"] = [train[i] for i in drawn["train"]]
    splits["all"] = list(range(len(names)))
    return splits


def split_groups(
    names: Sequence[str],
    groups: Sequence[str | None] | None,
    where: str = "",
    few_case_by_case: bool = False,
    **split_args,
) -> dict[str, list[int]]:
    """:func:`split_cases` over groups rather than cases where ``groups`` gives two or more:
    the images of one patient (or one subfolder) land in one split, so no score is made on
    a neighbour of what was trained on. The fractions and folds count groups, drawn in the
    order of their names; said in the log, with a warning where a split a fraction asks
    for gets no group (too few of them). With ``few_case_by_case``, groups too few for a
    split's fraction (:func:`too_few_groups`) are drawn case by case instead (a folder per class or per domain: BUSI's ``benign/``,
    ``malignant/``, ``normal/``, whose whole val would be one class), warned."""
    keys = group_keys(names, groups)
    if keys is None:
        if groups and len(set(groups)) == 1 and None not in groups:
            log.info(
                "the cases of %s are all in one group (%s): drawn case by case",
                where, groups[0],
            )  # fmt: skip
        return split_cases(names, **split_args)
    unique = sorted(set(keys))
    drawn = split_cases(unique, **split_args, unit="group")
    if few_case_by_case and (too_few := too_few_groups(drawn, len(unique), split_args)):
        log.warning(
            "%s has %d folders of images (%s): too few to draw %s by whole folders, so the "
            "splits are drawn image by image and the images of one folder are in several "
            "splits. Where a folder's images are near copies (one patient's), give the "
            "splits as folders (train/, val/, test/) or in a CSV's split column; "
            "data.groups=false draws image by image unsaid.",
            where, len(unique), ", ".join(k for k in unique[:5] if not k.startswith("\0")),
            too_few,
        )  # fmt: skip
        return split_cases(names, **split_args)
    counts = {split: len(drawn[split]) for split in SPLITS}
    log.info(
        "splits of %s drawn by group (an image's first subfolder, a CSV's group column, or "
        "data.groups' pattern), each whole in one split: %s of %d groups "
        "(data.groups=false draws case by case)",
        where, ", ".join(f"{n} {s}" for s, n in counts.items()), len(unique),
    )  # fmt: skip
    if split_args.get("test_fraction") and not counts["test"]:
        log.warning(
            "data.test_fraction=%s of %d groups is no group: %s has no test split (the "
            "run tests on val, which chose its checkpoint); add groups, raise "
            "data.test_fraction, or set data.groups=false",
            split_args["test_fraction"], len(unique), where,
        )  # fmt: skip
    split_of = {unique[i]: split for split in SPLITS for i in drawn[split]}
    splits = {split: [i for i, k in enumerate(keys) if split_of[k] == split] for split in SPLITS}
    return {**splits, "all": list(range(len(names)))}


def too_few_groups(drawn: dict[str, list[int]], groups: int, split_args: dict) -> str | None:
    """The split a fraction asks for that whole groups cannot give: one that gets no group,
    or over twice its fraction of them (val one of three folders at 0.15); None where
    every split asked for gets its share."""
    for split in ("test", "val"):
        fraction = split_args.get(f"{split}_fraction") or 0
        asked = split_args.get("fold") is None and fraction > 0
        if asked and (not drawn[split] or len(drawn[split]) > 2 * fraction * groups):
            return split
    return None


def group_keys(names: Sequence[str], groups: Sequence[str | None] | None) -> list[str] | None:
    """Each case's group, a case without one a group of its own; None where that makes
    no group of two or more cases, or puts every case in one (nothing to keep apart)."""
    if not groups:
        return None
    keys = [g if g is not None else f"\0{name}" for g, name in zip(groups, names, strict=True)]
    if len(set(keys)) in (1, len(keys)):
        return None
    return keys


def split_cases(
    names: Sequence[str],
    val_fraction: float,
    test_fraction: float,
    seed: int,
    fold: int | None = None,
    num_folds: int = 5,
    unit: str = "case",
) -> dict[str, list[int]]:
    """Indices of train/val/test. The test part is drawn first from a seeded permutation;
    the rest is split by ``val_fraction``, or into ``num_folds`` folds with ``fold`` as val."""
    order = np.random.default_rng(seed).permutation(len(names))
    n_test = int(round(test_fraction * len(names)))
    test, rest = order[:n_test], order[n_test:]
    if fold is not None:
        if not 0 <= fold < num_folds:
            raise ValueError(
                f"data.fold={fold} must be in 0..{num_folds - 1} (data.num_folds={num_folds})."
            )
        if len(rest) < num_folds:
            raise ValueError(
                f"data.num_folds={num_folds}: only {len(rest)} {unit}(s) are left after the "
                f"test split to share out, so some folds would be empty; use at most {len(rest)} "
                "folds (data.val_fraction does not apply with data.fold)"
                + (", or data.groups=false to share out cases." if unit == "group" else ".")
            )
        folds = np.array_split(rest, num_folds)
        val = folds[fold]
        train = np.concatenate([f for i, f in enumerate(folds) if i != fold])
    else:
        n_val = max(1, int(round(val_fraction * len(names)))) if val_fraction > 0 else 0
        val, train = rest[:n_val], rest[n_val:]
    return {
        "train": sorted(train.tolist()),
        "val": sorted(val.tolist()),
        "test": sorted(test.tolist()),
        "all": list(range(len(names))),
    }
