"""The epoch order written again from its documented definition (loaders/README.md, "The order,
exactly"), in plain Python integers, for tests that must not take an expected order from
`shardforge.loaders`: this module imports nothing of the loader; it reads a build's manifest
as JSON and its shards' footers and rows with pyarrow."""
from __future__ import annotations

import json
import os

import pyarrow.parquet as pq

_MASK = (1 << 64) - 1
_TAG_BLOCKS, _TAG_WINDOW, _TAG_SOURCE = 1, 2, 7


def mix(x: int) -> int:
    """splitmix64's finaliser, wrapping at 64 bits."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def key(*parts: int) -> int:
    """The key of a tuple of integers: h = 0x5F0CA11ED5EED000, then h = mix(h ^ p) per part."""
    h = 0x5F0CA11ED5EED000
    for p in parts:
        h = mix(h ^ (p & _MASK))
    return h


def perm(n: int, k: int) -> list[int]:
    """0..n-1 sorted by mix(i ^ k)."""
    return sorted(range(n), key=lambda i: mix(i ^ k))


def source_seed(seed: int, s: int) -> int:
    """The seed of source s of a mixture: key(seed, s, 7) shifted right by one bit."""
    return key(seed, s, _TAG_SOURCE) >> 1


_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12, "BYTE_ARRAY": 4}


def decoded_size(md: pq.FileMetaData, g: int) -> int:
    """A row group's decoded size as documented: per column chunk the larger of its uncompressed
    size and values x width, plus rows x 4 x the column's repetition level."""
    rg, total = md.row_group(g), 0
    for i in range(rg.num_columns):
        c, leaf = rg.column(i), md.schema.column(i)
        width = leaf.length if c.physical_type == "FIXED_LEN_BYTE_ARRAY" else _WIDTH.get(c.physical_type, 8)
        total += max(c.total_uncompressed_size, c.num_values * width) + rg.num_rows * 4 * leaf.max_repetition_level
    return total


def windows(blocks: list[tuple], *, shuffle: bool, seed: int, epoch: int, window: int | None,
            window_bytes: int | None, lanes: int = 1) -> list[list[tuple]]:
    """The epoch's windows, each a list of blocks (shard, group, rows, nbytes) in window order.
    `blocks`: the non-empty row groups in manifest order."""
    if not shuffle:
        return [[b] for b in blocks]
    blocks = [blocks[i] for i in perm(len(blocks), key(seed, epoch, _TAG_BLOCKS))] if len(blocks) > 1 else blocks
    budget = None if window_bytes is None else max(1, window_bytes // (2 * lanes))
    out: list[list[tuple]] = []
    size = 0
    for b in blocks:
        cur = out[-1] if out else []
        full = (budget is not None and size + b[3] > budget) or (window is not None and len(cur) >= window)
        if not cur or full:
            out.append([])
            size = 0
        out[-1].append(b)
        size += b[3]
    return out


def positions(blocks: list[tuple], **order) -> list[tuple[int, int, int]]:
    """(shard, group, row in group) of every position of the epoch, in order."""
    out = []
    for w, members in enumerate(windows(blocks, **order)):
        rows = [(b[0], b[1], r) for b in members for r in range(b[2])]
        if not order["shuffle"]:
            out += rows
            continue
        out += [rows[i] for i in perm(len(rows), key(order["seed"], order["epoch"], _TAG_WINDOW, w))]
    return out


def build_blocks(path: str) -> tuple[list[tuple], dict[int, str]]:
    """(blocks in manifest order, {shard index: file path}) of a local build."""
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    blocks, files = [], {}
    for s in manifest["shards"]:
        files[s["index"]] = os.path.join(path, s["file"])
        if not s["rows"]:
            continue
        md = pq.read_metadata(files[s["index"]])
        blocks += [(s["index"], g, n, decoded_size(md, g)) for g, n in enumerate(s["row_groups"]) if n]
    return blocks, files


def column_in_order(path: str, column: str, *, seed: int = 0, epoch: int = 0, shuffle: bool = True,
                    window: int | None = None, window_bytes: int | None = 128 << 20, lanes: int = 1) -> list:
    """`column`'s values of one epoch of the build at `path`, in the documented order."""
    blocks, files = build_blocks(path)
    groups: dict = {}
    for shard, group, _r, _b in blocks:
        groups[shard, group] = pq.ParquetFile(files[shard]).read_row_group(group, columns=[column]) \
            .column(0).to_pylist()
    return [groups[s, g][r] for s, g, r in positions(blocks, shuffle=shuffle, seed=seed, epoch=epoch,
                                                       window=window, window_bytes=window_bytes, lanes=lanes)]
