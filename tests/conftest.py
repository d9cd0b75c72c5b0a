import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

# Tests share the cores (2 here) with each other's processes (make test runs one per
# core, pytest-xdist); extra threads only add contention.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // WORKERS)))
warnings.filterwarnings("ignore", message=".*does not have many workers.*")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_dataset(name: str) -> Path:
    """Path of a real dataset under ../shared/data, or skip the test saying why."""
    root = Path(os.environ.get("SEGNET_SHARED_DATA", SHARED_DATA)) / name
    if not root.is_dir():
        pytest.skip(f"real dataset {name} not found at {root} (set SEGNET_SHARED_DATA)")
    return root


CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@contextmanager
def project_configs():
    """Hydra initialised on this project's configs (for code that composes configs itself)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        yield


def compose_config(config_name: str, overrides=(), hydra: bool = False):
    """The composed config, with Hydra's own section if ``hydra``; nothing resolved."""
    from hydra import compose as hydra_compose

    with project_configs():
        return hydra_compose(config_name, overrides=list(overrides), return_hydra_config=hydra)


def compose(config_name: str, overrides: list[str], output_dir: Path):
    """Compose a config as ``train.py``/``evaluate.py`` would, with the run directory set,
    so tests call segnet.commands.train functions directly instead of starting processes."""
    from omegaconf import open_dict

    cfg = compose_config(config_name, overrides, hydra=True)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)  # stands for ${hydra:runtime.output_dir}
        del cfg["hydra"]
    return cfg


REPO = Path(__file__).resolve().parents[1]

# A tiny, fast CamVid recipe for end-to-end tests (SegNet-Basic with 8 features).
TINY_CAMVID = [
    "experiment=camvid_segnet_basic",
    "model.net.features=[8,8,8,8]",
    "model.net.kernel_size=3",
    "model/optimizer=adamw",
    "model.optimizer.lr=0.01",
    "data.batch_size=2",
    "data.eval_batch_size=2",
    "data.num_workers=0",
    "trainer.max_epochs=2",
    "trainer.accelerator=cpu",
    "trainer.log_every_n_steps=1",
    "recompute_bn=false",
]


@pytest.fixture(scope="session")
def tiny_camvid(tmp_path_factory) -> Path:
    from tests.helpers import camvid_like

    return camvid_like(tmp_path_factory.mktemp("tiny") / "CamVid")


def run_cli(args: list[str], cwd: Path, timeout: int = 600, env: dict | None = None):
    """Run a project entry point as a user would, in ``cwd``; fail with its output."""
    import subprocess
    import sys

    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{args} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return proc


@pytest.fixture(scope="session")
def statistics_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xdg_cache")


@pytest.fixture(autouse=True)
def cache_of_the_tests(statistics_cache, monkeypatch):
    """Statistics cached by the DataModules go to a folder of the test session's, not the
    user's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(statistics_cache))
