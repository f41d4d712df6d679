"""Shared helpers for the loader tests: small shard builds of chosen sizes, and
"run to the end" / "checkpoint at k and resume" drivers over real DataLoaders."""
from __future__ import annotations

import pyarrow as pa

from shardforge.shardio import WriterSettings, write_build


def shard_tables(sizes: list[int], *, tokens: bool = True) -> list[pa.Table]:
    """One table per shard; row ids are globally unique ints: shard * 100_000 + row."""
    tables = []
    for s, n in enumerate(sizes):
        ids = [s * 100_000 + i for i in range(n)]
        cols = {"id": pa.array(ids, pa.int64()),
                "text": pa.array([f"doc-{i}" for i in ids], pa.string()),
                "score": pa.array([i / 7.0 for i in ids], pa.float32())}
        if tokens:
            cols["tokens"] = pa.array([[i % 97] * (1 + i % 5) for i in ids], pa.list_(pa.int32()))
        tables.append(pa.table(cols))
    return tables


def make_build(root, sizes: list[int], *, row_group_rows: int = 8, tokens: bool = True):
    """Write a build with shards of `sizes` rows (0 allowed) and return its manifest."""
    return write_build(str(root), shard_tables(sizes, tokens=tokens),
                       settings=WriterSettings(row_group_rows=row_group_rows))
