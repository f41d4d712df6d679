"""The torch-free core of the loader: position, state and Arrow chunks of a rank's part.

`ShardReader` owns everything except torch: the epoch order, the plan, the
rank/worker split, the saved state, and a generator of pyarrow Tables of the rows
a (rank, worker) reads, in order. `ShardReader.iter_batches()` is the plain
iterator for consumers that do not use torch; the torch dataset wraps the same
generator.
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (Table.take needs it; importing it here keeps ~1 s of
                        # one-time set-up out of the first batch)

from . import assignment, state as st
from .gather import take
from .order import EpochOrder
from .source import LoaderError, Source


def env_rank_world() -> tuple[int, int]:
    """(rank, world size) from RANK / WORLD_SIZE, else (0, 1)."""
    try:
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise LoaderError(f"RANK={os.environ.get('RANK')!r} / WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} "
                          "are not integers") from None
    return rank, world


class ShardReader:
    """Reads rank `rank` of `world_size`'s part of a shard build, epoch by epoch.

    Promises: the epoch order depends only on (build, seed, epoch, shuffle, window);
    ranks read disjoint contiguous stretches of it (up to `pad` repeats) of equal
    length; a position is reached by decoding one window of row groups; the state
    is a small JSON dict (see `shardforge.loaders.state`).
    """

    def __init__(self, path, *, rank: int | None = None, world_size: int | None = None, seed: int = 0,
                 shuffle: bool = True, window: int = 32, policy: str = "drop", columns=None,
                 verify: bool = False, epoch: int = 0):
        if rank is None or world_size is None:
            r, w = self._default_rank_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        if world_size < 1 or not 0 <= rank < world_size:
            raise LoaderError(f"rank {rank} is not in 0..{world_size - 1} (world_size={world_size})")
        if policy not in assignment.POLICIES:
            raise LoaderError(f"policy must be one of {assignment.POLICIES}, got {policy!r}")
        if int(window) < 1:
            raise LoaderError(f"window must be >= 1 row group, got {window}")
        self.source = Source(path, columns=columns, verify=verify)
        self.rank, self.world_size = int(rank), int(world_size)
        self.seed, self.shuffle, self.window, self.policy = int(seed), bool(shuffle), int(window), policy
        self.epoch = int(epoch)
        self._plan = [[0, self.total]] if self.total else []
        self._offset = 0          # samples of this rank's part consumed before this pass
        self._worker = None       # a worker's own progress, restored from a worker-level state
        self._yielded = 0         # samples this process's current pass has produced
        self._order: EpochOrder | None = None

    @staticmethod
    def _default_rank_world() -> tuple[int, int]:
        return env_rank_world()

    # -- facts ----------------------------------------------------------------
    @property
    def total(self) -> int:
        """Samples per epoch in the build."""
        return self.source.total

    @property
    def columns(self) -> list[str]:
        return self.source.columns

    def order(self) -> EpochOrder:
        """The current epoch's order (cached per epoch)."""
        if self._order is None or self._order.epoch != self.epoch:
            self._order = EpochOrder(self.source.blocks, seed=self.seed, epoch=self.epoch,
                                     shuffle=self.shuffle, window=self.window)
        return self._order

    def part(self) -> list[list[int]]:
        """Epoch positions this rank reads in the current pass, in order (already consumed
        ones included)."""
        return assignment.rank_part(self._plan, self.rank, self.world_size, self.policy)

    def num_samples(self) -> int:
        """Samples this rank yields in the current pass (the same on every rank)."""
        return assignment.per_rank(assignment.length(self._plan), self.world_size, self.policy) - self._offset

    def __len__(self) -> int:
        return self.num_samples()

    # -- position -------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Move to `epoch` from its start; a no-op if already in `epoch` (so a loop that
        calls set_epoch every epoch keeps a position restored by load_state_dict)."""
        if int(epoch) == self.epoch:
            return
        self.epoch = int(epoch)
        self._plan = [[0, self.total]] if self.total else []
        self._offset, self._worker, self._yielded = 0, None, 0

    def _base(self, **extra) -> dict:
        return st.make(build=self.source.fingerprint, total=self.total, seed=self.seed,
                       shuffle=self.shuffle, window=self.window, epoch=self.epoch, plan=self._plan,
                       world_size=self.world_size, policy=self.policy, **extra)

    def state_dict(self, consumed: int | None = None) -> dict:
        """The job's position: JSON-serialisable, the same on every rank in lockstep.

        `consumed` is the number of samples this rank has taken from its loader since
        the pass began (the epoch start or the last load_state_dict). Leave it None
        when this process runs the iteration itself (direct iteration, a DataLoader
        with num_workers=0, torchdata's StatefulDataLoader): then the samples this
        process produced are counted.
        """
        taken = self._yielded if consumed is None else int(consumed)
        if not 0 <= taken <= self.num_samples():
            raise LoaderError(f"consumed={taken} is outside 0..{self.num_samples()} (samples this rank "
                              "reads in this pass)")
        return self._base(consumed=self._offset + taken)

    def load_state_dict(self, state) -> None:
        """Resume from a state saved by any rank of a job with any world size and worker
        count: the next pass reads exactly what that job had not read yet, split over
        this job's ranks (see loaders/README.md). Raises StateError if it does not fit."""
        s = st.check(state, build=self.source.fingerprint, total=self.total, seed=self.seed,
                     shuffle=self.shuffle, window=self.window)
        self.epoch = s["epoch"]
        worker = s.get("worker")
        if worker is not None:
            if (s["world_size"], s["policy"]) != (self.world_size, self.policy):
                raise st.StateError(
                    f"this is one DataLoader worker's state (world_size={s['world_size']}, "
                    f"policy={s['policy']!r}); to resume with world_size={self.world_size}, "
                    f"policy={self.policy!r}, convert the whole StatefulDataLoader state with "
                    "shardforge.loaders.state.from_stateful_loader first")
            self._plan, self._offset, self._worker = s["plan"], s["consumed"], worker
        else:
            self._plan, self._offset, self._worker = st.rest(s), 0, None
        self._yielded = 0

    # -- reading --------------------------------------------------------------
    def iter_tables(self, chunk: int, worker: int = 0, num_workers: int = 1) -> Iterator[pa.Table]:
        """Tables of at most `chunk` rows: this rank's part from the current position,
        the chunks of worker `worker` of `num_workers`. Counts what it yields."""
        skip = 0
        if self._worker is not None:
            w = self._worker
            if (w["id"], w["num_workers"], w["chunk"]) != (worker, num_workers, chunk):
                raise st.StateError(f"this state was saved by DataLoader worker {w['id']} of "
                                    f"{w['num_workers']} with chunk {w['chunk']}; it can only resume "
                                    "the same worker layout (convert it with "
                                    "state.from_stateful_loader to change the layout)")
            skip = w["yielded"]
        self._yielded = skip if self._worker is not None else 0
        part = self.part()
        n = assignment.length(part) - self._offset
        order = self.order()
        cache: dict = {}
        for a, b in assignment.worker_chunks(n, chunk, worker, num_workers):
            if skip >= b - a:
                skip -= b - a
                continue
            a, skip = a + skip, 0
            if len(part) == 1:  # the usual case: one interval, no need to slice the plan
                ivs = [[part[0][0] + self._offset + a, part[0][0] + self._offset + b]]
            else:
                ivs = assignment.slice_plan(part, self._offset + a, self._offset + b)
            pieces = [t for s, e in ivs for t in self._read_range(order, s, e, cache)]
            table = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
            self._yielded += table.num_rows
            yield table

    def _read_range(self, order: EpochOrder, start: int, stop: int, cache: dict) -> Iterator[pa.Table]:
        """Rows at epoch positions [start, stop), window by window (one window decoded
        and permuted at a time, kept for the next call)."""
        pos = start
        while pos < stop:
            if "w" in cache and cache["ws"] <= pos < cache["we"]:
                ws, we = cache["ws"], cache["we"]
            else:
                w = order.window_of(pos)
                ws, we = order.window_span(w)
                table = self.source.read_many(order.window_blocks(w))
                perm = order.window_rows(w)
                # one gather per window (cheaper than one per batch); batches are then slices
                cache.clear()
                cache.update(w=w, ws=ws, we=we, table=table if perm is None else take(table, perm))
            end = min(stop, we)
            yield cache["table"].slice(pos - ws, end - pos)
            pos = end

    def iter_batches(self, batch_size: int = 1024) -> Iterator[pa.RecordBatch]:
        """The plain pyarrow iterator: this rank's part of the current epoch from the
        current position, as RecordBatches of `batch_size` rows (the last may be
        shorter). `state_dict()` afterwards counts the rows produced."""
        for table in self.iter_tables(batch_size):
            yield table.combine_chunks().to_batches()[0]

def epoch_positions(reader: ShardReader) -> np.ndarray:
    """(shard, row group, row) of every position of the current epoch, in order: an
    O(total) helper for tests and shuffle-quality measurements, not for training."""
    order = reader.order()
    out = np.empty((order.total, 3), dtype=np.int64)
    for w in range(order.num_windows):
        ws, we = order.window_span(w)
        rows = np.concatenate([np.stack([np.full(b.rows, b.shard), np.full(b.rows, b.group),
                                         np.arange(b.rows)], axis=1) for b in order.window_blocks(w)])
        perm = order.window_rows(w)
        out[ws:we] = rows if perm is None else rows[perm]
    return out
