"""How the trainer writes checkpoints (best, last, interrupt): whole or not at all, in the
checkpoint's own folder, in a background thread whose failures stop training.

Lightning's own writer stages each file in ``$TMPDIR`` and copies it across: a small or
full ``/tmp`` fails the run, and a full output disk or a kill during the copy leaves a
truncated file under the checkpoint's name. Here the bytes go to a temporary file beside
the checkpoint, are fsynced and renamed over it (:mod:`segnet.files`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.fabric.utilities.cloud_io import _is_local_file_protocol
from lightning.pytorch.plugins.io import AsyncCheckpointIO

from segnet.files import OutOfSpaceError, write_bytes
from segnet.shell import override


def newest_checkpoint(folder: Path) -> Path | None:
    """The most recently written complete checkpoint in ``folder`` (temporary files are
    hidden and not counted)."""
    done = [p for p in folder.glob("*.ckpt") if p.is_file()]
    return max(done, key=lambda p: p.stat().st_mtime_ns) if done else None


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` into memory, then :func:`segnet.files.write_bytes` beside the target.
    Remote paths (``s3://``...) are left to Lightning's writer."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None or not _is_local_file_protocol(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        path = Path(path)
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        try:
            write_bytes(path, buffer.getbuffer(), kept=lambda: newest_checkpoint(path.parent))
        except OutOfSpaceError as err:
            if err.kept is not None:
                err.strerror += " Then resume: python train.py " + override("ckpt_path", err.kept)
            raise


class BackgroundCheckpointIO(AsyncCheckpointIO):
    """Lightning's background writer over :class:`AtomicCheckpointIO`. A write that failed
    in the thread is raised on the main thread at the next save or at the end of training,
    once (not again while the trainer tears down after it)."""

    def __init__(self, checkpoint_io: Any | None = None) -> None:
        super().__init__(checkpoint_io or AtomicCheckpointIO())

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        self._raise_pending()  # a failed write stops training before another is queued
        try:
            # Lightning raises here too when the queued write failed already (a fast
            # thread): the error is then told, and not told again at teardown.
            super().save_checkpoint(*args, **kwargs)
        except BaseException:
            self._error = None
            raise

    def teardown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._raise_pending()

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error


def write_checkpoints_atomically(trainer: L.Trainer) -> None:
    """Whatever ``trainer.plugins`` gives (none, Lightning's own writers), the trainer
    writes through :class:`AtomicCheckpointIO`; a plugin of the user's own is kept."""
    strategy = trainer.strategy
    current = strategy._checkpoint_io
    if current is None or type(current) is TorchCheckpointIO:
        strategy.checkpoint_io = AtomicCheckpointIO()
    elif type(current) is AsyncCheckpointIO and type(current.checkpoint_io) in (
        type(None),
        TorchCheckpointIO,
    ):
        strategy.checkpoint_io = BackgroundCheckpointIO()
