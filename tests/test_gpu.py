"""The GPU path: bf16, compile, channels_last. Skipped where no CUDA device is present."""

import pytest
import torch

from segnet.pipeline import train
from tests.conftest import TINY_CAMVID, compose

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("extra", [[], ["model.compile=true"], ["model.channels_last=true"]])
def test_gpu_training_runs_and_checkpoints_keep_plain_keys(tiny_camvid, tmp_path, extra):
    cfg = compose(
        "train",
        [
            *TINY_CAMVID,
            f"data.root={tiny_camvid}",
            "trainer=gpu",
            "trainer.deterministic=warn",
            *extra,
        ],
        tmp_path,
    )
    metrics, objects = train(cfg)
    assert objects["trainer"].precision == "bf16-mixed"
    assert 0 <= metrics["test/miou"] <= 1
    ckpt = torch.load(tmp_path / "checkpoints" / "best.ckpt", weights_only=True)
    assert not any("_orig_mod" in k for k in ckpt["state_dict"])
