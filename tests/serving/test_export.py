"""Every export format round-trips against the eager network, in 2D and 3D."""

import subprocess
import sys

import pytest
import torch

from segnet.serving import export
from tests.helpers import small_net

pytest.importorskip("onnxruntime")

# (network variant, spatial dims, input channels) from the shared table of small nets
NETS = {
    "segnet2d": ("segnet", 2, 3),
    "unet3d-unpool": ("unet-unpool", 3, 1),
    "unet3d-transpose": ("unet-transpose", 3, 2),
    "segnet3d": ("segnet", 3, 1),
}


def trained_like(key):
    variant, dims, in_ch = NETS[key]
    torch.manual_seed(0)
    net = small_net(variant, dims, in_ch=in_ch, out_ch=4)
    # move BN statistics away from their defaults so that a lost buffer would show
    net.train()
    with torch.no_grad():
        for _ in range(2):
            net(torch.randn(2, in_ch, *([13] * dims)) * 3 + 1)
    return net.eval()


def round_trips():
    """Every network in every format; the 3D networks' ONNX exports, a few seconds each,
    in the slow suite (a 3D ONNX export and reload stays in the default one:
    tests/serving/test_export_cli.py's volume model), and so is the U-Net with pool
    indices as a torch.export program (segnet3d's keeps MaxUnpool3d in the default one)."""
    for key in NETS:
        for fmt in export.FORMATS:
            slow = (fmt == "onnx" and key != "segnet2d") or (key, fmt) == ("unet3d-unpool", "pt2")
            yield pytest.param(key, fmt, marks=pytest.mark.slow) if slow else (key, fmt)


@pytest.mark.parametrize(("key", "fmt"), list(round_trips()))
def test_round_trip(key, fmt, tmp_path):
    net = trained_like(key)
    path = export.WRITERS[fmt](net, tmp_path / f"model{export.SUFFIX[fmt]}")
    assert export.verify(net, path, fmt) < 1e-4
    # a batch and spatial size different from the export example (dynamic shapes)
    x = torch.randn(3, net.in_channels, *([21] * net.spatial_dims))
    with torch.no_grad():
        torch.testing.assert_close(export.LOADERS[fmt](path)(x), net(x), rtol=1e-4, atol=1e-4)


# the traced formats take 10 s or more here: in the slow suite
@pytest.mark.parametrize(
    "fmt",
    [f if f == "safetensors" else pytest.param(f, marks=pytest.mark.slow) for f in export.FORMATS],
)
def test_space_to_depth_round_trips_at_odd_and_even_sizes(fmt, tmp_path):
    # its padding to a multiple of 2 must not be specialised to the example's parity
    from segnet.models import create_model

    torch.manual_seed(0)
    net = create_model(
        "segnet", out_channels=4, features=(4, 8, 8), convs=(2, 1, 2), space_to_depth=2
    ).eval()
    path = export.WRITERS[fmt](net, tmp_path / f"model{export.SUFFIX[fmt]}")
    loaded = export.LOADERS[fmt](path)
    for size in ((21, 21), (22, 24), (23, 30)):
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), net(x), rtol=1e-4, atol=1e-4)


# the traced formats take seconds here: in the slow suite
@pytest.mark.parametrize(
    "fmt",
    [f if f == "safetensors" else pytest.param(f, marks=pytest.mark.slow) for f in export.FORMATS],
)
def test_a_unet_pooled_per_axis_round_trips_at_other_sizes(fmt, tmp_path):
    """Thick slices: the last axis kept at the first level; exported, reloaded and run at
    sizes other than the export's example, odd ones and few slices included."""
    from segnet.models import create_model

    torch.manual_seed(0)
    net = create_model(
        "unet", spatial_dims=3, in_channels=1, out_channels=3, features=(4, 8, 8),
        convs=1, pools=[[2, 2, 1], [2, 2, 2]],
    ).eval()  # fmt: skip
    path = export.WRITERS[fmt](net, tmp_path / f"model{export.SUFFIX[fmt]}")
    loaded = export.LOADERS[fmt](path)
    for size in ((16, 16, 4), (21, 19, 7)):
        x = torch.randn(2, 1, *size)
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), net(x), rtol=1e-4, atol=1e-4)


def test_safetensors_loads_without_hydra_or_lightning(tmp_path):
    net = trained_like("segnet2d")
    path = export.save_safetensors(
        net, tmp_path / "m.safetensors", metadata={"classes": ["a", "b"]}
    )
    assert export.read_safetensors_metadata(path)["classes"] == ["a", "b"]
    code = (
        "import sys, torch; from segnet.serving.export import load_safetensors;"
        f"net = load_safetensors({str(path)!r});"
        "assert 'hydra' not in sys.modules and 'lightning' not in sys.modules, sorted(sys.modules);"
        "print(net(torch.zeros(1, 3, 17, 17)).shape)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "torch.Size([1, 4, 17, 17])" in out.stdout


def test_compile_and_ddp_prefixes_are_stripped():
    state = {"_orig_mod.head.weight": 1, "module.encoder.x": 2, "plain": 3}
    assert export.clean_state_dict(state) == {"head.weight": 1, "encoder.x": 2, "plain": 3}


def test_foreign_safetensors_file_is_refused(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(tmp_path / "x.safetensors"))
    with pytest.raises(ValueError, match="not written by segnet.serving.export"):
        export.load_safetensors(tmp_path / "x.safetensors")
