"""What a run sends to the experiment trackers it logs to (``logger=tensorboard``,
``csv``, ``mlflow``, ``wandb``, or several): pictures, figures and files, each in the
tracker's own form. Scalars and hyperparameters go through Lightning's loggers already.

One small adapter per logger, so the callbacks say *what* to record and not how each
tracker takes it. A logger without an adapter here is skipped for pictures and files.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np

from segnet.training.tracker_guard import is_guarded

log = logging.getLogger(__name__)


class Tracker:
    """Records pictures (H, W, 3 uint8), matplotlib figures and files of a run."""

    def __init__(self, logger: Any):
        self.logger = logger

    def image(self, tag: str, picture: np.ndarray, step: int) -> None:
        raise NotImplementedError

    def figure(self, tag: str, fig: Any, step: int) -> None:
        self.image(tag, figure_pixels(fig), step)

    def file(self, path: Path) -> None:
        """A file of the run (metrics.json, an exported model); by default left where it
        is, in the run folder the tracker's own files sit beside."""

    def address(self) -> dict[str, Any] | None:
        """How a later command (export) finds this tracker's run again to add files to it;
        None where the run folder is the tracker's store (TensorBoard, CSV)."""
        return None


def figure_pixels(fig: Any) -> np.ndarray:
    import matplotlib.pyplot as plt

    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return pixels


def tag_file(tag: str, step: int, suffix: str = ".png") -> str:
    return f"{tag.replace('/', '_')}_step{step:07d}{suffix}"


class TensorBoardTracker(Tracker):
    def image(self, tag: str, picture: np.ndarray, step: int) -> None:
        self.logger.experiment.add_image(tag, picture, step, dataformats="HWC")

    def figure(self, tag: str, fig: Any, step: int) -> None:
        self.logger.experiment.add_figure(tag, fig, step, close=True)


class CSVTracker(Tracker):
    """Pictures as PNG files under the CSV logger's folder (``<run>/csv/images``)."""

    def image(self, tag: str, picture: np.ndarray, step: int) -> None:
        from PIL import Image

        folder = Path(self.logger.log_dir) / "images"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(picture).save(folder / tag_file(tag, step))


class MLflowTracker(Tracker):
    """Pictures, figures and files as artifacts of the logger's MLflow run."""

    def image(self, tag: str, picture: np.ndarray, step: int) -> None:
        self.logger.experiment.log_image(
            self.logger.run_id, picture, artifact_file=f"{tag}/{tag_file(tag, step)}"
        )

    def figure(self, tag: str, fig: Any, step: int) -> None:
        import matplotlib.pyplot as plt

        self.logger.experiment.log_figure(
            self.logger.run_id, fig, artifact_file=f"{tag}/{tag_file(tag, step)}"
        )
        plt.close(fig)

    def file(self, path: Path) -> None:
        self.logger.experiment.log_artifact(self.logger.run_id, str(path))

    def address(self) -> dict[str, Any] | None:
        # the run id as known, without asking a server (None: the run was never opened,
        # and a replay opens one in the experiment named)
        return {
            "tracker": "mlflow",
            "tracking_uri": self.logger._tracking_uri,  # the file store's URI where unset
            "experiment_name": self.logger._experiment_name,
            "run_id": self.logger._run_id,
        }


class WandbTracker(Tracker):
    """Pictures as ``wandb.Image``; files saved with the run (offline runs keep them for
    ``wandb sync``)."""

    def image(self, tag: str, picture: np.ndarray, step: int) -> None:
        self.logger.log_image(key=tag, images=[picture], step=step)

    def file(self, path: Path) -> None:
        self.logger.experiment.save(str(path), base_path=str(Path(path).parent), policy="now")

    def address(self) -> dict[str, Any] | None:
        run = self.logger.experiment
        if run is None:  # W&B never started (its failure was named then)
            return None
        return {
            "tracker": "wandb",
            "project": run.project,
            "id": run.id,
            "dir": str(self.logger.save_dir),
            "offline": bool(getattr(self.logger, "_offline", False)),
        }


ADAPTERS = {
    "TensorBoardLogger": TensorBoardTracker,
    "CSVLogger": CSVTracker,
    "MLFlowLogger": MLflowTracker,
    "WandbLogger": WandbTracker,
}


class GuardedTracker(Tracker):
    """A guarded logger's adapter (:mod:`segnet.training.tracker_guard`): pictures and
    files go through the logger's delivery, journalled, never raising."""

    def __init__(self, inner: Tracker):
        super().__init__(inner.logger)
        self.inner = inner
        self.delivery = inner.logger._delivery

    def image(self, tag: str, picture: np.ndarray, step: int) -> None:
        picture = np.array(picture, copy=True)  # the caller's array may change before it goes
        entry = {"call": "image", "tag": tag, "step": step, "name": tag_file(tag, step)}
        self.delivery.submit(lambda: self.inner.image(tag, picture, step), entry, picture)

    def figure(self, tag: str, fig: Any, step: int) -> None:
        self.image(tag, figure_pixels(fig), step)  # drawn here: matplotlib is not threaded

    def file(self, path: Path) -> None:
        entry = {"call": "file", "path": run_relative(path, self.delivery.run_dir)}
        self.delivery.submit(lambda: self.inner.file(path), entry)

    def address(self) -> dict[str, Any] | None:
        return self.inner.address()


def run_relative(path: Path, run_dir: Path) -> str:
    """``path`` as the journal keeps it: within the run folder where it is there, so that a
    moved run folder replays."""
    path, run_dir = Path(path).resolve(), Path(run_dir).resolve()
    return str(path.relative_to(run_dir)) if path.is_relative_to(run_dir) else str(path)


def trackers(trainer: L.Trainer) -> list[Tracker]:
    """An adapter for each of the trainer's loggers that has one."""
    out = []
    for logger in trainer.loggers:
        adapter = next(
            (
                a
                for name, a in ADAPTERS.items()
                if name in {c.__name__ for c in type(logger).__mro__}
            ),
            None,
        )
        if adapter is not None:
            out.append(GuardedTracker(adapter(logger)) if is_guarded(logger) else adapter(logger))
    return out


def record_file(trainer: L.Trainer, path: Path) -> None:
    """``path`` sent to every tracker that keeps files; a tracker that fails to take it is
    named in a warning, and the run goes on (the file is in the run folder either way)."""
    for tracker in trackers(trainer):
        try:
            tracker.file(path)
        except Exception as err:  # a tracker server gone away must not fail a finished run
            log.warning("%s did not take %s: %s", type(tracker.logger).__name__, path, err)


def tracker_addresses(trainer: L.Trainer) -> list[dict[str, Any]]:
    """How to reach each of the run's trackers that keeps files outside the run folder,
    and, for a guarded one, what it was sent and what it got (``delivery``)."""
    adapters = {id(t.logger): t for t in trackers(trainer)}
    out = []
    for logger in trainer.loggers:
        adapter = adapters.get(id(logger))
        address = adapter.address() if adapter is not None else None
        if is_guarded(logger):
            address = {**(address or {"tracker": type(logger).__name__}),
                       "delivery": logger._delivery.summary()}  # fmt: skip
        if address:
            out.append(address)
    return out
