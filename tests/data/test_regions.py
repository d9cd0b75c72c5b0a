"""Regions (segnet.data.regions): classes that overlap or nest, checked, turned into
training targets and back into label maps."""

from __future__ import annotations

import json

import pytest
import torch

from segnet.data.dataset_json import indexed_classes
from segnet.data.regions import check_regions, memberships, region_targets, to_label_map
from segnet.training.losses import region_loss
from tests.helpers import nifti_dataset

NAMES = ["background", "anterior", "posterior"]


def test_nested_regions_come_back_as_the_labels_they_were_made_of():
    regions = [[1, 2], [2]]
    label = torch.randint(0, 3, (2, 5, 6, 7))
    inside = region_targets(label, regions)
    assert torch.equal(to_label_map(inside, regions, None, 3), label)
    assert torch.equal(to_label_map(inside, regions, [1, 2], 3), label)  # nnU-Net's order


def test_overlapping_regions_decode_by_membership_and_a_painting_order_paints():
    regions = [[1, 2], [2, 3]]  # overlapping, neither inside the other
    label = torch.arange(4).view(1, 4)
    assert torch.equal(to_label_map(region_targets(label, regions), regions, None, 4), label)
    assert memberships(regions, 4).tolist() == [
        [False, False],
        [True, False],
        [True, True],
        [False, True],
    ]
    # an impossible prediction (the inner region without the outer) goes to the inner label
    # by membership, as nnU-Net's painting order (outer, then inner) does
    odd = torch.tensor([[[False], [True]]])
    assert to_label_map(odd, [[1, 2], [2]], None, 3).tolist() == [[2]]
    assert to_label_map(odd, [[1, 2], [2]], [1, 2], 3).tolist() == [[2]]


@pytest.mark.parametrize(
    ("regions", "order", "message"),
    [
        ({"a": [0, 1]}, None, r"the background \(0\) is in no region"),
        ({"a": [3]}, None, r"foreground label values \(1 to 2: anterior, posterior\)"),
        ({"a": [1, 2], "b": [2, 1]}, None, "two regions hold the same label values"),
        ({"a": [1, 2], "b": [2]}, [2, 2, 2], "one label value per region"),
        ({"a": [1, 2], "b": [2]}, [2, 1], "each one of its region's values"),
        (None, [1], "regions_class_order is set without data.regions"),
        ([1, 2], None, "give each region a name"),
        ({"posterior": [2]}, None, r"anterior \(1\) would never be predicted: no region holds"),
        ({"a": [1, 2], "b": [2]}, [1, 1], "one label value per region|paints none"),
    ],
)
def test_bad_regions_are_refused_naming_the_setting(regions, order, message):
    with pytest.raises(ValueError, match=message):
        check_regions(regions, order, NAMES)


def test_a_region_loss_is_small_where_the_regions_are_right_and_leaves_void_out():
    target = torch.tensor([[[0, 1, 2, 9]]])
    right = torch.tensor([[[[-9.0, 9, 9, 9]], [[-9.0, -9, 9, -9]]]])
    wrong = -right
    regions = [[1, 2], [2]]
    assert region_loss(right, target, regions, 9, 1.0, 1.0) < 0.01
    assert region_loss(wrong, target, regions, 9, 1.0, 1.0) > 1.0
    void_changed = right.clone()
    void_changed[..., 3] = -void_changed[..., 3]
    assert torch.allclose(
        region_loss(right, target, regions, 9, 1.0, 1.0),
        region_loss(void_changed, target, regions, 9, 1.0, 1.0),
    )


def test_nnunet_region_labels_in_dataset_json_are_read(tmp_path):
    root = nifti_dataset(tmp_path / "d", "msd", n=2)
    index = json.loads((root / "dataset.json").read_text())
    index["labels"] = {"background": 0, "whole": [1, 2], "inner": 2}
    index["regions_class_order"] = [1, 2]
    (root / "dataset.json").write_text(json.dumps(index))
    found = indexed_classes(root)
    assert found.class_names == ["background", "label_1", "inner"]
    assert (found.regions, found.regions_class_order) == ({"whole": [1, 2], "inner": [2]}, [1, 2])
    from segnet.data.nifti_datamodule import NiftiDataModule

    dm = NiftiDataModule(str(root), num_workers=0, val_fraction=0.5, test_fraction=0.0)
    dm.prepare_data()
    info = dm.info()
    assert info.regions == {"whole": [1, 2], "inner": [2]} and info.regions_class_order == [1, 2]
    assert info.out_channels == 2 and info.output_names == ["whole", "inner"]
