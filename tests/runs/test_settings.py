"""The table of settings (segnet.runs.settings): every key of every composed config has a
row, each row names a real setting, and the checks derived from it refuse what they
should."""

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from omegaconf import OmegaConf

from segnet.data.camvid_datamodule import CamVidDataModule
from segnet.data.images_datamodule import ImageFolderDataModule
from segnet.data.nifti_datamodule import NiftiDataModule
from segnet.runs.settings import (
    SETTINGS,
    check_values,
    data_format,
    data_keys,
    resume_may_change,
    setting,
    table,
)
from tests.conftest import CONFIGS, compose_config

FORMATS = (CamVidDataModule, NiftiDataModule, ImageFolderDataModule)


def flat(config: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(config, dict) and config:
        for key, value in config.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1]


def choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


def every_train_config() -> list[list[str]]:
    """The recipes, and each choice of every config group on its own."""
    runs = [[]] + [[f"experiment={e}"] for e in choices("experiment")]
    for group in ("data", "model/net", "model/optimizer", "model/scheduler", "logger",
                  "trainer", "debug", "callbacks", "hparams_search"):  # fmt: skip
        runs += [[f"{group}={c}"] for c in choices(group)]
    return runs


def unclassified(composed: Any) -> set[str]:
    rows = table(data_format(composed))
    cfg = OmegaConf.to_container(composed, resolve=False)
    return {key for key in flat(cfg) if setting(key, rows) is None}


@pytest.fixture(scope="module")
def composed() -> dict[str, Any]:
    """Every train config of every_train_config and the other commands' own, composed
    once for this file's tests (a composition costs a quarter of a second)."""
    configs = {
        " ".join(["train", *overrides]): compose_config("train", overrides)
        for overrides in every_train_config()
    }
    return configs | {name: compose_config(name, []) for name in ("evaluate", "export", "bench")}


@pytest.fixture(scope="module")
def composed_keys(composed) -> dict[str, set[str]]:
    return {run: unclassified(cfg) for run, cfg in composed.items()}


def test_every_key_of_every_recipe_is_in_the_table(composed_keys):
    missing = {run: keys for run, keys in composed_keys.items() if keys}
    assert not missing, (
        f"settings with no row in segnet.runs.settings.SETTINGS: {missing}; add each with "
        "its kind and whether a resume may change it"
    )
    assert len(composed_keys) > 40  # every recipe and group choice was composed


def test_a_key_without_a_row_is_found():
    assert setting("data.no_such_setting") is not None  # the data group's own row
    assert setting("no_such_group.key") is None
    assert setting("trainer.max_epochs").kind == "count"
    assert setting("callbacks.ema.decay").resume is False  # the most specific row wins
    assert setting("callbacks.lr_monitor.logging_interval").resume is True


def test_each_row_names_a_real_setting():
    """A row for a name nothing takes (a typo in the table) would classify nothing."""
    from lightning import Trainer

    from segnet.training.module import SegmentationModule

    trainer = set(inspect.signature(Trainer).parameters) | {"_target_"}
    module = set(inspect.signature(SegmentationModule).parameters)
    for key in SETTINGS:
        group, _, name = key.partition(".")
        first = name.split(".")[0]
        if group == "trainer" and name:
            assert first in trainer, f"{key}: the Trainer takes no {first}"
        if group == "model" and name:
            assert first in module | {"optimizer"}, f"{key}: SegmentationModule takes no {first}"
        assert group != "data" or not name, f"{key}: a format's own row belongs to its DataModule"


@pytest.mark.parametrize("data_format", FORMATS, ids=lambda c: c.__name__)
def test_each_format_has_a_row_for_every_setting_it_takes_and_no_other(data_format):
    """A new argument of a DataModule cannot go unclassified, and a row cannot outlive the
    argument it named."""
    takes = set(inspect.signature(data_format).parameters)
    assert set(data_format.setting_rows()) == takes


def test_a_format_is_asked_for_its_rows():
    camvid, volumes = table(CamVidDataModule), table(NiftiDataModule)
    assert setting("data.hflip", camvid).training_only
    assert setting("data.hflip", volumes) is setting("data.anything_else", volumes)  # no row
    assert setting("data.cache_max_gb", volumes).resume
    assert data_keys("part_of_model", NiftiDataModule) == ("clip", "channels")
    assert set(data_keys("part_of_model", ImageFolderDataModule)) == {"mean", "std", "downscale"}
    assert data_keys("training_only", None) == ()  # a DataModule that is not one of ours


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train=maybe", "train='maybe': use true or false"),
        ("data.pin_memory=yes", "data.pin_memory='yes': use true or false"),
        ("++trainer.num_nodes=0", r"trainer.num_nodes=0: use a whole number >= 1"),
        ("trainer.max_epochs=1.5", r"trainer.max_epochs=1.5: expected a whole number"),
        ("trainer.gradient_clip_val=-1", r"gradient_clip_val=-1: use 0 or a positive number"),
        (
            "model/optimizer=sgd model.optimizer.momentum=-0.5",
            r"momentum=-0.5: use a number 0 or above",
        ),
    ],
)
def test_values_are_checked_by_their_row(override, message):
    cfg = compose_config("train", ["experiment=camvid_quick", *override.split()])
    with pytest.raises(ValueError, match=message):
        check_values(cfg)


def test_the_recipes_pass_their_own_checks(composed):
    for run, cfg in composed.items():
        if run.startswith("train"):
            check_values(cfg)


def test_resume_and_evaluation_rules_come_from_the_table():
    images = table(ImageFolderDataModule)
    assert resume_may_change("trainer.devices")
    assert resume_may_change("data.num_workers", images)
    assert resume_may_change("logger.tensorboard.save_dir")
    assert not resume_may_change("model.optimizer.lr")
    assert not resume_may_change("data.batch_size", images)
    assert not resume_may_change("no_such.setting")  # unknown: kept as the run had it
    training_only = set(data_keys("training_only", ImageFolderDataModule))
    assert {"flip", "patch_size", "class_weights"} <= training_only
    assert "hflip" in data_keys("training_only", CamVidDataModule)
    assert "root" not in training_only


def test_model_card_keys_are_module_settings():
    from segnet.serving.model_card import MODULE_KEYS
    from segnet.training.module import SegmentationModule

    assert set(MODULE_KEYS) <= set(inspect.signature(SegmentationModule).parameters)
