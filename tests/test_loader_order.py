"""The epoch order is the documented one: the loader's order equals an implementation written
from loaders/README.md ("The order, exactly"; tests/order_reference.py, which imports nothing of
the loader) on synthetic row-group tables and on real builds read by ShardReader, and both equal
frozen permutations for a few seeds, epochs and sizes, so a change to the shuffle goes red."""
from __future__ import annotations

import random

import numpy as np
import pytest

from loader_helpers import UNEVEN, make_build, uneven_builds_fixture
from order_reference import column_in_order, key, mix, perm, positions
from shardforge.loaders import ShardReader
from shardforge.loaders.order import EpochOrder

uneven_builds = uneven_builds_fixture()

# Two row-group tables (shard, group, rows, decoded bytes) and their orders, frozen: the index of
# each position's row in the manifest order's rows. A: windows of 2 row groups; B: a byte budget
# of 200 per lane (window_bytes 400, one lane), windows of several row groups.
TABLE_A = [(0, 0, 3, 100), (0, 1, 2, 100), (2, 0, 4, 100), (3, 0, 1, 100), (3, 1, 3, 100)]
TABLE_B = [(0, g, 1 + g % 4, 40 * (1 + g % 3)) for g in range(6)] + [(1, 0, 2, 90), (1, 1, 2, 10)]
GOLDEN = {
    ("A", 0, 0): [11, 2, 10, 1, 12, 0, 9, 4, 3, 5, 8, 7, 6],
    ("A", 0, 1): [10, 4, 12, 11, 3, 8, 9, 5, 6, 7, 2, 1, 0],
    ("A", 7, 0): [1, 7, 6, 8, 0, 2, 5, 4, 10, 11, 3, 12, 9],
    ("A", 7, 1): [9, 10, 11, 12, 2, 1, 4, 0, 3, 5, 7, 6, 8],
    ("B", 0, 0): [14, 13, 10, 0, 9, 8, 7, 6, 12, 11, 1, 4, 3, 2, 5, 15, 16],
    ("B", 0, 1): [10, 2, 1, 11, 12, 15, 16, 6, 14, 8, 7, 13, 9, 0, 5, 4, 3],
    ("B", 7, 0): [5, 4, 0, 3, 13, 14, 10, 12, 11, 16, 6, 2, 15, 9, 1, 7, 8],
    ("B", 7, 1): [13, 14, 6, 8, 9, 7, 1, 2, 10, 11, 15, 12, 16, 0, 5, 4, 3],
}
TABLES = {"A": (TABLE_A, dict(window=2, window_bytes=None)), "B": (TABLE_B, dict(window=None, window_bytes=400))}


def loader_positions(blocks, *, shuffle, seed, epoch, window, window_bytes, lanes=1):
    """The loader's (shard, group, row) per position, through EpochOrder given the lane budget
    ShardReader gives it."""
    budget = None if window_bytes is None else max(1, window_bytes // (2 * lanes))
    order = EpochOrder(np.array(blocks, dtype=np.int64).reshape(-1, 4), seed=seed, epoch=epoch, shuffle=shuffle,
                       window=window, window_bytes=budget)
    return [order.sample_at(p) for p in range(order.total)]


def test_the_reference_hash_is_splitmix64():
    """splitmix64 seeded with 0 first returns mix(0): its published first output."""
    assert mix(0) == 0xE220A8397B1DCDAF
    assert sorted(perm(50, key(3, 1, 1))) == list(range(50))


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_frozen_orders(case):
    name, seed, epoch = case
    blocks, kw = TABLES[name]
    rows = [(s, g, r) for s, g, n, _b in blocks for r in range(n)]
    want = [rows[i] for i in GOLDEN[case]]
    assert positions(blocks, shuffle=True, seed=seed, epoch=epoch, lanes=1, **kw) == want
    assert loader_positions(blocks, shuffle=True, seed=seed, epoch=epoch, **kw) == want


def test_the_loader_order_is_the_reference_on_random_row_group_tables():
    rng = random.Random(33)
    for trial in range(400):
        blocks = [(rng.randrange(6), g, rng.randrange(1, 9), rng.randrange(0, 500)) for g in range(rng.randrange(13))]
        kw = dict(shuffle=rng.random() < 0.85, seed=rng.randrange(1 << 40), epoch=rng.randrange(5),
                  window=rng.choice([None, 1, 2, 3, 5]), window_bytes=rng.choice([None, 1, 600, 2000, 9000]),
                  lanes=rng.choice([1, 2, 3]))
        assert loader_positions(blocks, **kw) == positions(blocks, **kw), (trial, blocks, kw)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("order")
    make_build(root, [40, 0, 33, 27, 9], row_group_rows=8)
    return str(root)


# window_bytes 7000 with 2 lanes: a lane budget of 1750 bytes, about 3 row groups of this build
SETTINGS = [dict(seed=3, window=3), dict(seed=1, window_bytes=7000, lanes=2), dict(seed=2, window_bytes=2400),
            dict(seed=2, window_bytes=2400, window=2, epoch=3), dict(seed=9, window_bytes=None, lanes=3),
            dict(shuffle=False), dict(seed=5, window=1, epoch=1)]


@pytest.mark.parametrize("kw", SETTINGS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_shard_reader_reads_the_reference_order(build, uneven_builds, kw):
    paths = [build] + [uneven_builds[name][0] for name in sorted(UNEVEN)]
    for path in paths:
        reader = ShardReader(path, rank=0, world_size=1, columns=["id"], **kw)
        got = [i for t in reader.iter_tables(max(1, reader.total)) for i in t.column("id").to_pylist()]
        assert got == column_in_order(path, "id", **kw), path
    if kw.get("window_bytes"):
        reader = ShardReader(build, rank=0, world_size=1, **kw)
        assert 1 < reader.order().num_windows < len(reader.source.blocks)      # windows of several row groups
