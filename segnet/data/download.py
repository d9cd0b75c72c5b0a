"""Fetch and unpack a dataset archive (zip or tar) into a root folder, with checks."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn


def fetch(url: str, dest: Path) -> Path:
    """Download ``url`` to ``dest`` with a progress bar (file:// URLs work too)."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            with (
                dest.open("wb") as out,
                Progress("[progress.description]{task.description}", BarColumn(),
                         DownloadColumn(), TransferSpeedColumn()) as progress,
            ):
                task = progress.add_task(f"downloading {Path(url).name}", total=total)
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    progress.advance(task, len(chunk))
    except OSError as err:
        raise RuntimeError(
            f"could not download {url}: {err}. Check the network or data.url, or download "
            f"the archive yourself and unpack it into {dest.parent}."
        ) from err
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
) -> Path:
    """Download ``url``, unpack it, move the dataset folder to ``root`` and check that each
    folder in ``expected_counts`` holds that many ``pattern`` files (absent folders are
    skipped: an archive may lack a split)."""
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(
            f"{root} exists and is not empty but holds no dataset; move it away or point "
            "data.root elsewhere before downloading (nothing there is overwritten)."
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".download-") as tmp:
        tmp = Path(tmp)
        archive = fetch(url, tmp / "archive")
        unpack(archive, tmp / "unpacked")
        found = find_dataset_dir(tmp / "unpacked", marker)
        problems = []
        for folder, expected in (expected_counts or {}).items():
            if (found / folder).is_dir():
                n = len(list((found / folder).glob(pattern)))
                if n != expected:
                    problems.append(f"{folder}/ has {n} files, expected {expected}")
        if problems:
            raise RuntimeError(f"download from {url} is incomplete: {'; '.join(problems)}.")
        if root.exists():
            root.rmdir()
        shutil.move(str(found), str(root))
    return root
