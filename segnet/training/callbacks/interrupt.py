"""Save a resumable checkpoint when training is stopped by SIGTERM or Ctrl+C."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

from segnet.shell import override

log = logging.getLogger(__name__)


def restore_training_weights(trainer: L.Trainer, pl_module: L.LightningModule) -> None:
    """A weight average (EMA) swaps its weights into the module for validation and back at
    the validation epoch's end, which a stop during validation never reaches: swap them back
    here, or the checkpoint would store the average as the training weights (and the
    training weights as the average), and a resume would train on from the average."""
    from lightning.pytorch.callbacks import WeightAveraging

    for callback in trainer.callbacks:
        # _average_model and _swap_models: Lightning's own swap, as its hooks call it
        if isinstance(callback, WeightAveraging) and callback._average_model is not None:
            callback._swap_models(pl_module)


class CheckpointOnInterrupt(L.Callback):
    """SIGTERM (cluster pre-emption, ``kill``) or SIGINT (Ctrl+C) finishes the current
    training step, writes ``last.ckpt`` (atomically) and stops; ``ckpt_path=`` resumes.

    Lightning already turns SIGTERM into a stop at the next batch boundary; SIGINT is routed
    the same way, so the checkpoint never holds a half-applied optimizer step. A second
    Ctrl+C interrupts at once.
    """

    def __init__(self, filename: str = "last.ckpt"):
        self.filename = filename
        self._previous_sigint = None
        self._requested = False

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous_sigint = signal.signal(signal.SIGINT, self._on_sigint(trainer))

    def _on_sigint(self, trainer: L.Trainer):
        def handler(signum, frame):
            if self._requested:
                raise KeyboardInterrupt
            self._requested = True
            log.warning(
                "Ctrl+C: stopping after this step and saving a checkpoint "
                "(press again to stop at once)"
            )
            trainer._signal_connector.received_sigterm = True

        return handler

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        if not isinstance(exception, SIGTERMException):
            return
        if trainer.validating:
            restore_training_weights(trainer, pl_module)
        ckpt = trainer.checkpoint_callback
        folder = Path(ckpt.dirpath) if ckpt and ckpt.dirpath else Path(trainer.default_root_dir)
        path = folder / self.filename
        # the full state, for resuming; written whole or not at all (segnet.training.checkpoint_io)
        trainer.save_checkpoint(path, weights_only=False)
        # With AsyncCheckpointIO the write runs in a thread: wait for it (and for any
        # pending best.ckpt) before the process goes on to exit.
        trainer.strategy.checkpoint_io.teardown()
        if trainer.is_global_zero:
            log.warning(
                "interrupted: saved %s; resume with python train.py %s",
                path,
                override("ckpt_path", path),
            )

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._previous_sigint is not None:
            signal.signal(signal.SIGINT, self._previous_sigint)
            self._previous_sigint = None
