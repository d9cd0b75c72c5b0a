"""The statistics' cache key: each file by its real path, size and time, so that a key
holds across the ways a folder is named (a link, a relative path) and changes with a file."""

from __future__ import annotations

import hashlib
import json
import os

from segnet.data import stats_cache


def whole_path_key(items):
    """The key as each path resolved whole names it: what the folder-at-a-time key must
    equal, so that statistics cached before are found."""
    from pathlib import Path

    described = []
    for item in items:
        file = Path(item)
        if file.is_file():
            stat = file.stat()
            described.append([str(file.resolve()), stat.st_size, stat.st_mtime_ns])
        else:
            described.append([item])
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:24]


def test_the_key_names_files_by_their_real_paths(tmp_path, monkeypatch):
    real = tmp_path / "data" / "images"
    real.mkdir(parents=True)
    for k in range(3):
        (real / f"{k}.png").write_bytes(bytes(k + 1))
    (tmp_path / "linked").symlink_to(tmp_path / "data")
    (real / "alias.png").symlink_to(real / "0.png")
    monkeypatch.chdir(tmp_path)
    items = [
        str(real / "0.png"), "data/images/1.png", str(tmp_path / "linked" / "images" / "2.png"),
        str(real / "alias.png"), str(real / "missing.png"), str(real), "mode:RGB",
    ]  # fmt: skip
    key = stats_cache.file_key(items)
    assert key == whole_path_key(items)
    same = stats_cache.file_key([str(tmp_path / "linked" / "images" / "0.png"), *items[1:]])
    assert same == key  # the same file, named through the link
    (real / "1.png").write_bytes(b"longer")
    os.utime(real / "1.png", ns=(1, 1))
    assert stats_cache.file_key(items) != key


def test_a_link_before_dots_is_followed_as_before(tmp_path, monkeypatch):
    """``lists/../images/x.png`` where ``lists`` is a link: the ``..`` is taken from
    where the link leads, as resolving the whole path takes it."""
    store = tmp_path / "store" / "v2"
    (store / "images").mkdir(parents=True)
    (store / "lists").mkdir()
    (store / "images" / "x.png").write_bytes(b"x")
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "lists").symlink_to(store / "lists")
    items = [str(tmp_path / "ds" / "lists" / ".." / "images" / "x.png")]
    assert stats_cache.file_key(items) == whole_path_key(items)
