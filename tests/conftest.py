import os
import warnings
from pathlib import Path

import pytest
import torch

# Tests share 2 cores; extra threads only add contention.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
warnings.filterwarnings("ignore", message=".*does not have many workers.*")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_dataset(name: str) -> Path:
    """Path of a real dataset under ../shared/data, or skip the test saying why."""
    root = Path(os.environ.get("SEGNET_SHARED_DATA", SHARED_DATA)) / name
    if not root.is_dir():
        pytest.skip(f"real dataset {name} not found at {root} (set SEGNET_SHARED_DATA)")
    return root


CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def compose(config_name: str, overrides: list[str], output_dir: Path):
    """Compose a config as ``train.py``/``evaluate.py`` would, with the run directory set,
    so tests call segnet.pipeline functions directly instead of starting processes."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import open_dict

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = hydra_compose(config_name, overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)  # stands for ${hydra:runtime.output_dir}
        del cfg["hydra"]
    return cfg
