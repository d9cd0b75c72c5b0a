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


def recorded_figures() -> list[tuple[str, str, str, float]]:
    """``FIGURES``: one line per checkpoint, ``path:data folder:metric:value``, the score
    the commit that wrote it gave with ``evaluate.py ... data.split=val`` on the shared
    data; one line with nothing to read where the folder is not here (the tests skip)."""
    index = CHECKPOINTS / "FIGURES"
    if not index.is_file():
        return [("6564211/camvid_quick/best.ckpt", "CamVid", "miou", float("nan"))]
    lines = [line.split(":") for line in index.read_text().splitlines() if line.strip()]
    return [(path, data, metric, float(value)) for path, data, metric, value in lines]


# The oldest CamVid checkpoint is re-scored in the default suite (the oldest format is the
# one most at risk, and CamVid's val split scores fastest); every other one, 13 to 26 s
# each on 2 cores, in `make test-slow`.
DEFAULT_SUITE = "6564211/camvid_quick/best.ckpt"


def scored(figures: list[tuple[str, str, str, float]]) -> list:
    return [
        pytest.param(*row, marks=() if row[0] == DEFAULT_SUITE else pytest.mark.slow)
        for row in figures
    ]


def earlier_checkpoint(commit: str, name: str) -> Path:
    path = CHECKPOINTS / commit / name / "best.ckpt"
    if not path.is_file():
        pytest.skip(f"no checkpoint of an earlier version at {path}")
    return path


@pytest.mark.parametrize(("path", "dataset", "metric", "score"), scored(recorded_figures()))
def test_a_checkpoint_of_an_earlier_version_evaluates_to_its_recorded_score(
    path, dataset, metric, score, tmp_path
):
    from segnet.commands.evaluate import evaluate

    commit, name, _ = path.split("/", 2)
    ckpt = earlier_checkpoint(commit, name)
    root = shared_dataset(dataset)
    cfg = compose(
        "evaluate",
        [f"ckpt_path={ckpt}", f"data.root={root}", "data.split=val", "data.num_workers=0"],
        tmp_path,
    )
    metrics, _ = evaluate(cfg)
    assert metrics[f"test/{metric}"] == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("name", ["camvid_quick", "hippocampus"])
def test_a_checkpoint_of_6564211_exports_and_reloads(name, tmp_path):
    from segnet.serving.export import export_checkpoint

    diffs = export_checkpoint(earlier_checkpoint("6564211", name), tmp_path, ("safetensors",))
    assert diffs["safetensors"] < 1e-4
    assert (tmp_path / "model.json").is_file()
