"""The memory a run may count on: Linux's MemAvailable, or a container's limit if less."""

from segnet.data.memory import available_bytes

INFO = "MemTotal:       32000000 kB\nMemAvailable:   20000000 kB\n"


def machine(folder, meminfo: str = INFO, limit: str | None = None, used: int = 0, cache: int = 0):
    """A /proc/meminfo and a cgroup folder (with a limit where given), as paths."""
    folder.mkdir(parents=True)
    (folder / "meminfo").write_text(meminfo)
    (folder / "cgroup").mkdir()
    if limit is not None:
        (folder / "cgroup" / "memory.max").write_text(limit + "\n")
        (folder / "cgroup" / "memory.current").write_text(f"{used}\n")
        (folder / "cgroup" / "memory.stat").write_text(f"anon 1\ninactive_file {cache}\n")
    return folder / "meminfo", folder / "cgroup"


def test_available_memory_is_the_smaller_of_the_machine_and_the_container(tmp_path):
    assert available_bytes(*machine(tmp_path / "bare")) == 20000000 * 1024
    assert available_bytes(*machine(tmp_path / "unlimited", limit="max")) == 20000000 * 1024
    limited = machine(tmp_path / "limited", limit=str(8 * 2**30), used=2**30)
    assert available_bytes(*limited) == 7 * 2**30
    # files read earlier fill the cache up to the limit; the kernel gives it back on demand
    cached = machine(tmp_path / "cached", limit=str(8 * 2**30), used=8 * 2**30, cache=7 * 2**30)
    assert available_bytes(*cached) == 7 * 2**30
    # a container at its limit has nothing to spare, never a negative figure
    assert available_bytes(*machine(tmp_path / "full", limit="100", used=200)) == 0
    assert available_bytes(*machine(tmp_path / "other", meminfo="nothing here\n")) is None
