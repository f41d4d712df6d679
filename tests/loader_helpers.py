"""Shared helpers for the loader tests: small shard builds of chosen sizes, a log of the row
groups decoded, and "run to the end" / "checkpoint at k and resume" drivers over real
DataLoaders."""
from __future__ import annotations

import pyarrow as pa
import pytest

from shardforge.shards.writer import WriterSettings, new_staging_dir, publish_build, write_build, write_shard


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


def damage(path) -> None:
    """Flip one byte in the middle of a file (a shard whose sha256 no longer matches)."""
    from pathlib import Path

    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def make_layered_build(root, sizes: list[int], row_group_rows: list[int]):
    """A build whose shards each have their own row-group size (the manifest records every
    shard's rows per row group, so a build may mix layouts): the project's shard writer and
    publisher, one WriterSettings per shard."""
    tables = shard_tables(sizes)
    staging = new_staging_dir(str(root))
    infos = [write_shard(t, staging, i, len(tables), WriterSettings(row_group_rows=g))
             for i, (t, g) in enumerate(zip(tables, row_group_rows))]
    publish_build(str(root), staging, infos, tables[0].schema, key="id", config={}, source={},
                  settings=WriterSettings(row_group_rows=max(row_group_rows)))
    return str(root)


# Uneven builds: shards of very different sizes (empty ones too), each with its own row-group size,
# so windows, row groups and rank parts cut across shards unevenly. name -> (sizes, rows per group).
UNEVEN = {
    "skewed": ([61, 0, 2, 17, 1, 40], [4, 4, 1, 5, 3, 16]),
    "one-shard": ([0, 0, 33, 0], [8, 8, 8, 8]),
    "wide": ([1, 120, 3, 0, 9, 5, 50], [1, 16, 2, 4, 3, 5, 7]),
    "tiny": ([2, 1], [1, 1]),                          # fewer rows than most world sizes
    "singles": ([5, 0, 4, 6], [1, 1, 1, 1]),           # a row group per row
}


def build_ids(sizes: list[int]) -> list[int]:
    """Every row id of a build written by shard_tables (each once)."""
    return [s * 100_000 + i for s, n in enumerate(sizes) for i in range(n)]


def uneven_builds_fixture():
    """A module-scoped fixture: {name: (path, sizes)} for the UNEVEN builds, written once."""
    @pytest.fixture(scope="module")
    def uneven_builds(tmp_path_factory):
        root = tmp_path_factory.mktemp("uneven")
        return {name: (make_layered_build(root / name, sizes, groups), sizes)
                for name, (sizes, groups) in UNEVEN.items()}

    return uneven_builds


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


def settle_read_ahead() -> None:
    """Wait until every window decode submitted in the background so far has run (the
    read-ahead runs on one thread, in order): counting decodes after this counts what a
    read set in motion, not only what had finished."""
    from shardforge.loaders.windows import _background

    _background().submit(lambda: None).result()


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


# The documented contract written out by hand (loaders/README.md, "The epoch order" and "Ranks,
# lanes, workers, equal counts"), for tests that must not take their expectations from
# shardforge.loaders.assignment or state.rest / assignment.dropped.

def epoch_order(path, **order) -> list[int]:
    """The ids of one epoch in its order, computed from the documented definition
    (tests/order_reference.py, which imports nothing of the loader); `order` takes the
    loader's order arguments (seed, epoch, shuffle, window, window_bytes, lanes)."""
    from order_reference import column_in_order

    return column_in_order(path, "id", **order)


def per_rank(n: int, world: int, policy: str) -> int:
    """Samples per rank of a plan of n: `drop` n // W, `pad` ceil(n / W)."""
    return n // world if policy == "drop" else -(-n // world)


def stretch(seq: list, rank: int, world: int, policy: str) -> list:
    """What rank `rank` of `world` reads of the sequence `seq` (the epoch order, or what an
    elastic restart hands over), in part order: positions [r*q, (r+1)*q), pad slots
    wrapping to the sequence's start."""
    n = len(seq)
    q = per_rank(n, world, policy)
    return [seq[(rank * q + i) % n] for i in range(q)]


def pack(docs: list[list[int]], length: int, eos: int | None = None) -> list[tuple[int, ...]]:
    """Packed sequences by hand (loaders/README.md, "Packed token sequences"): the documents'
    tokens one after another, `eos` after each when given; sequence j is stream[j*L : j*L + L + 1],
    for every j whose L + 1 tokens are all in the stream."""
    stream = [t for d in docs for t in d + ([eos] if eos is not None else [])]
    return [tuple(stream[j * length:j * length + length + 1]) for j in range((len(stream) - 1) // length)]
