"""`ShardedDataset`: the torch IterableDataset over a shard build (ranks, workers, state).

It adds to `ShardReader` only what torch brings: rank and world size from
torch.distributed, the DataLoader worker split, tensors, and the Stateful
protocol (`state_dict` / `load_state_dict`) that torchdata's StatefulDataLoader
calls inside each worker.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import hf_accelerate
from .convert import table_to_batch, table_to_samples
from .reader import WINDOW_BYTES, ShardReader, env_rank_world
from . import state as st
from .procread import read_in_processes
from .ship import available as can_ship, ship, ship_array
from .source import LoaderError
from .mixture import MixtureReader
from .tokens import SequenceReader

SAMPLE_CHUNK = 4096   # rows read at a time in per-sample mode when no batch size is given
# what the torch dataset adds to its torch-free reader (not sent to reader processes)
_TORCH_ONLY = ("batch_size", "batched", "transform", "_accelerate", "reader_processes", "reader_stats")


def default_rank_world() -> tuple[int, int]:
    """(rank, world size) from torch.distributed when it is initialised, else
    RANK / WORLD_SIZE, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return env_rank_world()


class _Torch:
    """What torch adds to a reader: rank and world size from torch.distributed, batch
    size, the DataLoader worker split, and the Stateful protocol inside workers."""

    def _torch_setup(self, batch_size, batched: bool, transform, reader_processes: int = 0) -> None:
        if int(reader_processes) < 0:
            raise LoaderError(f"reader_processes must be >= 0, got {reader_processes}")
        self.reader_processes = int(reader_processes)
        self.reader_stats: list[dict] = []    # each reader process's rows and peak RSS, after a pass
        if batched and not batch_size:
            raise LoaderError("batched=True needs batch_size")
        if batch_size is not None and int(batch_size) < 1:
            raise LoaderError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size) if batch_size else None
        self.batched = bool(batched)
        self.transform = transform
        self._accelerate = None     # Accelerate's wrapper, once it has called set_epoch or len (hf_accelerate)

    def _note_caller(self) -> None:
        wrap = hf_accelerate.caller_wrapper(depth=3)
        if wrap is not None:
            self._accelerate = wrap

    def set_epoch(self, epoch: int) -> None:
        """See ShardReader.set_epoch. Also notes whether Accelerate's prepare() wrapped the dataset
        (its wrappers call set_epoch before every pass; see hf_accelerate)."""
        self._note_caller()
        super().set_epoch(epoch)

    @staticmethod
    def _default_rank_world() -> tuple[int, int]:
        return default_rank_world()

    def _pass_chunk(self) -> int:
        return self.batch_size or SAMPLE_CHUNK

    def __len__(self) -> int:
        """Items this rank yields in the current pass: batches in batch mode, else samples
        (the same on every rank, so every DDP rank takes the same number of steps). Asked by
        Accelerate's IterableDatasetShard: W times the samples, which it reads to keep them."""
        self._note_caller()
        n = self.num_samples()
        wrap = self._accelerate
        if wrap is not None and wrap["kind"] == "shard" and self.world_size > 1 and not self.batched:
            return n * wrap["slots"]   # what IterableDatasetShard reads to keep this rank's n
        return -(-n // self.batch_size) if self.batched else n

    def _worker_slot(self) -> tuple[int, int]:
        info = get_worker_info()
        return (0, 1) if info is None else (info.id, info.num_workers)

    def _worker_tables(self):
        """This worker's chunks of the rank's pass (checks the worker settings first)."""
        info = get_worker_info()         # the wrapper iterating this dataset, if Accelerate's
        wrap = hf_accelerate.caller_wrapper(depth=3) if info is None else hf_accelerate.wrapper_of(info.dataset)
        if wrap is not None:
            self._accelerate = wrap
        hf_accelerate.check(self._accelerate, rank=self.rank, world_size=self.world_size,
                            batch_size=self.batch_size, batched=self.batched)
        worker, num_workers = self._worker_slot()
        if self.reader_processes:
            return self._process_tables(num_workers)
        if num_workers > 1 and not self.batch_size:
            raise LoaderError("with DataLoader workers, pass batch_size= (the DataLoader's batch size) "
                              "so the rank's samples are dealt to workers in the order it collects them")
        if num_workers > 1 and worker == 0:
            self._warn_shared_lanes(num_workers, f"{num_workers} DataLoader workers", "workers", stacklevel=4)
        return self.iter_tables(self._pass_chunk(), worker, num_workers)

    def _warn_shared_lanes(self, count: int, by: str, who: str, *, stacklevel: int) -> None:
        """Warn when `count` readers (workers or reader processes) cannot each own whole lanes."""
        if self.lanes % count:
            warnings.warn(f"{type(self).__name__}(lanes={self.lanes}) read by {by}: {who} share lanes, so "
                          "each decodes row groups another also decodes; "
                          f"lanes={count} (or a multiple) reads disjoint row groups "
                          "(see loaders/README.md)", stacklevel=stacklevel)

    def _process_tables(self, num_workers: int):
        """The rank's chunks read by `reader_processes` torch-free processes (procread)."""
        if num_workers > 1 or get_worker_info() is not None:
            raise LoaderError("reader_processes reads in processes of its own: use it with num_workers=0 "
                              "(DataLoader workers are processes already, with torch in them)")
        if self._worker is not None:
            raise st.StateError("this is one DataLoader worker's state; to resume with reader_processes, "
                                "convert the whole StatefulDataLoader state with "
                                "shardforge.loaders.state.from_stateful_loader first")
        count = self.reader_processes
        self._warn_shared_lanes(count, f"reader_processes={count}", "readers", stacklevel=5)
        chunk = self._pass_chunk()
        self._settle(chunk)
        self._yielded = 0
        plain = object.__new__(self._torch_free)
        plain.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _TORCH_ONLY})
        plain._order = None          # made again in the reader from the settings
        self.reader_stats = []
        for table in read_in_processes(plain, chunk, count, self.reader_stats):
            self._yielded += len(table)
            yield table

    def _per_sample(self, chunks, split) -> Iterator[Any]:
        """Per-sample mode: count samples as they are handed out, not whole chunks. Under
        Accelerate's IterableDatasetShard, laid out so that its slice is this rank's samples."""
        wrap = self._accelerate
        if wrap is not None and wrap["kind"] == "shard" and self.world_size > 1:
            yield from hf_accelerate.lay_out(self._per_sample_plain(chunks, split), slot=wrap["slot"],
                                             slots=wrap["slots"], batch_size=self.batch_size)
            return
        yield from self._per_sample_plain(chunks, split)

    def _per_sample_plain(self, chunks, split) -> Iterator[Any]:
        for chunk in chunks:
            self._yielded -= len(chunk)
            for sample in split(chunk):
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


