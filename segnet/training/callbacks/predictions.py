"""Writes each test sample's predicted label map as the test step makes it, so that an
evaluation with ``save_predictions=true`` runs the network over the split once."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L

log = logging.getLogger(__name__)


class PredictionWriter(L.Callback):
    """Hands every test prediction (at its label's size, as it was scored: mirrored,
    windowed, an ensemble's average) to the DataModule's ``save_prediction``, which writes
    it where the DataModule says (PNG for images, NIfTI in the source space for volumes)
    and never over an existing file. Under DDP each rank writes its own share: evaluation
    samplers repeat no sample."""

    def __init__(self, datamodule: Any, out_dir: str | Path):
        self.datamodule = datamodule
        self.out_dir = Path(out_dir)
        self.written = 0

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.written = 0

    def on_test_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        preds = outputs["pred"].cpu()
        for pred, index in zip(preds, batch["index"].tolist(), strict=True):
            self.datamodule.save_prediction(pred, int(index), self.out_dir)
        probs = outputs.get("probs")
        if probs is not None:  # save_probabilities=true: beside each label map
            for p, index in zip(probs.cpu(), batch["index"].tolist(), strict=True):
                self.datamodule.save_probabilities(p, int(index), self.out_dir)
        self.written += len(preds)

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        log.info("wrote %d predictions to %s", self.written, self.out_dir)
