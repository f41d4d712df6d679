"""The epoch order: which row of which shard sits at each position of an epoch.

The order is a pure function of the build's row groups (their rows and their decoded
size, both read from the shards' own metadata), the seed, the epoch and the shuffle
settings (`window_bytes`, `window`); world size and DataLoader workers never enter
it. It is built from row groups ("blocks", the unit Parquet decodes) so any
position is reached by decoding one window of row groups, never by reading what
comes before it:

* shuffle off: blocks in manifest order, rows in file order (the manifest order),
  each block its own window;
* shuffle on: blocks permuted by a seeded hash sort; consecutive blocks form a
  window while their decoded bytes stay within `window_bytes` (and, if `window` is
  set, while there are at most `window` of them; a window always has at least one
  block); the rows of each window are permuted by a stateless seeded permutation
  (a hash sort of the row index). A window plays the part of a shuffle buffer, but
  it is computed, not filled, so it can be entered at any position.

`window_bytes` here is a lane's budget: `ShardReader` passes `max(1, window_bytes // (2 *
lanes))` of its own. loaders/README.md ("The order, exactly") states the whole definition,
hash and key included, so the order can be computed without this module.

Memory and time per epoch are O(number of row groups) for the block order (a numpy
array, 32 bytes per row group) and O(rows in one window) per window entered; there
is no array of all sample ids.
The hash is splitmix64 on numpy uint64, so the order is the same on every
platform and numpy version.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array: a bijection, so distinct inputs
    never collide (a hash sort over them is a permutation without ties)."""
    with np.errstate(over="ignore"):
        x = np.asarray(x, dtype=np.uint64) + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def stream_key(*parts: int) -> np.uint64:
    """One 64-bit key from a tuple of non-negative integers (seed, epoch, tag, ...)."""
    h = np.uint64(0x5F0C_A11E_D5EE_D000)
    for p in parts:
        h = mix64(np.array([h ^ np.uint64(int(p) & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64))[0]
    return h


def permutation(n: int, key: np.uint64) -> np.ndarray:
    """A seeded permutation of range(n) (int64): stateless, a function of (n, key) only."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    return np.argsort(mix64(np.arange(n, dtype=np.uint64) ^ key), kind="stable").astype(np.int64)


TAG_BLOCKS = 1
TAG_WINDOW = 2


@dataclass(frozen=True)
class Block:
    """One non-empty row group: `shard` index, `group` index inside the shard, `rows`, and
    `nbytes`, its decoded size (all columns; 0 when unknown)."""
    shard: int
    group: int
    rows: int
    nbytes: int = 0


def block_table(blocks) -> np.ndarray:
    """Row groups as an (n, 4) int64 array of (shard, group, rows, nbytes); 3-column input
    (no sizes) gets nbytes 0."""
    if isinstance(blocks, np.ndarray):
        table = blocks.astype(np.int64, copy=False)
    else:
        table = np.array([(b.shard, b.group, b.rows, b.nbytes) if isinstance(b, Block) else tuple(b)
                          for b in blocks], dtype=np.int64)
    table = table.reshape(len(table), -1) if table.size else np.zeros((0, 4), dtype=np.int64)
    if table.shape[1] == 3:
        table = np.concatenate([table, np.zeros((len(table), 1), dtype=np.int64)], axis=1)
    return table


def window_starts(nbytes: np.ndarray, *, window_bytes: int | None, window: int | None) -> np.ndarray:
    """Indices of the blocks that open a window, greedily: a block opens a new window
    when adding it would take the current one past `window_bytes` bytes or `window`
    blocks. O(blocks)."""
    n = len(nbytes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if window_bytes is None:
        return np.arange(0, n, window or n, dtype=np.int64)
    starts, size, count = [0], 0, 0
    cap_n = window or n
    for i, b in enumerate(nbytes.tolist()):
        if count and (size + b > window_bytes or count >= cap_n):
            starts.append(i)
            size, count = 0, 0
        size += b
        count += 1
    return np.array(starts, dtype=np.int64)


class EpochOrder:
    """Positions 0..total-1 of one epoch, grouped into windows of row groups.

    `window_span(w)` gives a window's [start, stop) positions, `window_blocks(w)`
    its blocks in order, and `window_rows(w)` the permutation mapping a position's
    offset inside the window to a row of the window's blocks concatenated.
    """

    def __init__(self, blocks, *, seed: int, epoch: int, shuffle: bool, window: int | None = None,
                 window_bytes: int | None = None):
        """`blocks`: the build's non-empty row groups in manifest order, as a list of Block
        or an int64 array of (shard, group, rows[, nbytes]) rows. Windows hold at most
        `window_bytes` decoded bytes and at most `window` blocks (None: no limit of that
        kind; both None: one window)."""
        if window is not None and window < 1:
            raise ValueError(f"window must be >= 1 row group, got {window}")
        if window_bytes is not None and window_bytes < 1:
            raise ValueError(f"window_bytes must be >= 1, got {window_bytes}")
        self.seed, self.epoch, self.shuffle = int(seed), int(epoch), bool(shuffle)
        self.window = None if window is None else int(window)
        self.window_bytes = None if window_bytes is None else int(window_bytes)
        table = block_table(blocks)
        if shuffle and len(table) > 1:
            table = table[permutation(len(table), stream_key(self.seed, self.epoch, TAG_BLOCKS))]
        self.blocks = table
        sizes = table[:, 2]
        self._block_starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.total = int(self._block_starts[-1])
        if shuffle:
            firsts = window_starts(table[:, 3], window_bytes=self.window_bytes, window=self.window)
        else:  # file order needs no window: every block is read on its own
            firsts = np.arange(len(table), dtype=np.int64)
        self._first_block = np.append(firsts, len(table)).astype(np.int64)
        self.num_windows = len(firsts)
        self._window_starts = self._block_starts[self._first_block]

    def first_blocks(self) -> np.ndarray:
        """Index (into `blocks`) of each window's first block."""
        return self._first_block[:-1]

    def window_of(self, position: int) -> int:
        """The window holding `position` (0 <= position < total); O(log windows)."""
        if not 0 <= position < self.total:
            raise IndexError(f"position {position} outside the epoch's {self.total} samples")
        return int(np.searchsorted(self._window_starts, position, side="right")) - 1

    def window_span(self, w: int) -> tuple[int, int]:
        return int(self._window_starts[w]), int(self._window_starts[w + 1])

    def window_blocks(self, w: int) -> list[Block]:
        rows = self.blocks[self._first_block[w]:self._first_block[w + 1]]
        return [Block(int(a), int(b), int(c), int(d)) for a, b, c, d in rows]

    def window_rows(self, w: int) -> np.ndarray | None:
        """Row index (into the window's blocks concatenated) for each offset in the
        window, or None when the window is read in file order (shuffle off)."""
        if not self.shuffle:
            return None
        start, stop = self.window_span(w)
        return permutation(stop - start, stream_key(self.seed, self.epoch, TAG_WINDOW, w))

    def sample_at(self, position: int) -> tuple[int, int, int]:
        """(shard, row group, row inside the group) of one position, without reading data."""
        w = self.window_of(position)
        start, _ = self.window_span(w)
        perm = self.window_rows(w)
        r = int(perm[position - start]) if perm is not None else position - start
        for b in self.window_blocks(w):
            if r < b.rows:
                return b.shard, b.group, r
            r -= b.rows
        raise AssertionError("window rows out of range")  # pragma: no cover
