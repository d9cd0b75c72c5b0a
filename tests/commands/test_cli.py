"""The commands look alike: console scripts that are the python forms, and segnet.serving.predict
taking key=value as every other command does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from segnet.commands.predict import from_key_values
from tests.conftest import REPO


def test_predict_takes_key_value_and_keeps_its_flags():
    assert from_key_values(["model=m.onnx", "inputs=[a.png,b.png]", "out=masks", "tta=false"]) == [
        "m.onnx", "a.png", "b.png", "--out", "masks", "--no-tta",
    ]  # fmt: skip
    assert from_key_values(["m.onnx", "a.png", "--out", "masks"]) == [
        "m.onnx", "a.png", "--out", "masks",
    ]  # fmt: skip
    assert from_key_values(["model=m.onnx", "input=a.png", "out=o", "device=cuda:1"])[-2:] == [
        "--device", "cuda:1",
    ]  # fmt: skip
    with pytest.raises(
        SystemExit, match=r"outdir=masks: python -m segnet.predict takes model=, inputs="
    ):
        from_key_values(["model=m.onnx", "outdir=masks"])
    with pytest.raises(SystemExit, match="tta=maybe"):
        from_key_values(["model=m.onnx", "tta=maybe"])
    both = ["model=m.onnx", "input=a.png", "postprocess=false", "save_probabilities=true"]
    assert from_key_values(both)[-2:] == ["--no-postprocess", "--save-probabilities"]
    assert from_key_values(["model=m.onnx", "save_probabilities=false"]) == ["m.onnx"]
    with pytest.raises(SystemExit, match="postprocess=off: true or false"):
        from_key_values(["model=m.onnx", "postprocess=off"])


@pytest.mark.parametrize(
    ("script", "expect"),
    [("train", "Recipes (experiment=<name>"), ("evaluate", "ckpt_path"), ("predict", "key=value")],
)
def test_console_scripts_are_the_python_commands(script, expect):
    code = f"import sys; sys.argv = ['segnet-{script}', '--help']; from segnet.cli import {script}; {script}()"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert expect in proc.stdout, proc.stdout[-2000:]
