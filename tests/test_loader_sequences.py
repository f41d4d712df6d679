"""Packed token sequences: the stream is the epoch's documents in row-mode order with EOS
between them, cut into rows of L+1; ranks and workers read disjoint sequences in equal
numbers; a run interrupted and resumed (same topology or not) reads what an uninterrupted
one does; resuming decodes one window wherever it resumes; bad token columns are refused."""
from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as hs

from loader_helpers import log_reads, pack, settle_read_ahead
from order_reference import column_in_order
from shardforge.loaders import LoaderError
from shardforge.loaders.tokens import SequenceReader
from shardforge.shards.writer import WriterSettings, write_build

L = 16
B = 3
ORDER = dict(seed=5, window=3)


def token_tables(sizes, seed=0, dtype=pa.uint16()):
    """Shards of documents with 0 to 60 random tokens (some empty), ids s * 1000 + i."""
    rng = random.Random(seed)
    out = []
    for s, n in enumerate(sizes):
        toks = [[rng.randrange(3, 60000) for _ in range(rng.choice([0, 1, 2, 7, 19, 33, 60]))] for _ in range(n)]
        out.append(pa.table({"id": pa.array([s * 1000 + i for i in range(n)], pa.int64()),
                             "tokens": pa.array(toks, pa.list_(dtype))}))
    return out


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    write_build(str(root), token_tables([37, 0, 52, 29]), settings=WriterSettings(row_group_rows=8))
    return str(root)


