"""The package as ``pip install`` gives it: a wheel built from this checkout, installed in
a fresh environment, trains from an empty folder (nothing of the checkout on its path)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.data.test_images import make_folder


def run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f"{args}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_trains_from_an_empty_folder(tmp_path):
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-q", str(REPO), "-w", str(wheels)], tmp_path)  # fmt: skip
    (wheel,) = wheels.glob("segnet-*.whl")

    # a fresh environment; its dependencies are this one's (installing torch again would
    # take gigabytes), read through a path file, which adds no editable install of segnet
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    env_site = Path(run([python, "-c", "import site; print(site.getsitepackages()[0])"],
                        tmp_path).stdout.strip())  # fmt: skip
    (env_site / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], tmp_path)

    empty = tmp_path / "empty"
    empty.mkdir()
    where = run([python, "-c", "import segnet.runs.config_files as c; print(c.CONFIGS)"], empty)
    assert Path(where.stdout.strip()) == env_site / "segnet" / "configs"
    packaged = {p.relative_to(env_site / "segnet" / "configs") for p in
                (env_site / "segnet" / "configs").rglob("*.yaml")}  # fmt: skip
    assert packaged == {p.relative_to(REPO / "configs") for p in (REPO / "configs").rglob("*.yaml")}

    root = make_folder(tmp_path / "data", n=8, sizes=[(40, 48)])
    run([env_dir / "bin" / "segnet-train", "experiment=images_quick", f"data.root={root}",
         "data.class_names=[background,disc]", "data.label_values=[0,255]",
         "model.net.features=[4,8,8,8,8]", "data.num_workers=0", "debug=fdr"], empty)  # fmt: skip
    (metrics,) = empty.glob("outputs/train/runs/*/metrics.json")
    assert (metrics.parent / "checkpoints" / "last.ckpt").is_file()
