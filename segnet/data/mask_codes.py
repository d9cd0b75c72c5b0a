"""How a mask pixel is coded once read, whatever the file stores: a grey pixel is its grey
level (0-255, or 0-65535 for 16-bit values); a coloured pixel ``COLOUR + r*65536 + g*256 +
b``, so that no colour is taken for a grey level, and a grey ``[r, r, r]`` is the level
``r`` however the file stores it (1-bit, 8-bit, palette, RGB).

Kept apart from the readers (:mod:`segnet.data.images`) so that what combines or reports
codes (:mod:`segnet.data.class_masks`) can write them as the user knows them.
"""

from __future__ import annotations

COLOUR = 1 << 24


def is_colour(code: int) -> bool:
    return code >= COLOUR


def code_text(code: int) -> str:
    """A code as the user wrote it in the settings: a value, or a colour ``[r,g,b]``."""
    if is_colour(code):
        rgb = code - COLOUR
        return f"[{rgb >> 16},{(rgb >> 8) & 255},{rgb & 255}]"
    return str(code)
