"""Lanes: a rank's pass draws its batches from L contiguous lanes in turn. Pure tests of the
layout against brute-force models (no files), then the promises on real builds: the
sequence does not depend on the DataLoader's workers, a rank reads the same samples as
with one lane, resumes are exact, and with L workers no two workers decode a row group
outside the windows that straddle lane boundaries."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from loader_helpers import build_fixture, epoch_order, factory, log_reads, run_with_stops, stretch
from shardforge.loaders import ShardedDataset, assignment as A

CASES = [(n, chunk, lanes) for n in (0, 1, 5, 17, 64, 101) for chunk in (1, 4, 7, 64) for lanes in (1, 2, 3, 5)]


def sequence(layout: A.Pass) -> list[int]:
    return [p for j in range(layout.num_batches) for p in range(*layout.batch(j))]


@pytest.mark.parametrize("n,chunk,lanes", CASES)
def test_pass_is_a_partition_of_lanes_read_in_turn(n, chunk, lanes):
    layout = A.Pass(n, chunk, lanes)
    seq = sequence(layout)
    assert sorted(seq) == list(range(n))                                   # every sample once
    sizes = [b - a for a, b in (layout.batch(j) for j in range(layout.num_batches))]
    assert all(s == chunk for s in sizes[:-1]) and (not sizes or 0 < sizes[-1] <= chunk)
    if sizes:
        assert layout.batch(layout.num_batches - 1)[1] == n                # the short batch is last
    per_lane = Counter(j % lanes for j in range(layout.num_batches))
    assert max(per_lane.values(), default=0) - min([per_lane[i] for i in range(lanes)]) <= 1
    for lane in range(lanes):                                              # a lane: contiguous, in order
        pos = [p for j in range(lane, layout.num_batches, lanes) for p in range(*layout.batch(j))]
        assert pos == list(range(pos[0], pos[0] + len(pos))) if pos else True


@pytest.mark.parametrize("n,chunk,lanes", CASES)
def test_unread_and_pieces_match_the_sequence(n, chunk, lanes):
    layout = A.Pass(n, chunk, lanes)
    seq = sequence(layout)
    for consumed in sorted({0, 1, chunk - 1, chunk, chunk + 1, n // 2, n - 1, n} & set(range(n + 1))):
        assert A.positions(layout.unread(consumed)) == sorted(set(seq) - set(seq[:consumed]))
        got = [p for _, a, b in layout.pieces(consumed, n) for p in range(a, b)]
        assert got == seq[consumed:]


@pytest.mark.parametrize("n,chunk,lanes", CASES)
@pytest.mark.parametrize("workers", [0, 1, 2, 3, 4])
def test_dataloader_order_is_the_pass_whatever_the_workers(n, chunk, lanes, workers):
    layout = A.Pass(n, chunk, lanes)
    seq = sequence(layout)
    for start in sorted({0, chunk, 2 * chunk + 1} & set(range(n + 1))):
        streams = [list(A.worker_pieces(layout, w, workers, start=start)) for w in range(max(1, workers))]
        got, turn = [], 0                  # a DataLoader takes one chunk from each worker in turn
        while any(streams):
            w = turn % len(streams)
            if streams[w]:
                got += [p for _, a, b in streams[w].pop(0) for p in range(a, b)]
            turn += 1
        assert got == seq[start:]
        if workers and lanes % workers == 0 and start % chunk == 0:        # workers own whole lanes
            owned = [{lane for pieces in A.worker_pieces(layout, w, workers, start=start) for lane, _, _ in pieces}
                     for w in range(workers)]
            assert sum(map(len, owned)) == len(set().union(*owned))         # no lane read by two workers


@pytest.mark.parametrize("policy", A.POLICIES)
@pytest.mark.parametrize("lanes,chunk", [(1, 3), (2, 3), (3, 2), (4, 5)])
def test_remaining_is_what_the_ranks_did_not_read(policy, lanes, chunk):
    plan, world = [[0, 50], [70, 103]], 3
    q = A.per_rank(A.length(plan), world, policy)
    for consumed in (0, 1, chunk, 7, q - 1, q):
        expected = []
        for r in range(world):
            part = A.positions(A.rank_part(plan, r, world, policy))
            seq = [part[i] for i in sequence(A.Pass(q, chunk, lanes))]
            read = Counter(seq[:consumed])
            expected += [p for p in part if not read[p] or read.subtract([p])]
        got = A.positions(A.remaining(plan, world, policy, consumed, chunk=chunk, lanes=lanes))
        assert got == expected


# -- on real builds -------------------------------------------------------------------

SIZES = [23, 0, 9, 14, 1, 30, 16]
TOTAL = sum(SIZES)
build = build_fixture(SIZES, row_group_rows=4)


def flat(batches):
    return [i for b in batches for i in b]


@pytest.mark.parametrize("lanes", [2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_sequence_is_the_same_for_any_worker_count(build, lanes, batched):
    kw = dict(world_size=2, rank=1, seed=3, batch_size=3, batched=batched, lanes=lanes)
    ref = run_with_stops(factory(build, **kw), epochs=1)
    for workers in (1, 2, 3):
        assert run_with_stops(factory(build, **kw), epochs=1, workers=workers) == ref
    one_lane = run_with_stops(factory(build, **dict(kw, lanes=1)), epochs=1)
    assert sorted(flat(ref)) == sorted(flat(one_lane))            # the rank reads the same samples
    assert flat(ref) != flat(one_lane)                             # in another sequence


@pytest.mark.parametrize("kind,workers,workers_after", [("plain", 0, 2), ("plain", 2, 3), ("stateful", 2, 2),
                                                        ("stateful", 0, 0)])
def test_resume_with_lanes_is_exact(build, kind, workers, workers_after):
    kw = dict(world_size=2, rank=0, seed=1, batch_size=2, batched=True, lanes=2)
    ref = run_with_stops(factory(build, **kw), epochs=2)
    per_epoch = len(ref) // 2
    stops = [3, per_epoch, per_epoch + 1]
    got = run_with_stops(factory(build, **kw), epochs=2, stops=stops, kind=kind, workers=workers,
                         workers_after=workers_after if kind == "plain" else None)
    assert got == ref


@pytest.mark.parametrize("lanes", [2, 3])
def test_per_sample_resume_mid_batch_with_lanes_is_exact(build, lanes):
    """Checkpoints inside a batch (per-sample mode, no workers): the rest of the pass is
    not a pass of its own there, so the restored reader must go on with the saved one."""
    kw = dict(rank=0, world_size=1, seed=5, window=3, batch_size=4, lanes=lanes, columns=["id"])
    ref = [s["id"] for s in ShardedDataset(build, **kw)]
    got, state = [], None
    for stop in (1, 6, 7, 17, TOTAL):
        ds = ShardedDataset(build, **kw)
        if state is not None:
            ds.load_state_dict(state)
        it = iter(ds)
        while len(got) < stop:
            got.append(next(it)["id"])
        state = json.loads(json.dumps(ds.state_dict()))
    assert got == ref


@pytest.mark.parametrize("before,after,bs_after", [(2, 3, 2), (3, 2, 5), (2, 2, 3)])
def test_elastic_restart_with_lanes_reads_the_rest_once(build, before, after, bs_after):
    """W ranks with 2 lanes read 3 batches; rank 0's state goes to W' ranks (also a new
    batch size, which re-splits the rest when W' == W). Expected sets from the epoch order
    (read whole by one rank) and the documented split, not from `rest` / `dropped`: old
    rank r reads only its stretch of the order; what it left is its stretch minus what it
    read, in part order, rank 0's first; new rank r' reads stretch r' of that (in lane
    order, so compared as sets)."""
    seed, lanes = 2, 2
    order = epoch_order(build, seed=seed, window=3, lanes=lanes)
    read, state = [], None
    for r in range(before):
        ds = ShardedDataset(build, rank=r, world_size=before, seed=seed, window=3, lanes=lanes,
                            batch_size=2, batched=True)
        it = iter(ds)
        got = [int(i) for _ in range(3) for i in next(it)["id"]]
        assert set(got) <= set(stretch(order, r, before, "drop"))
        read.append(got)
        if r == 0:
            state = json.loads(json.dumps(ds.state_dict()))
    assert state["consumed"] == 6
    rest = [x for r in range(before) for x in stretch(order, r, before, "drop") if x not in read[r]]
    seen = Counter(i for got in read for i in got)
    for r in range(after):
        ds = ShardedDataset(build, rank=r, world_size=after, seed=seed, window=3, lanes=lanes,
                            batch_size=bs_after, batched=True)
        ds.load_state_dict(state)
        got = [int(i) for b in ds for i in b["id"]]
        assert sorted(got) == sorted(stretch(rest, r, after, "drop")), r
        seen.update(got)
    skipped = order[before * (TOTAL // before):] + rest[after * (len(rest) // after):]
    assert max(seen.values()) == 1
    assert set(order) - set(seen) == set(skipped)


@pytest.mark.parametrize("lanes,workers", [(2, 2), (4, 2), (3, 3)])
def test_workers_owning_lanes_decode_disjoint_row_groups(build, monkeypatch, lanes, workers):
    """Worker slots read in turn, in this process, counting what each decodes: with K
    dividing L, a row group is decoded by two workers only if it sits in a window that a
    lane boundary cuts (at most L - 1 windows of 3 row groups); with one lane every
    worker decodes every row group."""
    log = log_reads(monkeypatch)
    groups = sum(-(-n // 4) for n in SIZES)

    def decoded(lanes_):
        per_worker = []
        for w in range(workers):
            ds = ShardedDataset(build, rank=0, world_size=1, seed=4, window=3, lanes=lanes_, batch_size=2,
                                batched=True)
            del log[:]
            list(ds.iter_tables(2, w, workers))
            per_worker.append(Counter(log))
        return per_worker

    per_worker = decoded(lanes)
    shared = set.union(*[set(a) & set(b) for i, a in enumerate(per_worker) for b in per_worker[i + 1:]])
    assert len(shared) <= (lanes - 1) * 3
    assert sum(sum(c.values()) for c in per_worker) <= groups + (lanes - 1) * 3
    assert all(sum(c.values()) == groups for c in decoded(1))       # one lane: every worker, everything
