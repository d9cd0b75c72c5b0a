"""The checks of data settings that several formats take, each refusing a value before
any data is read and naming the setting: whole numbers, lists, the axes random flips
mirror, the sliding window of whole-input evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SW_MODES = ("gaussian", "constant")  # how overlapping windows are blended


def check_count(setting: str, value, minimum: int = 1, allow_none: bool = False) -> int | None:
    """A whole-number setting (batch size, workers), checked before any data is read."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"data.{setting}={value!r}: expected a whole number >= {minimum}"
            + (" (or null)" if allow_none else "")
            + "."
        )
    return value


def as_list(setting: str, value: Any, example: str) -> list | None:
    """A list setting (a size, a mean per channel, a range) as a list, or None for null: a
    single value (``data.image_size=48``) is refused here, naming the setting, rather than
    failing inside torch later."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValueError(f"{setting}={value!r}: give a list, e.g. {setting}={example}.")
    return list(value)


def check_flip(flip: bool | Sequence[int], axis_names: Sequence[str]) -> tuple[int, ...]:
    """``data.flip``, the axes random flips mirror (and test-time mirroring flips again):
    true all of them, false none, or a list of axes, each once (``axis_names``, one per
    axis, say which is which)."""
    every = tuple(range(len(axis_names)))
    if isinstance(flip, bool):
        return every if flip else ()
    named = ", ".join(f"{i} {name}" for i, name in enumerate(axis_names))
    hint = f"use true (every axis), false, or a list of axes ({named})"
    if isinstance(flip, str) or not isinstance(flip, Sequence):
        raise ValueError(f"data.flip={flip!r}: {hint}.")
    axes = list(flip)
    if any(isinstance(a, bool) or a not in every for a in axes) or len(set(axes)) < len(axes):
        raise ValueError(f"data.flip={axes}: {hint}, each once.")
    return tuple(sorted(int(a) for a in axes))


def check_window(
    roi_size: Sequence[int] | None,
    overlap: float,
    mode: str,
    sw_batch_size: int,
    dims: int,
    minimum: int,
    default: str,
) -> dict[str, Any]:
    """The sliding window of whole-input evaluation, as a DataInfo's ``sliding_window``
    (``roi_size`` None: the format's ``default``, which a refusal names), after refusing
    what MONAI would only reject, less clearly, at the first validation:
    ``data.sw_roi_size`` (``dims`` whole numbers of at least ``minimum``),
    ``data.sw_overlap``, ``data.sw_mode`` and ``data.sw_batch_size``."""
    if roi_size is not None and (
        isinstance(roi_size, str | bytes)
        or not isinstance(roi_size, Sequence)
        or len(roi_size) != dims
        or not all(isinstance(r, int) and not isinstance(r, bool) for r in roi_size)
        or min(roi_size) < minimum
    ):
        raise ValueError(
            f"data.sw_roi_size={roi_size} must be {dims} whole numbers of at least {minimum} "
            f"(pixels or voxels per axis), or null ({default})."
        )
    if isinstance(overlap, bool) or not isinstance(overlap, int | float) or not 0 <= overlap < 1:
        raise ValueError(f"data.sw_overlap={overlap} must be in 0..1 (1 excluded).")
    if mode not in SW_MODES:
        raise ValueError(f"data.sw_mode={mode!r}: choose one of {SW_MODES}.")
    check_count("sw_batch_size", sw_batch_size)
    return {
        "roi_size": list(roi_size) if roi_size is not None else None,
        "overlap": overlap,
        "mode": mode,
        "sw_batch_size": sw_batch_size,
    }
