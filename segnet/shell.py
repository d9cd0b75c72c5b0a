"""Command lines printed for the user to paste (resume a run, evaluate an ensemble),
quoted so that they mean the same once pasted: a path with a comma, a space or brackets
stays one value for Hydra, and an override such as ``+callbacks.ema={a:1,b:2}`` stays one
word for the shell (unquoted, bash would brace-expand it into two).

Example:
    >>> override("ckpt_path", "outputs/run/checkpoints/last.ckpt")
    'ckpt_path=outputs/run/checkpoints/last.ckpt'
    >>> print(override("ckpt_path", ["sweep,a/0/best.ckpt", "sweep,a/1/best.ckpt"]))
    'ckpt_path=["sweep,a/0/best.ckpt","sweep,a/1/best.ckpt"]'
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

# what Hydra reads as one plain value, unquoted, with no special meaning to the shell
_PLAIN = re.compile(r"[A-Za-z0-9_./+@:%-]+")


def hydra_value(value: str | Path) -> str:
    """``value`` as Hydra's override grammar reads it back unchanged: as it is when plain,
    else in double quotes (a comma would otherwise make a list or a sweep)."""
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    # Hydra unescapes backslashes only before a quote: double those, then escape the quote
    text = re.sub(r'(\\*)"', lambda m: m.group(1) * 2 + '\\"', text)
    text = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text)  # before the closing quote
    # a literal "${", not an OmegaConf interpolation once the value is in the config
    text = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", text)
    return f'"{text}"'


def override(key: str, value: str | Path | Sequence[str | Path]) -> str:
    """``key=value`` (a list for a sequence), ready for a shell command line."""
    if isinstance(value, str | Path):
        text = hydra_value(value)
    else:
        text = "[" + ",".join(hydra_value(v) for v in value) + "]"
    return shlex.quote(f"{key}={text}")


def command(*words: str) -> str:
    """Words (a program, its overrides as Hydra recorded them) joined into one shell
    command line, each quoted where the shell would split or expand it."""
    return " ".join(shlex.quote(w) for w in words)