class ShardedDataset(_Torch, ShardReader, IterableDataset):
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
    with `lanes` a multiple of it, no two workers decode the same row groups.
    `reader_processes=K` (with num_workers=0) reads in K torch-free processes instead, in the
    same order and with the same state (`shardforge.loaders.procread`). See
    loaders/README.md for the state fields and the resume recipes. Packed token
    sequences: `TokenDataset`; weighted mixtures of builds: `MixedDataset`.
    """

    _torch_free = ShardReader     # what reader processes run (see _process_tables)

    def __init__(self, path, *, rank: int | None = None, world_size: int | None = None, seed: int = 0,
                 shuffle: bool = True, window_bytes: int | None = WINDOW_BYTES, window: int | None = None,
                 lanes: int = 1, policy: str = "drop", columns=None, batch_size: int | None = None,
                 batched: bool = False, transform: Callable[[Any], Any] | None = None,
                 verify: bool = False, epoch: int = 0, cache_dir=None, cache_limit_bytes: int | None = None,
                 reader_processes: int = 0):
        self._torch_setup(batch_size, batched, transform, reader_processes)
        super().__init__(path, rank=rank, world_size=world_size, seed=seed, shuffle=shuffle,
                         window_bytes=window_bytes, window=window, lanes=lanes, policy=policy,
                         columns=columns, verify=verify, epoch=epoch, cache_dir=cache_dir,
                         cache_limit_bytes=cache_limit_bytes)

    def __iter__(self) -> Iterator[Any]:
        tables = self._worker_tables()
        if self.batched:
            if get_worker_info() is not None and self.transform is None and can_ship():
                for table in tables:   # one shared-memory buffer per batch; text decoded by the trainer
                    yield ship(table)
                return
            for table in tables:
                batch = table_to_batch(table)
                yield self.transform(batch) if self.transform else batch
            return
        yield from self._per_sample(tables, table_to_samples)


class TokenDataset(_Torch, SequenceReader, IterableDataset):
    """Packed token sequences of a shard build (see `shardforge.loaders.tokens`): each
    sample is a tensor of `sequence_length + 1` token ids (inputs `x[:-1]`, targets
    `x[1:]`), in the token column's integer type (`.long()` it for an embedding).

    `batched=True`: yields (batch_size, sequence_length + 1) tensors; use
    `DataLoader(ds, batch_size=None, num_workers=K)`. Else one sequence at a time; use
    `DataLoader(ds, batch_size=B, num_workers=K)` and pass `batch_size=B` here when K > 0.
    Ranks, workers, lanes, `policy` and the state work as in ShardedDataset, on sequences.
    """

    _torch_free = SequenceReader     # what reader processes run (see _process_tables)

    def __init__(self, path, *, sequence_length: int, token_column: str = "tokens", eos_id: int | None = None,
                 rank: int | None = None, world_size: int | None = None, seed: int = 0, shuffle: bool = True,
                 window_bytes: int | None = WINDOW_BYTES, window: int | None = None, lanes: int = 1,
                 policy: str = "drop", batch_size: int | None = None, batched: bool = False,
                 transform: Callable[[Any], Any] | None = None, verify: bool = False, epoch: int = 0,
                 cache_dir=None, cache_limit_bytes: int | None = None, reader_processes: int = 0):
        self._torch_setup(batch_size, batched, transform, reader_processes)
        super().__init__(path, sequence_length=sequence_length, token_column=token_column, eos_id=eos_id,
                         rank=rank, world_size=world_size, seed=seed, shuffle=shuffle, window_bytes=window_bytes,
                         window=window, lanes=lanes, policy=policy, verify=verify, epoch=epoch,
                         cache_dir=cache_dir, cache_limit_bytes=cache_limit_bytes)

    def __iter__(self) -> Iterator[Any]:
        chunks = self._worker_tables()
        if self.batched:
            if get_worker_info() is not None and self.transform is None and can_ship():
                for chunk in chunks:   # one reused shared-memory segment per worker, not a new one per batch
                    yield ship_array(chunk)
                return
            for chunk in chunks:
                batch = torch.from_numpy(chunk)
                yield self.transform(batch) if self.transform else batch
            return
        yield from self._per_sample(chunks, lambda chunk: list(torch.from_numpy(chunk)))


class MixedDataset(_Torch, MixtureReader, IterableDataset):
    """A weighted mixture of builds (see `shardforge.loaders.mixture`), as one dataset with
    one state: `MixedDataset([(path_a, 0.7), (path_b, 0.3)], seed=0, ...)`.

    Row modes (default): samples are dicts of the sources' common columns, per sample or
    `batched=True` collated, as ShardedDataset yields them. With `sequence_length`: packed
    token sequences of every source, as TokenDataset yields them. Ranks, workers, lanes,
    `policy` and the state work as in ShardedDataset, on the mixture's positions.
    """

    _torch_free = MixtureReader     # what reader processes run (see _process_tables)

    def __init__(self, sources, *, seed: int = 0, shuffle: bool = True, window_bytes: int | None = WINDOW_BYTES,
                 window: int | None = None, lanes: int = 1, policy: str = "drop", columns=None,
                 sequence_length: int | None = None, token_column: str = "tokens", eos_id: int | None = None,
                 samples_per_epoch: int | None = None, rank: int | None = None, world_size: int | None = None,
                 batch_size: int | None = None, batched: bool = False, transform: Callable[[Any], Any] | None = None,
                 verify: bool = False, epoch: int = 0, cache_dir=None, cache_limit_bytes: int | None = None,
                 reader_processes: int = 0):
        self._torch_setup(batch_size, batched, transform, reader_processes)
        super().__init__(sources, seed=seed, shuffle=shuffle, window_bytes=window_bytes, window=window, lanes=lanes,
                         policy=policy, columns=columns, sequence_length=sequence_length, token_column=token_column,
                         eos_id=eos_id, samples_per_epoch=samples_per_epoch, rank=rank, world_size=world_size,
                         verify=verify, epoch=epoch, cache_dir=cache_dir, cache_limit_bytes=cache_limit_bytes)

    def __iter__(self) -> Iterator[Any]:
        chunks = self._worker_tables()
        if self._sequence:
            to_batch, split = torch.from_numpy, (lambda chunk: list(torch.from_numpy(chunk)))
        else:
            to_batch, split = table_to_batch, table_to_samples
        if self.batched:
            for chunk in chunks:
                batch = to_batch(chunk)
                yield self.transform(batch) if self.transform else batch
            return
        yield from self._per_sample(chunks, split)
