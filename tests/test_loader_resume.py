"""Exact resumption: interrupted and resumed runs read exactly the uninterrupted sequence,
through torch's DataLoader and torchdata's StatefulDataLoader, several times in a row,
across epoch boundaries; and elastic restarts at another world size."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as stg

from loader_helpers import (build_fixture, build_ids, epoch_order, factory, per_rank, run_with_stops, stretch,
                            UNEVEN, uneven_builds_fixture)
from shardforge.loaders import ShardedDataset, ShardReader, assignment as A, state as st

SIZES = [23, 0, 9, 14, 1, 30]
TOTAL = sum(SIZES)
build = build_fixture(SIZES, row_group_rows=4)
uneven_builds = uneven_builds_fixture()


TOTALS = {"base": TOTAL, **{name: sum(sizes) for name, (sizes, _) in UNEVEN.items()}}


def path_of(name, build, uneven_builds) -> str:
    return build if name == "base" else uneven_builds[name][0]


@stg.composite
def scenarios(draw):
    """A build (of six: sizes 3 to 188 rows, one to eight row-group sizes), a rank of a
    topology, order and batch settings, a loader kind, a worker count and 1-3 stops."""
    name = draw(stg.sampled_from(sorted(TOTALS)))
    world = draw(stg.integers(1, 4))
    kw = dict(world_size=world, rank=draw(stg.integers(0, world - 1)), seed=draw(stg.integers(0, 3)),
              policy=draw(stg.sampled_from(A.POLICIES)), batch_size=draw(stg.integers(1, 7)),
              batched=draw(stg.booleans()), lanes=draw(stg.sampled_from([1, 2])),
              window=draw(stg.sampled_from([1, 3])))
    q = A.per_rank(TOTALS[name], world, kw["policy"])
    batches = 2 * -(-q // kw["batch_size"])          # two epochs
    stops = draw(stg.lists(stg.integers(1, max(1, batches)), min_size=1, max_size=3, unique=True))
    # worker processes cost a fork per pass: a third of the examples use them, the rest read in-process
    workers = draw(stg.sampled_from([0, 0, 0, 0, 1, 2]))
    return name, kw, draw(stg.sampled_from(["plain", "stateful"])), workers, stops


REFS: dict = {}


def reference(build, kw):
    key = json.dumps([build, kw], sort_keys=True)
    if key not in REFS:
        REFS[key] = run_with_stops(factory(build, **kw), epochs=2)
    return REFS[key]


# 200 examples in CI, the same ones on every run (derandomised; no example database)
SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.slow
def test_multi_interrupt_resume_is_exact(build, uneven_builds):
    """Checkpoint at 1-3 stops over two epochs, resume each time in a new dataset and loader:
    the batches equal the uninterrupted run's."""
    seen = []

    @SETTINGS
    @given(scenarios())
    def check(scenario):
        name, kw, kind, workers, stops = scenario
        path = path_of(name, build, uneven_builds)
        got = run_with_stops(factory(path, **kw), epochs=2, stops=stops, kind=kind, workers=workers)
        assert got == reference(path, kw), (name, kw, kind, workers, stops)
        seen.append(scenario)

    check()
    assert len(seen) >= 200 and len({s[0] for s in seen}) == len(TOTALS)   # explored every build


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


@pytest.mark.parametrize("stops", [[1, 2], [2, 3], [5, 6, 7]])
def test_stateful_resumes_again_before_every_worker_has_read(build, stops):
    """A StatefulDataLoader snapshots every worker when its iterator starts: a worker restored
    from a checkpoint that has not yielded again by the next checkpoint must still report
    its restored progress (else that checkpoint re-reads the worker's batches)."""
    kw = dict(world_size=1, rank=0, seed=0, policy="drop", batch_size=1, batched=False)
    ref = reference(build, kw)
    assert run_with_stops(factory(build, **kw), epochs=2, stops=stops, kind="stateful", workers=2) == ref


def test_worker_count_may_change_on_resume(build):
    kw = dict(world_size=2, rank=0, seed=3, policy="drop", batch_size=3, batched=False)
    ref = reference(build, kw)
    got = run_with_stops(factory(build, **kw), epochs=2, stops=[3, 9], workers=2, workers_after=1)
    assert got == ref


def ids_of(batches) -> list[int]:
    return [i for b in batches for i in b]


ELASTIC = [("base", 4, 2, 2, 3), ("base", 4, 3, 2, 3), ("base", 2, 4, 3, 3), ("base", 3, 5, 1, 3),
           ("skewed", 3, 2, 3, 4), ("wide", 2, 5, 5, 7), ("singles", 5, 3, 1, 2), ("one-shard", 2, 3, 2, 5),
           ("tiny", 2, 3, 1, 1)]


