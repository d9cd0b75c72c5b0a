"""The Dockerfile: hadolint-clean and shaped as the README says (no engine runs here)."""

import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()


def test_hadolint_is_clean():
    hadolint = shutil.which("hadolint") or str(REPO / ".venv" / "bin" / "hadolint")
    if not shutil.which(hadolint):
        pytest.skip("hadolint not installed (pip install -e '.[dev]')")
    proc = subprocess.run([hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_layers_user_and_entrypoint():
    assert re.search(r"^ARG BASE_IMAGE=pytorch/pytorch:\S+cuda\S+runtime$", DOCKERFILE, re.M)
    # dependencies are installed before the code is copied in
    assert DOCKERFILE.index("COPY pyproject.toml") < DOCKERFILE.index("COPY segnet")
    assert DOCKERFILE.index("pip install") < DOCKERFILE.index("COPY segnet")
    assert re.search(r"^USER (?!root|0)\S+$", DOCKERFILE, re.M)
    assert 'ENTRYPOINT ["python", "train.py"]' in DOCKERFILE
    # the image's default torch is the one CI tests (constraints.txt), which pip keeps
    pin = re.search(r"^torch==([\d.]+)$", (REPO / "constraints.txt").read_text(), re.M).group(1)
    assert f"pytorch/pytorch:{pin}-" in DOCKERFILE


def test_dockerignore_keeps_data_and_outputs_out():
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"data", "outputs", ".venv", ".git"} <= set(ignored)
