"""The order run lengths number an image's pixels in, told from the masks themselves:
Kaggle numbers pixels top to bottom, then left to right (``columns``), and some datasets'
own code row by row (``rows``); the CSV says neither (:mod:`segnet.data.run_length`).

Read in the wrong order, an object that does not span its image is torn into stripes
(many pieces where there was one); an object that does, or any object on a square image,
keeps its pieces but moves (a band along the other side, a transpose), and its edges then
no longer follow the image's. Each image holding an object votes by the first of the two
that tells (:func:`order_vote`), and the images' votes decide (:func:`tell_order`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

ORDER_WORDS = {
    "columns": "column by column (top to bottom, then left to right, as Kaggle numbers pixels)",
    "rows": "row by row (left to right, then top to bottom)",
}
TORN = 2  # pieces in one order over the other that tell a torn object,
TORN_MORE = 3  # and at least so many more
EDGE_FIT = 1.1  # edge contrast in one order over the other that an image votes by,
EDGE_SURE = 4.0  # and in standard errors of the difference
MIN_VOTES = 3  # images that tell, at least (or every image where fewer hold objects),
AGREEING = 0.75  # and the share of them that agree
VOTES = 32  # images that tell enough (faint edges: more are looked at, up to 128)


def decode(runs: np.ndarray, height: int, width: int, order: str) -> np.ndarray:
    """The pixels ``runs`` (``(start, length)`` pairs from 0, ascending) cover, numbered
    column by column (``columns``) or row by row (``rows``): a byte per pixel."""
    flat = np.zeros(height * width, bool)
    for start, length in runs.tolist():
        flat[start : start + length] = True
    return flat.reshape(width, height).T if order == "columns" else flat.reshape(height, width)


def edges(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where ``mask`` changes between horizontal and between vertical neighbours."""
    return mask[:, 1:] != mask[:, :-1], mask[1:] != mask[:-1]


def edge_steps(grey: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """How much the image changes across each of ``mask``'s edges (between the two
    neighbours the edge parts)."""
    across, down = edges(mask)
    return np.concatenate(
        [np.abs(np.diff(grey, axis=1))[across], np.abs(np.diff(grey, axis=0))[down]]
    )


def follows_edges(grey: np.ndarray, one: np.ndarray, other: np.ndarray) -> int:
    """1 where mask ``one`` follows the image's edges better than ``other`` does, -1
    where ``other`` does, 0 where neither clearly does: the image changes more across
    its edges by :data:`EDGE_FIT` times and by :data:`EDGE_SURE` standard errors (noise
    along a few edge pixels tells nothing)."""
    a, b = edge_steps(grey, one), edge_steps(grey, other)
    if len(a) < 2 or len(b) < 2:
        return 0
    error = np.sqrt(a.var() / len(a) + b.var() / len(b)) + 1e-12
    if abs(a.mean() - b.mean()) < EDGE_SURE * error:
        return 0
    high, low = max(a.mean(), b.mean()), min(a.mean(), b.mean())
    return 0 if high < EDGE_FIT * low else (1 if a.mean() > b.mean() else -1)


def torn(one: np.ndarray, other: np.ndarray) -> int:
    """1 where ``other`` is ``one`` torn into pieces (:data:`TORN` times as many, and
    :data:`TORN_MORE` more), -1 the other way round, 0 where neither is."""
    from scipy import ndimage

    a, b = (ndimage.label(m)[1] for m in (one, other))
    if b >= TORN * a and b >= a + TORN_MORE:
        return 1
    return -1 if a >= TORN * b and a >= b + TORN_MORE else 0


def grey_image(path: Path) -> np.ndarray:
    """The image at ``path`` as one float channel, turned as its EXIF orientation shows it."""
    from PIL import Image, ImageOps

    from segnet.data import bands  # arrays, DICOM, MetaImage: read as training reads them

    if bands.is_array_file(path):
        return bands.read(path).mean(axis=-1)
    with Image.open(path) as im:
        pixels = np.asarray(ImageOps.exif_transpose(im)).astype(np.float32)
    return pixels.mean(axis=-1) if pixels.ndim == 3 else pixels


def order_vote(image: Path, runs: np.ndarray, height: int, width: int) -> str | None:
    """The order one image's runs fit: the one that tears no object (images not square),
    else the one whose edges follow the image's; None where neither tells."""
    by_columns, by_rows = (decode(runs, height, width, o) for o in ("columns", "rows"))
    if (by_columns == by_rows).all():
        return None  # either order draws the same
    vote = torn(by_columns, by_rows) if height != width else 0
    if not vote:
        try:
            grey = grey_image(image)
        except (OSError, ValueError, SyntaxError):
            return None
        vote = follows_edges(grey, by_columns, by_rows) if grey.shape == (height, width) else 0
    return {1: "columns", -1: "rows", 0: None}[vote]


def tell_order(
    sample: Iterable[tuple[Path, np.ndarray, int, int]], looked_at: int = 128
) -> tuple[str | None, dict[str, int]]:
    """The pixel order the runs of ``sample`` (image, runs, height, width; read lazily)
    were written in, by their votes (:func:`order_vote`), until :data:`VOTES` images
    tell or ``looked_at`` are looked at: one order where :data:`MIN_VOTES` tell (or
    all of them, fewer) and :data:`AGREEING` of those vote for it; else None. The votes
    are counted under ``columns``, ``rows`` and ``none``."""
    votes = {"columns": 0, "rows": 0, "none": 0}
    for image, runs, height, width in sample:
        votes[order_vote(image, runs, height, width) or "none"] += 1
        if votes["columns"] + votes["rows"] >= VOTES or sum(votes.values()) >= looked_at:
            break
    told, looked = votes["columns"] + votes["rows"], sum(votes.values())
    winner = max(("columns", "rows"), key=votes.get)
    enough = told and told >= min(MIN_VOTES, looked) and votes[winner] >= AGREEING * told
    return (winner if enough else None), votes
