"""The Lovasz-softmax term (1 - IoU for hard predictions, void left out, strided), soft
Dice with void left out, and the bootstrapped cross-entropy (the hardest pixels only)."""

import math

import pytest
import torch

from segnet.training.losses import (
    deep_supervision_weights,
    labels_at,
    lovasz_softmax,
    soft_dice,
    top_k_cross_entropy,
)


def hard_logits(pred: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Logits whose softmax is (numerically) the one-hot of ``pred``."""
    return torch.nn.functional.one_hot(pred, num_classes).movedim(-1, 1).float() * 100.0


def test_hard_predictions_give_one_minus_iou_averaged_over_present_classes():
    torch.manual_seed(0)
    target = torch.randint(0, 3, (2, 9, 11))
    pred = torch.where(torch.rand(2, 9, 11) < 0.7, target, torch.randint(0, 4, (2, 9, 11)))
    expected = []
    for c in target.unique():
        inter = ((pred == c) & (target == c)).sum()
        union = ((pred == c) | (target == c)).sum()
        expected.append(1 - inter / union)
    got = lovasz_softmax(hard_logits(pred, 4), target)
    torch.testing.assert_close(got, torch.stack(expected).float().mean(), atol=1e-5, rtol=0)


def test_ignored_pixels_take_no_part_and_the_loss_has_gradients():
    torch.manual_seed(1)
    target = torch.randint(0, 3, (1, 8, 8))
    target[:, :2] = 11  # void rows
    logits = torch.randn(1, 3, 8, 8, requires_grad=True)
    loss = lovasz_softmax(logits, target, ignore_index=11)
    changed = logits.detach().clone()
    changed[:, :, :2] = torch.randn(1, 3, 2, 8) * 10  # only where the label is void
    torch.testing.assert_close(lovasz_softmax(changed, target, ignore_index=11), loss.detach())
    loss.backward()
    assert logits.grad[:, :, :2].abs().sum() == 0 and logits.grad[:, :, 2:].abs().sum() > 0
    everything_void = torch.full_like(target, 11)
    assert float(lovasz_softmax(logits, everything_void, ignore_index=11)) == 0.0


def test_stride_evaluates_on_every_nth_pixel_of_each_spatial_axis():
    torch.manual_seed(2)
    logits, target = torch.randn(2, 4, 6, 6, 6), torch.randint(0, 4, (2, 6, 6, 6))
    sub = lovasz_softmax(logits[..., ::2, ::2, ::2], target[..., ::2, ::2, ::2])
    torch.testing.assert_close(lovasz_softmax(logits, target, stride=2), sub)


def test_top_k_cross_entropy_averages_the_hardest_labelled_pixels():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, 7)
    target = torch.randint(0, 4, (2, 6, 7))
    target[0, :2] = 11  # void rows
    per_pixel = torch.nn.functional.cross_entropy(logits, target, ignore_index=11, reduction="none")
    labelled = per_pixel[target != 11]
    # all pixels: the plain mean over labelled pixels
    torch.testing.assert_close(
        top_k_cross_entropy(logits, target, 1.0, ignore_index=11), labelled.mean()
    )
    # a quarter: the mean of the largest quarter of the labelled losses
    k = round(0.25 * labelled.numel())
    expected = labelled.sort(descending=True).values[:k].mean()
    torch.testing.assert_close(top_k_cross_entropy(logits, target, 0.25, ignore_index=11), expected)
    # void pixels never count, however wrong the prediction there
    changed = logits.clone()
    changed[0, :, :2] = torch.tensor([-50.0, 50.0, 50.0, 50.0]).view(4, 1, 1)
    torch.testing.assert_close(
        top_k_cross_entropy(changed, target, 0.25, ignore_index=11), expected
    )


def test_top_k_cross_entropy_scales_pixels_by_their_class_weight_and_checks_the_fraction():
    logits = torch.zeros(1, 2, 1, 4)  # every pixel equally unsure: loss ln 2 each
    target = torch.tensor([[[0, 0, 0, 1]]])
    weight = torch.tensor([1.0, 3.0])
    # the class-1 pixel, weighted 3x, is the hardest one
    got = top_k_cross_entropy(logits, target, 0.25, weight=weight)
    torch.testing.assert_close(got, torch.tensor(3 * math.log(2)))
    with pytest.raises(ValueError, match="fraction"):
        top_k_cross_entropy(logits, target, 0.0)


def test_the_module_trains_on_the_hardest_pixels_with_its_class_weights():
    from segnet.data.info import DataInfo, rgb_normalization
    from segnet.training.module import SegmentationModule

    data = DataInfo(2, 3, ["a", "b", "c"], [[0, 0, 0]] * 3, 3,
                    rgb_normalization([0.5] * 3, [0.25] * 3), None, None, "val/miou", False)  # fmt: skip
    net = {"name": "segnet_basic", "features": [4, 4, 4, 4]}
    weights = [1.0, 2.0, 0.5]
    module = SegmentationModule(net, data, class_weights=weights, ce_top_k=0.3)
    torch.manual_seed(0)
    logits, target = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8))
    expected = top_k_cross_entropy(logits, target, 0.3, torch.tensor(weights), ignore_index=3)
    torch.testing.assert_close(module.compute_loss(logits, target), expected)
    with pytest.raises(ValueError, match="model.ce_top_k"):
        SegmentationModule(net, data, ce_top_k=1.5)


def test_soft_dice_without_an_ignore_label_is_monais_own():
    from monai.losses import DiceLoss

    torch.manual_seed(0)
    logits, target = torch.randn(2, 3, 5, 6, 7), torch.randint(0, 3, (2, 5, 6, 7))
    monai_own = DiceLoss(include_background=False, to_onehot_y=True, softmax=True, batch=True)
    ours = soft_dice(logits, target, DiceLoss(include_background=False, batch=True))
    torch.testing.assert_close(ours, monai_own(logits, target.unsqueeze(1)))


def test_soft_dice_leaves_void_out_and_scores_the_labelled_pixels():
    from monai.losses import DiceLoss

    loss = DiceLoss(include_background=True, batch=True)
    torch.manual_seed(0)
    target = torch.randint(0, 4, (2, 9, 11))  # 3 is void
    perfect = hard_logits(target.clamp(max=2), 3)
    void = target == 3
    assert void.any()
    # whatever is predicted on void pixels, a perfect prediction elsewhere scores ~0
    noisy = torch.where(void.unsqueeze(1), torch.randn(2, 3, 9, 11) * 50, perfect)
    assert soft_dice(noisy, target, loss, ignore_index=3) < 1e-4
    # a wrong prediction on labelled pixels does count
    wrong = hard_logits((target + 1) % 3, 3)
    assert soft_dice(wrong, target, loss, ignore_index=3) > 0.9
    # and the term has gradients on labelled pixels only
    logits = torch.randn(2, 3, 9, 11, requires_grad=True)
    soft_dice(logits, target, loss, ignore_index=3).backward()
    assert logits.grad[void.unsqueeze(1).expand_as(logits)].abs().max() == 0
    assert logits.grad[~void.unsqueeze(1).expand_as(logits)].abs().max() > 0


def test_the_module_adds_soft_dice_with_a_void_label():
    from monai.losses import DiceLoss

    from segnet.data.info import DataInfo, rgb_normalization
    from segnet.training.module import SegmentationModule

    data = DataInfo(2, 3, ["a", "b", "c"], [[0, 0, 0]] * 3, 3,
                    rgb_normalization([0.5] * 3, [0.25] * 3), None, None, "val/miou", False)  # fmt: skip
    net = {"name": "segnet_basic", "features": [4, 4, 4, 4]}
    module = SegmentationModule(net, data, loss={"ce": 1.0, "dice": 0.5})
    torch.manual_seed(0)
    logits, target = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8))
    ce = torch.nn.functional.cross_entropy(logits, target, ignore_index=3)
    dice = soft_dice(logits, target, DiceLoss(include_background=True, batch=True), 3)
    torch.testing.assert_close(module.compute_loss(logits, target), ce + 0.5 * dice)


def test_labels_at_takes_each_blocks_centre_and_never_blends_void():
    """A coarse voxel covers a block of the full-resolution grid; its target is the label
    nearest the block's centre (at 1/2 the second voxel of each pair, at 1/8 the fifth of
    each 8), not the block's first corner."""
    target = torch.randint(0, 4, (2, 8, 6, 4))
    target[0, 2, 2, 2] = 255
    torch.testing.assert_close(labels_at(target, (4, 3, 2)), target[:, 1::2, 1::2, 1::2])
    line = torch.arange(40)[None, :, None].expand(1, 40, 8)
    assert labels_at(line, (5, 1))[0, :, 0].tolist() == [4, 12, 20, 28, 36]
    assert labels_at(target, (8, 6, 4)) is target
    assert set(labels_at(target, (3, 5, 3)).unique().tolist()) <= {0, 1, 2, 3, 255}


