"""The GPU path: bf16, compile, channels_last. Skipped where no CUDA device is present."""

import pytest
import torch

from segnet.commands.train import train
from tests.conftest import TINY_CAMVID, compose

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each case compiles from scratch: compiled graphs and recompile counters of earlier
    cases in the same process must not decide whether this one recompiles or falls back."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize(
    "extra,compiled",
    [([], True), (["model.compile=false", "model.channels_last=false"], False)],
    ids=["auto", "eager"],
)
def test_gpu_training_runs_and_checkpoints_keep_plain_keys(tiny_camvid, tmp_path, extra, compiled):
    cfg = compose(
        "train",
        [
            *TINY_CAMVID,
            f"data.root={tiny_camvid}",
            "trainer=gpu",
            # TINY_CAMVID pins the CPU; a value override outranks the trainer group, so
            # without this line the case would train on the CPU and prove nothing
            "trainer.accelerator=gpu",
            "trainer.deterministic=warn",
            *extra,
        ],
        tmp_path,
    )
    metrics, objects = train(cfg)
    assert objects["trainer"].strategy.root_device.type == "cuda"
    assert torch.get_float32_matmul_precision() == "high"  # TF32, set before fit
    assert objects["trainer"].precision == "bf16-mixed"
    module = objects["module"]
    assert module.channels_last is compiled  # auto: on for 2D networks on a GPU
    assert (module.net._compiled_call_impl is not None) is compiled  # nn.Module.compile()
    assert 0 <= metrics["test/miou"] <= 1
    assert metrics["time/startup_s"] >= 0
    ckpt = torch.load(tmp_path / "checkpoints" / "best.ckpt", weights_only=True)
    assert not any("_orig_mod" in k for k in ckpt["state_dict"])


def test_the_batch_plan_measures_a_step_on_the_gpu_and_leaves_nothing_behind():
    from segnet.models.nets.unet import UNet
    from segnet.runs.batch_plan import measured_on_gpu

    net = UNet(spatial_dims=2, in_channels=1, out_channels=2, features=[16, 32, 64, 128])
    device = torch.device("cuda")
    before = torch.cuda.memory_allocated(device)
    small = measured_on_gpu(net, (1, 64, 64), device, "32-true")
    large = measured_on_gpu(net, (1, 128, 128), device, "32-true")
    assert small.measured and 3 < large.per_sample / small.per_sample < 5
    assert measured_on_gpu(net, (1, 128, 128), device, "bf16-mixed").per_sample < large.per_sample
    assert torch.cuda.memory_allocated(device) == before  # the probe is freed
    assert next(net.parameters()).device.type == "cpu"  # the run's network stays put
