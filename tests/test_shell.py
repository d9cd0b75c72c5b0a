"""Commands printed for the user to paste mean the same once pasted into a shell and read
by Hydra: paths with commas, spaces, quotes or "${" stay one value."""

import shlex

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from segnet.shell import command, override

ODD_PATHS = [
    "outputs/2026-11-25/10-00-00/checkpoints/last.ckpt",
    "/runs/sweep,lr=(0.1)/0/checkpoints/best.ckpt",
    "/runs/my run/best.ckpt",
    "/runs/it's/best.ckpt",
    '/runs/"quoted"/best.ckpt',
    "/runs/[a]{b}/best.ckpt",
    "/runs/${x}/best.ckpt",
    "/runs/$HOME/best.ckpt",
    "C:\\runs\\",
    'back\\"slash',
]


def pasted(line: str):
    """What ``line`` (one ``key=value``) gives in a composed config, once pasted."""
    (word,) = shlex.split(line)
    parsed = OverridesParser.create().parse_override(word)
    config = OmegaConf.create({parsed.key_or_group: parsed.value()})
    return OmegaConf.to_container(config, resolve=True)[parsed.key_or_group]


@pytest.mark.parametrize("path", ODD_PATHS)
def test_a_path_stays_one_value(path):
    assert pasted(override("ckpt_path", path)) == path


def test_a_list_of_paths_stays_that_list():
    assert pasted(override("ckpt_path", ODD_PATHS)) == ODD_PATHS


def test_overrides_stay_one_word_each():
    words = ["python", "train.py", "+callbacks.ema={_target_:x.Y,decay:0.99}", "a=[1,2]"]
    assert shlex.split(command(*words)) == words
