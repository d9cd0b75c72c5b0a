"""One shared network test over nets x spatial_dims x upsamplers x odd sizes."""

import pytest
import torch

from segnet.models import MODELS, create_model
from tests.helpers import SMALL_NETS, small_net

SIZES = {2: [(17, 23), (45, 61), (32, 32)], 3: [(35, 51, 35), (9, 10, 11)]}
GRID = [(variant, dims, size) for variant in SMALL_NETS for dims in (2, 3) for size in SIZES[dims]]


@pytest.mark.parametrize("variant,dims,size", GRID, ids=lambda v: str(v))
def test_shape_gradients_determinism(variant, dims, size):
    torch.manual_seed(0)
    net = small_net(variant, dims)
    x = torch.randn(2, 2, *size)

    out = net(x)
    assert out.shape == (2, 3, *size)

    out.square().mean().backward()
    no_grad = [n for n, p in net.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    assert not no_grad, f"parameters without gradient: {no_grad}"

    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net(x), net(x), rtol=0, atol=0)


@pytest.mark.parametrize("variant", SMALL_NETS)
def test_spec_rebuilds_the_same_network(variant):
    net = small_net(variant, 3)
    spec = net.spec()
    assert spec["name"] == variant.split("-")[0]
    rebuilt = create_model(**spec)
    assert rebuilt.spec() == spec
    rebuilt.load_state_dict(net.state_dict())  # same parameter names and shapes


def count(net) -> int:
    return sum(p.numel() for p in net.parameters())


def test_segnet_vgg16_matches_the_paper():
    net = create_model("segnet", out_channels=11)
    # VGG16-BN's convolutional part (torchvision: 14,723,136) is the encoder.
    assert count(net.encoder) == 14_723_136
    assert 29.35e6 < count(net) < 29.5e6
    with torch.no_grad():
        assert net.eval()(torch.zeros(1, 3, 360, 480)).shape == (1, 11, 360, 480)


def test_segnet_basic_matches_the_paper():
    net = create_model("segnet_basic", out_channels=11)
    assert 1.41e6 < count(net) < 1.43e6
    assert all(
        m.kernel_size == (7, 7)
        for m in net.encoder.modules()
        if hasattr(m, "kernel_size") and isinstance(m, torch.nn.Conv2d)
    )


@pytest.mark.parametrize("upsample", ["transpose", "unpool"])
def test_unet3d_default_round_trips_odd_volume(upsample):
    net = create_model("unet", spatial_dims=3, in_channels=1, out_channels=3, upsample=upsample)
    with torch.no_grad():
        assert net.eval()(torch.zeros(1, 1, 35, 51, 35)).shape == (1, 3, 35, 51, 35)


def test_unet_takes_one_convolution_count_per_stage_and_mirrors_it_in_the_decoder():
    def convs(stack) -> int:
        return sum(isinstance(m, torch.nn.Conv3d) for m in stack.modules())

    net = create_model("unet", spatial_dims=3, features=(4, 8, 8, 16), convs=[1, 1, 2, 3])
    assert [convs(s) for s in net.encoder.stages] == [1, 1, 2]
    assert convs(net.bottleneck) == 3
    assert [convs(s) for s in net.decoder] == [2, 1, 1]  # deepest first
    same = create_model("unet", spatial_dims=3, features=(4, 8, 8, 16), convs=2)
    assert same.spec()["convs"] == 2 and count(same) == count(
        create_model("unet", spatial_dims=3, features=(4, 8, 8, 16), convs=[2, 2, 2, 2])
    )
    for bad in ([1, 2, 2], [1, 0, 2, 2], 0):
        with pytest.raises(ValueError, match="one count of at least 1 for every stage"):
            create_model("unet", spatial_dims=3, features=(4, 8, 8, 16), convs=bad)


def test_unpool_decoder_really_uses_indices():
    """Unpooling puts values back where the maxima were: the output depends on the input's
    argmax positions, which a transpose-conv decoder would not preserve exactly."""
    from segnet.models.layers import max_pool, max_unpool

    x = torch.randn(1, 2, 5, 7, 9)
    pooled, idx = max_pool(x, 3)
    back = max_unpool(pooled, idx, x.shape[2:], 3)
    assert back.shape == x.shape
    kept = back != 0
    torch.testing.assert_close(back[kept], x[kept])
    assert kept.sum() == pooled.numel()


