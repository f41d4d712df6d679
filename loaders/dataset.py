"""`ShardedDataset`: the torch IterableDataset over a shard build (ranks, workers, state).

It adds to `ShardReader` only what torch brings: rank and world size from
torch.distributed, the DataLoader worker split, tensors, and the Stateful
protocol (`state_dict` / `load_state_dict`) that torchdata's StatefulDataLoader
calls inside each worker.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator

from torch.utils.data import IterableDataset, get_worker_info

from .convert import table_to_batch, table_to_samples
from .reader import WINDOW_BYTES, ShardReader, env_rank_world
from .ship import available as can_ship, ship
from .source import LoaderError

SAMPLE_CHUNK = 4096   # rows read at a time in per-sample mode when no batch size is given


def default_rank_world() -> tuple[int, int]:
    """(rank, world size) from torch.distributed when it is initialised, else
    RANK / WORLD_SIZE, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return env_rank_world()


class ShardedDataset(ShardReader, IterableDataset):
    """Rank `rank` of `world_size`'s part of a shard build, split over DataLoader workers.

    Two modes:
    * `batch_size=B, batched=True`: yields collated batches of B samples made straight
      from Arrow; use `DataLoader(ds, batch_size=None, num_workers=K, collate_fn=no_collate)`.
    * `batched=False` (default): yields one sample dict at a time; use
      `DataLoader(ds, batch_size=B, num_workers=K, collate_fn=collate)` and pass the same
      `batch_size=B` here when K > 0 (it is how the dataset deals the rank's samples to
      workers in the order the DataLoader collects them).

    Every rank yields the same number of samples per pass (`num_samples()`; `len()` counts
    the items, batches in batch mode), so DDP ranks take the same number of steps.
    `transform` is applied to each sample (per-sample mode) or to each collated batch
    (batch mode). A rank's sequence does not depend on the DataLoader's worker count;
    with `lanes` a multiple of it, no two workers decode the same row groups. See
    loaders/README.md for the state fields and the resume recipes.
    """

    def __init__(self, path, *, rank: int | None = None, world_size: int | None = None, seed: int = 0,
                 shuffle: bool = True, window_bytes: int | None = WINDOW_BYTES, window: int | None = None,
                 lanes: int = 1, policy: str = "drop", columns=None, batch_size: int | None = None,
                 batched: bool = False, transform: Callable[[Any], Any] | None = None,
                 verify: bool = False, epoch: int = 0):
        if batched and not batch_size:
            raise LoaderError("batched=True needs batch_size")
        if batch_size is not None and int(batch_size) < 1:
            raise LoaderError(f"batch_size must be >= 1, got {batch_size}")
        super().__init__(path, rank=rank, world_size=world_size, seed=seed, shuffle=shuffle,
                         window_bytes=window_bytes, window=window, lanes=lanes, policy=policy,
                         columns=columns, verify=verify, epoch=epoch)
        self.batch_size = int(batch_size) if batch_size else None
        self.batched = bool(batched)
        self.transform = transform

    @staticmethod
    def _default_rank_world() -> tuple[int, int]:
        return default_rank_world()

    def _pass_chunk(self) -> int:
        return self.batch_size or SAMPLE_CHUNK

    def __len__(self) -> int:
        """Items this rank yields in the current pass: batches in batch mode, else samples
        (the same on every rank, so every DDP rank takes the same number of steps)."""
        n = self.num_samples()
        return -(-n // self.batch_size) if self.batched else n

    def _worker_slot(self) -> tuple[int, int]:
        info = get_worker_info()
        return (0, 1) if info is None else (info.id, info.num_workers)

    def __iter__(self) -> Iterator[Any]:
        worker, num_workers = self._worker_slot()
        if num_workers > 1 and not self.batch_size:
            raise LoaderError("with DataLoader workers, pass batch_size= (the DataLoader's batch size) "
                              "so the rank's samples are dealt to workers in the order it collects them")
        if num_workers > 1 and worker == 0 and self.lanes % num_workers:
            warnings.warn(f"ShardedDataset(lanes={self.lanes}) read by {num_workers} DataLoader workers: "
                          "workers share lanes, so each decodes row groups another also decodes; "
                          f"lanes={num_workers} (or a multiple) reads disjoint row groups "
                          "(see loaders/README.md)", stacklevel=2)
        tables = self.iter_tables(self._pass_chunk(), worker, num_workers)
        if self.batched:
            if get_worker_info() is not None and self.transform is None and can_ship():
                for table in tables:   # one shared-memory buffer per batch; text decoded by the trainer
                    yield ship(table)
                return
            for table in tables:
                batch = table_to_batch(table)
                yield self.transform(batch) if self.transform else batch
            return
        # per-sample: count samples as they are handed out, not whole chunks
        for table in tables:
            self._yielded -= table.num_rows
            for sample in table_to_samples(table):
                self._yielded += 1
                yield self.transform(sample) if self.transform else sample

    def state_dict(self, consumed: int | None = None) -> dict:
        """See ShardReader.state_dict. Inside a DataLoader worker (StatefulDataLoader
        calls it there) the state also records that worker's own progress."""
        info = get_worker_info()
        if info is None or consumed is not None:
            return super().state_dict(consumed)
        return self._base(consumed=self._offset,
                          worker={"id": info.id, "num_workers": info.num_workers, "chunk": self._pass_chunk(),
                                  "yielded": self._yielded})

