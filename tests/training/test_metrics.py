"""Per-case surface metrics (HD95, NSD) through MONAI, and their nnU-Net-style summary."""

import math

import pytest
import torch

from segnet.training.metrics import per_case_surface, summarize_cases


def cube(offset=0, shape=(16, 16, 16)):
    v = torch.zeros(shape, dtype=torch.long)
    v[4 + offset : 10 + offset, 4:10, 4:10] = 1
    return v


def test_identical_masks_have_zero_distance_and_full_surface_dice():
    label = cube()[None]
    hd, nsd = per_case_surface(label, label, 2, torch.tensor([[1.0, 1.0, 1.0]]), 1.0)
    assert hd.shape == (1, 2) and math.isnan(hd[0, 0])  # background is not scored
    assert hd[0, 1] == 0 and nsd[0, 1] == 1


def test_distances_are_in_millimetres_from_the_spacing():
    label, pred = cube()[None], cube(offset=2)[None]  # shifted 2 voxels along x
    hd1, nsd1 = per_case_surface(pred, label, 2, torch.tensor([[1.0, 1.0, 1.0]]), 1.0)
    hd2, _ = per_case_surface(pred, label, 2, torch.tensor([[2.0, 1.0, 1.0]]), 1.0)
    assert 0 < hd1[0, 1] <= 2.0 + 1e-6
    assert abs(float(hd2[0, 1]) - 2 * float(hd1[0, 1])) < 1e-6  # 2 mm voxels along x
    assert 0 < nsd1[0, 1] < 1  # part of the surface is further than 1 mm away
    _, nsd_wide = per_case_surface(pred, label, 2, torch.tensor([[1.0, 1.0, 1.0]]), 3.0)
    assert nsd_wide[0, 1] == 1  # all of it is within 3 mm


def test_empty_classes_follow_monai():
    label = cube()[None]
    empty = torch.zeros_like(label)
    spacing = torch.tensor([[1.0, 1.0, 1.0]])
    hd, nsd = per_case_surface(empty, label, 3, spacing, 1.0)  # class 1 missed, 2 absent
    assert math.isinf(hd[0, 1]) and nsd[0, 1] == 0
    assert math.isnan(hd[0, 2]) and math.isnan(nsd[0, 2])


def test_summary_leaves_out_undefined_values_and_counts_infinite_ones():
    per_case = {
        "dice": torch.tensor([[1.0, 0.8, float("nan")], [1.0, 0.6, 0.5]]),
        "hd95": torch.tensor(
            [[float("nan"), 2.0, float("nan")], [float("nan"), float("inf"), 4.0]]
        ),
    }
    s = summarize_cases(per_case, ["bg", "a", "b"])
    assert s["mean"]["a"]["dice"] == pytest.approx(0.7) and s["mean"]["b"]["dice"] == 0.5
    assert s["mean"]["a"]["hd95"] == 2.0 and s["mean"]["a"]["hd95_infinite"] == 1
    assert "hd95" not in s["mean"]["bg"]
    assert s["foreground_mean"]["dice"] == pytest.approx(0.6)
    assert s["foreground_mean"]["hd95"] == 3.0


def test_small_volumes_are_padded_for_inference_and_cropped_back():
    """A case smaller than the deepest stage can take (instance norm needs more than one
    value) is padded, as training pads small volumes, and its logits cropped back."""
    from segnet.models import create_model
    from segnet.serving.inference import Inference

    net = create_model(
        "unet", spatial_dims=3, in_channels=1, out_channels=3, features=[4, 8, 8], norm="instance"
    ).eval()
    inference = Inference.for_net(net)
    assert inference.min_input == 5  # 2 pools: deepest map 2 voxels per axis
    x = torch.randn(1, 1, 3, 4, 6)
    with torch.no_grad():
        out = inference.logits(net, x)
        padded = net(torch.nn.functional.pad(x, (0, 0, 0, 1, 1, 1)))
    assert out.shape == (1, 3, 3, 4, 6)
    torch.testing.assert_close(out, padded[:, :, 1:4, 0:4, :])


