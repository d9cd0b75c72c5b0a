"""debug=fdr (one batch through every stage) and debug=limit (a short complete run) work for
every experiment recipe, BatchNorm recomputation and per-case outputs included."""

import json
import logging

import pytest

from segnet.commands.train import train
from tests.conftest import CONFIGS, compose
from tests.helpers import nifti_dataset

EXPERIMENTS = sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml"))
# On this CPU machine: no downloads, no GPU, no worker processes.
CPU = ["trainer.accelerator=cpu", "trainer.precision=32-true", "data.num_workers=0"]


@pytest.fixture(scope="module")
def volumes(tmp_path_factory):
    return nifti_dataset(tmp_path_factory.mktemp("vol") / "data", "msd", n=8, shape=(19, 23, 17))


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    from tests.data.test_images import make_folder

    return make_folder(tmp_path_factory.mktemp("img") / "data", n=10)


# The full-size GPU and paper recipes (VGG16-BN on CamVid frames, the GPU recipes' wide
# networks) cost seconds a batch on a CPU: the slow suite runs their debug passes; every
# other recipe's one-batch pass (fdr) and short run (limit) stay in the default one.
HEAVY = {"camvid_gpu", "camvid_segnet", "hippocampus_gpu", "camvid_segnet_basic"}
LIGHT_PASS = {"camvid_segnet_basic"}  # its one-batch pass is light enough; its short run not
CASES = [
    pytest.param(e, d, marks=pytest.mark.slow)
    if e in HEAVY and (d == "limit" or e not in LIGHT_PASS)
    else (e, d)
    for e in EXPERIMENTS
    for d in ("fdr", "limit")
]


@pytest.mark.parametrize(("experiment", "debug"), CASES)
def test_debug_runs_for_every_experiment(
    experiment, debug, tiny_camvid, volumes, images, tmp_path, caplog
):
    overrides = [f"experiment={experiment}", f"debug={debug}", *CPU]
    if experiment.startswith("camvid"):
        overrides += [f"data.root={tiny_camvid}", "data.batch_size=2", "data.eval_batch_size=2"]
    elif experiment.startswith("images"):
        overrides += [
            f"data.root={images}", "data.class_names=[background,disc]",
            "data.label_values=[0,255]", "data.max_patch=32", "data.batch_size=2",
        ]  # fmt: skip
    else:
        overrides += [f"data.root={volumes}", "data.patch_size=[16,16,16]", "data.batch_size=2"]
    cfg = compose("train", overrides, tmp_path)
    if cfg.model.net.get("encoder_weights"):  # VGG encoders: no ImageNet download here
        cfg.model.net.encoder_weights = None
    with caplog.at_level(logging.INFO):  # the warning and the run's summary
        metrics, objects = train(cfg)
    assert any(k.startswith("test/") for k in metrics), sorted(metrics)
    if debug == "fdr":
        # the warning and the summary name what was given (debug=fdr sets fast_dev_run),
        # not a limit Lightning set from it
        assert "trainer.fast_dev_run=True: the test metrics cover 1" in caplog.text
        assert "(part of it: trainer.fast_dev_run=True)" in caplog.text
        said = [
            r.getMessage()
            for r in caplog.records  # the warnings and the summary (the config lists it)
            if r.levelno >= logging.WARNING or r.getMessage().startswith("summary")
        ]
        assert not any("limit_test_batches" in message for message in said), said
    if objects["cfg"].recompute_bn and objects["module"].bn_recomputed:
        # one batch per training batch the debug run allows, not the whole training set
        assert objects["module"].bn_recomputed["batches"] <= 4
    if debug == "limit":
        saved = json.loads((tmp_path / "metrics.json").read_text())
        assert saved["split"] in ("test", "val")
        if experiment.startswith("hippocampus"):
            rows = (tmp_path / "per_case.csv").read_text().splitlines()
            assert len(rows) >= 2  # header + the cases tested (complete rows only)


def test_a_gpu_recipe_on_a_cpu_without_bf16_units_trains_in_fp32_on_its_cores(
    volumes, tmp_path, caplog, monkeypatch
):
    """debug=fdr of a GPU recipe on a machine without a GPU: bf16, which such a CPU would
    emulate (a 3D step 33x slower), becomes fp32, and the recipe's 8 loader workers the
    machine's cores, each said in one line."""
    from segnet.runs import building

    monkeypatch.setattr(building, "cpu_has_bf16_units", lambda: False)
    monkeypatch.setattr(building.os, "cpu_count", lambda: 1)
    overrides = [
        "experiment=hippocampus_gpu", "debug=fdr", f"data.root={volumes}",
        "data.patch_size=[16,16,16]", "data.batch_size=2",
        "data.num_workers=8",  # the recipe's own (debug=fdr sets 0)
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="segnet.commands.train"):
        _, objects = train(compose("train", overrides, tmp_path))
    assert str(objects["trainer"].precision) == "32-true"
    assert objects["cfg"].data.num_workers == 1
    assert "training in fp32 (32-true) instead" in caplog.text
    assert "data.num_workers=8 on a CPU with 1 core(s)" in caplog.text
