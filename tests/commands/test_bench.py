"""The benchmark: the README's commands compose, and a tiny run prints every figure."""

import json

import pytest
import torch
from omegaconf import open_dict

from segnet.commands import bench
from tests.conftest import TINY_CAMVID, compose_config, project_configs


def compose_bench(overrides):
    return compose_config("bench", overrides, hydra=True)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["trainer=gpu"],
        ["trainer=gpu", "run=[camvid_full]"],
        ["'extra_overrides=[\"data.num_workers=8\"]'"],
        ["trainer.precision=bf16-mixed", "trainer.max_epochs=3"],
    ],
)
def test_readme_commands_compose_every_recipe(command):
    """`python -m segnet.bench trainer=gpu` and friends, as the README writes them."""
    cfg = compose_bench([c.strip("'") for c in command])
    names = cfg.run or list(cfg.recipes)
    for name in names:
        recipe = compose_config("train", bench.recipe_overrides(cfg, name))
        assert recipe.trainer.accelerator == ("gpu" if "trainer=gpu" in command else "auto")
        if "trainer.precision=bf16-mixed" in command:  # the bench's own trainer settings
            assert recipe.trainer.precision == "bf16-mixed" and recipe.trainer.max_epochs == 3
    if "run=[camvid_full]" in command:
        assert cfg.recipes.camvid_full[0] == "experiment=camvid_segnet"


def test_full_size_recipe_is_skipped_on_cpu_unless_asked():
    cfg = compose_bench([])
    expected = ["camvid", "hippocampus", "images"] + (
        ["camvid_full"] if torch.cuda.is_available() else []
    )
    assert bench.recipes_to_run(cfg) == expected
    assert bench.recipes_to_run(compose_bench(["run=[camvid_full]"])) == ["camvid_full"]
    with pytest.raises(ValueError, match="unknown"):
        bench.recipes_to_run(compose_bench(["run=[nope]"]))


def test_tiny_bench_measures_pipeline_and_bare_loop_on_one_device(tiny_camvid, tmp_path):
    cfg = compose_bench(
        ["run=[tiny]", "steps=2", "warmup=1", "repeats=1", "epochs=2", "data_samples=4"]
        + ["profile=2"]
    )
    with open_dict(cfg):
        cfg.recipes.tiny = [*TINY_CAMVID, f"data.root={tiny_camvid}"]
        cfg.paths.output_dir = str(tmp_path)
    lines = []
    with project_configs():
        results = bench.run(cfg, out=lines.append)
    r = results["tiny"]
    text = "\n".join(lines)
    for label in (
        "pipeline / bare",
        "network alone (synthetic)",
        "pipeline / network alone",
        "epoch train.py / bare",
        "per worker",
        "GFLOP/s",
        "weight EMA",
    ):
        assert label in text
    assert r["device"] == "cpu" and r["precision"] == "32-true"
    assert r["pipeline_samples_s"] > 0 and r["bare_samples_s"] > 0 and r["network_samples_s"] > 0
    # one window of each per repeat, and the ratio's spread over them around its median
    assert {k: len(v) for k, v in r["windows"].items()} == {"pipeline": 1, "bare": 1, "network": 1}
    lo, med, hi = r["ratio_spread"]
    assert lo <= med <= hi
    assert r["pipeline_epoch_s"] > 0 and r["bare_epoch_s"] > 0
    assert r["ema_update_ms"]["per_tensor"] > 0 and r["ema_update_ms"]["fused"] > 0
    assert r["flops_per_sample"] > 0 and r["data_samples_s_per_worker"] > 0
    # the profiler's table names the network's own operators, and the figures are kept
    table = (tmp_path / "profile_tiny.txt").read_text()
    assert "2 steps of the network alone" in table and "aten::convolution" in table
    assert json.loads((tmp_path / "bench.json").read_text())["tiny"]["profile"] == str(
        tmp_path / "profile_tiny.txt"
    )


def test_a_gpu_trainer_in_extra_overrides_is_refused_before_any_recipe(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    printed = []
    cfg = compose_bench(['extra_overrides=["trainer.accelerator=gpu"]'])
    with (
        project_configs(),
        pytest.raises(ValueError, match="accelerator=gpu.*without trainer=gpu"),
    ):
        bench.run(cfg, out=printed.append)
    assert printed == []  # nothing was measured or announced


def test_bare_loop_predicts_single_pass_like_validation_even_for_a_mirroring_recipe(monkeypatch):
    """The inference figure and the bare epoch's validation mirror what train.py's
    validation does: a recipe's mirroring TTA belongs to its test stage only."""
    import contextlib

    from segnet.serving.inference import Inference
    from segnet.training.module import SegmentationModule
    from tests.helpers import data_info

    net = {"name": "segnet_basic", "features": [4, 4, 4, 4]}
    module = SegmentationModule(net, data_info(), tta=True)
    passes = []
    forward = Inference._logits
    monkeypatch.setattr(
        Inference, "_logits", lambda self, net, x: passes.append(1) or forward(self, net, x)
    )
    loop = bench.BareLoop.__new__(bench.BareLoop)  # the loop's state, without a trainer
    loop.device, loop.module, loop.net = torch.device("cpu"), module, module.net
    loop.amp, loop.memory = contextlib.nullcontext(), torch.contiguous_format
    batch = {"image": torch.randn(2, 3, 36, 48), "label": torch.randint(0, 3, (2, 36, 48))}
    module.eval()
    loop.eval_step(batch, with_loss=True)
    assert len(passes) == 1
    assert module.tta  # the recipe's own setting is left as it was
