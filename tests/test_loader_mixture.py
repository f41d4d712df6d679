"""Weighted mixtures of builds: each source's share stays within one sample of weight x n
over 10,000 samples (every prefix and every window up to 500), each source is read in
whole epochs without repeats, and the mixture has one state that resumes exactly and
elastically, in row, batch and sequence modes; sources that disagree on types are refused."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

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


def test_batch_and_sequence_modes_through_dataloaders(builds):
    import torch
    from torch.utils.data import DataLoader

    from shardforge.loaders import MixedDataset

    rows = MixedDataset(list(zip(builds, WEIGHTS)), seed=4, window=2, rank=0, world_size=1, batch_size=10,
                        batched=True, lanes=2)
    batches = list(DataLoader(rows, batch_size=None, num_workers=2))
    assert [int(i) for b in batches for i in b["id"]] == ids_of(mixture(builds, lanes=2), 10)
    assert batches[0]["tokens"].shape == (10, 2)
    seqs = MixedDataset(list(zip(builds, WEIGHTS)), seed=4, window=2, rank=0, world_size=1, sequence_length=5,
                        batch_size=4, batched=True)
    got = list(DataLoader(seqs, batch_size=None, num_workers=0))
    assert got[0].shape == (4, 6) and got[0].dtype == torch.uint16
    firsts = torch.cat(got)[:, 0]
    assert set(firsts.tolist()) <= set(range(3, 60))


def test_sources_that_disagree_on_types_are_refused(builds, tmp_path):
    write_build(str(tmp_path / "wide"), [pa.table({"id": pa.array([1, 2], pa.int64()),
                                                   "tokens": pa.array([[1], [2]], pa.list_(pa.int32()))})])
    with pytest.raises(LoaderError, match="different types"):
        MixtureReader([(builds[0], 0.5), (str(tmp_path / "wide"), 0.5)], sequence_length=4, rank=0, world_size=1)
    with pytest.raises(LoaderError, match="column 'tokens' is list<element: uint16> in .* but list<element: int32>"):
        MixtureReader([(builds[0], 0.5), (str(tmp_path / "wide"), 0.5)], rank=0, world_size=1)
    with pytest.raises(LoaderError, match="weights must be positive"):
        MixtureReader([(builds[0], 0.0)], rank=0, world_size=1)