DEEP_SUPERVISED = {
    "unet-transpose": dict(name="unet", features=(4, 8, 8, 16), upsample="transpose"),
    "unet-unpool": dict(name="unet", features=(4, 8, 8, 16), upsample="unpool"),
    # instance norm, so that training and eval mode compute the same function
    "segnet": dict(name="segnet", features=(4, 8, 8), convs=(2, 1, 1), norm="instance"),
}


@pytest.mark.parametrize("variant", DEEP_SUPERVISED)
def test_deep_supervision_adds_coarser_outputs_in_training_only(variant):
    torch.manual_seed(0)
    kwargs = dict(spatial_dims=3, in_channels=1, out_channels=3, **DEEP_SUPERVISED[variant])
    net = create_model(**kwargs, deep_supervision=2)
    x = torch.randn(2, 1, 19, 24, 17)
    outs = net.train()(x)
    # full resolution first, then each decoder stage before it (ceil-pooled sizes)
    assert [tuple(o.shape[2:]) for o in outs] == [(19, 24, 17), (10, 12, 9), (5, 6, 5)]
    sum(o.sum() for o in outs).backward()
    assert all(head.weight.grad.abs().sum() > 0 for head in net.aux_heads)
    # eval mode (validation, export, prediction): the full-resolution logits alone, the
    # same as the training output's first entry
    with torch.no_grad():
        net.eval()
        plain = create_model(**kwargs).eval()
        plain.load_state_dict(net.state_dict(), strict=False)
        torch.testing.assert_close(net(x), plain(x))
        torch.testing.assert_close(net(x), net.train()(x)[0])
    assert create_model(**net.spec()).aux_heads.state_dict().keys() == (
        net.aux_heads.state_dict().keys()
    )
    with pytest.raises(ValueError, match=r"deep_supervision=3: use 0 \(off\) up to 2"):
        create_model(**kwargs, deep_supervision=3)


def test_registry_lists_all_nets():
    assert set(MODELS) == {"segnet", "segnet_basic", "unet"}


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(name="segnet", spatial_dims=4), r"spatial_dims=4 .* use 2 \(images\) or 3"),
        (dict(name="unet", spatial_dims=1), r"spatial_dims=1 .* use 2 \(images\) or 3"),
        (dict(name="segnet", features=(8, 16), convs=(2, 2, 3)), "same length"),
        (dict(name="unet", features=(8,)), "at least two"),
        (dict(name="unet", upsample="bilinear"), r"upsample='bilinear'.*transpose.*unpool"),
        (dict(name="segnet", norm="group"), r"norm='group'.*batch"),
        (dict(name="segnet", act="swishy"), r"act='swishy'.*relu"),
        (dict(name="resnet"), r"Unknown model 'resnet'.*segnet"),
        # another network's setting left in the config when model.net.name changed alone
        (dict(name="unet", space_to_depth=2), r"'unet' takes no space_to_depth .*~model.net.space"),
        # SegNet-Basic passes **kwargs on to SegNet: SegNet's own arguments decide
        (dict(name="segnet_basic", upsample="transpose"), r"'segnet_basic' takes no upsample"),
        (dict(name="segnet", out_channels=0), "out_channels must be a positive integer"),
    ],
)
def test_bad_arguments_say_what_is_allowed(kwargs, match):
    with pytest.raises(ValueError, match=match):
        create_model(**kwargs)


def test_wrong_input_channels_and_sizes_are_explained():
    net = small_net("segnet", 2, in_ch=3).eval()
    with pytest.raises(ValueError, match=r"expects 3 input channel\(s\), got 1"):
        net(torch.zeros(1, 1, 32, 32))
    with pytest.raises(ValueError, match=r"4D input \(N, C, H, W\)"):
        net(torch.zeros(1, 3, 8, 32, 32))
    # three pooling stages need at least 2**2 + 1 = 5 pixels per axis
    with pytest.raises(ValueError, match=r"spatial size \(4, 32\).*at least 5"):
        net(torch.zeros(1, 3, 4, 32))
    assert net(torch.zeros(1, 3, 5, 5)).shape == (1, 3, 5, 5)


