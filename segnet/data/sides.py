"""Classes that name a side (``left kidney`` and ``right kidney``, ``leftMask`` and
``rightMask``): a flip across the left-right axis shows the one where the other belongs,
so random flips and test-time mirroring keep to the other axes. One rule for images and
volumes; each format says which of its axes is left-right."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from segnet.data.folder_roles import name_words

log = logging.getLogger(__name__)


def sided_classes(names: Sequence[str]) -> list[str]:
    """The class names that name a side, left or right, where some name each
    (``leftMask``, ``rightMask``; ``left kidney``, ``right kidney``); empty otherwise."""
    sides = {n: name_words(n) & {"left", "right"} for n in names}
    named = set().union(set(), *sides.values())
    return [n for n, s in sides.items() if s] if named == {"left", "right"} else []


def axes_keeping_sides(
    flip_axes: Sequence[int],
    flip_given_as_axes: bool,
    class_names: Sequence[str],
    left_right: int,
    axis_names: Sequence[str],
) -> tuple[int, ...]:
    """``flip_axes`` without the ``left_right`` axis where the classes name both sides,
    said; as they are where they do not, or where ``data.flip`` named its axes (a user's
    explicit choice stands)."""
    sided = sided_classes(list(dict.fromkeys(class_names)))
    if not sided or left_right not in flip_axes:
        return tuple(flip_axes)
    kept = tuple(a for a in flip_axes if a != left_right)
    if flip_given_as_axes:  # a recipe's axes (hippocampus_unet3d's [0]) or the user's
        log.warning(
            "the classes %s name a side, and data.flip=%s flips left-right, which shows the "
            "one as the other (in training and test-time mirroring): 'data.flip=%s' keeps "
            "them apart", ", ".join(sided), list(flip_axes),
            list(kept) if kept else "false' 'model.tta=false",
        )  # fmt: skip
        return tuple(flip_axes)
    log.info(
        "the classes %s name a side, which a left-right flip would swap: random flips (and "
        "test-time mirroring) are %s; 'data.flip=%s' flips every axis",
        ", ".join(sided),
        " and ".join(axis_names[a] for a in kept) + " only" if kept else "off",
        list(range(len(axis_names))),
    )
    return kept


def check_rotation(degrees: float, class_names: Sequence[str]) -> None:
    """Random rotations past a right angle carry a side's class across the middle, onto
    the other side of the image (a rotation never mirrors, but a half turn shows the
    left kidney where the right one lies): said where the classes name sides."""
    sided = sided_classes(list(dict.fromkeys(class_names)))
    if sided and degrees > 90:
        log.warning(
            "the classes %s name a side, and data.rotate=%g turns a case past a right "
            "angle, which carries each onto the other side of the image: data.rotate=30 "
            "(nnU-Net's) keeps the sides apart", ", ".join(sided), degrees,
        )  # fmt: skip
