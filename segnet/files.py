"""Files written whole or not at all: checkpoints, exports, model cards and predictions.

Each file is written under a temporary name in its own folder (never ``$TMPDIR``, which
may be another, smaller disk), flushed and fsynced, then moved over the target with
``os.replace``. Until that moment the previous file under the target's name, if any,
stays whole; a failed write removes its temporary file. A disk that fills up stops the
work with :class:`OutOfSpaceError`, which names the folder, the bytes needed and free, and
the file that is kept.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# ENOSPC: the disk is full; EDQUOT: the user's quota on it is
NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


class OutOfSpaceError(OSError):
    """A write stopped for lack of space; the message says where, how much, and what is
    kept. No partial file is left under the target's name."""

    def __init__(self, path: Path, needed: int | None, free: int | None, kept: Path | None) -> None:
        self.path, self.needed, self.free, self.kept = path, needed, free, kept
        need = f"it needs {size_text(needed)}, " if needed is not None else ""
        have = f"{size_text(free)} free" if free is not None else "free space unknown"
        if kept is None:
            keep = "No partial file was left."
        elif kept == path:
            keep = f"The previous {path.name} is kept whole; no partial file was left."
        else:
            keep = f"The last complete one is {kept}; no partial file was left."
        super().__init__(
            errno.ENOSPC,
            f"no space left in {path.parent} to write {path.name} ({need}{have}). {keep} "
            "Free some space there, or write to a disk with room (paths.output_dir=...).",
        )

    def __str__(self) -> str:
        return self.strerror


def size_text(n: int | None) -> str:
    if n is None:
        return "an unknown size"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path`` that keeps its suffixes (writers such as Pillow and
    nibabel choose the format from them), unique to this process."""
    return path.with_name(f".tmp-{os.getpid()}-{path.name}")


def is_out_of_space(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in NO_SPACE


def sync_folder(folder: Path) -> None:
    """Make the rename itself durable (a crash right after it keeps the new name)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # platforms that cannot open a folder
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def staged(
    path: str | Path, needed: int | None = None, kept: Callable[[], Path | None] | None = None
) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill; when the block ends without
    an error it is fsynced and renamed to ``path``, else removed. ``needed`` (bytes, where
    known) is checked against the free space first, so a full disk is found before any
    byte is written. ``kept`` says which complete file a failure leaves (default: ``path``
    itself where it exists)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def out_of_space() -> OutOfSpaceError:
        keep = kept() if kept is not None else (path if path.is_file() else None)
        return OutOfSpaceError(path, needed, free_bytes(path.parent), keep)

    if needed is not None:
        free = free_bytes(path.parent)
        if free is not None and free < needed:
            raise out_of_space()
    tmp = temporary_name(path)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # a writer that took a path: its bytes reach the disk
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if is_out_of_space(err) and not isinstance(err, OutOfSpaceError):
            raise out_of_space() from None
        raise
    sync_folder(path.parent)


def write_bytes(
    path: str | Path, data: bytes | memoryview, kept: Callable[[], Path | None] | None = None
) -> Path:
    """``data`` into ``path``, whole or not at all."""
    path = Path(path)
    with staged(path, needed=len(data), kept=kept) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
    return path


def write_image(path: str | Path, array) -> Path:
    """A prediction (an array Pillow takes: class indices, colours) as an image file named
    ``path``, whole or not at all; an existing file is never overwritten."""
    from PIL import Image

    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; predictions are never overwritten.")
    with staged(path) as tmp:
        Image.fromarray(array).save(tmp)
    return path


def write_probabilities(path: str | Path, probs, class_names) -> Path:
    """An image's class probabilities (C, H, W) as a compressed NumPy file named ``path``
    (``.npz``: ``probabilities`` float32, ``classes`` their names), whole or not at all;
    an existing file is never overwritten."""
    import numpy as np

    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; predictions are never overwritten.")
    with staged(path) as tmp:
        np.savez_compressed(
            tmp, probabilities=np.asarray(probs, np.float32), classes=np.array(list(class_names))
        )
    return path


def write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) into ``path``, whole or not at all."""
    return write_bytes(path, text.encode("utf-8"))