@pytest.mark.parametrize("policy", A.POLICIES)
@pytest.mark.parametrize("name,before,after,k,bs", ELASTIC)
def test_elastic_restart_reads_the_rest_of_the_independent_epoch_order(build, uneven_builds, policy, name,
                                                                       before, after, k, bs):
    """W ranks read k batches; rank 0's state (through JSON) is loaded on every rank of a job
    with W' ranks and other worker counts. The expected reads come from the epoch order
    (read whole, by one rank) and the documented split, never from the library's
    `rest` / `dropped`: old rank r reads stretch r of the order; what is left is each old
    rank's stretch after the state's `consumed`, rank 0's first; new rank r' reads stretch
    r' of that, in order."""
    path, sizes = (build, SIZES) if name == "base" else uneven_builds[name]
    seed, order_kw = 4, dict(seed=4, window=3)
    order = epoch_order(path, **order_kw)
    assert sorted(order) == sorted(build_ids(sizes))
    n = len(order)
    read, state = [], None
    for r in range(before):
        ds = ShardedDataset(path, rank=r, world_size=before, policy=policy, batch_size=bs, batched=True,
                            **order_kw)
        it = iter(ds)
        got = ids_of([int(i) for i in next(it)["id"]] for _ in range(min(k, len(ds))))
        assert got == stretch(order, r, before, policy)[:len(got)]        # its stretch, in order
        read.append(got)
        if r == 0:
            state = json.loads(json.dumps(ds.state_dict()))
    assert (state["world_size"], state["policy"], state["epoch"]) == (before, policy, 0)
    c = state["consumed"]
    assert all(len(got) == c for got in read)
    rest = [x for r in range(before) for x in stretch(order, r, before, policy)[c:]]   # from the state alone
    # first principles: what the old ranks had not read, each in its stretch's order
    assert rest == [x for r in range(before) for x in stretch(order, r, before, policy) if x not in read[r]]
    after_reads, counts = [], set()
    for r in range(after):
        ds = ShardedDataset(path, rank=r, world_size=after, policy=policy, batch_size=bs, batched=True,
                            **order_kw)
        ds.load_state_dict(state)
        got = ids_of(run_with_stops(lambda: ds, epochs=1, workers=2 if r % 2 else 0))
        assert got == stretch(rest, r, after, policy), (r, after)
        counts.add(len(got))
        after_reads += got
    assert len(counts) == 1                                              # equal per-rank counts after
    seen = Counter(ids_of(read) + after_reads)
    q, q2 = per_rank(n, before, policy), per_rank(len(rest), after, policy)
    if policy == "drop":
        assert max(seen.values(), default=1) == 1                          # no duplicate
        skipped = order[before * q:] + rest[after * q2:]                   # the two starts' tails
        assert set(order) - set(seen) == set(skipped)
        assert len(skipped) <= (before - 1) + (after - 1)
    else:
        assert set(seen) == set(order)                                     # none missing
        pads = [order[i % n] for i in range(n, before * q)] + [rest[i % len(rest)] for i in range(len(rest), after * q2)]
        assert seen == Counter(order) + Counter(pads)                      # only pad repeats
        assert len(pads) < before + after


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_loader_state_converts_for_an_elastic_restart(build, workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    kw = dict(seed=1, window=3, policy="drop", batch_size=4, batched=True)
    order = epoch_order(build, seed=1, window=3)
    read, state = [], None
    for r in range(2):
        loader = StatefulDataLoader(ShardedDataset(build, rank=r, world_size=2, **kw), batch_size=None,
                                    num_workers=workers)
        got = []
        for j, b in enumerate(loader):
            got += [int(i) for i in b["id"]]
            if j == 2:
                break
        assert got == stretch(order, r, 2, "drop")[:12]
        read.append(got)
        if r == 0:
            state = st.from_stateful_loader(loader.state_dict())
    assert state["consumed"] == 12
    rest = [x for r in range(2) for x in stretch(order, r, 2, "drop")[12:]]
    after = []
    for r in range(3):
        ds = ShardedDataset(build, rank=r, world_size=3, **kw)
        ds.load_state_dict(state)
        got = [int(i) for b in ds for i in b["id"]]
        assert got == stretch(rest, r, 3, "drop")
        after += got
    seen = Counter(ids_of(read) + after)
    assert max(seen.values()) == 1
    assert set(order) - set(seen) == set(order[2 * (TOTAL // 2):] + rest[3 * (len(rest) // 3):])


def test_skip_edits_the_position(build):
    kw = dict(world_size=2, rank=1, seed=0, batch_size=4, batched=True, window=3)
    full = [int(i) for b in ShardedDataset(build, **kw) for i in b["id"]]
    ds = ShardedDataset(build, **kw)
    ds.load_state_dict(st.skip(ds.state_dict(consumed=4), 8))      # skip batches 2 and 3
    assert [int(i) for b in ds for i in b["id"]] == full[12:]
