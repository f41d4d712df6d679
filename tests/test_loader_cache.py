"""The loader's remote shard cache, against a real build served by a real HTTP server on
127.0.0.1 (tests/fileserver.py) that counts the requests: the second epoch fetches nothing,
the budget holds at every fetch, LRU eviction, a corrupted copy is fetched again, and
concurrent readers fetch a shard once. Expected rows and checksums come from the build's
files on disk (pyarrow, hashlib), not from the loader."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from fileserver import FileServer
from loader_helpers import make_build

SIZES = [40, 0, 33, 27, 50, 19]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(folder served, build name): one build, written once."""
    root = tmp_path_factory.mktemp("served")
    make_build(root / "b", SIZES, row_group_rows=8)
    return str(root), "b"


def disk_facts(folder: str):
    """{shard file name: (sha256, bytes, ids)} straight from the build's files."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*", "part-*.parquet"))):
        data = open(path, "rb").read()
        out[os.path.basename(path)] = (hashlib.sha256(data).hexdigest(), len(data),
                                       pq.read_table(path, columns=["id"]).column(0).to_pylist())
    return out


def cache_bytes(cache_dir: str) -> int:
    """Bytes of everything in the cache folder except its empty lock files."""
    if not os.path.isdir(cache_dir):
        return 0
    return sum(os.path.getsize(os.path.join(cache_dir, n)) if not n.endswith(".part")
               else int(n.split(".")[1]) for n in os.listdir(cache_dir) if not n.endswith(".lock"))


def shard_gets(srv) -> list[str]:
    return [os.path.basename(p) for p in srv.requests(".parquet")]


def epoch_ids(ds, epoch: int, workers: int = 2) -> list[int]:
    from torch.utils.data import DataLoader

    from shardforge.loaders import no_collate

    ds.set_epoch(epoch)
    loader = DataLoader(ds, batch_size=None, num_workers=workers, collate_fn=no_collate)
    return [int(i) for batch in loader for i in batch["id"]]


def test_second_epoch_from_cache_and_corrupt_copy_fetched_again(served, tmp_path):
    from shardforge.loaders import ShardedDataset

    folder, name = served
    facts = disk_facts(os.path.join(folder, name))
    expected = sorted(i for _s, _b, ids in facts.values() for i in ids)
    budget = sum(b for _s, b, _i in facts.values())       # every shard fits, nothing to spare
    cache = str(tmp_path / "cache")
    peaks: list[int] = []

    def check(method, path, rng):   # runs in the server as each request arrives
        peaks.append(cache_bytes(cache))
        if method == "GET" and path.endswith(".parquet") and rng is None:   # a whole-shard fetch
            sha, size, _ids = facts[os.path.basename(path)]
            fetching.append(os.path.exists(os.path.join(cache, f"{sha}.{size}.part")) and
                            not os.path.exists(os.path.join(cache, f"{sha}.parquet")))

    fetching: list[bool] = []
    with FileServer(folder, on_request=check) as srv:
        ds = ShardedDataset(f"{srv.url}/{name}", seed=3, batch_size=8, batched=True, lanes=2,
                            cache_dir=cache, cache_limit_bytes=budget)
        before = len(srv.log)
        assert sorted(epoch_ids(ds, 0)) == expected
        # every non-empty shard fetched whole, once, though two workers read them
        whole = [os.path.basename(p) for m, p, r in srv.log[before:] if m == "GET" and p.endswith(".parquet")]
        assert sorted(whole) == sorted(n for n, (_s, _b, ids) in facts.items() if ids)
        assert all(r is None for m, p, r in srv.log[before:] if p.endswith(".parquet"))
        assert fetching == [True] * len(whole)    # each fetch wrote a reservation, never the copy's name
        n1 = len(shard_gets(srv))
        second = epoch_ids(ds, 1)
        assert sorted(second) == expected
        assert shard_gets(srv)[n1:] == []                    # epoch 2: no shard request at all
        assert max(peaks) <= budget and cache_bytes(cache) <= budget
        assert srv.errors == []

        # flip bytes inside one copy, keeping its size and mtime: found by sha256, fetched again
        victim = max(facts, key=lambda n: facts[n][1])
        sha = facts[victim][0]
        copy = os.path.join(cache, f"{sha}.parquet")
        st = os.stat(copy)
        with open(copy, "r+b") as fh:
            fh.seek(st.st_size // 2)
            b = fh.read(4)
            fh.seek(st.st_size // 2)
            fh.write(bytes(x ^ 0xFF for x in b))
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        n2 = len(shard_gets(srv))
        third = epoch_ids(ds, 2)
        assert shard_gets(srv)[n2:] == [victim]             # only the corrupted shard, once
        assert sorted(third) == sorted(epoch_ids(ShardedDataset(os.path.join(folder, name), seed=3,
                                                                batch_size=8, batched=True, lanes=2), 2, 0))
        assert hashlib.sha256(open(copy, "rb").read()).hexdigest() == sha
        assert srv.errors == []
