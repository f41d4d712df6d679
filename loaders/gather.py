"""Gathering rows from a decoded window: `Window(tables).take(rows)`, one batch at a time.

A window is a few decoded row groups, kept as they came from Parquet (never
concatenated, never permuted as a whole), so a reader holds one copy of its rows.
`take(rows)` returns a new table of those rows in that order, with the same
values, types and schema as `pyarrow.Table.take` on the row groups concatenated;
its cost is proportional to the rows asked for, not to the window. Fast paths
(numpy) cover the columns that dominate training data, without nulls: numbers,
strings and binaries, and lists of numbers (token ids); any other column goes
through Arrow's take, one call per row group the batch touches.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrays import array_of, numpy_of


def _number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _one_chunk(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


class _Numbers:
    """A number column without nulls: one small numpy array over the window (8 bytes a row
    at most), gathered by fancy indexing."""

    def __init__(self, arrays: list[pa.Array]):
        self.type = arrays[0].type
        self.values = np.concatenate([numpy_of(a) for a in arrays])

    def take(self, rows: np.ndarray, blocks: np.ndarray, local: np.ndarray) -> pa.Array:
        return array_of(self.values[rows], self.type)


class _Spans:
    """Strings, binaries and lists of numbers without nulls: each row is a span of one
    row group's value buffer; a batch copies its rows' spans into one new buffer."""

    def __init__(self, arrays: list[pa.Array]):
        t = self.type = arrays[0].type
        self.fixed = pa.types.is_fixed_size_list(t)
        self.text = pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t)
        self.large = pa.types.is_large_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_list(t)
        self.buffers, starts, lengths = [], [], []
        for a in arrays:
            if self.text:
                data = a.buffers()[2]
                self.buffers.append(np.frombuffer(data, dtype=np.uint8) if data is not None
                                    else np.zeros(0, dtype=np.uint8))
                raw = np.frombuffer(a.buffers()[1], dtype=np.int64 if self.large else np.int32)
                offsets = raw[a.offset:a.offset + len(a) + 1].astype(np.int64)
            elif self.fixed:
                size = t.list_size
                self.buffers.append(numpy_of(a.values))
                offsets = (np.arange(len(a) + 1, dtype=np.int64) + a.offset) * size
            else:
                self.buffers.append(numpy_of(a.values))
                offsets = numpy_of(a.offsets).astype(np.int64)
            starts.append(offsets[:-1])
            lengths.append(np.diff(offsets))
        self.starts = np.concatenate(starts)
        self.lengths = np.concatenate(lengths)

    def take(self, rows: np.ndarray, blocks: np.ndarray, local: np.ndarray) -> pa.Array:
        starts, lengths = self.starts[rows], self.lengths[rows]
        bufs = self.buffers
        pieces = [bufs[b][s:s + n] for b, s, n in zip(blocks.tolist(), starts.tolist(), lengths.tolist())]
        values = np.concatenate(pieces) if pieces else bufs[0][:0]
        n = len(rows)
        if self.fixed:
            return pa.FixedSizeListArray.from_arrays(array_of(values, self.type.value_type),
                                                     self.type.list_size)
        offsets = np.zeros(n + 1, dtype=np.int64 if self.large else np.int32)
        np.cumsum(lengths, out=offsets[1:])
        if self.text:
            return pa.Array.from_buffers(self.type, n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])
        return pa.Array.from_buffers(self.type, n, [None, pa.py_buffer(offsets)],
                                     children=[array_of(values, self.type.value_type)])


class _Arrow:
    """Any other column: Arrow's take on each row group the batch touches, then the
    pieces back in the batch's order."""

    def __init__(self, arrays: list[pa.Array]):
        self.arrays = arrays

    def take(self, rows: np.ndarray, blocks: np.ndarray, local: np.ndarray) -> pa.Array:
        if len(self.arrays) == 1:
            return self.arrays[0].take(array_of(local))
        by_block = np.argsort(blocks, kind="stable")
        sorted_blocks = blocks[by_block]
        cuts = np.flatnonzero(np.diff(sorted_blocks)) + 1
        pieces = [self.arrays[int(sorted_blocks[a])].take(array_of(local[by_block[a:b]]))
                  for a, b in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(rows)]]))]
        back = np.empty_like(by_block)
        back[by_block] = np.arange(len(by_block))
        return pa.concat_arrays(pieces).take(array_of(back))


def _gatherer(arrays: list[pa.Array]):
    t = arrays[0].type
    if any(a.null_count for a in arrays):
        return _Arrow(arrays)
    if _number(t):
        return _Numbers(arrays)
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t):
        return _Spans(arrays)
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) \
            and _number(t.value_type) and not any(a.values.null_count for a in arrays):
        return _Spans(arrays)
    return _Arrow(arrays)


class Window:
    """Decoded row groups (tables with one schema) and the gather of their rows.

    Row i of the window is row i of the tables laid end to end. Holds the tables and,
    per row, 8 to 24 bytes of index; `nbytes` is what the decoded tables hold.
    """

    def __init__(self, tables: list[pa.Table]):
        if not tables:
            raise ValueError("a window needs at least one row group")
        self.tables = tables
        self.schema = tables[0].schema
        self.num_rows = sum(t.num_rows for t in tables)
        self.nbytes = sum(t.nbytes for t in tables)
        self._starts = np.concatenate([[0], np.cumsum([t.num_rows for t in tables])]).astype(np.int64)
        self._columns = [_gatherer([_one_chunk(t.column(i)) for t in tables])
                         for i in range(len(self.schema))]

    def take(self, rows) -> pa.Table:
        """Rows `rows` (window row indices) as a new table, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        blocks = np.searchsorted(self._starts, rows, side="right") - 1
        local = rows - self._starts[blocks]
        n = len(rows)
        if n == 0:
            return self.tables[0].slice(0, 0)
        # consecutive window rows (not merely consecutive local rows: [27, 12, 29] over groups of 16
        # has locals 11, 12, 13 in groups 1, 0, 1) whose first and last share a row group
        if blocks[0] == blocks[-1] and rows[-1] - rows[0] == n - 1 \
                and (n < 3 or bool(np.all(np.diff(rows) == 1))):
            return self.tables[int(blocks[0])].slice(int(local[0]), n)   # a run in one row group
        cols = [g.take(rows, blocks, local) for g in self._columns]
        return pa.Table.from_arrays(cols, schema=self.schema)


def take(table: pa.Table, idx) -> pa.Table:
    """Rows `idx` of `table`, in that order (the same result as `table.take(idx)`)."""
    return Window([table]).take(idx)
