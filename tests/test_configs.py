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
    assert cfg.model._target_ == "segnet.training.module.SegmentationModule"
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


TRAINER_OPTIONS = {p.stem for p in (CONFIGS / "trainer").glob("*.yaml")}


@pytest.mark.parametrize("command", ["train", "evaluate", "export", "bench"])
def test_help_offers_the_groups_the_command_takes(command):
    """``--help`` of evaluate, export and bench must not list train.py's groups (experiment,
    data, model...), which Hydra would otherwise show for every command from the shared
    config folder; evaluate and bench take the trainer group, with its options as they are."""
    help_cfg = compose_config(command, hydra=True).hydra.help
    template = help_cfg.template
    assert help_cfg.header.splitlines()[0].startswith("python ")  # a usage line first
    assert "$CONFIG" in template
    if command == "train":
        assert "$APP_CONFIG_GROUPS" in template
        return
    assert "$APP_CONFIG_GROUPS" not in template
    offered = [line for line in template.splitlines() if line.startswith("trainer:")]
    if command == "export":
        assert not offered
        return
    options = {o.strip() for o in offered[0].split(":", 1)[1].split(",")}
    if command == "evaluate":
        assert options == TRAINER_OPTIONS
    else:  # the bench times one device
        assert options == {"auto", "cpu", "gpu"} <= TRAINER_OPTIONS


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_help_answers_before_torch_is_imported(command):
    """``--help`` (and likewise ``--cfg`` and an override Hydra refuses) is answered before
    the commands import torch and Lightning, about ten seconds on a small machine."""
    import subprocess
    import sys

    from tests.conftest import REPO

    script = (
        "import runpy, sys\n"
        f"sys.argv = ['{command}.py', '--help']\n"
        "try:\n"
        f"    runpy.run_path('{command}.py', run_name='__main__')\n"
        "except SystemExit:\n"  # Hydra ends --help with sys.exit(0)
        "    print('imported torch:', 'torch' in sys.modules)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert shown.startswith(f"python {command}.py ")
    assert "ckpt_path:" in shown and shown.rstrip().endswith("imported torch: False")
    if command == "evaluate":  # its own settings, not train.py's groups
        assert "tta: null" in shown
        assert "experiment:" not in shown and "hparams_search" not in shown