def test_nets_register_themselves_under_their_name():
    from segnet.models.nets.base import SegmentationNet, register

    assert {"segnet", "segnet_basic", "unet"} <= set(MODELS)
    assert all(cls.name == key for key, cls in MODELS.items())
    with pytest.raises(ValueError, match="'segnet' is already registered"):
        register("segnet")(type("Another", (SegmentationNet,), {}))
    # SegNet-Basic is SegNet with other defaults; its spec holds every argument
    spec = create_model("segnet_basic", out_channels=5, features=[4, 4, 4, 4]).spec()
    assert spec["name"] == "segnet_basic" and spec["kernel_size"] == 7
    assert spec["features"] == [4, 4, 4, 4] and spec["head_kernel_size"] == 1
    assert "encoder_weights" not in create_model("segnet", out_channels=3).spec()


def test_a_network_written_outside_the_package_needs_only_the_base_class():
    """The least a new network does: register, call the base __init__, check its input and
    return ``supervised(logits, [])``; without deep supervision it needs no heads."""
    from segnet.models.nets.base import SegmentationNet, register

    class Tiny(SegmentationNet):
        def __init__(self, spatial_dims=2, in_channels=3, out_channels=2, width: int = 4):
            super().__init__(spatial_dims, in_channels, out_channels, num_pools=1)
            self.body = torch.nn.Sequential(
                torch.nn.Conv2d(in_channels, width, 3, padding=1),
                torch.nn.ReLU(),
                torch.nn.Conv2d(width, out_channels, 1),
            )

        def forward(self, x):
            self.check_input(x)
            return self.supervised(self.body(x), [])

    if "tiny_example" not in MODELS:
        register("tiny_example")(Tiny)
    net = create_model("tiny_example", out_channels=5, width=6).train()
    assert net(torch.zeros(2, 3, 9, 11)).shape == (2, 5, 9, 11)
    assert net.spec() == {"name": "tiny_example", "spatial_dims": 2, "in_channels": 3,
                          "out_channels": 5, "width": 6}  # fmt: skip
    with pytest.raises(ValueError, match=r"'tiny_example' takes no features \(it takes width\)"):
        create_model("tiny_example", features=[4, 8])


@pytest.mark.parametrize("size", [(17, 23), (32, 32), (45, 61)])
def test_space_to_depth_is_the_plain_net_between_unshuffle_and_shuffle(size):
    # The folded network must be exactly: pad to a multiple of f, pixel_unshuffle, a plain
    # SegNet with f*f times the channels in and out, pixel_shuffle, crop.
    torch.manual_seed(0)
    f, kwargs = 2, dict(features=(4, 8, 8), convs=(2, 1, 2))
    folded = create_model("segnet", in_channels=3, out_channels=5, space_to_depth=f, **kwargs)
    torch.nn.init.normal_(folded.head.weight)  # sub-pixel classifiers apart, as once trained
    plain = create_model("segnet", in_channels=3 * f * f, out_channels=5 * f * f, **kwargs)
    plain.load_state_dict(folded.state_dict())
    folded.eval(), plain.eval()
    x = torch.randn(2, 3, *size)
    h, w = size
    padded = torch.nn.functional.pad(x, (0, -w % f, 0, -h % f), mode="replicate")
    with torch.no_grad():
        expected = torch.nn.functional.pixel_shuffle(
            plain(torch.nn.functional.pixel_unshuffle(padded, f)), f
        )[..., :h, :w]
        out = folded(x)
    assert out.shape == (2, 5, h, w)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    # full-resolution output: the pixels of a 2x2 block get their own logits
    assert (out[..., 0:-1:2, :] != out[..., 1::2, :]).any()
    folded.train()
    folded(x).square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in folded.parameters())
    assert create_model(**folded.spec()).spec() == folded.spec()


