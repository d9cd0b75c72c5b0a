"""The loss's class weights, one definition for every format: ``data.class_weights`` is a
rule (``median_frequency``, its square root, ``none``) or one number per class, and
``data.class_weights_power`` raises the rule's weights to a power.

Median-frequency balancing is SegNet's (Badrinarayanan et al., after Eigen & Fergus):
``weight(c) = median(freq) / freq(c)``, where ``freq(c)`` is the number of pixels of c
over the number of pixels of the images in which c appears, all of each image's pixels
counted (void and ignored ones too, as the paper counts an image's size). A class that no
training image holds gets weight 0 (nothing to weigh)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

RULES = ("median_frequency", "median_frequency_sqrt", "none")


def check_class_weights(option, num_classes: int | None, power: float = 1.0) -> None:
    """``data.class_weights`` and ``data.class_weights_power``, checked before any data
    is read (``num_classes`` None: the classes are found in the data later, and a list's
    length is checked then)."""
    if isinstance(option, str) and option not in RULES:
        raise ValueError(
            f"data.class_weights={option!r}: use {', '.join(map(repr, RULES))} or a list "
            f"of one number per class{f' ({num_classes})' if num_classes else ''}."
        )
    if option is not None and not isinstance(option, str):
        check_weight_list(list(option), num_classes)
    if isinstance(power, bool) or not isinstance(power, int | float) or not 0 < power <= 4:
        raise ValueError(f"data.class_weights_power={power}: use a number in (0, 4].")
    if power != 1.0 and option != "median_frequency":
        raise ValueError(
            f"data.class_weights_power={power} applies to class_weights='median_frequency' "
            f"only, and class_weights is {option!r}: add data.class_weights_power=1 to use "
            f"these weights, or set data.class_weights=median_frequency."
        )


def check_weight_list(weights: list, num_classes: int | None) -> None:
    if num_classes is not None and len(weights) != num_classes:
        raise ValueError(
            f"data.class_weights has {len(weights)} entries; the data has {num_classes} "
            "classes: give one number per class."
        )
    numbers = all(isinstance(w, int | float) and not isinstance(w, bool) for w in weights)
    if not numbers or not all(math.isfinite(w) and w >= 0 for w in weights) or not any(weights):
        raise ValueError(
            f"data.class_weights={weights}: give one number per class, each 0 or above "
            "(0 leaves a class out of the loss) and not all 0."
        )


def median_frequency(counts: np.ndarray, image_pixels: Sequence[int] | np.ndarray) -> np.ndarray:
    """Median-frequency weights from per-image class pixel counts (images x classes) and
    each image's size in pixels (void included)."""
    counts = np.asarray(counts, dtype=np.float64)
    pixels = np.asarray(image_pixels, dtype=np.float64).reshape(-1, 1)
    seen = ((counts > 0) * pixels).sum(0)
    freq = np.where(seen > 0, counts.sum(0) / np.maximum(seen, 1), np.nan)
    if np.isnan(freq).all():
        return np.zeros(counts.shape[1])
    return np.nan_to_num(np.nanmedian(freq) / freq, nan=0.0)


def from_option(option, power: float, median_frequency_weights) -> list[float] | None:
    """The weights ``data.class_weights`` asks for; ``median_frequency_weights()`` is
    called only where a rule needs it (it reads every training label)."""
    if option in (None, "none"):
        return None
    if not isinstance(option, str):
        return [float(w) for w in option]
    # a power below 1 narrows the spread (in log terms): rare classes still count more,
    # without the paper's ratios that cost a short schedule its large classes
    power = 0.5 if option == "median_frequency_sqrt" else power
    return [float(w) ** power for w in median_frequency_weights()]
