"""What the CamVid and NIfTI DataModules share: loaders that are exact under DDP."""

from __future__ import annotations

import lightning as L
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def check_count(setting: str, value, minimum: int = 1, allow_none: bool = False) -> int | None:
    """A whole-number setting (batch size, workers), checked before any data is read."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"data.{setting}={value!r}: expected a whole number >= {minimum}"
            + (" (or null)" if allow_none else "")
            + "."
        )
    return value


class SegmentationDataModule(L.LightningDataModule):
    """Base class. Subclasses fill ``self.datasets`` ("train", "val", "test") in ``setup``
    and set ``batch_size``, ``eval_batch_size``, ``num_workers`` and ``pin_memory``.

    Under DDP each rank evaluates a disjoint share of the validation/test set with nothing
    repeated (PyTorch's DistributedSampler pads by repeating samples, which would bias the
    metrics), so multi-process metrics equal single-process ones. The DDP trainer configs
    set ``use_distributed_sampler: false`` to leave this to the DataModule.
    """

    worker_init_fn = None
    datasets: dict[str, Dataset]

    def _sampler(self, dataset: Dataset, shuffle: bool):
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return None
        if shuffle:
            return DistributedSampler(dataset, shuffle=True, drop_last=True)
        from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler

        return UnrepeatedDistributedSampler(dataset, shuffle=False)

    def _loader(
        self, dataset: Dataset, batch_size: int, shuffle: bool, shard: bool = True
    ) -> DataLoader:
        """``shard=False``: every rank reads the whole dataset (BatchNorm recomputation,
        whose statistics must be the same on every rank)."""
        sampler = self._sampler(dataset, shuffle) if shard else None
        return DataLoader(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            drop_last=shuffle and len(dataset) > batch_size,
            num_workers=self.num_workers,
            # None means "when a GPU is there": pinned pages let copies run asynchronously
            pin_memory=torch.cuda.is_available() if self.pin_memory is None else self.pin_memory,
            persistent_workers=self.num_workers > 0,
            worker_init_fn=self.worker_init_fn,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["val"], self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.datasets["test"], self.eval_batch_size, shuffle=False)

