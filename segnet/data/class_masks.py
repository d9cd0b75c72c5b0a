"""One mask per class: a black-and-white mask for each class (a folder of masks per class,
or a CSV column ``label_<class>`` per class), classes that may overlap on a pixel ("vessel"
and "artery"; a whole organ and its parts).

They become one label map whose value holds each pixel's classes as bits (class k adds
``2**k``: with ``[vessel, artery]``, 0 is neither, 1 vessel only, 2 artery only, 3 both) and
one region per class (the label values with its bit), so that such a folder trains, is
scored, post-processed, saved and exported as any region run is (``segnet.data.regions``):
one sigmoid per class, scores per class, and label maps written in the same bits.

In a class's mask, black (0) is outside the class and any one other value (white, 1, a
colour) inside; ``data.ignore_values`` are void in every class. A mask with more values
than that is refused, naming the file: it is a label map, not one class's mask.

Example:
    >>> combination_names(["vessel", "artery"])
    ['background', 'vessel', 'artery', 'vessel+artery']
    >>> combination_regions(["vessel", "artery"])
    {'vessel': [1, 3], 'artery': [2, 3]}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from segnet.data.errors import DataError

# 2**7 label values and the void beside them still fit the uint8 masks written
MAX_CLASSES = 7


class ClassMaskError(DataError):
    """Masks given one per class that cannot be combined as they are."""


def check_mask_classes(names: Sequence[str], where: str) -> list[str]:
    """The classes' names (folders or CSV columns) as the order of the outputs."""
    names = [str(n) for n in names]
    if not names:
        raise ClassMaskError(f"{where}: no class masks found.")
    if len(names) > MAX_CLASSES:
        raise ClassMaskError(
            f"{where}: {len(names)} classes of masks ({', '.join(names)}); one mask per class "
            f"takes at most {MAX_CLASSES}. For more, save one label map per image (a value "
            "per class) and give overlapping classes as data.regions."
        )
    clash = [n for n in names if n == "background" or "+" in n]
    if clash:
        raise ClassMaskError(
            f"{where}: a class of masks is named {clash[0]!r}; 'background' and names with "
            "'+' name the combinations of classes: rename it."
        )
    return names


def combination_names(names: Sequence[str]) -> list[str]:
    """The name of each label value: the classes whose bits it holds, joined by '+'."""
    return ["background"] + [
        "+".join(n for k, n in enumerate(names) if v >> k & 1) for v in range(1, 2 ** len(names))
    ]


def combination_regions(names: Sequence[str]) -> dict[str, list[int]]:
    """Each class as a region: the label values holding its bit."""
    return {n: [v for v in range(1, 2 ** len(names)) if v >> k & 1] for k, n in enumerate(names)}


def order_from_combinations(class_names: Sequence[str]) -> list[str] | None:
    """The classes of a label map's names that :func:`combination_names` made (as a
    checkpoint keeps them); None where they are not such names."""
    count = len(class_names).bit_length() - 1
    if count < 1 or len(class_names) != 2**count:
        return None
    names = [class_names[1 << k] for k in range(count)]
    return names if list(class_names) == combination_names(names) else None


def combine(
    masks: Sequence[np.ndarray],
    paths: Sequence[Path],
    names: Sequence[str],
    ignore: Sequence[int],
    spell: Callable[[int], str] = str,
) -> np.ndarray:
    """Each class's mask codes (as :func:`segnet.data.images.read_mask` reads them) ->
    one label map (int64) of bits, ``2**len(masks)`` (void) where any mask holds an
    ignored value; ``spell`` writes a code as the user knows it (a value or a colour)."""
    shape = masks[0].shape
    label = np.zeros(shape, np.int64)
    void = np.zeros(shape, bool)
    for k, (codes, path, name) in enumerate(zip(masks, paths, names, strict=True)):
        if codes.shape != shape:
            raise ClassMaskError(
                f"mask {path} (class {name}) is {codes.shape[1]}x{codes.shape[0]} and the mask "
                f"{paths[0]} of the same image {shape[1]}x{shape[0]} (W x H): one size per image."
            )
        ignored = np.isin(codes, ignore) if len(ignore) else np.zeros(shape, bool)
        inside = (codes != 0) & ~ignored
        values = np.unique(codes[inside])
        if len(values) > 1:
            raise ClassMaskError(
                f"mask {path} (class {name}) holds {len(values)} values besides black (0): "
                f"{', '.join(spell(int(v)) for v in values[:6])}. A class's mask is black "
                "(0) outside the class and one value inside: save it in two values, or make "
                "the others void (data.ignore_values=[...])."
            )
        label |= inside.astype(np.int64) << k
        void |= ignored
    label[void] = 2 ** len(masks)
    return label
