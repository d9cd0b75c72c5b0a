"""Fetch and unpack a dataset archive (zip or tar) into a root folder, with checks."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn


@contextlib.contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if needed): processes that fetch
    the same dataset at once (DDP ranks, parallel jobs) take turns; the later ones then
    find the data in place. Without ``fcntl`` (Windows) nothing is locked."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch(url: str, dest: Path, sha256: str | None = None, manual: str = "") -> Path:
    """Download ``url`` to ``dest`` with a progress bar (file:// URLs work too).

    The bytes go to ``<dest>.part`` first: a download that stops (network, Ctrl+C) resumes
    from there on the next try with an HTTP range request, where the server supports it.
    With ``sha256`` the finished file is checked before use, and removed if it differs.
    """
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            resumed = have > 0 and getattr(response, "status", None) == 206
            if not resumed:
                have = 0  # the server sent the whole file: start over
            length = int(response.headers.get("Content-Length") or 0)
            total = have + length if length else None
            with (
                part.open("ab" if resumed else "wb") as out,
                Progress(
                    "[progress.description]{task.description}",
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                ) as progress,
            ):
                label = f"{'resuming' if resumed else 'downloading'} {Path(url).name}"
                task = progress.add_task(label, total=total, completed=have)
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    progress.advance(task, len(chunk))
        arrived = part.stat().st_size
        if total is not None and arrived < total:
            # http.client ends a read at a dropped connection without an error
            raise ConnectionError(f"the connection closed after {arrived} of {total} bytes")
    except urllib.error.HTTPError as err:
        if not (err.code == 416 and have):  # 416: nothing left to send, the file is whole
            raise RuntimeError(f"could not download {url}: {err}. {manual}") from err
    except (OSError, http.client.HTTPException) as err:  # IncompleteRead is the latter
        kept = f" What arrived is kept in {part}; run again to resume." if part.exists() else ""
        raise RuntimeError(
            f"could not download {url}: {err}. Check the network or data.url.{kept} {manual}"
        ) from err
    if sha256:
        digest = hashlib.sha256()
        with part.open("rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
        if digest.hexdigest() != sha256.lower():
            part.unlink()
            raise RuntimeError(
                f"{url} does not match data.sha256 (expected {sha256}, got "
                f"{digest.hexdigest()}); the file was removed. Run again, or check data.url."
            )
    part.replace(dest)
    return dest


def unpack(archive: Path, into: Path) -> None:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            z.extractall(into)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as t:
            t.extractall(into, filter="data")
    else:
        raise RuntimeError(f"{archive} is neither a zip nor a tar archive.")


def find_dataset_dir(top: Path, marker: Sequence[str]) -> Path:
    """The folder under ``top`` that holds every entry of ``marker`` (e.g. train/, trainannot/)."""
    for candidate in [top, *sorted(p for p in top.rglob("*") if p.is_dir())]:
        if all((candidate / m).exists() for m in marker):
            return candidate
    raise RuntimeError(f"the downloaded archive holds no folder with {list(marker)}.")


def download_dataset(
    url: str,
    root: Path,
    marker: Sequence[str],
    expected_counts: dict[str, int] | None = None,
    pattern: str = "*.png",
    sha256: str | None = None,
) -> Path:
    """Download ``url`` (resumable, checked against ``sha256`` when given), unpack it, move
    the dataset folder to ``root`` and check that each folder in ``expected_counts`` holds
    that many ``pattern`` files (absent folders are skipped: an archive may lack a split).
    Never writes into a non-empty ``root``."""
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(
            f"{root} exists and is not empty but holds no dataset; move it away or point "
            "data.root elsewhere before downloading (nothing there is overwritten)."
        )
    manual = (
        f"Without network: download {url} elsewhere, unpack it, and put the folder that "
        f"holds {', '.join(marker)}/ at {root.resolve()} (or point data.root at it)."
    )
    root.parent.mkdir(parents=True, exist_ok=True)
    # kept between attempts, so that an interrupted download resumes
    staging = root.parent / f".{root.name}.download"
    staging.mkdir(exist_ok=True)
    archive = staging / "archive"
    if not archive.exists():
        fetch(url, archive, sha256, manual)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".unpack-") as tmp:
        tmp = Path(tmp)
        try:
            unpack(archive, tmp)
        except (RuntimeError, OSError, EOFError, zipfile.BadZipFile, tarfile.TarError) as err:
            # e.g. a proxy's HTML page or a corrupt archive: kept, every later run would
            # fail on it the same way
            archive.unlink()
            raise RuntimeError(
                f"what {url} sent does not unpack ({type(err).__name__}: {err}); it was "
                f"removed, so the next run downloads it again. Check data.url. {manual}"
            ) from err
        found = find_dataset_dir(tmp, marker)
        problems = []
        for folder, expected in (expected_counts or {}).items():
            if (found / folder).is_dir():
                n = len(list((found / folder).glob(pattern)))
                if n != expected:
                    problems.append(f"{folder}/ has {n} files, expected {expected}")
        if problems:
            shutil.rmtree(staging)
            raise RuntimeError(f"download from {url} is incomplete: {'; '.join(problems)}.")
        if root.exists():
            root.rmdir()
        shutil.move(str(found), str(root))
    shutil.rmtree(staging)
    return root
