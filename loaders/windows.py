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
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np
import pyarrow as pa

from .gather import Window
from .order import EpochOrder
from .source import Source


_BACKGROUND: tuple[int, ThreadPoolExecutor] | None = None


def _background() -> ThreadPoolExecutor:
    """This process's one background decode thread (made after a fork, never inherited);
    it runs what it is given in order."""
    global _BACKGROUND
    if _BACKGROUND is None or _BACKGROUND[0] != os.getpid():
        _BACKGROUND = (os.getpid(), ThreadPoolExecutor(max_workers=1))
    return _BACKGROUND[1]


class _Decode:
    """The decode of one window's row groups, shared by whoever has time for it.

    A background thread takes the row groups one at a time (`work`); the reader, once it
    needs the window (`window`), takes the ones not yet started itself instead of waiting,
    then waits only for those in progress. A reader that keeps a core busy with its batches
    leaves the whole decode to the background (one row group at a time: the least memory
    and no threads fighting over the cores); one that has caught up decodes side by side
    with it. Row groups decode without pyarrow's column threads, except a window of one row
    group that the reader decodes itself with `threads`.
    """

    def __init__(self, source: Source, blocks):
        self.source, self.blocks = source, blocks
        self.pid = os.getpid()         # the process whose background thread works on it
        self.tables: list = [None] * len(blocks)
        self._next = 0                 # the first row group nobody has started
        self._running = 0              # started, not finished
        self._stop = False             # cancelled, or a decode failed
        self._error: BaseException | None = None
        self._cond = threading.Condition()

    def work(self, threads: bool = False) -> None:
        """Decode row groups nobody has started, until none is left."""
        while True:
            with self._cond:
                if self._stop or self._next >= len(self.blocks):
                    return
                i, self._next, self._running = self._next, self._next + 1, self._running + 1
            table, error = None, None
            try:
                table = self.source.read(self.blocks[i], threads=threads)
            except BaseException as exc:          # handed to the reader by window()
                error = exc
            with self._cond:
                self.tables[i] = table
                if error is not None and self._error is None:
                    self._error, self._stop = error, True
                self._running -= 1
                self._cond.notify_all()

    def window(self, threads: bool = False) -> Window:
        """The decoded window, once every row group is: helps with the ones not started."""
        self.work(threads=threads and len(self.blocks) == 1)
        with self._cond:
            while self._running:
                self._cond.wait()
            if self._error is not None:
                raise self._error
            # a helper still queued keeps this object; it must not keep the window's memory
            tables, self.tables, self._stop = self.tables, [], True
        return Window(tables)

    def foreign(self) -> bool:
        """Made in another process (a DataLoader worker forked from the reader that made it):
        the thread decoding it is not in this process, and its lock may have been copied
        held, so this process must neither wait for it nor take its lock."""
        return self.pid != os.getpid()

    def cancel(self) -> None:
        """Start no more row groups, and wait for those in progress (so that a stale window
        never overlaps a third one in memory); errors are dropped."""
        if self.foreign():
            self.tables = []
            return
        with self._cond:
            self._stop = True
            while self._running:
                self._cond.wait()
        self.tables = []


class Cursor:
    """Rows of an epoch order by position, for one lane of reading.

    `threads`: the process reads alone, so a window it needs before its first batch is
    decoded by the reader and the background thread side by side (DataLoader workers
    already keep the cores busy, so a worker decodes such a window alone). `ahead`: the
    epoch position where the lane ends (None: do not read ahead); once a batch has been
    taken from window w, window w + 1 is decoded in the background if the lane reaches it
    (when the next read begins), so the cursor holds at most two windows; a reader that
    needs it before it is done helps decode it (`_Decode`). One background thread per
    process serves every cursor in it.
    """

    def __init__(self, source: Source, order: EpochOrder, *, threads: bool = True, ahead: int | None = None):
        self.source, self.order, self.threads, self.ahead = source, order, threads, ahead
        self._w: int | None = None
        self._window: Window | None = None
        self._perm: np.ndarray | None = None
        self._next: tuple[int, _Decode] | None = None     # the window decoding in the background

    def _enter(self, w: int) -> None:
        if self._w == w:
            return
        self._w, self._window, self._perm = None, None, None      # free the old window first
        ahead, self._next = self._own_next(), None
        if ahead is not None and ahead[0] == w:
            job = ahead[1]
        else:
            if ahead is not None:
                ahead[1].cancel()
            job = _Decode(self.source, self.order.window_blocks(w))
            if self.threads and len(job.blocks) > 1 and (os.cpu_count() or 1) > 1:
                _background().submit(job.work)
        window = job.window(threads=self.threads)
        self._window, self._perm, self._w = window, self.order.window_rows(w), w

    def _own_next(self) -> tuple[int, _Decode] | None:
        """The read-ahead job, unless it was started in the process this cursor was copied
        from by a fork (then it is dropped: it would never finish here)."""
        if self._next is not None and self._next[1].foreign():
            self._next = None
        return self._next

    def _read_ahead(self) -> None:
        w = self._w + 1
        if self.ahead is None or self._own_next() is not None or w >= self.order.num_windows \
                or self.order.window_span(w)[0] >= self.ahead:
            return
        job = _Decode(self.source, self.order.window_blocks(w))
        _background().submit(job.work)
        self._next = (w, job)

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
        if self._own_next() is not None:
            self._next[1].cancel()
        self._w, self._window, self._perm, self._next = None, None, None, None


def one_table(pieces: list[pa.Table]) -> pa.Table:
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
