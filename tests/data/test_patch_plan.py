"""The training patch, batch and poolings planned from the data (nnU-Net's planning)."""

import math

import pytest

from segnet.data.info import DataInfo, zscore_normalization
from segnet.data.patch_plan import plan_batch_size, plan_volume_patch
from segnet.runs.building import plan_pools, planned_net
from tests.helpers import data_info


def test_a_volume_patch_is_the_median_case_when_it_fits():
    shapes = [(30, 44, 30), (36, 50, 35), (40, 60, 38)]
    assert plan_volume_patch(shapes, (1.0, 1.0, 1.0), 10**6) == (32, 48, 32)


def test_a_patch_over_the_budget_gives_way_along_the_axes_it_spans_most_millimetres_of():
    """Sub-millimetre slices 4 mm apart: the fine axes shrink until they span what the
    thick axis does, so the few slices stay while the in-plane size gives way."""
    patch = plan_volume_patch([(400, 400, 24)] * 3, (0.5, 0.5, 4.0), 48**3)
    assert math.prod(patch) <= 48**3
    assert patch[0] == patch[1] < 400 and patch[2] == 12  # half the slices, a fifth of the rows
    extents = [n * mm for n, mm in zip(patch, (0.5, 0.5, 4.0), strict=True)]
    assert max(extents) / min(extents) < 1.6  # about as long in space along each axis


def test_patch_sides_are_whole_multiples_and_never_below_four():
    assert plan_volume_patch([(100, 37, 11)], (1.0, 1.0, 1.0), 10**6) == (96, 32, 12)
    assert plan_volume_patch([(100, 37, 9)], (1.0, 1.0, 1.0), 10**6) == (96, 32, 8)
    assert plan_volume_patch([(50, 50, 3)], (1.0, 1.0, 1.0), 10**6) == (48, 48, 4)


def test_a_planned_batch_fills_its_voxels_within_five_percent_of_the_data_and_two_at_least():
    assert plan_batch_size((32, 48, 32), [(36, 50, 35)] * 145, 4 * 32 * 48 * 32) == 4
    assert plan_batch_size((64, 64, 64), [(64, 64, 64)] * 400, 64**3 * 8) == 8
    assert plan_batch_size((64, 64, 64), [(64, 64, 64)] * 100, 64**3 * 8) == 5  # 5%
    assert plan_batch_size((64, 64, 64), [(64, 64, 64)] * 3, 64**3 * 8) == 2


def test_poolings_wait_for_a_thick_axis_until_the_others_catch_up():
    assert plan_pools((32, 48, 32), (1.0, 1.0, 1.0), 4) == [[2, 2, 2]] * 3
    # 3 mm slices among 1 mm pixels: the slices are halved from the second level on,
    # and kept once they are under 8 while the pixels go on
    assert plan_pools((64, 64, 16), (1.0, 1.0, 3.0), 4) == [
        [2, 2, 1], [2, 2, 2], [2, 2, 2], [2, 2, 1],
    ]  # fmt: skip
    # an axis of the finest voxels under 8 ends the levels (a patch of 4 at the bottom)
    assert plan_pools((32, 64, 64), (1.0, 1.0, 1.0), 5) == [[2, 2, 2]] * 3
    assert plan_pools((6, 6), (1.0, 1.0), 4) == []


def _volume_info(patch, spacing):
    info = data_info(num_classes=2, spatial_dims=3)
    info["normalization"] = zscore_normalization(None, spacing)
    return DataInfo.from_dict({**info, "patch_size": patch})


def test_a_planned_volume_unet_pools_per_axis_and_keeps_what_was_given():
    net = {"name": "unet", "features": [16, 32, 64, 128, 256], "convs": 1}
    planned = planned_net(net, _volume_info([80, 80, 12], [0.6, 0.6, 3.6]))
    assert planned["pools"] == [[2, 2, 1], [2, 2, 1], [2, 2, 2], [2, 2, 1]]
    assert planned["features"] == net["features"]
    # isotropic voxels, halved alike: no pools written, the deepest level dropped
    planned = planned_net(net, _volume_info([32, 48, 32], [1.0, 1.0, 1.0]))
    assert "pools" not in planned and planned["features"] == [16, 32, 64, 128]
    # pools given are the user's
    given = {**net, "pools": [[2, 2, 2]] * 4}
    assert planned_net(given, _volume_info([80, 80, 12], [0.6, 0.6, 3.6])) is given


@pytest.mark.parametrize("patch", [[128, 128], [64, 96], [48, 64], [32, 32], [32, 48]])
def test_images_of_square_pixels_plan_the_same_depth_as_before_per_axis_pooling(patch):
    """For 2D patches whose short side is at least half the long one, the per-axis plan
    is the depth the shortest side allowed before: every axis halved at every level."""
    net = {"name": "unet", "features": [16, 32, 64, 128, 256], "convs": 1}
    info = DataInfo.from_dict({**data_info(), "patch_size": patch})
    planned = planned_net(net, info)
    levels = 5
    while levels > 2 and min(patch) / 2 ** (levels - 1) < 4:
        levels -= 1
    assert "pools" not in planned and len(planned["features"]) == levels
