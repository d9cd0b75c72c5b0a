"""How an image's file name and its mask's pair: the name rules (``data.image_name``,
``data.label_name``: patterns with one ``{id}``), the key each file pairs by, and the
rule a folder's names follow where none is given and one alone fits every file
(``scan_1.png`` beside ``scan_1_mask.png``; ``s0.png`` with ``s0_L.png``), said in the log;
where no rule fits, the message that shows one of each and the rule that pairs the most.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from segnet.data.errors import ImageDataError
from segnet.data.folder_roles import MASK_WORDS, name_words, role_of

DEFAULT_RULE = "{id}"
# what Pillow reads, NumPy arrays and 2D MetaImage and NRRD files (segnet.data.bands)
# Netpbm's kinds too: older datasets keep theirs so (STARE's .ppm, EM stacks' .pgm)
IMAGE_SUFFIXES = (
    ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp", ".ppm", ".pgm", ".pbm",
    ".pnm", ".npy", ".mha", ".nrrd", ".dcm", ".dicom",
)  # fmt: skip
log = logging.getLogger(__name__)


class BesideRules(NamedTuple):
    """The rules of images with their masks beside them in one folder: the image's, the
    mask's, and those of other sets of masks beside them that are not read."""

    image: str
    label: str
    others: list[str]


def name_pattern(pattern: str, setting: str) -> re.Pattern:
    """``{id}_manual1`` as a regular expression matching a file stem, ``id`` captured; one
    that ends in an image file's suffix (``{id}.png``) matches the whole name instead,
    the suffix in any case (:func:`name_match`)."""
    if pattern.count("{id}") != 1:
        raise ValueError(
            f"{setting}={pattern!r}: give a file-name pattern with one {{id}} (the part that "
            "image and mask share), e.g. '{id}_training' and '{id}_manual1'."
        )
    head, tail = pattern.split("{id}")
    suffix = suffix_of(tail)
    if suffix:
        tail = tail[: -len(suffix)]
        end = f"(?P<suffix>(?i:{re.escape(suffix)}))$"
    else:
        end = "$"
    return re.compile(f"^{re.escape(head)}(?P<id>.+?){re.escape(tail)}{end}")


def suffix_of(rule: str) -> str:
    """The image file suffix a name rule ends in (``{id}.png``: ``.png``), else ``""``."""
    return next((s for s in IMAGE_SUFFIXES if rule.lower().endswith(s)), "")


def without_suffix(rule: str) -> str:
    """The rule without the suffix it names: what files of other kinds (regions of
    interest beside ``{id}.jpg`` images) are named by."""
    suffix = suffix_of(rule)
    return rule[: -len(suffix)] if suffix and rule[: -len(suffix)].count("{id}") == 1 else rule


def file_named(rule: str, key: str) -> str:
    """What ``rule`` names the file of ``key`` (``21_manual1.*``; ``0001.png``)."""
    return rule.replace("{id}", key) + ("" if suffix_of(rule) else ".*")


def name_match(pattern: re.Pattern, path: Path) -> re.Match | None:
    """``pattern`` (:func:`name_pattern`) matched against the file's stem, or against its
    whole name where the rule names a suffix (``{id}.png``: ``0001.jpg`` and ``0001.png``
    beside each other are told apart by it)."""
    return pattern.match(path.name if "(?P<suffix>" in pattern.pattern else path.stem)


def key_of(path: Path, pattern: re.Pattern, folder: Path) -> str | None:
    """The key ``path`` pairs by: the ``{id}`` of its name after the subfolder of
    ``folder`` it sits in (``aachen/aachen_000000_000019``); None where the rule does not
    match its name."""
    match = name_match(pattern, path)
    return path.parent.relative_to(folder).joinpath(match["id"]).as_posix() if match else None


def keyed(files: list[Path], pattern: re.Pattern, folder: Path, setting: str) -> dict[str, Path]:
    """``files`` (in ``folder`` or below it) by their :func:`key_of`."""
    out: dict[str, Path] = {}
    for path in files:
        key = key_of(path, pattern, folder)
        if key is None:
            continue
        if key in out:
            raise ImageDataError(
                f"{out[key].relative_to(folder)} and {path.relative_to(folder)} in {folder} "
                f"both match {setting} with the same id {PurePosixPath(key).name!r}: keep "
                "one, or make the pattern tell them apart."
            )
        out[key] = path
    return out


