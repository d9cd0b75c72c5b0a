"""The training batch planned from memory: the recipe's batch where it fits, fewer where
it does not, and a clear stop where one input alone is too large."""

import logging

import pytest
import torch

from segnet.models.nets.unet import UNet
from segnet.runs.batch_plan import StepMemory, estimated_on_cpu, plan_batch, planned_batch


def small_unet():
    return UNet(spatial_dims=2, in_channels=1, out_channels=2, features=[8, 16, 32])


def test_the_cpu_estimate_grows_with_the_input_and_leaves_the_network_as_it_was():
    net = small_unet().train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    small = estimated_on_cpu(net, (1, 32, 32), "32-true")
    large = estimated_on_cpu(net, (1, 64, 64), "32-true")
    assert large.per_sample == pytest.approx(4 * small.per_sample, rel=0.05)
    assert small.fixed == large.fixed > 0 and not small.measured
    # bf16 activations take half the bytes of fp32 ones
    assert estimated_on_cpu(net, (1, 64, 64), "bf16-mixed").per_sample < 0.75 * large.per_sample
    assert net.training
    for k, v in net.state_dict().items():  # batch-norm statistics untouched
        assert torch.equal(v, before[k]), k


def test_the_batch_is_kept_where_it_fits_and_lowered_where_not(caplog):
    memory = StepMemory(fixed=100, per_sample=10, measured=True)
    with caplog.at_level(logging.INFO, "segnet.runs.batch_plan"):
        assert planned_batch(8, memory, free=1000, shape=(3, 64, 64)) == 8
    assert "batch plan: 8 inputs of 64x64" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, "segnet.runs.batch_plan"):
        assert planned_batch(8, memory, free=155, shape=(3, 64, 64)) == 5
    assert "data.batch_size=8" in caplog.text and "batches of 5" in caplog.text


def test_an_input_too_large_to_train_alone_stops_the_run_saying_what_to_lower():
    memory = StepMemory(fixed=100, per_sample=10, measured=True)
    with pytest.raises(MemoryError, match=r"one training input of 512x512 .*data\.patch_size"):
        planned_batch(2, memory, free=105, shape=(1, 512, 512))


class Planned:
    batch_size = 16

    def train_input_shape(self):
        return (1, 64, 64)


def test_the_datamodule_trains_with_the_planned_batch(monkeypatch):
    net = small_unet()
    one = estimated_on_cpu(net, (1, 64, 64), "32-true")
    free = one.fixed + 3 * one.per_sample + 1
    monkeypatch.setattr("segnet.runs.batch_plan.free_memory", lambda device: free)
    dm = Planned()
    plan_batch(dm, net, torch.device("cpu"), "32-true")
    assert dm.batch_size == 3


def test_no_plan_where_the_training_input_is_not_known():
    dm = Planned()
    dm.train_input_shape = lambda: None
    plan_batch(dm, small_unet(), torch.device("cpu"), "32-true")
    assert dm.batch_size == 16
