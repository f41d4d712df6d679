"""Packed token sequences: an epoch's documents, concatenated, cut into rows of L+1 tokens.

The token stream of an epoch is the build's token column (a list of integers per
document) in the epoch order of documents (`order.EpochOrder`, the same order the
row modes read), each document followed by `eos_id` when one is given (leave it None
when the tokenize stage already appended EOS). Sequence j is stream[j*L : j*L + L + 1]:
inputs are its first L tokens and targets its last L, so consecutive sequences share
one token and every token of the stream is an input once. The last (N - 1) mod L tokens
of an epoch of N tokens are in no sequence (the tail); an epoch with N <= L has none.

A sequence is a *position* of this stream the way a document is a position of the row
modes: the plan, ranks, lanes, DataLoader workers and the saved state (`assignment`,
`state`) work on sequence indices unchanged, so exact resume, elastic resume across
W -> W' ranks and K -> K' workers, and equal steps per rank hold as for rows.

Reaching sequence j decodes one window: per-row-group token counts (from the manifest
when the build recorded them, else one scan of `num_tokens`, else of the token lists,
made once per reader and cached) give each window's first token, so a token offset
maps to its window by a binary search; the window's documents are then decoded and
laid out as one flat stream. Resume therefore costs the same at 90% of an epoch as at 1%.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import numpy_of
from .order import EpochOrder
from .reader import WINDOW_BYTES, ShardReader
from .source import LoaderError, Source
from .windows import Cursor
from shardforge.shards.manifest import token_column_problem


def check_token_column(source: Source, column: str) -> pa.DataType:
    """The token column's Arrow type, which must be a list of integers (else LoaderError)."""
    for shard in source.manifest.shards:
        if shard.rows:
            schema = source.file(shard.index).schema_arrow
            break
    else:
        raise LoaderError(f"the build at {source.path} has no rows")
    problem = token_column_problem(schema, column, source.path)
    if problem:
        raise LoaderError(f"{problem}: sequence mode packs token ids; run the tokenize stage, or pass token_column=")
    t = schema.field(column).type
    return t


def block_tokens(source: Source, column: str) -> np.ndarray:
    """Tokens of each row group of `source.blocks` (manifest order): from the manifest's
    per-row-group list lengths when the build recorded them, else the sums of `num_tokens`,
    else of the lists' lengths, read once."""
    recorded = {s.index: s.list_lengths[column] for s in source.manifest.shards if column in s.list_lengths}
    out = np.zeros(len(source.blocks), dtype=np.int64)
    for i, (shard, group, _rows, _b) in enumerate(source.blocks):
        if shard in recorded:
            out[i] = recorded[shard][group]
            continue
        pf = source.file(int(shard))
        if "num_tokens" in pf.schema_arrow.names:
            col = pf.read_row_group(int(group), columns=["num_tokens"]).column(0)
            out[i] = int(pc.sum(col).as_py() or 0)
        else:
            col = pf.read_row_group(int(group), columns=[column]).column(0)
            out[i] = int(pc.sum(pc.list_value_length(col)).as_py() or 0)
    return out