def test_the_module_scores_deep_supervision_outputs_at_every_scale():
    from monai.losses import DiceLoss

    from segnet.data.info import DataInfo, zscore_normalization
    from segnet.training.module import SegmentationModule

    data = DataInfo(3, 1, ["bg", "a", "b"], [[0, 0, 0]] * 3, None,
                    zscore_normalization(None), None, None, "val/dice", False)  # fmt: skip
    net = {"name": "unet", "features": [4, 8, 8], "deep_supervision": 1}
    module = SegmentationModule(net, data, loss={"ce": 1.0, "dice": 1.0})
    torch.manual_seed(0)
    full, half = torch.randn(2, 3, 8, 6, 4), torch.randn(2, 3, 4, 3, 2)
    target = torch.randint(0, 3, (2, 8, 6, 4))
    dice = DiceLoss(include_background=False, batch=True)

    def terms(logits, labels):
        ce = torch.nn.functional.cross_entropy(logits, labels)
        return ce + soft_dice(logits, labels, dice)

    w_full, w_half = deep_supervision_weights(2)
    assert (w_full, w_half) == pytest.approx((2 / 3, 1 / 3))
    expected = w_full * terms(full, target) + w_half * terms(half, target[:, 1::2, 1::2, 1::2])
    torch.testing.assert_close(module.compute_loss([full, half], target), expected)
    # and a training step feeds the network's list of outputs to it
    module.net.train()
    outs = module.net(torch.randn(2, 1, 8, 8, 8))
    assert isinstance(outs, list) and len(outs) == 2