def test_mirroring_tta_averages_the_softmax_over_flips():
    from segnet.models import create_model
    from segnet.serving.inference import Inference

    net = create_model("segnet_basic", out_channels=5, features=[4, 4, 4, 4]).eval()
    inference = Inference.for_net(net)
    x = torch.randn(2, 3, 36, 48)
    with torch.no_grad():
        plain = inference.logits(net, x)
        inference.tta = True
        tta = inference.logits(net, x, (72, 96))
        flipped = net(x.flip(-1)).flip(-1)
    # 2D: left-right only (two passes), the mean of the two softmaxes, as log-probabilities
    expected = ((plain.softmax(1) + flipped.softmax(1)) / 2).log()
    expected = torch.nn.functional.interpolate(expected, (72, 96), mode="bilinear")
    torch.testing.assert_close(tta, expected, atol=1e-5, rtol=1e-5)


def test_mirroring_flips_the_axes_training_flipped_and_none_other():
    from segnet.data.info import DataInfo
    from segnet.models import create_model
    from segnet.serving.inference import Inference, check_mirroring

    net = create_model(
        "unet", spatial_dims=3, in_channels=1, out_channels=3, features=[4, 8], norm="instance"
    ).eval()
    x = torch.randn(1, 1, 8, 10, 12)
    inference = Inference.for_net(net, mirror_axes=[1, 2])  # left-right (axis 0) kept
    inference.tta = True
    with torch.no_grad():
        tta = inference.logits(net, x)
        runs = [(), (3,), (4,), (3, 4)]
        probs = [net(x.flip(a)).flip(a).softmax(1) if a else net(x).softmax(1) for a in runs]
    torch.testing.assert_close(tta, (sum(probs) / 4).log(), atol=1e-5, rtol=1e-5)
    # a description written before the axes were recorded: every axis, as before
    info = DataInfo(3, 1, ["bg", "fg"], [[0, 0, 0]] * 2, None, {"kind": "zscore_per_volume"},
                    [8, 8, 8], None, "val/dice", True)  # fmt: skip
    old = {k: v for k, v in info.to_dict().items() if k != "mirror_axes"}
    assert DataInfo.from_dict(old).mirror_axes is None
    assert Inference.for_net(net).mirror_axes is None
    # a network trained without flips has nothing to mirror: refused, not a silent single pass
    check_mirroring(False, [])
    check_mirroring(True, None)
    with pytest.raises(ValueError, match="trained without flips"):
        check_mirroring(True, [])


def test_a_module_with_tta_mirrors_in_testing_but_never_in_validation(monkeypatch):
    from segnet.data.info import DataInfo, rgb_normalization
    from segnet.serving.inference import Inference
    from segnet.training.module import SegmentationModule

    data = DataInfo(2, 3, ["a", "b", "c"], [[0, 0, 0]] * 3, None,
                    rgb_normalization([0.5] * 3, [0.25] * 3), None, None, "val/miou", False)  # fmt: skip
    module = SegmentationModule({"name": "segnet_basic", "features": [4, 4, 4, 4]}, data, tta=True)
    passes = []
    forward = Inference._logits
    monkeypatch.setattr(
        Inference, "_logits", lambda self, net, x: passes.append(1) or forward(self, net, x)
    )
    monkeypatch.setattr(module, "log", lambda *a, **k: None)
    batch = {"image": torch.randn(2, 3, 36, 48), "label": torch.randint(0, 3, (2, 36, 48))}
    with torch.no_grad():
        module._eval_step(batch, "val")
        assert len(passes) == 1  # validation picks the checkpoint on single passes
        module._eval_step(batch, "test")
        assert len(passes) == 3  # the test stage mirrors (2D: left-right, two passes)
    assert module.hparams["tta"] is True  # kept in the checkpoint for evaluate.py


def test_metrics_json_is_strict_json_with_null_for_undefined_scores(tmp_path):
    """A class absent from both label and prediction has no Dice (NaN): metrics.json
    writes null there, which every JSON parser reads (NaN is not JSON)."""
    import json

    from segnet.runs.records import write_metrics

    path = write_metrics(
        tmp_path / "metrics.json",
        {"test/dice": 0.5, "test/dice/absent": float("nan")},
        cases={"hd95": {"one": float("inf"), "two": 1.5}, "per_case": [float("nan"), 2.0]},
    )
    record = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert record["metrics"] == {"test/dice": 0.5, "test/dice/absent": None}
    assert record["cases"] == {"hd95": {"one": None, "two": 1.5}, "per_case": [None, 2.0]}