def flatten(lists: pa.Array, eos: int | None, dtype) -> np.ndarray:
    """One flat token stream from a list array: each list's values, then `eos` if given."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    offsets = numpy_of(lists.offsets).astype(np.int64)
    values = numpy_of(lists.values)[offsets[0]:offsets[-1]].astype(dtype, copy=False)
    offsets = offsets - offsets[0]
    if eos is None:
        return values
    rows = len(lists)
    out = np.empty(len(values) + rows, dtype=dtype)
    lengths = np.diff(offsets)
    out[np.arange(len(values)) + np.repeat(np.arange(rows), lengths)] = values
    out[offsets[1:] + np.arange(rows)] = eos
    return out


class TokenLayout:
    """Where each window's tokens start in one epoch's stream (O(row groups) to build)."""

    def __init__(self, order: EpochOrder, tokens_by_block: dict, eos: bool):
        self.epoch = order.epoch
        blocks = order.blocks
        per_block = np.array([tokens_by_block[(int(s), int(g))] for s, g in blocks[:, :2]], dtype=np.int64) \
            if len(blocks) else np.zeros(0, dtype=np.int64)
        if eos:
            per_block = per_block + blocks[:, 2]
        window_tokens = np.add.reduceat(per_block, order.first_blocks()) if len(per_block) else per_block
        self.starts = np.concatenate([[0], np.cumsum(window_tokens)]).astype(np.int64)
        self.total = int(self.starts[-1])

    def window_of(self, token: int) -> int:
        return int(np.searchsorted(self.starts, token, side="right")) - 1


class TokenCursor:
    """Sequences by index, for one lane: reads the windows their tokens lie in through a
    row `Cursor` and keeps the current window's flat stream."""

    def __init__(self, source: Source, order: EpochOrder, layout: TokenLayout, *, length: int, eos: int | None,
                 dtype, threads: bool, ahead: int | None):
        self.order, self.layout, self.length, self.eos, self.dtype = order, layout, length, eos, dtype
        ahead_doc = None
        if ahead is not None:                       # the document position where the lane's tokens end
            last = min(ahead * length, layout.total - 1)
            ahead_doc = order.window_span(layout.window_of(last))[1]
        self.rows = Cursor(source, order, threads=threads, ahead=ahead_doc)
        self._w: int | None = None
        self._stream: np.ndarray | None = None
        self._entered = False          # the window was entered by the last read

    def _window(self, w: int) -> np.ndarray:
        if self._w != w:
            self._stream = None
            a, b = self.order.window_span(w)
            (table,) = list(self.rows.read(a, b))
            self._stream = flatten(table.column(0), self.eos, self.dtype)
            del table
            self._w, self._entered = w, True
        return self._stream

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """The stream's tokens [start, stop) (stop <= total)."""
        if self._entered:
            # a batch has been taken from the current window, whose rows are all in its
            # stream: free them and decode the next window in the background meanwhile (not
            # earlier: a resume decodes one window before its first batch)
            self._entered = False
            self.rows.finish()
        parts, t = [], start
        while t < stop:
            w = self.layout.window_of(t)
            ws, we = int(self.layout.starts[w]), int(self.layout.starts[w + 1])
            stream = self._window(w)
            end = min(stop, we)
            parts.append(stream[t - ws:end - ws])
            t = end
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def read(self, start: int, stop: int) -> Iterator[np.ndarray]:
        """Sequences [start, stop) as one (n, L + 1) array."""
        flat = self.tokens(start * self.length, stop * self.length + 1)
        size = flat.itemsize
        yield np.lib.stride_tricks.as_strided(flat, shape=(stop - start, self.length + 1),
                                              strides=(self.length * size, size)).copy()

    def close(self) -> None:
        self.rows.close()
        self._w, self._stream = None, None