def expected(build, eos):
    """The epoch's sequences packed by hand: documents in the documented epoch order
    (tests/order_reference.py, not the loader), tokens concatenated with `eos` after each,
    cut every L tokens into rows of L + 1. Returns (sequences, stream)."""
    docs = column_in_order(build, "tokens", **ORDER)
    stream = [t for doc in docs for t in doc + ([eos] if eos is not None else [])]
    want = pack(docs, L, eos)
    assert want == [tuple(stream[j * L:j * L + L + 1]) for j in range((len(stream) - 1) // L)]
    return want, stream


@pytest.mark.parametrize("eos", [None, 2])
def test_sequences_are_the_epoch_stream_cut_in_rows_of_l_plus_one(build, eos):
    want, stream = expected(build, eos)
    reader = SequenceReader(build, sequence_length=L, eos_id=eos, rank=0, world_size=1, **ORDER)
    got = [tuple(int(x) for x in row) for chunk in reader.iter_sequences(B) for row in chunk]
    assert got == want and reader.total == len(want)
    stats = reader.epoch_stats()
    docs = [d for t in token_tables([37, 0, 52, 29]) for d in t.column("tokens").to_pylist()]
    assert stats["documents"] == len(docs) and stats["empty_documents"] == sum(1 for d in docs if not d)
    assert stats["tokens"] == len(stream)
    assert stats["tail_tokens"] == len(stream) - (len(want) * L + 1)          # the documented remainder
    again = SequenceReader(build, sequence_length=L, eos_id=eos, rank=0, world_size=1, **ORDER)
    assert next(again.iter_sequences(B)).dtype == np.uint16


def read_job(build, world, workers, *, state=None, steps=None):
    """One segment of a job: `world` ranks, each reading its batches the way a DataLoader with
    `workers` workers hands them out (worker w's chunks round robin). Stops after `steps`
    batches per rank (None: the end). Returns ({rank: [sequence, ...]}, state at the stop)."""
    out, readers = {}, []
    for r in range(world):
        rd = SequenceReader(build, sequence_length=L, rank=r, world_size=world, **ORDER)
        if state is not None:
            rd.load_state_dict(json.loads(json.dumps(state)))
        its = [rd.iter_tables(B, w, workers) for w in range(workers)]
        seqs, n = [], 0
        while steps is None or n < steps:
            chunk = next(its[n % workers], None)
            if chunk is None:
                break
            seqs += [tuple(int(x) for x in row) for row in chunk]
            n += 1
        out[r] = seqs
        readers.append((rd, len(seqs)))
    rd, taken = readers[0]
    return out, rd.state_dict(consumed=taken)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hs.lists(hs.tuples(hs.integers(1, 3), hs.integers(1, 3), hs.integers(0, 6)), min_size=1, max_size=4),
       hs.booleans())
def test_interrupted_and_resumed_runs_read_the_uninterrupted_epoch(build, segments, same_topology):
    want, _ = expected(build, None)
    if same_topology:
        segments = [(segments[0][0], segments[0][1], s) for _, _, s in segments]
    world0, workers0 = segments[0][0], segments[0][1]
    uninterrupted, _ = read_job(build, world0, workers0)
    read, state = {r: [] for r in range(world0)}, None
    dropped_at_most = 0
    for i, (world, workers, steps) in enumerate(segments + [(segments[-1][0], segments[-1][1], None)]):
        got, state = read_job(build, world, workers, state=state, steps=steps)
        assert len({len(v) for v in got.values()}) == 1          # every rank takes the same steps
        for r, seqs in got.items():
            read.setdefault(r, []).extend(seqs)
        dropped_at_most += world - 1
    if same_topology:
        assert read == uninterrupted                             # the exact sequence of every rank
    all_read = [s for seqs in read.values() for s in seqs]
    assert len(all_read) == len(set(all_read))                   # nothing read twice
    assert set(all_read) <= set(want)
    assert len(want) - len(all_read) <= dropped_at_most          # only `drop`'s remainders are skipped
    tokens_read = Counter(t for s in all_read for t in s[:-1])
    tokens_all = Counter(t for s in want for t in s[:-1])
    assert not tokens_read - tokens_all                         # a sub-multiset of the epoch's tokens


def test_the_next_window_is_decoded_while_this_one_is_read(build, monkeypatch):
    """Sequence mode takes a window's rows in one read; every window after the first must
    still be set decoding in the background while sequences of the one before are handed
    out, before the reader needs it (a reader that decoded on demand stalled once per window)."""
    from shardforge.loaders.tokens import TokenCursor
    from shardforge.loaders.windows import Cursor

    want, _ = expected(build, None)
    events = []
    read_ahead, window = Cursor._read_ahead, TokenCursor._window

    def logged_read_ahead(self):
        before = self._next
        read_ahead(self)
        if self._next is not None and self._next is not before:
            events.append(("ahead", self._next[0]))

    def logged_window(self, w):
        if self._w != w:
            events.append(("need", w))
        return window(self, w)

    monkeypatch.setattr(Cursor, "_read_ahead", logged_read_ahead)
    monkeypatch.setattr(TokenCursor, "_window", logged_window)
    reader = SequenceReader(build, sequence_length=L, rank=0, world_size=1, **ORDER)
    got = [tuple(int(x) for x in row) for chunk in reader.iter_sequences(1) for row in chunk]
    assert got == want
    windows = reader.order(0).num_windows
    assert windows >= 4
    for w in range(1, windows):
        assert ("ahead", w) in events and events.index(("ahead", w)) < events.index(("need", w)), (w, events)


def test_resume_decodes_one_window_at_1_and_90_percent(build, monkeypatch):
    decoded = log_reads(monkeypatch)
    total = SequenceReader(build, sequence_length=L, rank=0, world_size=1, **ORDER).total
    counts = []
    for frac in (0.01, 0.9):
        saver = SequenceReader(build, sequence_length=L, rank=0, world_size=1, **ORDER)
        state = saver.state_dict(consumed=max(1, int(total * frac)))
        reader = SequenceReader(build, sequence_length=L, rank=0, world_size=1, **ORDER)
        del decoded[:]
        reader.load_state_dict(state)
        next(reader.iter_sequences(1))
        settle_read_ahead()
        counts.append(len(decoded))
    assert counts[0] == counts[1] <= 3      # one window: at most ORDER["window"] row groups


def test_real_dataloaders_resume_exactly_with_workers(build):
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader

    from shardforge.loaders import TokenDataset

    def ds():
        return TokenDataset(build, sequence_length=L, rank=0, world_size=1, batch_size=2, batched=True, lanes=2,
                            **ORDER)

    full = [b for b in StatefulDataLoader(ds(), batch_size=None, num_workers=2)]
    loader = StatefulDataLoader(ds(), batch_size=None, num_workers=2)
    head = []
    for b in loader:
        head.append(b)
        if len(head) == 5:
            saved = loader.state_dict()
            break
    again = StatefulDataLoader(ds(), batch_size=None, num_workers=2)
    again.load_state_dict(saved)
    rest = list(again)
    assert [b.tolist() for b in head + rest] == [b.tolist() for b in full]          # whole lists
    assert full[0].shape == (2, L + 1) and all(b.shape[1] == L + 1 and b.dtype == torch.uint16 for b in full)
    want, _ = expected(build, None)
    got = [tuple(row) for b in full for row in b.tolist()]
    assert sorted(got) == sorted(want)                          # the whole epoch (in lane order)
    unbatched = [tuple(row) for b in StatefulDataLoader(ds(), batch_size=None, num_workers=0) for row in b.tolist()]
    assert got == unbatched                                     # the workers' sequence is num_workers=0's


def test_bad_token_columns_are_refused(tmp_path):
    write_build(str(tmp_path / "s"), [pa.table({"id": [1, 2], "tokens": ["a", "b"]})])
    with pytest.raises(LoaderError, match="'tokens' is string, not a list of integers"):
        SequenceReader(str(tmp_path / "s"), sequence_length=L)
    write_build(str(tmp_path / "f"), [pa.table({"id": [1], "tokens": pa.array([[1.5]], pa.list_(pa.float32()))})])
    with pytest.raises(LoaderError, match="not a list of integers"):
        SequenceReader(str(tmp_path / "f"), sequence_length=L)
    with pytest.raises(LoaderError, match="no token column 'ids'"):
        SequenceReader(str(tmp_path / "f"), sequence_length=L, token_column="ids")
    write_build(str(tmp_path / "u8"), token_tables([5], dtype=pa.uint16()))
    with pytest.raises(LoaderError, match="eos_id 70000 does not fit"):
        SequenceReader(str(tmp_path / "u8"), sequence_length=L, eos_id=70000)


def test_builds_without_recorded_list_lengths_give_the_same_sequences(build, tmp_path):
    """Older manifests have no per-row-group list lengths: the reader counts the tokens itself."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(build, old)
    manifest = json.loads((old / "manifest.json").read_text())
    assert all("tokens" in s["list_lengths"] for s in manifest["shards"] if s["rows"])
    for s in manifest["shards"]:
        s.pop("list_lengths", None)
    (old / "manifest.json").write_text(json.dumps(manifest))
    new = SequenceReader(build, sequence_length=L, rank=0, world_size=1, **ORDER)
    again = SequenceReader(str(old), sequence_length=L, rank=0, world_size=1, **ORDER)
    assert new.total == again.total
    got_new = [tuple(int(x) for x in row) for chunk in new.iter_sequences(B) for row in chunk]
    got_old = [tuple(int(x) for x in row) for chunk in again.iter_sequences(B) for row in chunk]
    assert got_old == got_new == expected(build, None)[0]                          # whole lists
