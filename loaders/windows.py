"""Reading epoch positions: the rows at any run of positions, one decoded window at a time.

A `Cursor` follows one lane of a reader through the epoch order. It keeps the one
window its last read needed, decoded as separate row groups (`gather.Window`),
and builds each batch by gathering the batch's rows out of it. Moving to another
window drops the old one before the new one is decoded, so a cursor holds at most
one window (the order sizes windows to `window_bytes / lanes`) plus the batch it
is building, and a read that starts anywhere decodes exactly the row groups of
the windows it touches: nothing before the position is read.

This is the reader's core (plan -> positions -> row groups -> rows) and knows
nothing of ranks, workers or torch; other output modes (packed sequences, mixing)
read through it too.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np
import pyarrow as pa

from .gather import Window
from .order import EpochOrder
from .source import Source


_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """This process's decoding threads (made after a fork, never inherited)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)))
    return _POOL[1]


class Cursor:
    """Rows of an epoch order by position, for one lane of reading. `threads`: decode a
    window's row groups side by side on a few threads (for a process that reads alone;
    DataLoader workers already keep the cores busy)."""

    def __init__(self, source: Source, order: EpochOrder, *, threads: bool = True):
        self.source, self.order, self.threads = source, order, threads
        self._w: int | None = None
        self._window: Window | None = None
        self._perm: np.ndarray | None = None

    def _enter(self, w: int) -> None:
        if self._w == w:
            return
        self._w, self._window, self._perm = None, None, None      # free the old window first
        blocks = self.order.window_blocks(w)
        if self.threads and len(blocks) > 1:      # the window's row groups side by side
            tables = list(_pool().map(lambda b: self.source.read(b, threads=False), blocks))
        else:
            tables = [self.source.read(b, threads=self.threads) for b in blocks]
        self._window, self._perm, self._w = Window(tables), self.order.window_rows(w), w

    def read(self, start: int, stop: int) -> Iterator[pa.Table]:
        """Rows at epoch positions [start, stop), in order, as one table per window
        touched (each a new table; nothing refers to the window afterwards except a
        run of rows read in file order, which is a slice of one row group)."""
        pos = start
        while pos < stop:
            w = self.order.window_of(pos)
            ws, we = self.order.window_span(w)
            end = min(stop, we)
            self._enter(w)
            if self._perm is None:
                rows = np.arange(pos - ws, end - ws, dtype=np.int64)
            else:
                rows = self._perm[pos - ws:end - ws]
            yield self._window.take(rows)
            pos = end

    def close(self) -> None:
        self._w, self._window, self._perm = None, None, None


def one_table(pieces: list[pa.Table]) -> pa.Table:
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
