"""Reading epoch positions: the rows at any run of positions, one decoded window at a time.

A `Cursor` follows one lane of a reader through the epoch order. It keeps the
window its last read needed, decoded as separate row groups (`gather.Window`),
and builds each batch by gathering the batch's rows out of it; once a batch of a
window has been taken, it decodes the lane's next window in the background. Moving
to another window drops the old one first, so a cursor holds at most two windows
(the order sizes windows to `window_bytes / (2 * lanes)`) plus the batch it is
building, and a read that starts anywhere decodes the row groups of the window it
starts in before its first batch, and nothing before the position.

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


_POOLS: dict[str, tuple[int, ThreadPoolExecutor]] = {}


def _pool(name: str, threads: int) -> ThreadPoolExecutor:
    """This process's threads of one kind (made after a fork, never inherited)."""
    got = _POOLS.get(name)
    if got is None or got[0] != os.getpid():
        got = _POOLS[name] = (os.getpid(), ThreadPoolExecutor(max_workers=threads))
    return got[1]


class Cursor:
    """Rows of an epoch order by position, for one lane of reading.

    `threads`: decode a window's row groups side by side on a few threads (for a process
    that reads alone; DataLoader workers already keep the cores busy). `ahead`: the
    epoch position where the lane ends (None: do not read ahead); once a batch has been
    taken from window w, window w + 1 is decoded in the background if the lane reaches
    it (when the next read begins), so the cursor holds at most two windows.
    """

    def __init__(self, source: Source, order: EpochOrder, *, threads: bool = True, ahead: int | None = None):
        self.source, self.order, self.threads, self.ahead = source, order, threads, ahead
        self._w: int | None = None
        self._window: Window | None = None
        self._perm: np.ndarray | None = None
        self._next = None            # (w, Future of its Window)

    def _decode(self, w: int) -> Window:
        blocks = self.order.window_blocks(w)
        if self.threads and len(blocks) > 1:      # the window's row groups side by side
            cores = min(4, os.cpu_count() or 1)
            tables = list(_pool("decode", cores).map(lambda b: self.source.read(b, threads=False), blocks))
        else:
            tables = [self.source.read(b, threads=self.threads) for b in blocks]
        return Window(tables)

    def _enter(self, w: int) -> None:
        if self._w == w:
            return
        self._w, self._window, self._perm = None, None, None      # free the old window first
        ahead, self._next = self._next, None
        if ahead is not None and ahead[0] == w:
            window = ahead[1].result()
        else:
            if ahead is not None:
                _drop(ahead[1])
            window = self._decode(w)
        self._window, self._perm, self._w = window, self.order.window_rows(w), w

    def _read_ahead(self) -> None:
        w = self._w + 1
        if self.ahead is None or self._next is not None or w >= self.order.num_windows \
                or self.order.window_span(w)[0] >= self.ahead:
            return
        self._next = (w, _pool("ahead", 1).submit(self._decode, w))

    def read(self, start: int, stop: int) -> Iterator[pa.Table]:
        """Rows at epoch positions [start, stop), in order, as one table per window
        touched (each a new table; nothing refers to the window afterwards except a
        run of rows read in file order, which is a slice of one row group)."""
        if self._w is not None:
            self._read_ahead()                     # a batch was taken from this window before
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

    def finish(self) -> None:
        """The current window has been read whole and is no longer needed: free it, and
        decode the next one in the background if the lane reaches it (a reader that takes a
        window in one read would otherwise only ask for the next one when it needs it)."""
        if self._w is None:
            return
        self._read_ahead()
        self._w, self._window, self._perm = None, None, None

    def close(self) -> None:
        if self._next is not None:
            _drop(self._next[1])
        self._w, self._window, self._perm, self._next = None, None, None, None


def _drop(future) -> None:
    """Forget a read-ahead: cancel it, or wait for it to finish (so that a stale window
    never overlaps a third one in memory)."""
    if not future.cancel():
        future.exception()


def one_table(pieces: list[pa.Table]) -> pa.Table:
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
