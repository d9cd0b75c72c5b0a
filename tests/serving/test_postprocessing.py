"""Keeping the largest connected component, and choosing where it helps on validation
(segnet.serving.postprocessing), on label maps made by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from segnet.serving.postprocessing import Postprocessing, candidate_dice, choose, largest_component


def test_parts_that_touch_at_a_corner_are_one_component():
    mask = np.zeros((5, 5), bool)
    mask[0, 0] = mask[1, 1] = mask[2, 2] = True  # a diagonal: one part (8-connected)
    mask[4, 4] = True  # a part of its own, smaller
    kept = largest_component(mask)
    assert kept[:3, :3].sum() == 3 and not kept[4, 4]
    volume = np.zeros((3, 3, 3), bool)
    volume[0, 0, 0] = volume[1, 1, 1] = True  # a 3D corner: one part (26-connected)
    assert largest_component(volume).sum() == 2


def test_the_steps_set_what_they_drop_to_background():
    pred = torch.zeros(1, 8, 8, dtype=torch.long)
    pred[0, :3, :3] = 1  # the largest foreground part
    pred[0, 6, 6] = 1  # a speck of class 1
    pred[0, 5:8, 0:2] = 2  # class 2: apart from the rest, smaller than the first part
    by_foreground = Postprocessing(foreground=True).apply(pred)[0]
    assert by_foreground[6, 6] == 0 and (by_foreground[5:8, 0:2] == 0).all()
    by_class = Postprocessing(classes=(1,)).apply(pred)[0]
    assert by_class[6, 6] == 0 and (by_class[5:8, 0:2] == 2).all()  # class 2 untouched
    assert torch.equal(Postprocessing().apply(pred), pred)  # none: as predicted
    assert Postprocessing.from_dict(Postprocessing(True, (2,)).to_dict()) == Postprocessing(
        True, (2,)
    )
    assert not Postprocessing.from_dict(None)


def cases(n: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Class 1 is one blob in every label, predicted with a false speck far from it; class
    2 is two blobs, both predicted: its largest component alone would lose one."""
    target = torch.zeros(n, 16, 16, dtype=torch.long)
    target[:, 2:7, 2:7] = 1
    target[:, 10:13, 2:5] = 2
    target[:, 10:12, 10:12] = 2
    pred = target.clone()
    pred[:, 14, 14] = 1
    return pred, target


def test_a_step_is_kept_where_it_raises_validation_dice_and_not_where_it_lowers_it():
    pred, target = cases()
    rows = candidate_dice(pred, target, 3, None)
    assert rows.shape == (4, 4, 3) and rows[:, :, 0].isnan().all()  # never on background
    plan, record = choose(rows, ["background", "one", "two"])
    # the speck goes with class 1's step; the foreground step would drop a blob of class 2
    assert plan == Postprocessing(foreground=False, classes=(1,))
    assert record["classes"] == ["one"] and record["foreground"] is False
    assert record["val_dice_with"] > record["val_dice_without"]
    assert (
        record["val_dice_per_class"]["two"]["with"]
        == record["val_dice_per_class"]["two"]["without"]
    )
    after = plan.apply(pred)
    assert torch.equal(after, target)  # here the chosen step gives the labels back


def test_the_foreground_step_is_kept_where_it_helps():
    target = torch.zeros(3, 12, 12, dtype=torch.long)
    target[:, 2:8, 2:5] = 1
    target[:, 2:8, 5:8] = 2  # two classes side by side: one foreground part
    pred = target.clone()
    pred[:, 10, 10] = 2  # a speck of class 2 away from everything
    plan, record = choose(candidate_dice(pred, target, 3, None), ["bg", "a", "b"])
    assert plan.foreground and record["val_dice_with"] == pytest.approx(1.0)


def test_ignored_pixels_are_left_out_of_the_choice():
    pred, target = cases(2)
    target[:, 14, 14] = 3  # the speck lies on void: it costs nothing, so nothing is gained
    plan, _ = choose(candidate_dice(pred, target, 3, ignore_index=3), ["bg", "one", "two"])
    assert plan == Postprocessing()