class SequenceReader(ShardReader):
    """ShardReader whose samples are packed sequences of `sequence_length` + 1 token ids.

    Chunks are numpy arrays of shape (n, sequence_length + 1) in the token column's
    integer type. `epoch_stats()` accounts for every document of the epoch (including
    those with no tokens) and the tail left out.
    """

    def __init__(self, path, *, sequence_length: int, token_column: str = "tokens", eos_id: int | None = None,
                 rank: int | None = None, world_size: int | None = None, seed: int = 0, shuffle: bool = True,
                 window_bytes: int | None = WINDOW_BYTES, window: int | None = None, lanes: int = 1,
                 policy: str = "drop", verify: bool = False, epoch: int = 0,
                 cache_dir=None, cache_limit_bytes: int | None = None):
        if int(sequence_length) < 1:
            raise LoaderError(f"sequence_length must be >= 1, got {sequence_length}")
        self.sequence_length = int(sequence_length)
        self.token_column = token_column
        self.eos_id = None if eos_id is None else int(eos_id)
        self._layout: TokenLayout | None = None
        super().__init__(path, rank=rank, world_size=world_size, seed=seed, shuffle=shuffle,
                         window_bytes=window_bytes, window=window, lanes=lanes, policy=policy,
                         columns=[token_column], verify=verify, epoch=epoch, cache_dir=cache_dir,
                         cache_limit_bytes=cache_limit_bytes)

    def _open(self, path, columns, verify) -> Source:
        """The build, checked for a token column, with its tokens counted per row group."""
        source = Source(path, verify=verify, **self._cache_options)
        t = check_token_column(source, self.token_column)
        source.columns = list(columns)
        self.dtype = np.dtype(t.value_type.to_pandas_dtype())
        if self.eos_id is not None and not (np.iinfo(self.dtype).min <= self.eos_id <= np.iinfo(self.dtype).max):
            raise LoaderError(f"eos_id {self.eos_id} does not fit the token column's type {t.value_type}")
        counts = block_tokens(source, self.token_column)
        self._tokens_by_block = {(int(b[0]), int(b[1])): int(n) for b, n in zip(source.blocks, counts)}
        self._stream_tokens = int(counts.sum()) + (source.total if self.eos_id is not None else 0)
        return source

    @property
    def total(self) -> int:
        """Sequences per epoch (the same every epoch: a new order moves tokens, not their count)."""
        n, length = self._stream_tokens, self.sequence_length
        return 0 if n <= length else (n - 1) // length

    def layout(self, epoch: int | None = None) -> TokenLayout:
        order = self.order(epoch)
        if self._layout is None or self._layout.epoch != order.epoch:
            self._layout = TokenLayout(order, self._tokens_by_block, self.eos_id is not None)
        return self._layout

    def epoch_cursor(self, epoch: int, *, threads: bool, ahead: int | None = None):
        layout = self.layout(epoch)
        return TokenCursor(self.source, self.order(epoch), layout, length=self.sequence_length, eos=self.eos_id,
                           dtype=self.dtype, threads=threads, ahead=ahead)

    @staticmethod
    def _join(parts):
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _base(self, **extra) -> dict:
        state = super()._base(**extra)
        state["sequence"] = {"length": self.sequence_length, "column": self.token_column, "eos_id": self.eos_id}
        return state

    def load_state_dict(self, state) -> None:
        from .state import StateError

        mine = {"length": self.sequence_length, "column": self.token_column, "eos_id": self.eos_id}
        theirs = state.get("sequence") if isinstance(state, dict) else None
        if theirs != mine:
            raise StateError(f"loader state has sequence settings {theirs!r} but this dataset has {mine!r}; "
                             "the sequences would differ")
        super().load_state_dict({k: v for k, v in state.items() if k != "sequence"})

    def iter_sequences(self, batch_size: int = 8) -> Iterator[np.ndarray]:
        """The plain numpy iterator: this rank's sequences from the current position, in
        arrays of `batch_size` rows (only the last may be shorter)."""
        yield from self.iter_tables(batch_size)

    def epoch_stats(self) -> dict:
        """Documents, documents without tokens, tokens (with the separators), sequences and
        the tail of an epoch: every document is in the stream, an empty one as its EOS
        only (or not at all without eos_id)."""
        empty = 0
        for shard, group, _r, _b in self.source.blocks:
            pf = self.source.file(int(shard))
            col = pf.read_row_group(int(group), columns=[self.token_column]).column(0)
            empty += int(pc.sum(pc.equal(pc.list_value_length(col), 0)).as_py() or 0)
        used = self.total * self.sequence_length + (1 if self.total else 0)
        return {"documents": self.source.total, "empty_documents": empty, "tokens": self._stream_tokens,
                "sequences": self.total, "tail_tokens": self._stream_tokens - used}
