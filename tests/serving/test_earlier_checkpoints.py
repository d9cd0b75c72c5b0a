"""Checkpoints written by earlier versions keep working: users keep theirs for years.

``../shared/checkpoints/<commit>/`` holds checkpoints written by that commit of ``main``
(barely trained: the point is the file format), with the scores that commit's
``evaluate.py`` gave them on the shared data. Today's reader, evaluation and export must
give the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO, compose, shared_dataset

CHECKPOINTS = Path(
    os.environ.get("SEGNET_SHARED_CHECKPOINTS", REPO.parent / "shared" / "checkpoints")
)

# (folder, dataset, metric, the score 6564211 gave on the shared val split)
WRITTEN_BY_6564211 = [
    ("camvid_quick", "CamVid", "test/miou", 0.037217),
    ("hippocampus", "Task04_Hippocampus", "test/dice", 0.068429),
]


def earlier_checkpoint(commit: str, name: str) -> Path:
    path = CHECKPOINTS / commit / name / "best.ckpt"
    if not path.is_file():
        pytest.skip(f"no checkpoint of an earlier version at {path}")
    return path


@pytest.mark.parametrize(("name", "dataset", "metric", "score"), WRITTEN_BY_6564211)
def test_a_checkpoint_of_6564211_evaluates_to_its_own_score(name, dataset, metric, score, tmp_path):
    from segnet.commands.evaluate import evaluate

    ckpt = earlier_checkpoint("6564211", name)
    root = shared_dataset(dataset)
    cfg = compose(
        "evaluate",
        [f"ckpt_path={ckpt}", f"data.root={root}", "data.split=val", "data.num_workers=0"],
        tmp_path,
    )
    metrics, _ = evaluate(cfg)
    assert metrics[metric] == pytest.approx(score, abs=2e-6)


@pytest.mark.parametrize("name", ["camvid_quick", "hippocampus"])
def test_a_checkpoint_of_6564211_exports_and_reloads(name, tmp_path):
    from segnet.serving.export import export_checkpoint

    diffs = export_checkpoint(earlier_checkpoint("6564211", name), tmp_path, ("safetensors",))
    assert diffs["safetensors"] < 1e-4
    assert (tmp_path / "model.json").is_file()