def test_cross_entropy_is_torchs_mean_and_zero_for_a_batch_of_void_alone():
    """nn.CrossEntropyLoss's own figure (class weights included); a batch with no
    labelled pixel (a crop of void) gives 0 and finite gradients, not NaN, in every loss
    term the module adds."""
    from segnet.data.info import DataInfo, rgb_normalization
    from segnet.training.losses import cross_entropy
    from segnet.training.module import SegmentationModule

    torch.manual_seed(0)
    weights = torch.tensor([1.0, 2.0, 0.5])
    logits, target = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8))
    expected = torch.nn.CrossEntropyLoss(weight=weights, ignore_index=3)(logits, target)
    ce = torch.nn.CrossEntropyLoss(weight=weights, ignore_index=3)
    assert torch.equal(cross_entropy(ce, logits, target), expected)

    data = DataInfo(2, 3, ["a", "b", "c"], [[0, 0, 0]] * 3, 3,
                    rgb_normalization([0.5] * 3, [0.25] * 3), None, None, "val/miou", False)  # fmt: skip
    net = {"name": "segnet_basic", "features": [4, 4, 4, 4]}
    module = SegmentationModule(
        net, data, class_weights=weights.tolist(), loss={"ce": 1.0, "dice": 0.5, "lovasz": 0.5}
    )
    void = torch.full((2, 8, 8), 3)
    logits.requires_grad_(True)
    loss = module.compute_loss(logits, void)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
