"""The commands' own reading of their command line, before Hydra parses it."""

import pytest

from segnet.commands.argv import evaluate_argv, quote_name_rules, quote_plain_values, train_argv
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


@pytest.mark.parametrize("read", [train_argv, evaluate_argv])
@pytest.mark.parametrize(
    "root", ["/data/Études/", "/data/Photos (2024)/", "/data/it's mine", "C:\\Users\\dé\\"]
)
def test_a_path_hydra_cannot_read_unquoted_reaches_the_config_as_typed(read, root):
    # as the shell passes it: no quotes left; Hydra alone stops with a lexer error
    cfg = compose_config("train", read(["data=images", f"data.root={root}"]))
    assert cfg.data.root == root


def test_a_path_holding_a_comma_is_one_value_where_it_exists(tmp_path):
    folder = tmp_path / "scans,2024"
    folder.mkdir()
    cfg = compose_config("train", train_argv(["data=images", f"data.root={folder}"]))
    assert cfg.data.root == str(folder)
    # elsewhere a comma is Hydra's sweep (python train.py -m data.root=/a,/b): left as typed
    sweep = [f"data.root={tmp_path}/a,{tmp_path}/b"]
    assert quote_plain_values(sweep) == sweep


def test_a_list_of_names_outside_ascii_reaches_the_config_as_typed():
    argv = train_argv(["data=images", "data.class_names=[fond,bâtiment,végétation]"])
    assert list(compose_config("train", argv).data.class_names) == [
        "fond",
        "bâtiment",
        "végétation",
    ]


def test_a_sweep_of_names_outside_ascii_stays_a_sweep(tmp_path):
    # -m name=Été,Hiver: each value quoted, not the two as one
    (swept,) = quote_plain_values([f"data.root={tmp_path}/Été,{tmp_path}/Hiver"])
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_override(swept)
    assert parsed.is_sweep_override()
    assert [getattr(v, "text", v) for v in parsed.value().list] == [
        f"{tmp_path}/Été",
        f"{tmp_path}/Hiver",
    ]


def test_values_hydra_reads_are_left_as_typed():
    argv = ["data.root=null", "data.class_names=[a,b]", "data.palette=[[0,0,0],[1,2,3]]",
            "trainer.max_epochs=3", "data.root='/x/é'", "-m", "data.fold=0,1", "~logger",
            "paths.data=${oc.env:HOME}/data"]  # fmt: skip
    assert quote_plain_values(argv) == argv


@pytest.mark.parametrize("setting", ["trainer.max_epochs=1é", "train_minutes=abc"])
def test_a_word_for_the_runs_length_is_refused_naming_the_setting(setting):
    # the length is read first of all the values (it decides the epochs): a word there
    # was a TypeError from a comparison, not a refusal
    from segnet.commands.train import time_budget_of

    cfg = compose_config("train", train_argv(["experiment=images_quick", setting]))
    with pytest.raises(ValueError, match=setting.split("=")[0]):
        time_budget_of(cfg)
