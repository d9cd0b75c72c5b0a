"""The commands' own reading of their command line, before Hydra parses it."""

import pytest

from segnet.commands.argv import evaluate_argv, quote_name_rules, train_argv
from tests.conftest import compose_config


@pytest.mark.parametrize("read", [train_argv, evaluate_argv])
def test_a_name_rule_typed_as_documented_reaches_hydra_quoted(read):
    # data.label_name='{id}_manual1' in a shell arrives without its quotes; Hydra alone
    # reads {id}_manual1 as a broken dictionary and stops
    argv = read(["data=images", "data.label_name={id}_manual1", "data.image_name={id}_training",
                 "data.groups={group}_slice*"])  # fmt: skip
    cfg = compose_config("train", argv)
    assert cfg.data.label_name == "{id}_manual1"
    assert cfg.data.image_name == "{id}_training"
    assert cfg.data.groups == "{group}_slice*"


def test_quoted_name_rules_and_other_settings_pass_unchanged():
    argv = ["data.label_name='{id}_mask'", '+data.image_name="{id}"', "data.root={x}", "a=b"]
    assert quote_name_rules(argv) == argv
    assert quote_name_rules(["++data.label_name={id}"]) == ["++data.label_name='{id}'"]
