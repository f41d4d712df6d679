"""Exact resumption: interrupted and resumed runs read exactly the uninterrupted sequence,
through torch's DataLoader and torchdata's StatefulDataLoader, several times in a row,
across epoch boundaries; and elastic restarts at another world size."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as stg

from loader_helpers import build_fixture, factory, run_with_stops
from shardforge.loaders import ShardedDataset, ShardReader, assignment as A, state as st

SIZES = [23, 0, 9, 14, 1, 30]
TOTAL = sum(SIZES)
build = build_fixture(SIZES, row_group_rows=4)


@stg.composite
def scenarios(draw):
    world = draw(stg.integers(1, 4))
    kw = dict(world_size=world, rank=draw(stg.integers(0, world - 1)), seed=draw(stg.integers(0, 3)),
              policy=draw(stg.sampled_from(A.POLICIES)), batch_size=draw(stg.integers(1, 7)),
              batched=draw(stg.booleans()))
    q = A.per_rank(TOTAL, world, kw["policy"])
    batches = 2 * -(-q // kw["batch_size"])          # two epochs
    stops = draw(stg.lists(stg.integers(1, max(1, batches)), min_size=1, max_size=3, unique=True))
    return kw, draw(stg.sampled_from([0, 1, 2])), stops


REFS: dict = {}


def reference(build, kw):
    key = json.dumps(kw, sort_keys=True)
    if key not in REFS:
        REFS[key] = run_with_stops(factory(build, **kw), epochs=2)
    return REFS[key]


SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["plain", "stateful"])
def test_multi_interrupt_resume_is_exact(build, kind):
    @SETTINGS
    @given(scenarios())
    def check(scenario):
        kw, workers, stops = scenario
        got = run_with_stops(factory(build, **kw), epochs=2, stops=stops, kind=kind, workers=workers)
        assert got == reference(build, kw), (kw, workers, stops)

    check()


@pytest.mark.parametrize("kind,workers", [("plain", 0), ("plain", 2), ("stateful", 0), ("stateful", 2)])
def test_resume_at_every_kind_over_an_epoch_boundary(build, kind, workers):
    kw = dict(world_size=2, rank=1, seed=1, policy="pad", batch_size=5, batched=False)
    ref = reference(build, kw)
    per_epoch = len(ref) // 2
    stops = [1, per_epoch, per_epoch + 2]             # mid epoch, exactly at its end, into the next
    assert run_with_stops(factory(build, **kw), epochs=2, stops=stops, kind=kind, workers=workers) == ref


def test_rank0_state_resumes_every_rank(build):
    world = 3
    kw = dict(world_size=world, seed=2, policy="drop", batch_size=4, batched=True)
    full = [run_with_stops(factory(build, rank=r, **kw), epochs=1) for r in range(world)]
    r0 = ShardedDataset(build, rank=0, window=3, **kw)
    state = json.loads(json.dumps(r0.state_dict(consumed=8)))   # two batches, through JSON
    for r in range(world):
        ds = ShardedDataset(build, rank=r, window=3, **kw)
        ds.load_state_dict(state)
        assert [int(i) for b in ds for i in b["id"]] == [i for b in full[r][2:] for i in b]


def test_worker_count_may_change_on_resume(build):
    kw = dict(world_size=2, rank=0, seed=3, policy="drop", batch_size=3, batched=False)
    ref = reference(build, kw)
    got = run_with_stops(factory(build, **kw), epochs=2, stops=[3, 9], workers=2, workers_after=1)
    assert got == ref


def epoch_ids(build, seed):
    return [int(i) for b in ShardReader(build, rank=0, world_size=1, seed=seed, window=3,
                                        columns=["id"]).iter_batches(64) for i in b.column("id").to_pylist()]


@pytest.mark.parametrize("policy", A.POLICIES)
@pytest.mark.parametrize("before,after", [(4, 2), (4, 3), (2, 4), (3, 5)])
def test_elastic_restart_sees_the_rest_of_the_epoch_once(build, policy, before, after):
    """W ranks read k batches; rank 0's state is loaded on every rank of a job with W'
    ranks (and another worker count), which reads the rest of the epoch."""
    seed, bs, k = 4, 3, 2
    order = epoch_ids(build, seed)
    seen: Counter = Counter()
    state = None
    for r in range(before):
        ds = ShardedDataset(build, rank=r, world_size=before, seed=seed, window=3, policy=policy,
                            batch_size=bs, batched=True)
        loader_iter = iter(ds)
        for _ in range(k):
            seen.update(int(i) for i in next(loader_iter)["id"])
        if r == 0:
            state = json.loads(json.dumps(ds.state_dict()))
    rest = st.rest(state)
    counts = set()
    for r in range(after):
        ds = ShardedDataset(build, rank=r, world_size=after, seed=seed, window=3, policy=policy,
                            batch_size=bs, batched=True)
        ds.load_state_dict(state)
        got = run_with_stops(lambda: ds, epochs=1, workers=2 if r % 2 else 0)
        counts.add(sum(len(b) for b in got))
        seen.update(i for b in got for i in b)
    assert len(counts) == 1                                        # equal per-rank counts after
    first_plan = [[0, TOTAL]]
    dropped = A.positions(A.dropped(first_plan, before, policy)) + A.positions(A.dropped(rest, after, policy))
    if policy == "drop":
        assert max(seen.values()) == 1                             # no duplicate
        assert set(order) - set(seen) == {order[p] for p in dropped}  # only the documented drops
        assert len(dropped) <= (before - 1) + (after - 1)
    else:
        assert set(seen) == set(order)                             # none missing
        extra = sum(seen.values()) - TOTAL
        assert 0 <= extra < before + after                         # only pad repeats


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_loader_state_converts_for_an_elastic_restart(build, workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    seed, kw = 1, dict(seed=1, window=3, policy="drop", batch_size=4, batched=True)
    order = epoch_ids(build, seed)
    seen: Counter = Counter()
    state = None
    for r in range(2):
        loader = StatefulDataLoader(ShardedDataset(build, rank=r, world_size=2, **kw), batch_size=None,
                                    num_workers=workers)
        for j, b in enumerate(loader):
            seen.update(int(i) for i in b["id"])
            if j == 2:
                break
        if r == 0:
            state = st.from_stateful_loader(loader.state_dict())
    assert state["consumed"] == 12
    for r in range(3):
        ds = ShardedDataset(build, rank=r, world_size=3, **kw)
        ds.load_state_dict(state)
        seen.update(int(i) for b in ds for i in b["id"])
    dropped = A.dropped([[0, TOTAL]], 2, "drop") + A.dropped(st.rest(state), 3, "drop")
    assert max(seen.values()) == 1
    assert set(order) - set(seen) == {order[p] for p in A.positions(dropped)}


def test_skip_edits_the_position(build):
    kw = dict(world_size=2, rank=1, seed=0, batch_size=4, batched=True, window=3)
    full = [int(i) for b in ShardedDataset(build, **kw) for i in b["id"]]
    ds = ShardedDataset(build, **kw)
    ds.load_state_dict(st.skip(ds.state_dict(consumed=4), 8))      # skip batches 2 and 3
    assert [int(i) for b in ds for i in b["id"]] == full[12:]
