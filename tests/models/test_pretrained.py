"""Encoder initialisation from ImageNet VGG16-BN, tested with locally made weights."""

import socket

import pytest
import torch
from torchvision.models import vgg16_bn

from segnet.models import create_model, pretrained


@pytest.fixture(scope="module")
def vgg_state(tmp_path_factory):
    torch.manual_seed(1)
    model = vgg16_bn(weights=None)
    for m in model.modules():  # non-default BN statistics, so copying them is visible
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    path = tmp_path_factory.mktemp("vgg") / "vgg16_bn.pth"
    torch.save(model.state_dict(), path)
    return path, model


def assert_encoder_equals_vgg(net, vgg):
    src = [m for m in vgg.features if isinstance(m, torch.nn.Conv2d | torch.nn.BatchNorm2d)]
    dst = [
        m for m in net.encoder.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.BatchNorm2d)
    ]
    assert len(src) == len(dst) == 26  # 13 conv + 13 BN
    for s, d in zip(src, dst, strict=True):
        for key, value in s.state_dict().items():
            torch.testing.assert_close(d.state_dict()[key], value, rtol=0, atol=0)


def test_all_13_conv_bn_layers_land_in_the_encoder(vgg_state):
    path, vgg = vgg_state
    net = create_model("segnet", out_channels=11, encoder_weights=str(path))
    assert_encoder_equals_vgg(net, vgg)
    # the spec does not carry the weights source: a reload must not re-download anything
    assert "encoder_weights" not in net.spec()


def test_imagenet_reads_the_torch_hub_cache(vgg_state, tmp_path, monkeypatch):
    path, vgg = vgg_state
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    cached = tmp_path / "hub" / "checkpoints" / "vgg16_bn-6c64b313.pth"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(path.read_bytes())
    net = create_model("segnet", out_channels=11, encoder_weights="imagenet")
    assert_encoder_equals_vgg(net, vgg)


def test_no_network_and_no_file_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with socket.socket() as s:  # a port on which nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(
        pretrained, "VGG16_BN_URL", f"http://127.0.0.1:{port}/vgg16_bn-6c64b313.pth"
    )
    with pytest.raises(RuntimeError) as err:
        create_model("segnet", encoder_weights="imagenet")
    message = str(err.value)
    assert str(tmp_path / "hub" / "checkpoints" / "vgg16_bn-6c64b313.pth") in message
    assert "model.net.encoder_weights=/path/to/vgg16_bn.pth" in message
    assert "give its path as encoder_weights" in message  # create_model's own argument
    # through train.py's config: the message as written, not folded into one line of Hydra's
    from omegaconf import OmegaConf

    from segnet.runs.building import build
    from tests.helpers import data_info

    node = OmegaConf.create(
        {"_target_": "segnet.training.module.SegmentationModule",
         "net": {"name": "segnet", "encoder_weights": "imagenet"}}
    )  # fmt: skip
    with pytest.raises(RuntimeError) as built:
        build(node, data=data_info(11))
    assert str(built.value) == message


def test_missing_file_and_wrong_architecture(tmp_path, vgg_state):
    with pytest.raises(FileNotFoundError, match="no such file"):
        create_model("segnet", encoder_weights=str(tmp_path / "nope.pth"))
    with pytest.raises(ValueError, match="needs the 2D VGG16-BN encoder"):
        create_model("segnet", features=(64, 128), convs=(2, 2), encoder_weights=str(vgg_state[0]))
