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
