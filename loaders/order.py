"""The epoch order: which row of which shard sits at each position of an epoch.

The order is a pure function of (manifest row-group sizes, seed, epoch, shuffle
settings); world size and DataLoader workers never enter it. It is built from
row groups ("blocks", the unit Parquet decodes) so any position is reached by
decoding one window of row groups, never by reading what comes before it:

* shuffle off: blocks in manifest order, rows in file order (the manifest order);
* shuffle on: blocks permuted by a seeded hash sort, consecutive runs of
  `window` blocks form a window, and the rows of each window are permuted by a
  stateless seeded permutation (a hash sort of the row index). A window plays the
  part of a shuffle buffer, but it is computed, not filled, so it can be
  entered at any position.

Memory and time per epoch are O(number of row groups) for the block order (a numpy
array, 24 bytes per row group) and O(rows in one window) per window entered; there
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
    """One non-empty row group: `shard` index, `group` index inside the shard, `rows`."""
    shard: int
    group: int
    rows: int


def block_table(blocks) -> np.ndarray:
    """Row groups as an (n, 3) int64 array of (shard, group, rows)."""
    if isinstance(blocks, np.ndarray):
        return blocks.astype(np.int64, copy=False).reshape(-1, 3)
    rows = [(b.shard, b.group, b.rows) if isinstance(b, Block) else tuple(b) for b in blocks]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


class EpochOrder:
    """Positions 0..total-1 of one epoch, grouped into windows of row groups.

    `window_span(w)` gives a window's [start, stop) positions, `window_blocks(w)`
    its blocks in order, and `window_rows(w)` the permutation mapping a position's
    offset inside the window to a row of the window's blocks concatenated.
    """

    def __init__(self, blocks, *, seed: int, epoch: int, shuffle: bool, window: int):
        """`blocks`: the build's non-empty row groups in manifest order, as a list of Block
        or an int64 array of (shard, group, rows) rows (24 bytes per row group)."""
        if window < 1:
            raise ValueError(f"window must be >= 1 row group, got {window}")
        self.seed, self.epoch, self.shuffle, self.window = int(seed), int(epoch), bool(shuffle), int(window)
        table = block_table(blocks)
        if shuffle and len(table) > 1:
            table = table[permutation(len(table), stream_key(self.seed, self.epoch, TAG_BLOCKS))]
        self.blocks = table
        sizes = table[:, 2]
        self._block_starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.total = int(self._block_starts[-1])
        self.num_windows = -(-len(self.blocks) // self.window)
        self._window_starts = self._block_starts[::self.window].copy()
        if len(self._window_starts) == self.num_windows:
            self._window_starts = np.append(self._window_starts, self.total)

    def window_of(self, position: int) -> int:
        """The window holding `position` (0 <= position < total); O(log windows)."""
        if not 0 <= position < self.total:
            raise IndexError(f"position {position} outside the epoch's {self.total} samples")
        return int(np.searchsorted(self._window_starts, position, side="right")) - 1

    def window_span(self, w: int) -> tuple[int, int]:
        return int(self._window_starts[w]), int(self._window_starts[w + 1])

    def window_blocks(self, w: int) -> list[Block]:
        rows = self.blocks[w * self.window:(w + 1) * self.window]
        return [Block(int(a), int(b), int(c)) for a, b, c in rows]

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
