"""One mask per class: a black-and-white mask for each class (a folder of masks per class,
or a CSV column ``label_<class>`` per class), classes that may overlap on a pixel ("vessel"
and "artery"; a whole organ and its parts).

A pixel's classes are read as bits (class k adds ``2**k``: with ``[vessel, artery]``, 0 is
neither, 1 vessel only, 2 artery only, 3 both). The combinations the masks hold become the
classes of one label map (background first, then in the order of their bits: nested masks
never give "artery only", so it is no class, never predicted and never scored), and each
mask class a region of it, so that such a folder trains, is scored, post-processed, saved
and exported as any region run is (``segnet.data.regions``): one sigmoid per class.

In a class's mask, black (0) is outside the class and any one other value (white, 1, a
colour) inside; ``data.ignore_values`` are void in every class. A mask with more values
than that is refused, naming the file: it is a label map, not one class's mask.

Example:
    >>> combination_names([0, 1, 3], ["vessel", "artery"])
    ['background', 'vessel', 'vessel+artery']
    >>> combination_regions([0, 1, 3], ["vessel", "artery"])
    {'vessel': [1, 2], 'artery': [2]}
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from segnet.data.errors import DataError
from segnet.data.mask_codes import code_text

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


def combination_names(codes: Sequence[int], names: Sequence[str]) -> list[str]:
    """The name of each combination (bits of ``names``): its classes joined by '+'."""
    return ["+".join(n for k, n in enumerate(names) if c >> k & 1) or "background" for c in codes]


def combination_regions(codes: Sequence[int], names: Sequence[str]) -> dict[str, list[int]]:
    """Each class as a region: the indices of the combinations holding its bit."""
    return {n: [i for i, c in enumerate(codes) if c >> k & 1] for k, n in enumerate(names)}


def combination_codes(class_names: Sequence[str], names: Sequence[str]) -> list[int] | None:
    """The bits (in the order of ``names``) of each of a label map's classes where they are
    combinations of ``names`` as :func:`combination_names` wrote them (a checkpoint's
    classes), background first; None where they are not."""
    if not class_names or class_names[0] != "background":
        return None
    codes = [0]
    for combo in class_names[1:]:
        parts = combo.split("+")
        if not set(parts) <= set(names) or len(set(parts)) < len(parts):
            return None
        codes.append(sum(1 << list(names).index(p) for p in parts))
    return codes if len(set(codes)) == len(codes) else None


def is_combination_run(class_names: Sequence[str], regions: dict[str, list[int]] | None) -> bool:
    """Whether a trained network's classes and regions are those of masks given one per
    class: its classes the combinations of its regions."""
    codes = combination_codes(class_names, list(regions or {}))
    return codes is not None and combination_regions(codes, list(regions)) == regions


def combine(
    masks: Sequence[np.ndarray],
    paths: Sequence[Path],
    names: Sequence[str],
    ignore: Sequence[int],
) -> np.ndarray:
    """Each class's mask codes (as :func:`segnet.data.images.read_mask` reads them) ->
    one label map (int64) of bits, ``2**len(masks)`` (void) where any mask holds an
    ignored value."""
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
                f"{', '.join(code_text(int(v)) for v in values[:6])}. A class's mask is black "
                "(0) outside the class and one value inside: save it in two values, or make "
                "the others void (data.ignore_values=[...])."
            )
        label |= inside.astype(np.int64) << k
        void |= ignored
    label[void] = 2 ** len(masks)
    return label
