"""Who reads what, over real uneven builds: shards of very different sizes (empty ones too),
each with its own row-group size, read from their Parquet files by every rank and every
worker slot of many topologies. The expected sets come from the build's rows (written by
the test) and from the documented contract (ranks read contiguous equal stretches of
the epoch order; `drop` skips the last N mod W, `pad` repeats the first W*q - N), never
from `shardforge.loaders.assignment`."""
from __future__ import annotations

import itertools
import warnings
from collections import Counter

import pytest
import torch
from torch.utils.data import DataLoader, get_worker_info

from loader_helpers import build_ids, epoch_order, per_rank, stretch, uneven_builds_fixture
from shardforge.loaders import ShardReader, ShardedDataset, no_collate

uneven_builds = uneven_builds_fixture()

WORLDS = (1, 2, 3, 5, 8)
# (DataLoader workers, batch size, lanes, window in row groups)
LAYOUTS = [(0, 4, 1, 3), (2, 3, 1, 2), (3, 5, 3, 1), (2, 1, 2, None), (4, 7, 2, 4)]


def slot_batches(path, *, rank, world, workers, chunk, policy, **order) -> list[list[list[int]]]:
    """Each worker slot's batches of one rank, every slot read by a fresh reader (as each
    DataLoader worker holds its own copy of the dataset)."""
    out = []
    for w in range(max(1, workers)):
        reader = ShardReader(path, rank=rank, world_size=world, policy=policy, columns=["id"], **order)
        out.append([t.column("id").to_pylist() for t in reader.iter_tables(chunk, w, max(1, workers))])
    return out


def interleave(per_worker: list[list]) -> list:
    """The DataLoader's collection order: batch j from worker j mod K."""
    out, k = [], len(per_worker)
    for j in range(sum(len(b) for b in per_worker)):
        out.append(per_worker[j % k][j // k])
    return out


@pytest.mark.parametrize("policy", ["drop", "pad"])
@pytest.mark.parametrize("name", ["skewed", "one-shard", "wide", "tiny", "singles"])
def test_every_row_once_across_ranks_and_workers(uneven_builds, name, policy):
    path, sizes = uneven_builds[name]
    rows = build_ids(sizes)
    n = len(rows)
    for (workers, chunk, lanes, window), world in itertools.product(LAYOUTS, WORLDS):
        order = dict(seed=5, window=window, lanes=lanes)
        epoch = epoch_order(path, **order)
        assert sorted(epoch) == sorted(rows)                           # a permutation of the build's rows
        q = per_rank(n, world, policy)
        seen: Counter = Counter()
        batch_counts = set()
        for rank in range(world):
            per_worker = slot_batches(path, rank=rank, world=world, workers=workers, chunk=chunk,
                                      policy=policy, **order)
            ids = [i for w in per_worker for b in w for i in b]
            assert len(ids) == len(set(ids)) == q, (name, world, rank, workers)   # workers disjoint
            sequence = interleave(per_worker)
            assert all(len(b) == chunk for b in sequence[:-1]) and (not sequence or 0 < len(sequence[-1]) <= chunk)
            batch_counts.add(len(sequence))
            # the rank reads the stretch [rank*q, (rank+1)*q) of the epoch order (pads wrap to its start)
            mine = stretch(epoch, rank, world, policy)
            flat = [i for b in sequence for i in b]
            if lanes == 1:
                assert flat == mine, (name, world, rank, workers)
            else:
                assert sorted(flat) == sorted(mine), (name, world, rank, workers, lanes)
            seen.update(ids)
        assert batch_counts == {-(-q // chunk)}, (name, world, batch_counts)   # equal steps per rank
        if policy == "drop":
            assert max(seen.values(), default=1) == 1                        # no row twice
            assert set(rows) - set(seen) == set(epoch[world * q:])           # only the last N mod W
            assert n - len(seen) == n % world
        else:
            assert set(seen) == set(rows)                                    # none missing
            assert seen - Counter(rows) == Counter(epoch[i % n] for i in range(world * q - n))


def _tag_worker(batch):
    """A transform run where the batch is made: records which DataLoader worker made it."""
    info = get_worker_info()
    batch["worker"] = -1 if info is None else info.id
    return batch


@pytest.mark.parametrize("name,world,workers,lanes", [("skewed", 3, 2, 2), ("wide", 2, 3, 1),
                                                      ("singles", 4, 2, 1)])
def test_real_dataloader_workers_split_uneven_builds(uneven_builds, name, world, workers, lanes):
    """The same properties through torch DataLoaders with worker processes: worker w makes
    the rank's batches w, w+K, ...; ranks make equal numbers of batches; every row of
    the epoch is read once (drop)."""
    path, sizes = uneven_builds[name]
    rows = build_ids(sizes)
    n, bs = len(rows), 3
    q = n // world
    seen: Counter = Counter()
    lengths = set()
    for rank in range(world):
        ds = ShardedDataset(path, rank=rank, world_size=world, seed=1, window=2, lanes=lanes,
                            batch_size=bs, batched=True, columns=["id"], transform=_tag_worker)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                                  # lanes not a multiple of K
            batches = list(DataLoader(ds, batch_size=None, num_workers=workers, collate_fn=no_collate))
        assert [b["worker"] for b in batches] == [j % workers for j in range(len(batches))]
        assert len(batches) == len(ds) == -(-q // bs)
        lengths.add(len(batches))
        ids = [int(i) for b in batches for i in b["id"]]
        assert isinstance(batches[0]["id"], torch.Tensor) and len(ids) == q
        seen.update(ids)
    assert len(lengths) == 1
    assert max(seen.values()) == 1 and len(seen) == world * q and set(seen) <= set(rows)