def test_space_to_depth_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match=r"space_to_depth=2 folds pixels into channels in 2D"):
        create_model("segnet", spatial_dims=3, space_to_depth=2)
    with pytest.raises(ValueError, match=r"ImageNet's first convolution.*encoder_weights=null"):
        create_model("segnet", space_to_depth=2, encoder_weights="imagenet")
    with pytest.raises(ValueError, match=r"space_to_depth=0: use a positive integer"):
        create_model("segnet", space_to_depth=0)
    # three pooling stages at half resolution need 2 * 2**2 + 1 pixels per axis
    net = create_model("segnet", features=(4, 8, 8), convs=(2, 1, 2), space_to_depth=2).eval()
    assert net.min_size == 9
    with pytest.raises(ValueError, match=r"at least 9"):
        net(torch.zeros(1, 3, 8, 32))
    assert net(torch.zeros(1, 3, 9, 9)).shape == (1, 11, 9, 9)


def test_space_to_depth_starts_as_the_plain_net_on_block_averages():
    # At initialisation the folded network is the plain one on the 2x2-averaged image,
    # each block's label repeated over its pixels: no checkerboard to unlearn.
    torch.manual_seed(0)
    f, n, kwargs = 2, 4, dict(features=(4, 8, 8), convs=(2, 1, 2), out_channels=5)
    folded = create_model("segnet", space_to_depth=f, **kwargs).eval()
    plain = create_model("segnet", **kwargs).eval()
    state = folded.state_dict()
    first = "encoder.stages.0.0.0.weight"
    state[first] = state[first][:, ::n] * n
    state["head.weight"], state["head.bias"] = state["head.weight"][::n], state["head.bias"][::n]
    plain.load_state_dict(state)
    x = torch.randn(2, 3, 36, 44)
    with torch.no_grad():
        expected = plain(torch.nn.functional.avg_pool2d(x, f)).repeat_interleave(f, 2)
        expected = expected.repeat_interleave(f, 3)
        torch.testing.assert_close(folded(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("upsample", ["transpose", "unpool"])
def test_a_unet_pooled_along_some_axes_keeps_the_others_and_round_trips_odd_sizes(upsample):
    """Per-axis pooling (thick slices): the first axis kept at the first and last level,
    so its 7 slices are 4 at the bottom while the others are halved three times; the
    output has the input's size, and the spec rebuilds the same network."""
    from segnet.models.nets.unet import UNet

    pools = [[1, 2, 2], [2, 2, 2], [1, 2, 2]]
    net = UNet(3, 1, 3, features=(4, 8, 8, 8), convs=1, upsample=upsample, pools=pools)
    x = torch.randn(1, 1, 7, 33, 30)
    _, records = net.encoder(x)
    assert [tuple(size) for _, _, size in records] == [(7, 33, 30), (7, 17, 15), (4, 9, 8)]
    assert net(x).shape == (1, 3, 7, 33, 30)
    assert net.spec()["pools"] == pools
    twin = create_model(**net.spec())
    twin.load_state_dict(net.state_dict())
    net.eval(), twin.eval()
    assert torch.equal(net(x), twin(x))
    # the smallest input follows the axis halved most often (three times: 2**2 + 1)
    assert net.min_size == 5


def test_a_unet_without_pools_is_built_as_before_per_axis_pooling():
    """No ``pools``: every axis halved at every level, with the 2x2x2 transposed
    convolutions older checkpoints hold weights for."""
    from segnet.models.nets.unet import UNet

    net = UNet(3, 1, 2, features=(4, 8, 16))
    assert net.encoder.kernels == [2, 2]
    assert [tuple(up.weight.shape[2:]) for up in net.upsamplers] == [(2, 2, 2), (2, 2, 2)]
    assert net.min_size == 3


@pytest.mark.parametrize(
    "pools",
    [[[2, 2, 2]], [[3, 2, 2], [2, 2, 2]], [[2, 2], [2, 2]]],
)
def test_pools_of_the_wrong_shape_or_factor_are_refused(pools):
    from segnet.models.nets.unet import UNet

    with pytest.raises(ValueError, match=r"pools=.*give 2 level\(s\) of 3 factors"):
        UNet(3, 1, 2, features=(4, 8, 16), pools=pools)
