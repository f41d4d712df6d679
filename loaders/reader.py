"""The torch-free core of the loader: position, state and Arrow chunks of a rank's part.

`ShardReader` owns everything except torch: the epoch order, the plan, the
rank/lane/worker split, the saved state, and a generator of pyarrow Tables of the
rows a (rank, worker) reads, in order (read through `windows.Cursor`, one per
lane). `ShardReader.iter_batches()` is the plain iterator for consumers that do
not use torch; the torch dataset wraps the same generator.

Memory: a reading process holds at most two decoded windows per lane it reads (the
one it reads and the next, decoded ahead), `window_bytes / (2 * lanes)` each
(estimated from the Parquet metadata; a window holds at least one row group), so at
most `window_bytes` whatever the row size, plus the batch being built.
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (Table.take needs it; importing it here keeps ~1 s of
                        # one-time set-up out of the first batch)

from . import assignment, state as st
from .order import EpochOrder
from .source import LoaderError, Source
from .windows import Cursor, one_table

WINDOW_BYTES = 128 << 20    # the default memory budget of a reading process (decoded rows)


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

    Promises: the epoch order depends only on (build, seed, epoch, shuffle,
    window_bytes, window, lanes); ranks read disjoint contiguous stretches of it (up
    to `pad` repeats) of equal length; a rank's sequence (its pass) depends on its
    part, the batch size and `lanes`, never on DataLoader workers; a position is
    reached by decoding one window of row groups; the state is a small JSON dict
    (see `shardforge.loaders.state`).
    """

    def __init__(self, path, *, rank: int | None = None, world_size: int | None = None, seed: int = 0,
                 shuffle: bool = True, window_bytes: int | None = WINDOW_BYTES, window: int | None = None,
                 lanes: int = 1, policy: str = "drop", columns=None, verify: bool = False, epoch: int = 0,
                 cache_dir=None, cache_limit_bytes: int | None = None):
        if rank is None or world_size is None:
            r, w = self._default_rank_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        if world_size < 1 or not 0 <= rank < world_size:
            raise LoaderError(f"rank {rank} is not in 0..{world_size - 1} (world_size={world_size})")
        if policy not in assignment.POLICIES:
            raise LoaderError(f"policy must be one of {assignment.POLICIES}, got {policy!r}")
        if window is not None and int(window) < 1:
            raise LoaderError(f"window must be >= 1 row group, got {window}")
        if window_bytes is not None and int(window_bytes) < 1:
            raise LoaderError(f"window_bytes must be >= 1, got {window_bytes}")
        if int(lanes) < 1:
            raise LoaderError(f"lanes must be >= 1, got {lanes}")
        self._cache_options = {"cache_dir": cache_dir, "cache_limit_bytes": cache_limit_bytes}
        self.source = self._open(path, columns, verify)
        self.rank, self.world_size = int(rank), int(world_size)
        self.seed, self.shuffle, self.policy = int(seed), bool(shuffle), policy
        self.window = None if window is None else int(window)
        self.window_bytes = None if window_bytes is None else int(window_bytes)
        self.lanes = int(lanes)
        self.epoch = int(epoch)
        self._new_pass()
        self._order: EpochOrder | None = None

    def _new_pass(self, plan=None, offset: int = 0, chunk: int | None = None, worker=None) -> None:
        self._plan = ([[0, self.total]] if self.total else []) if plan is None else plan
        self._offset = offset     # samples of this rank's pass consumed before this process's reading
        self._chunk = chunk       # the pass's batch size, once known
        self._worker = worker     # a worker's own progress, restored from a worker-level state
        # samples this process's current reading has produced; a restored worker starts from its
        # saved count, so a state taken before it reads again (StatefulDataLoader snapshots every
        # worker when an iterator starts) still holds that worker's progress
        self._yielded = int(worker["yielded"]) if worker else 0

    @staticmethod
    def _default_rank_world() -> tuple[int, int]:
        return env_rank_world()

    def _open(self, path, columns, verify) -> Source:
        return Source(path, columns=columns, verify=verify, **self._cache_options)

    def _pass_chunk(self) -> int | None:
        """The batch size this reader's passes use, when known before reading."""
        return None

    # -- facts ----------------------------------------------------------------
    @property
    def total(self) -> int:
        """Samples per epoch in the build."""
        return self.source.total

    @property
    def columns(self) -> list[str]:
        return self.source.columns

    def order(self, epoch: int | None = None) -> EpochOrder:
        """The order of the current epoch (or of `epoch`); the last one made is cached."""
        epoch = self.epoch if epoch is None else int(epoch)
        if self._order is None or self._order.epoch != epoch:
            # each lane holds the window it reads and the next one, decoded ahead
            per_lane = None if self.window_bytes is None else max(1, self.window_bytes // (2 * self.lanes))
            self._order = EpochOrder(self.source.blocks, seed=self.seed, epoch=epoch,
                                     shuffle=self.shuffle, window=self.window, window_bytes=per_lane)
        return self._order

    def part(self) -> list[list[int]]:
        """Epoch positions this rank reads in the current pass, in part order (already
        consumed ones included)."""
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
        self._new_pass()

    def _base(self, **extra) -> dict:
        chunk = self._chunk or self._pass_chunk() or 1
        return st.make(build=self.source.fingerprint, total=self.total, seed=self.seed,
                       shuffle=self.shuffle, window=self.window, window_bytes=self.window_bytes,
                       lanes=self.lanes, epoch=self.epoch, plan=self._plan, world_size=self.world_size,
                       policy=self.policy, chunk=chunk, **extra)

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
        count. With the same world size, policy and batch size the pass goes on where it
        stopped (the uninterrupted sequence); otherwise what that job had not read yet
        becomes a new pass, split over this job's ranks (see loaders/README.md). Raises
        StateError if it does not fit."""
        s = st.check(state, build=self.source.fingerprint, total=self.total, seed=self.seed,
                     shuffle=self.shuffle, window=self.window, window_bytes=self.window_bytes,
                     lanes=self.lanes)
        self.epoch = s["epoch"]
        same_ranks = (s["world_size"], s["policy"]) == (self.world_size, self.policy)
        worker = s.get("worker")
        if worker is not None:
            if not same_ranks:
                raise st.StateError(
                    f"this is one DataLoader worker's state (world_size={s['world_size']}, "
                    f"policy={s['policy']!r}); to resume with world_size={self.world_size}, "
                    f"policy={self.policy!r}, convert the whole StatefulDataLoader state with "
                    "shardforge.loaders.state.from_stateful_loader first")
            self._new_pass(s["plan"], s["consumed"], s["chunk"], worker)
        elif same_ranks:
            self._new_pass(s["plan"], s["consumed"], s["chunk"])
            if self._pass_chunk() is not None:
                self._settle(self._pass_chunk())
        else:
            self._new_pass(st.rest(s))

    def _settle(self, chunk: int) -> None:
        """Fix the pass's batch size before reading with `chunk`: a pass begun with
        another batch size (and more than one lane) is replaced by its unread rest."""
        if self._chunk == chunk:
            return
        if self._offset and self.lanes > 1 and self._chunk is not None:
            rest = assignment.remaining(self._plan, self.world_size, self.policy, self._offset,
                                        chunk=self._chunk, lanes=self.lanes)
            self._new_pass(rest, 0, chunk, self._worker)
        self._chunk = chunk

    # -- reading --------------------------------------------------------------
    def iter_tables(self, chunk: int, worker: int = 0, num_workers: int = 1) -> Iterator[pa.Table]:
        """Tables of at most `chunk` rows (a subclass's own chunks): this rank's pass from the
        current position, the chunks of worker `worker` of `num_workers`. Counts what it yields."""
        skip = 0
        if self._worker is not None:
            w = self._worker
            if (w["id"], w["num_workers"], w["chunk"]) != (worker, num_workers, chunk):
                raise st.StateError(f"this state was saved by DataLoader worker {w['id']} of "
                                    f"{w['num_workers']} with chunk {w['chunk']}; it can only resume "
                                    "the same worker layout (convert it with "
                                    "state.from_stateful_loader to change the layout)")
            skip = w["yielded"]
        self._settle(chunk)
        self._yielded = skip
        part = self.part()
        layout = assignment.Pass(assignment.length(part), chunk, self.lanes)
        cursors: dict[int, Cursor] = {}

        def cursor(lane: int) -> Cursor:
            if lane not in cursors:
                a, b = layout.lane_span(lane)                 # read ahead up to the lane's end
                end = self._positions(part, b - 1, b)[0][1] if b > a and len(part) == 1 else None
                cursors[lane] = self._cursor(threads=num_workers <= 1, ahead=end)
            return cursors[lane]

        for pieces in assignment.worker_pieces(layout, worker, num_workers, start=self._offset):
            size = sum(b - a for _, a, b in pieces)
            if skip >= size:
                skip -= size
                continue
            parts = []
            for lane, a, b in pieces:
                if skip >= b - a:
                    skip -= b - a
                    continue
                a, skip = a + skip, 0
                for s, e in self._positions(part, a, b):
                    parts.extend(cursor(lane).read(s, e))
            chunk_out = self._join(parts)
            self._yielded += len(chunk_out)
            yield chunk_out
        for c in cursors.values():
            c.close()

    # what a pass reads, and how its pieces join: rows of the build here; a subclass reading
    # other units (packed token sequences, a mixture's samples) replaces these two
    def _cursor(self, *, threads: bool, ahead: int | None):
        """A reader of the current epoch's positions for one lane: `.read(start, stop)` yields
        pieces, `.close()`."""
        return self.epoch_cursor(self.epoch, threads=threads, ahead=ahead)

    def epoch_cursor(self, epoch: int, *, threads: bool, ahead: int | None = None):
        """A reader of epoch `epoch`'s positions (a mixture reads its sources' epochs in turn)."""
        return Cursor(self.source, self.order(epoch), threads=threads, ahead=ahead)

    @staticmethod
    def _join(parts):
        """One chunk out of a read's pieces (its len() is the samples it holds)."""
        return one_table(parts)

    @staticmethod
    def _positions(part, a: int, b: int) -> list[list[int]]:
        if len(part) == 1:  # the usual case: one interval, no need to slice the plan
            return [[part[0][0] + a, part[0][0] + b]]
        return assignment.slice_plan(part, a, b)

    def iter_batches(self, batch_size: int = 1024) -> Iterator[pa.RecordBatch]:
        """The plain pyarrow iterator: this rank's pass of the current epoch from the
        current position, as RecordBatches of `batch_size` rows (only the last may be
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