def unpaired_message(
    images: Path, labels: Path, by_id: dict[str, Path], masks: dict[str, Path]
) -> str:
    """No image pairs with any mask: where the names match and the subfolders do not,
    say so; else show one of each, and the naming rule that would pair them where one
    does (``21_training`` and ``21_manual1``: the part before the first separator they
    share)."""
    image_key, mask_key = min(by_id), min(masks)
    image, mask = by_id[image_key].stem, masks[mask_key].stem
    if {PurePosixPath(k).name for k in by_id} & {PurePosixPath(k).name for k in masks}:
        return (
            f"no image in {images} pairs with a mask in {labels}: their names match but "
            f"not their subfolders (e.g. {by_id[image_key].relative_to(images)} and "
            f"{masks[mask_key].relative_to(labels)}). A mask goes in the subfolder of "
            f"{labels} that its image has in {images}."
        )
    hint = ""
    rules = affix_rules(image, by_id, masks, images, labels)
    heads = {r: pairs_made(r, by_id, masks, images, labels) for r in head_rules(image, mask)}
    if rules:
        hint = f" To pair them: 'data.label_name={rules[1]}'."
    elif heads and max(heads.values()):
        rules = max(heads, key=heads.__getitem__)  # the one that pairs the most
        hint = f" To pair them: 'data.image_name={rules[0]}' 'data.label_name={rules[1]}'."
    return (
        f"no image in {images} pairs with a mask in {labels} by name (e.g. {image} and "
        f"{mask}): data.image_name and data.label_name are the rule, patterns with one {{id}} "
        f"for the part image and mask share.{hint}"
    )


def head_rules(image: str, mask: str) -> list[tuple[str, str]]:
    """The rules where image and mask share the part of their names up to a separator
    and each has its own text after it (``21_training`` and ``21_manual1``:
    ``{id}_training`` and ``{id}_manual1``; Potsdam's ``top_potsdam_2_10_RGB`` and
    ``top_potsdam_2_10_label``: ``{id}_RGB`` and ``{id}_label``), one per separator they
    share, the longest shared part first; none where they share no such part."""
    rules = []
    for sep in reversed(list(re.finditer(r"[_\-. ]", image))):
        head = image[: sep.start()]
        if head and mask.startswith(head + sep[0]) and mask != image:
            own_image, own_mask = image[sep.end() :], mask[sep.end() :]
            rules.append((f"{{id}}{sep[0]}{own_image}", f"{{id}}{sep[0]}{own_mask}"))
    return rules


def affix_rules(
    image: str, by_id: dict, masks: dict, images: Path, labels: Path
) -> tuple[str, str] | None:
    """The name rules where a mask is named as its image with text added after or before
    (``car0_01`` and ``car0_01_mask``, ``mask_car0_01``): of those the masks named after
    ``image`` suggest, the one that pairs the most images (``1`` with ``10_mask`` suggests
    ``{id}0_mask``, which pairs one; ``1_mask`` suggests ``{id}_mask``, which pairs all)."""
    candidates = set()
    for stem in (m.stem for m in masks.values()):
        if stem != image and stem.startswith(image):
            candidates.add((DEFAULT_RULE, DEFAULT_RULE + stem[len(image) :]))
        elif stem != image and stem.endswith(image):
            candidates.add((DEFAULT_RULE, stem[: -len(image)] + DEFAULT_RULE))
    counted = {rules: pairs_made(rules, by_id, masks, images, labels) for rules in candidates}
    best = max(sorted(counted), key=lambda r: counted[r], default=None)
    return best if best is not None and counted[best] else None


def pairs_made(rules: tuple[str, str], by_id: dict, masks: dict, images: Path, labels: Path) -> int:
    """How many images ``rules`` (image, mask) pair with a mask (none where the rules
    give two files one id)."""
    try:
        found = [
            keyed(list(by_id.values()), name_pattern(rules[0], ""), images, ""),
            keyed(list(masks.values()), name_pattern(rules[1], ""), labels, ""),
        ]
    except ImageDataError:
        return 0
    return len(set(found[0]) & set(found[1]))


def affixed(stem: str, affix: str, after: bool) -> str:
    return stem + affix if after else affix + stem


def beside_rules(files: list[Path]) -> list[str]:
    """The mask rules of files that are images and their masks in one folder (or one per
    patient): the mask named as an image of its folder with text added after it
    (``scan_1`` and ``scan_1_mask``) or before it (``mask_scan_1``), text that holds a
    letter (``1`` beside ``10`` is two images). Each rule returned gives every image (a
    file that is no other file's name with such text added) one mask; two or more where
    each image has a mask by each (two observers: ``_1stHO`` and ``_2ndHO``), in order of
    preference (:func:`preferred_rule`). Empty where no rule pairs every file."""
    stems = {(f.parent, f.stem) for f in files}
    if len(stems) != len(files) or len(files) < 2:
        return []
    folder, shortest = min(stems, key=lambda s: (len(s[1]), s[1], str(s[0])))
    candidates = set()
    for parent, stem in stems:
        if parent == folder and stem != shortest and shortest in (stem[: len(shortest)],
                                                                  stem[-len(shortest) :]):  # fmt: skip
            after = stem.startswith(shortest)
            affix = stem[len(shortest) :] if after else stem[: -len(shortest)]
            if re.search("[A-Za-z]", affix):
                candidates.add((affix, after))
    masks_of = {
        c: {(p, s) for p, s in stems if (p, strip_affix(s, *c)) in stems} for c in candidates
    }

    def pairs_all(c: tuple, images: set) -> bool:
        return len(masks_of[c]) == len(images) and all(
            (p, affixed(s, *c)) in masks_of[c] for p, s in images
        )

    def further(c: tuple) -> set:  # BUSI's a_mask_1 beside a_mask: another mask of a
        rest = stems - masks_of[c]
        if len(rest) > 2 * len(masks_of[c]):  # more files than an image and a further
            return set()  # mask for each mask: not one set of masks (and quick)
        return {(p, s) for p, s in rest
                if any((p, s[:n]) in masks_of[c] for n in range(1, len(s)))}  # fmt: skip

    # one set of masks: the rest are images (img1_aug beside img1 is an image too), but
    # for further masks of some images (laid over their image's mask: image_pairs.beside())
    single = [
        affixed(DEFAULT_RULE, *c)
        for c in sorted(candidates)
        if pairs_all(c, stems - masks_of[c] - further(c))
    ]
    if single:
        return single if len(single) == 1 else []
    # several sets, each pairing every image: the images are what no set names
    fits = set(candidates)
    while True:
        images = stems - set().union(set(), *(masks_of[c] for c in fits))
        kept = {c for c in fits if pairs_all(c, images)}
        if kept == fits:
            break
        fits = kept
    if len(fits) < 2 or len(images) * (len(fits) + 1) != len(stems):
        return []  # some file is neither an image nor a mask by these rules
    return sorted((affixed(DEFAULT_RULE, *c) for c in fits), key=preferred_rule)


