"""The memory this machine has to spare: what a dataset held in memory and a training
batch planned on the CPU must fit in."""

from __future__ import annotations

from pathlib import Path

MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")  # a container's limit (cgroup v2) where there is one


def available_bytes(meminfo: Path = MEMINFO, cgroup: Path = CGROUP) -> int | None:
    """The memory Linux reports available (free, plus caches it can drop), or what is left
    under the container's limit where that is less, in bytes; None where neither can be
    read (another system)."""
    found = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":  # "max": no limit
            used = int((cgroup / "memory.current").read_text())
            # the file cache counts as used, yet is given back on demand: the working set
            # is what is used less the inactive files (as container runtimes count it)
            for line in (cgroup / "memory.stat").read_text().splitlines():
                if line.startswith("inactive_file "):
                    used -= int(line.split()[1])
            found.append(int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(min(found), 0) if found else None
