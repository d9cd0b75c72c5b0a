"""A DataModule written outside the package with only the contract's core (``describe`` and
``build_datasets``): it trains, tests and evaluates, and what it lacks for a setting
(``recompute_bn``, ``save_predictions``) is named before any data is read."""

import json

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from segnet.commands.evaluate import evaluate
from segnet.commands.train import train
from segnet.data.base import SegmentationDataModule
from segnet.data.info import DataInfo
from tests.conftest import TINY_CAMVID, compose
from tests.helpers import data_info


class RandomImages(SegmentationDataModule):
    """Eight 24x32 RGB images per split whose label is the brightest channel: learnable."""

    built: list[str] = []  # the stages whose datasets were built (read), in order

    def __init__(self, batch_size: int = 2):
        super().__init__()
        self.batch_size = self.eval_batch_size = batch_size
        self.num_workers, self.pin_memory = 0, False

    def describe(self) -> DataInfo:
        return DataInfo.from_dict(data_info(3))

    def build_datasets(self, stage: str) -> None:
        RandomImages.built.append(stage)
        splits = ("train", "val") if stage == "fit" else ("test",)
        for seed, split in enumerate(splits, start=1 if stage == "fit" else 3):
            images = torch.rand(8, 3, 24, 32, generator=torch.Generator().manual_seed(seed))
            self.datasets[split] = Samples(images, split)


class Samples(torch.utils.data.Dataset):
    def __init__(self, images: torch.Tensor, split: str):
        self.images, self.names = images, [f"{split}_{i}" for i in range(len(images))]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> dict:
        return {"image": self.images[i], "label": self.images[i].argmax(0), "index": i}


def with_custom_data(cfg):
    with open_dict(cfg):
        cfg.data = OmegaConf.create({"_target_": f"{__name__}.RandomImages"})
    return cfg


def test_a_datamodule_of_the_core_contract_trains_and_is_told_what_it_lacks(tmp_path):
    RandomImages.built.clear()
    overrides = [*TINY_CAMVID, "recompute_bn=true"]
    with pytest.raises(ValueError, match=r"recompute_bn=true: RandomImages has no bn_dataloader"):
        train(with_custom_data(compose("train", overrides, tmp_path / "refused")))
    assert RandomImages.built == []  # before any data was read
    cfg = with_custom_data(compose("train", [*TINY_CAMVID, "recompute_bn=false"], tmp_path / "run"))
    metrics, _ = train(cfg)
    # the default read_split read the test split before training
    assert RandomImages.built[:2] == ["fit", "test"]
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())["metrics"]
    assert saved["test/miou"] == pytest.approx(metrics["test/miou"])
    ckpt = tmp_path / "run" / "checkpoints" / "best.ckpt"
    RandomImages.built.clear()
    asked = [f"ckpt_path={ckpt}", "save_predictions=true", "trainer.accelerator=cpu"]
    with pytest.raises(ValueError, match=r"save_predictions=true: RandomImages has no save_pred"):
        evaluate(compose("evaluate", asked, tmp_path / "ev_refused"))
    assert RandomImages.built == [] and not (tmp_path / "ev_refused" / "predictions").exists()
    # rebuilt from the checkpoint's data config: the numbers its training run reported
    scored, _ = evaluate(compose("evaluate", asked[::2], tmp_path / "ev"))
    assert scored["test/miou"] == pytest.approx(metrics["test/miou"], abs=1e-6)
