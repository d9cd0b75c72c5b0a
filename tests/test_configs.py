"""Every option of every config group composes, and instantiates where it can here."""

import pytest
import torch
from hydra.utils import instantiate

from tests.conftest import CONFIGS, compose_config
from tests.helpers import data_info


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


def compose_train(overrides):
    return compose_config("train", overrides)


GROUPS = [
    "data",
    "model",
    "model/net",
    "trainer",
    "experiment",
    "debug",
    "model/optimizer",
    "model/scheduler",
    "hparams_search",
    "logger",
]
CASES = [(g, o) for g in GROUPS for o in options(g)]


@pytest.mark.parametrize("group,option", CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_every_option_composes(group, option, tiny_camvid):
    overrides = [f"{group}={option}"]
    if group != "experiment":
        overrides.append(f"data.root={tiny_camvid}")
    cfg = compose_train(overrides)
    if cfg.model.net.get("encoder_weights"):
        cfg.model.net.encoder_weights = None  # no downloads in tests
    assert cfg.model._target_ == "segnet.module.SegmentationModule"
    if group == "trainer":
        if ("gpu" in option or option == "ddp") and not torch.cuda.is_available():
            return  # composes; a GPU trainer cannot be built without a GPU
        trainer = instantiate(
            cfg.trainer, logger=False, enable_checkpointing=False, default_root_dir=str(tiny_camvid)
        )
        assert trainer is not None
    if group in ("model", "model/net", "model/optimizer", "model/scheduler"):
        three_d = "3d" in option
        module = instantiate(
            cfg.model,
            data=data_info(num_classes=3, spatial_dims=3 if three_d else 2),
            _convert_="all",
        )
        assert module.net.out_channels == 3


def test_default_is_the_paper_recipe():
    cfg = compose_train([])
    assert cfg == compose_train(["experiment=camvid_segnet"])
    assert cfg.model.net.name == "segnet" and cfg.model.net.encoder_weights == "imagenet"
    assert cfg.data.root == "data/CamVid" and cfg.data.image_size is None
    assert cfg.recompute_bn is True and cfg.data.batch_size == 12
    assert cfg.monitor is None  # the dataset's own: val/miou for CamVid
    assert cfg.model.optimizer._target_ == "torch.optim.SGD" and cfg.model.optimizer.lr == 0.1
