"""The fused weight EMA averages exactly what Lightning's EMAWeightAveraging averages."""

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from segnet.training.callbacks.ema import FusedEMAWeightAveraging


class _Tiny(L.LightningModule):
    """Parameters, BatchNorm buffers (float and the int64 batch counter) and an SGD step."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Conv2d(4, 3, 1)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)


def _fit(callback) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = _Tiny()
    g = torch.Generator().manual_seed(1)
    images, labels = (
        torch.randn(12, 2, 8, 8, generator=g),
        torch.randint(0, 3, (12, 8, 8), generator=g),
    )
    data = DataLoader(TensorDataset(images, labels), batch_size=2)
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, data)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_fused_ema_matches_lightning_ema():
    decay = 0.7  # a fast average, so that every one of the 12 updates moves the result
    fused = _fit(FusedEMAWeightAveraging(decay=decay))
    reference = _fit(EMAWeightAveraging(decay=decay))
    plain = _fit(L.Callback())
    assert fused.keys() == reference.keys()
    for name, value in reference.items():
        torch.testing.assert_close(fused[name], value, msg=name)
    # the average is not the last weights: the comparison above checks an average
    assert not torch.allclose(fused["net.0.weight"], plain["net.0.weight"])


def test_fused_ema_refuses_a_second_averaging_function():
    with pytest.raises(ValueError, match="avg_fn"):
        FusedEMAWeightAveraging(decay=0.9, avg_fn=lambda *a: a[0])
