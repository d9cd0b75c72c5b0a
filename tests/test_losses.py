"""The Lovasz-softmax term: 1 - IoU for hard predictions, void left out, strided."""

import torch

from segnet.losses import lovasz_softmax


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
