"""Tests on the real datasets in ../shared/data (skipped where they are absent)."""

import json

import numpy as np
import pytest

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from segnet.data import camvid, nifti
from segnet.data.class_weights import median_frequency
from tests.conftest import compose, shared_dataset


def test_real_camvid_val_split_loads():
    root = shared_dataset("CamVid")
    images, labels, names = camvid.load_split(root, "val")  # list file paths are /SegNet/...
    assert images.shape == (101, 3, 360, 480) and labels.shape == (101, 360, 480)
    assert int(labels.max()) <= camvid.VOID
    assert len(set(names)) == 101


def test_real_camvid_median_frequency_weights_are_sane():
    root = shared_dataset("CamVid")
    _, labels, _ = camvid.load_split(root, "train")
    w = median_frequency(*camvid.class_pixel_counts(labels))
    names = dict(zip(camvid.CLASS_NAMES, w.tolist(), strict=True))
    # frequent classes are down-weighted, rare ones up-weighted, as in the paper's table
    assert names["Road"] < 1 < names["Pole"] and names["Sky"] < 1 < names["Bicyclist"]


def test_real_hippocampus_cases_load_with_their_quirks():
    root = shared_dataset("Task04_Hippocampus")
    cases = nifti.find_cases(root)
    assert len(cases) == 208
    dtypes, shapes = set(), []
    for case in cases:
        v = nifti.load_volume(case, 3)
        dtypes.add(v.image.dtype)
        shapes.append(v.image.shape[1:])
        assert v.label.dtype == np.uint8 and set(np.unique(v.label)) <= {0, 1, 2}
        assert v.label.shape == v.image.shape[1:]
    shapes = np.array(shapes)
    assert shapes.min() >= 24 and shapes.max() <= 59  # the README's 24-59 voxel range


@pytest.mark.slow
def test_real_camvid_short_training_and_evaluation(tmp_path):
    root = shared_dataset("CamVid")
    cfg = compose(
        "train",
        [
            "experiment=camvid_quick",
            f"data.root={root}",
            "trainer.max_epochs=2",
            "trainer.limit_train_batches=20",
            "data.num_workers=1",
        ],
        tmp_path / "run",
    )
    metrics, _ = train(cfg)
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["split"] == "val"  # the shared copy has no test split
    assert saved["metrics"]["test/global_acc"] > 0.3  # well above chance after 40 steps
    ev, _ = evaluate(
        compose(
            "evaluate",
            [f"ckpt_path={tmp_path}/run/checkpoints/best.ckpt", "data.split=val"],
            tmp_path / "ev",
        )
    )
    assert ev["test/miou"] == pytest.approx(metrics["test/miou"], abs=1e-6)


@pytest.mark.slow
def test_real_hippocampus_short_training_learns(tmp_path):
    root = shared_dataset("Task04_Hippocampus")
    cfg = compose(
        "train",
        [
            "experiment=hippocampus_unet3d",
            f"data.root={root}",
            "trainer.max_epochs=4",
            "trainer.check_val_every_n_epoch=1",
            "data.num_workers=1",
        ],
        tmp_path / "run",
    )
    metrics, _ = train(cfg)
    assert metrics["test/dice"] > 0.5  # background-only would score 0
    rows = (tmp_path / "run" / "per_case.csv").read_text().splitlines()
    assert len(rows) == 1 + 42  # header + 20% of 208 cases


@pytest.mark.slow
def test_real_hippocampus_volumes_quick_plans_what_the_tuned_recipe_fixes(tmp_path):
    """The planned recipe on the cases the Hippocampus recipe was tuned on plans that
    recipe's patch, batch and depth, and learns (counted in epochs: no clock)."""
    root = shared_dataset("Task04_Hippocampus")
    overrides = [
        "experiment=volumes_quick", f"data.root={root}", "train_minutes=null",
        "trainer.max_epochs=3", "trainer.check_val_every_n_epoch=1", "data.num_workers=1",
    ]  # fmt: skip
    metrics, objects = train(compose("train", overrides, tmp_path / "run"))
    dm, module = objects["datamodule"], objects["module"]
    assert dm.patch_size == (32, 48, 32) and dm.batch_size == 4
    assert module.hparams["net"]["features"] == [16, 32, 64, 128]
    assert module.hparams["net"].get("pools") is None  # 1 mm every way: all axes halved
    assert metrics["test/dice"] > 0.5
