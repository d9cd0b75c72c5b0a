"""Statistics of a training set (mean and std, mask value counts) kept between runs, so
that the next run on the same files, a resume or each job of a sweep does not decode the
whole set again for them. Keyed by the files' paths, sizes and modification times: a
changed, added or removed file is a new key, computed afresh.

Kept in ``$XDG_CACHE_HOME/segnet`` (``~/.cache/segnet``), never in the user's data
folder; written whole (``segnet.files``), so processes starting together read either no
entry or a complete one. An entry that cannot be read or written is computed again."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from stat import S_ISREG
from typing import Any

from segnet.files import write_text

log = logging.getLogger(__name__)


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "segnet"


def file_key(items: list[str]) -> str:
    """A key for ``items``: file paths (each with its size and modification time) and
    any other words the statistics depend on (the colour mode they were read in)."""
    described, real_folders = [], {}
    for item in items:
        try:
            stat = os.stat(item)
        except (OSError, ValueError):
            stat = None
        if stat is None or not S_ISREG(stat.st_mode):
            described.append([item])
            continue
        # the file's real path, its folder's resolved once (each path resolved whole
        # looks up every folder above it: seconds for a folder of 20,000 images)
        folder, name = os.path.split(item)  # not normalised: a link before a ".." counts
        if folder not in real_folders:
            real_folders[folder] = os.path.realpath(folder or ".")
        real = os.path.join(real_folders[folder], name)
        real = os.path.realpath(real) if os.path.islink(real) else real
        described.append([real, stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:24]


def path(kind: str, key: str) -> Path:
    return folder() / f"{kind}_{key}.json"


def read(kind: str, key: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(path(kind, key).read_text())
        return entry if entry.get("key") == key else None
    except (OSError, ValueError, AttributeError):
        return None  # none yet, or unreadable: computed again


def write(kind: str, key: str, values: dict[str, Any]) -> None:
    try:
        path(kind, key).parent.mkdir(parents=True, exist_ok=True)
        write_text(path(kind, key), json.dumps({"key": key, **values}))
    except OSError as err:  # a read-only home, a full disk: the next run computes them
        log.info("statistics not cached (%s): computed again next time", err)
