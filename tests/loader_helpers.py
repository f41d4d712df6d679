"""Shared helpers for the loader tests: small shard builds of chosen sizes, a log of the row
groups decoded, and "run to the end" / "checkpoint at k and resume" drivers over real
DataLoaders."""
from __future__ import annotations

import pyarrow as pa
import pytest

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


def build_fixture(sizes: list[int], *, row_group_rows: int):
    """A module-scoped fixture: the path of a build with shards of `sizes` rows."""
    @pytest.fixture(scope="module")
    def build(tmp_path_factory):
        root = tmp_path_factory.mktemp("build")
        make_build(root, sizes, row_group_rows=row_group_rows)
        return str(root)

    return build


def factory(build, **kw):
    """A maker of fresh datasets over `build` (windows of 3 row groups unless told)."""
    from shardforge.loaders import ShardedDataset

    return lambda: ShardedDataset(build, **{"window": 3, **kw})


def log_reads(monkeypatch) -> list:
    """The (shard, group) of every row group decoded from now on, in order (wraps
    Source.read for the test's duration)."""
    from shardforge.loaders.source import Source

    log: list = []
    orig = Source.read

    def counted(self, block, **kw):
        log.append((block.shard, block.group))
        return orig(self, block, **kw)

    monkeypatch.setattr(Source, "read", counted)
    return log


def batch_ids(batch) -> list[int]:
    return [int(i) for i in batch["id"]]


def _loader(ds, kind: str, workers: int):
    from torch.utils.data import DataLoader

    from shardforge.loaders import collate

    cls = DataLoader
    if kind == "stateful":
        from torchdata.stateful_dataloader import StatefulDataLoader as cls
    if ds.batched:
        return cls(ds, batch_size=None, num_workers=workers)
    return cls(ds, batch_size=ds.batch_size, num_workers=workers, collate_fn=collate)


def run_with_stops(factory, *, epochs: int, stops=(), kind: str = "plain", workers: int = 0,
                   workers_after=None) -> list[list[int]]:
    """Train-loop driver: read `epochs` epochs of one rank, batch by batch. After the
    n-th batch for each n in `stops`, save the position, throw everything away, build
    a new dataset (and loader) from `factory()` and resume from the saved position.

    kind="plain": torch DataLoader; the loop counts the samples it took this pass and
    calls `ds.state_dict(consumed=...)`. kind="stateful": torchdata's
    StatefulDataLoader state_dict / load_state_dict. Returns the ids of every batch.
    """
    stops = sorted(set(stops))
    out: list[list[int]] = []
    state, epoch0, k = None, 0, workers
    while True:
        ds = factory()
        if kind == "plain" and state is not None:
            ds.load_state_dict(state)
            epoch0 = ds.epoch
        ds.set_epoch(epoch0)
        loader = _loader(ds, kind, k)
        if kind == "stateful" and state is not None:
            loader.load_state_dict(state)
        stopped = False
        for epoch in range(epoch0, epochs):
            ds.set_epoch(epoch)
            consumed = 0
            for batch in loader:
                ids = batch_ids(batch)
                out.append(ids)
                consumed += len(ids)
                if stops and len(out) == stops[0]:
                    stops.pop(0)
                    state = ds.state_dict(consumed=consumed) if kind == "plain" else loader.state_dict()
                    epoch0, stopped = epoch, True
                    break
            if stopped:
                break
        if not stopped:
            return out
        if workers_after is not None:
            k = workers_after
