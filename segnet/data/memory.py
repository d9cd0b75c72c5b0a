"""The memory this machine has to spare (Linux's ``MemAvailable``): what a dataset held
in memory and a training batch planned on the CPU must fit in."""

from __future__ import annotations

from pathlib import Path


def available_bytes() -> int | None:
    """The memory Linux reports available (free, plus caches it can drop), in bytes; None
    where it cannot be read (another system)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