def preferred_rule(rule: str) -> tuple:
    """Which of several mask rules is read first: one whose text says mask (``_mask``,
    ``_gt``, ``_label``), then the first observer's (``_1stHO`` before ``_2ndHO``)."""
    says_mask = bool(name_words(rule.replace(DEFAULT_RULE, "")) & MASK_WORDS)
    return (not says_mask, rule)


def beside_rule(files: list[Path]) -> BesideRules | None:
    """The rules of images with their masks beside them: a mask named as its image with
    text added (:func:`beside_rules`), with the rules of other sets of masks beside them,
    not read; else both named with their own text (:func:`tail_rules`). None where no rule
    fits, or where several do and none is preferred by what it says (then nothing is
    guessed). Kept for the last few lists of files: split folders are judged by it, then
    read by it."""
    return _beside_rule(tuple(files))


@functools.lru_cache(maxsize=8)
def _beside_rule(files: tuple[Path, ...]) -> BesideRules | None:
    rules = beside_rules(list(files))
    if len(rules) > 1 and preferred_rule(rules[0])[0] == preferred_rule(rules[1])[0]:
        ordinal = [re.search(r"\d+", r) for r in rules[:2]]
        if not all(ordinal) or ordinal[0][0] == ordinal[1][0]:
            return None  # two sets alike (_mask and _gt): the user chooses
    if rules:
        return BesideRules(DEFAULT_RULE, rules[0], rules[1:])
    both = tail_rules(list(files))
    return BesideRules(*both, []) if both else None


def tail_rules(files: list[Path]) -> tuple[str, str] | None:
    """The rules (image, mask) of images and masks beside each other, each named with its
    own text after the part they share (DeepGlobe's ``119_sat.jpg`` beside
    ``119_mask.png``: ``{id}_sat`` and ``{id}_mask``): every name ends in one of two
    texts after its last separator, the one says mask and the other image
    (:mod:`segnet.data.folder_roles`), and each image has its mask. None otherwise."""
    kinds: dict[str, set] = {}
    for f in files:
        found = re.match(r"^(.+?)([_\-. ][^_\-. ]+)$", f.stem)
        if found is None:
            return None
        kinds.setdefault(found[2], set()).add((f.parent, found[1]))
    roles = {tail: role_of(tail[1:]) for tail in kinds}
    masks = [tail for tail, role in roles.items() if role == "labels"]
    if len(kinds) != 2 or len(masks) != 1:
        return None
    image = next(tail for tail in kinds if tail != masks[0])
    # the other text must say image (_sat, _img): _roi or _pred beside _gt is no image
    if roles[image] != "images" or kinds[image] != kinds[masks[0]]:
        return None
    return DEFAULT_RULE + image, DEFAULT_RULE + masks[0]


def strip_affix(stem: str, affix: str, after: bool) -> str | None:
    """``stem`` without ``affix`` at its end (``after``) or start; None where it has none."""
    if after and stem.endswith(affix) and len(stem) > len(affix):
        return stem[: -len(affix)]
    if not after and stem.startswith(affix) and len(stem) > len(affix):
        return stem[len(affix) :]
    return None


def inferred_rules(
    by_id: dict[str, Path], masks: dict[str, Path], images: Path, labels: Path
) -> tuple[str, str] | None:
    """Where no image pairs with a mask by the same name: the rules (image, mask) that
    pair every image with a mask and every mask with an image, the mask named as its image
    with text added (``{id}_L``) or both with their own text after the part they share
    (``{id}_training`` and ``{id}_manual1``); None where none does (the refusal then shows
    the rule that pairs the most)."""
    image, mask = by_id[min(by_id)].stem, masks[min(masks)].stem
    for rules in (affix_rules(image, by_id, masks, images, labels), *head_rules(image, mask)):
        if rules and pairs_made(rules, by_id, masks, images, labels) == len(by_id) == len(masks):
            return rules
    return None
