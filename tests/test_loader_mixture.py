"""Weighted mixtures of builds: each source's share stays within one sample of weight x n
over 10,000 samples (every prefix and every window up to 500), each source is read in
whole epochs without repeats, and the mixture has one state that resumes exactly and
elastically, in row, batch and sequence modes; sources that disagree on types are refused.
Sequence mode is held to the documented schedule (the one row mode follows) and to each
source's sequences packed by hand from its documented order, uninterrupted, resumed at the
same topology and resumed across 2 -> 3 ranks."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from loader_helpers import pack, stretch
from order_reference import column_in_order, source_seed
from shardforge.loaders import LoaderError, MixtureReader
from shardforge.shards.writer import WriterSettings, write_build

WEIGHTS = (0.5, 0.3, 0.2)
SIZES = (300, 200, 120)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = []
    for k, n in enumerate(SIZES):
        root = tmp_path_factory.mktemp(f"src{k}")
        ids = [k * 10_000 + i for i in range(n)]
        write_build(str(root), [pa.table({"id": pa.array(ids[:n // 2], pa.int64()),
                                          "tokens": pa.array([[k + 3, i % 50 + 3] for i in ids[:n // 2]],
                                                             pa.list_(pa.uint16()))}),
                                pa.table({"id": pa.array(ids[n // 2:], pa.int64()),
                                          "tokens": pa.array([[k + 3, i % 50 + 3] for i in ids[n // 2:]],
                                                             pa.list_(pa.uint16()))})],
                    settings=WriterSettings(row_group_rows=16))
        out.append(str(root))
    return out


def mixture(builds, **kw):
    return MixtureReader(list(zip(builds, WEIGHTS)), **{"seed": 4, "window": 2, "rank": 0, "world_size": 1, **kw})


def ids_of(reader, batch=64):
    return [i for t in reader.iter_batches(batch) for i in t.column("id").to_pylist()]


def test_shares_follow_the_weights_over_10000_samples(builds):
    ids = ids_of(mixture(builds, samples_per_epoch=10_000))
    assert len(ids) == 10_000
    src = np.array([i // 10_000 for i in ids])
    onehot = np.stack([src == k for k in range(3)]).astype(np.int64)
    prefix = np.concatenate([np.zeros((3, 1), dtype=np.int64), np.cumsum(onehot, axis=1)], axis=1)
    n = np.arange(10_001)
    for k, w in enumerate(WEIGHTS):
        assert np.abs(prefix[k] - w * n).max() <= 1.0                   # every prefix
        for width in range(1, 501):                                   # every window up to 500
            counts = prefix[k, width:] - prefix[k, :-width]
            assert np.abs(counts - w * width).max() <= 1.0 + 1e-9, (k, width)
    for k, size in enumerate(SIZES):        # each source read in whole epochs, no repeat inside one
        mine = [i for i in ids if i // 10_000 == k]
        for e in range(len(mine) // size):
            assert sorted(mine[e * size:(e + 1) * size]) == [k * 10_000 + i for i in range(size)]
        assert mine[:size] != mine[size:2 * size]          # each epoch of a source in its own order


def test_default_epoch_reads_no_source_twice(builds):
    m = mixture(builds)
    ids = ids_of(m)
    assert len(ids) == len(set(ids)) == m.total == 600      # 120 / 0.2: the smallest source ends it


def test_the_mixture_resumes_exactly_and_elastically(builds):
    full = ids_of(mixture(builds))
    head_reader = mixture(builds)
    head = []
    for t in head_reader.iter_batches(32):
        head += t.column("id").to_pylist()
        if len(head) == 224:
            break
    state = json.loads(json.dumps(head_reader.state_dict(consumed=224)))
    again = mixture(builds)
    again.load_state_dict(state)
    assert head + ids_of(again, 32) == full

    # two ranks read 5 batches each, three ranks finish: every sample once, minus drop's remainders
    read, ranks = [], []
    for r in range(2):
        rd = mixture(builds, rank=r, world_size=2)
        it = rd.iter_batches(20)
        for _ in range(5):
            read += next(it).column("id").to_pylist()
        ranks.append(rd)
    state = ranks[0].state_dict(consumed=100)
    lengths = []
    for r in range(3):
        rd = mixture(builds, rank=r, world_size=3)
        rd.load_state_dict(state)
        got = ids_of(rd, 20)
        lengths.append(len(got))
        read += got
    assert len(set(lengths)) == 1
    assert len(read) == len(set(read)) and set(read) <= set(full) and len(full) - len(read) <= 1 + 2


def test_batch_and_sequence_modes_through_dataloaders(builds, token_builds):
    import torch
    from torch.utils.data import DataLoader

    from shardforge.loaders import MixedDataset

    rows = MixedDataset(list(zip(builds, WEIGHTS)), seed=4, window=2, rank=0, world_size=1, batch_size=10,
                        batched=True, lanes=2)
    batches = list(DataLoader(rows, batch_size=None, num_workers=2))
    assert [int(i) for b in batches for i in b["id"]] == ids_of(mixture(builds, lanes=2), 10)
    assert batches[0]["tokens"].shape == (10, 2)
    seqs = MixedDataset(list(zip(token_builds, WEIGHTS)), seed=4, window=2, rank=0, world_size=1,
                        sequence_length=SEQ_L, samples_per_epoch=SEQ_M, batch_size=4, batched=True)
    got = list(DataLoader(seqs, batch_size=None, num_workers=2))
    assert got[0].shape == (4, SEQ_L + 1) and got[0].dtype == torch.uint16
    assert [tuple(row) for b in got for row in b.tolist()] == hand_mixture(token_builds, 0)[:len(got) * 4]
    assert len(got) == SEQ_M // 4


# Sequence mode. Source k's document i has the tokens k * 20000 + 10 * i + t for t < 1 + i % 4,
# so every token names its source and document; sequences of SEQ_L + 1 tokens, no EOS.
SEQ_L = 5
SEQ_M = 400           # mixture positions per epoch: several epochs of every source's sequences


@pytest.fixture(scope="module")
def token_builds(tmp_path_factory):
    out = []
    for k, n in enumerate(SIZES):
        root = tmp_path_factory.mktemp(f"tok{k}")
        docs = [[k * 20000 + 10 * i + t for t in range(1 + i % 4)] for i in range(n)]
        write_build(str(root), [pa.table({"id": pa.array(range(k * 10_000 + a, k * 10_000 + b), pa.int64()),
                                          "tokens": pa.array(docs[a:b], pa.list_(pa.uint16()))})
                                for a, b in ((0, n // 2), (n // 2, n))],
                    settings=WriterSettings(row_group_rows=16))
        out.append(str(root))
    return out


def hand_schedule(n: int) -> list[int]:
    """The documented rule: position i goes to the source whose count lags weight x (i + 1) the
    most, ties to the first (exact fractions)."""
    w = [Fraction(x).limit_denominator(1000) for x in WEIGHTS]
    w = [x / sum(w) for x in w]
    counts, out = [0] * len(w), []
    for i in range(n):
        lag = [w[s] * (i + 1) - counts[s] for s in range(len(w))]
        s = lag.index(max(lag))
        out.append(s)
        counts[s] += 1
    return out


def hand_source_sequences(path: str, s: int, count: int) -> list[tuple]:
    """Source s's first `count` sequences: its epochs one after another, each the documents in
    the documented order (seed key(4, s, 7) >> 1, windows of 2 row groups, its third of the
    default memory budget) packed by hand, the tail of each left out."""
    out, epoch = [], 0
    while len(out) < count:
        docs = column_in_order(path, "tokens", seed=source_seed(4, s), epoch=epoch, window=2,
                               window_bytes=(128 << 20) // 3)
        out += pack(docs, SEQ_L)
        epoch += 1
    return out[:count]


def hand_mixture(paths, epoch: int) -> list[tuple]:
    """Mixture epoch `epoch` (SEQ_M positions) in sequence mode, from the hand schedule and the
    hand-packed sources."""
    plan = hand_schedule(SEQ_M * (epoch + 1))
    streams = [iter(hand_source_sequences(p, s, plan.count(s))) for s, p in enumerate(paths)]
    every = [next(streams[s]) for s in plan]
    return every[SEQ_M * epoch:]


def seq_mixture(paths, **kw):
    return MixtureReader(list(zip(paths, WEIGHTS)), **{"seed": 4, "window": 2, "rank": 0, "world_size": 1,
                                                        "sequence_length": SEQ_L, "samples_per_epoch": SEQ_M, **kw})


def seqs_of(reader, batch=7) -> list[tuple]:
    return [tuple(int(x) for x in row) for chunk in reader.iter_tables(batch) for row in chunk]


def test_sequence_mode_follows_the_row_schedule_and_packs_each_source_by_hand(builds, token_builds):
    want = hand_schedule(2 * SEQ_M)
    rows = [i // 10_000 for i in ids_of(mixture(builds, samples_per_epoch=2 * SEQ_M))]
    assert rows == want                                                   # row mode: the documented rule
    for epoch in (0, 1):
        reader = seq_mixture(token_builds, epoch=epoch)
        got = seqs_of(reader)
        assert [{t // 20000 for t in seq} for seq in got] == [{s} for s in want[epoch * SEQ_M:(epoch + 1) * SEQ_M]]
        assert got == hand_mixture(token_builds, epoch)
    plan = hand_schedule(SEQ_M)
    per_epoch = [len(pack(column_in_order(p, "tokens", seed=0), SEQ_L)) for p in token_builds]
    assert any(plan.count(s) > n for s, n in enumerate(per_epoch))      # a source runs into its next epoch


def test_sequence_mode_resumes_exactly_and_elastically(token_builds):
    full = seqs_of(seq_mixture(token_builds))
    assert full == hand_mixture(token_builds, 0)
    head_reader, head = seq_mixture(token_builds), []
    for chunk in head_reader.iter_tables(7):
        head += [tuple(int(x) for x in row) for row in chunk]
        if len(head) == 147:
            break
    again = seq_mixture(token_builds)
    again.load_state_dict(json.loads(json.dumps(head_reader.state_dict(consumed=147))))
    assert head + seqs_of(again) == full                                  # exact, the same topology

    # 2 ranks read 5 batches of 9, then 3 ranks finish: each old rank read its stretch of the
    # order, the rest is each old stretch after it (rank 0's first), new rank r reads stretch r
    read, state = [], None
    for r in range(2):
        rd = seq_mixture(token_builds, rank=r, world_size=2)
        it = rd.iter_tables(9)
        got = [tuple(int(x) for x in row) for _ in range(5) for row in next(it)]
        assert got == stretch(full, r, 2, "drop")[:45]
        read += got
        if r == 0:
            state = json.loads(json.dumps(rd.state_dict(consumed=45)))
    rest = [x for r in range(2) for x in stretch(full, r, 2, "drop")[45:]]
    after = []
    for r in range(3):
        rd = seq_mixture(token_builds, rank=r, world_size=3)
        rd.load_state_dict(state)
        got = seqs_of(rd, 9)
        assert got == stretch(rest, r, 3, "drop")
        after += got
    skipped = full[2 * (SEQ_M // 2):] + rest[3 * (len(rest) // 3):]
    assert sorted(read + after + skipped) == sorted(full) and len(skipped) <= 1 + 2


def test_sources_that_disagree_on_types_are_refused(builds, tmp_path):
    write_build(str(tmp_path / "wide"), [pa.table({"id": pa.array([1, 2], pa.int64()),
                                                   "tokens": pa.array([[1], [2]], pa.list_(pa.int32()))})])
    with pytest.raises(LoaderError, match="different types"):
        MixtureReader([(builds[0], 0.5), (str(tmp_path / "wide"), 0.5)], sequence_length=4, rank=0, world_size=1)
    with pytest.raises(LoaderError, match="column 'tokens' is list<element: uint16> in .* but list<element: int32>"):
        MixtureReader([(builds[0], 0.5), (str(tmp_path / "wide"), 0.5)], rank=0, world_size=1)
    with pytest.raises(LoaderError, match="weights must be positive"):
        MixtureReader([(builds[0], 0.0)], rank=0, world_size=1)
