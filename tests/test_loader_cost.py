"""What reading costs, counted rather than timed: the row groups a resume decodes before its
first batch (the same at 1% and at 90% of an epoch, at most one window), the decoded rows a
reader holds (two windows per lane, the next one decoded ahead, within `window_bytes`), and
the size estimate that sizes windows."""
from __future__ import annotations

import json
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loader_helpers import build_fixture, log_reads, make_build, settle_read_ahead
from shardforge.loaders import ShardedDataset, ShardReader
from shardforge.loaders.source import Source, decoded_sizes
from shardforge.shards.writer import WriterSettings, write_build

GROUP = 8                     # rows per row group
SIZES = [GROUP * 10] * 6      # 60 row groups of 8 rows, all the same size
TOTAL = sum(SIZES)
WINDOW = 4                    # row groups per window (the cap, so windows are exactly 4)


build = build_fixture(SIZES, row_group_rows=GROUP)


@pytest.fixture
def decoded(monkeypatch):
    """The (shard, group) of every row group decoded while the test runs, in order."""
    return log_reads(monkeypatch)


@pytest.mark.parametrize("lanes,batched", [(1, True), (1, False), (2, True)])
def test_resume_decodes_one_window_wherever_it_resumes(build, decoded, lanes, batched):
    kw = dict(rank=0, world_size=1, seed=3, window=WINDOW, lanes=lanes, batch_size=16, batched=batched)
    counts = []
    for frac in (0.01, 0.9):
        saver = ShardedDataset(build, **kw)
        state = json.loads(json.dumps(saver.state_dict(consumed=int(TOTAL * frac) // 16 * 16)))
        ds = ShardedDataset(build, **kw)
        del decoded[:]
        ds.load_state_dict(state)
        next(iter(ds))
        settle_read_ahead()
        counts.append(len(decoded))
    assert counts[0] == counts[1] <= WINDOW


def test_a_fresh_epoch_also_decodes_one_window(build, decoded):
    ds = ShardedDataset(build, rank=0, world_size=1, seed=3, window=WINDOW, batch_size=16, batched=True)
    next(iter(ds))
    assert len(decoded) == WINDOW


def test_an_epoch_decodes_each_row_group_once_per_lane_boundary(build, decoded):
    for lanes in (1, 3):
        del decoded[:]
        ds = ShardedDataset(build, rank=0, world_size=1, seed=3, window=WINDOW, lanes=lanes, batch_size=16,
                            batched=True)
        assert sum(len(b["id"]) for b in ds) == TOTAL
        assert len(set(decoded)) == TOTAL // GROUP
        assert len(decoded) <= TOTAL // GROUP + (lanes - 1) * WINDOW   # a window cut by a lane boundary


def test_a_reader_holds_two_windows_per_lane(build, monkeypatch):
    """Every decoded row group is tracked while alive: at no decode does the reader hold
    more than two windows per lane (the one it reads and the next, decoded ahead)."""
    live: list = []
    most = [0]
    orig = Source.read

    def tracked(self, block, **kw):
        table = orig(self, block, **kw)
        live[:] = [r for r in live if r() is not None] + [weakref.ref(table)]
        most[0] = max(most[0], len(live))
        return table

    monkeypatch.setattr(Source, "read", tracked)
    for lanes in (1, 2):
        most[0] = 0
        ds = ShardedDataset(build, rank=0, world_size=1, seed=3, window=WINDOW, lanes=lanes, batch_size=16,
                            batched=True)
        for _ in ds:
            pass
        assert most[0] <= 2 * lanes * WINDOW


def test_windows_stay_within_window_bytes(tmp_path):
    """Rows of very different sizes: windows sized in bytes hold about the same decoded
    bytes (never more than half of window_bytes, the other half being for the next window,
    unless one row group alone is bigger)."""
    rng = np.random.default_rng(0)
    tables = []
    for s, width in enumerate((16, 256, 2048)):
        n = 64
        toks = rng.integers(0, 30000, size=n * width, dtype=np.int32)
        tables.append(pa.table({"id": pa.array(np.arange(n) + s * 1000, pa.int64()),
                                "tokens": pa.ListArray.from_arrays(np.arange(0, n * width + 1, width,
                                                                             dtype=np.int32), toks)}))
    write_build(str(tmp_path), tables, settings=WriterSettings(row_group_rows=8))
    budget = 40_000
    r = ShardReader(str(tmp_path), rank=0, world_size=1, seed=1, window_bytes=budget)
    order = r.order()
    for w in range(order.num_windows):
        blocks = order.window_blocks(w)
        held = sum(r.source.read(b).nbytes for b in blocks)
        assert held <= budget / 2 * 1.05 or len(blocks) == 1
    assert order.num_windows < len(r.source.blocks)          # small row groups do share windows


def test_decoded_size_estimate_is_close_to_arrow(tmp_path):
    rng = np.random.default_rng(1)
    n = 256
    words = np.array(["alpha", "béta", "gamma", "δelta", "epsilon"])
    t = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                  "score": pa.array(rng.random(n), pa.float32()),
                  "tokens": pa.ListArray.from_arrays(np.arange(0, n * 300 + 1, 300, dtype=np.int32),
                                                     rng.integers(0, 500, n * 300, dtype=np.int32)),
                  "text": pa.array([" ".join(rng.choice(words, 200)) for _ in range(n)])})
    m = write_build(str(tmp_path), [t], settings=WriterSettings(row_group_rows=64))
    pf = pq.ParquetFile(m.path_of(m.shards[0]))
    for g, est in enumerate(decoded_sizes(pf.metadata)):
        actual = pf.read_row_group(g).nbytes
        assert 0.9 * actual <= est <= 1.1 * actual, (g, est, actual)


def _blocks(build, n):
    from shardforge.loaders.order import Block

    src = Source(str(build))
    return src, [Block(int(s), int(g), int(r), int(nb)) for s, g, r, nb in src.blocks[:n]]


def test_cancelling_a_read_ahead(build, decoded):
    """A read-ahead still queued when its lane ends is cancelled without decoding anything;
    one in progress is waited for (a stale window never overlaps a third one in memory)."""
    import threading

    from shardforge.loaders.windows import _Decode, _background

    src, blocks = _blocks(build, 3)
    gate = threading.Event()
    busy = _background().submit(gate.wait, 30)      # the read-ahead thread is taken
    queued = _Decode(src, blocks)
    _background().submit(queued.work)
    queued.cancel()
    gate.set()
    busy.result()
    settle_read_ahead()
    assert decoded == []                                 # started after the cancel: took nothing

    started, release = threading.Event(), threading.Event()
    orig = Source.read

    def slow(self, block, **kw):
        started.set()
        release.wait(30)
        return orig(self, block, **kw)

    running = _Decode(src, blocks)
    Source.read = slow
    try:
        _background().submit(running.work)
        assert started.wait(30)
        threading.Timer(0.2, release.set).start()
        running.cancel()                                  # returns only once the decode has ended
        assert release.is_set() and running._running == 0
    finally:
        Source.read = orig
        release.set()
    settle_read_ahead()
    assert len(decoded) == 1                              # the one in progress; none started after


def test_a_reader_that_has_caught_up_decodes_the_next_window_itself(build, decoded):
    """The next window's read-ahead has not started (its thread is taken): the reader needing
    it decodes its row groups itself rather than wait, and gets the same rows."""
    import threading

    from shardforge.loaders.windows import _background

    kw = dict(rank=0, world_size=1, seed=3, window=WINDOW, batch_size=16, batched=True)
    want = [b["id"].tolist() for b in ShardedDataset(build, **kw)]
    gate = threading.Event()
    busy = _background().submit(gate.wait, 60)
    try:
        it = iter(ShardedDataset(build, **kw))
        got = [next(it)["id"].tolist() for _ in range(WINDOW * GROUP // 16 + 1)]   # into window 1
        assert not gate.is_set() and not busy.done()     # window 1 came without the read-ahead thread
    finally:
        gate.set()
    got += [b["id"].tolist() for b in it]
    assert got == want
    assert len(decoded) == len(set(decoded)) * 2 == 2 * (TOTAL // GROUP)   # `want`'s epoch, then ours


def test_row_groups_of_one_shard_decode_side_by_side(tmp_path):
    """Threads reading row groups of the same shard at once get what one thread gets."""
    from concurrent.futures import ThreadPoolExecutor

    from shardforge.loaders.order import Block

    make_build(tmp_path, [400], row_group_rows=8)
    src = Source(str(tmp_path))
    blocks = [Block(0, g, 8) for g in range(50)] * 8
    alone = [src.read(b, threads=False) for b in blocks[:50]]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(lambda b: src.read(b, threads=False), blocks))
    assert all(t.equals(alone[i % 50]) for i, t in enumerate(together))


def test_a_forked_worker_never_waits_for_its_parents_read_ahead(build):
    """A DataLoader worker is a fork of the process that made its dataset. A cursor whose
    read-ahead is mid-decode in the parent's background thread when the fork happens must, in
    the child, drop that job (its thread is not there, its lock may be copied held) and decode
    the window itself: the same rows as the parent's, and no wait for ever (seen as a hung
    `make test`). The child reports through its exit code; the parent waits up to 120 s."""
    import os
    import threading
    import time

    from shardforge.loaders.windows import Cursor

    r = ShardReader(str(build), rank=0, world_size=1, seed=3, window_bytes=4_000)
    order = r.order()
    assert order.num_windows >= 3
    cur = Cursor(r.source, order, threads=False, ahead=order.window_span(order.num_windows - 1)[1])
    ws = order.window_span(0)[0]
    want = [t.column("id").to_pylist() for t in cur.read(order.window_span(1)[0], order.window_span(1)[1])]
    cur.close()

    started, release = threading.Event(), threading.Event()
    orig = Source.read

    def slow(self, block, **kw):
        started.set()
        release.wait(120)
        return orig(self, block, **kw)

    cur = Cursor(r.source, order, threads=False, ahead=order.window_span(order.num_windows - 1)[1])
    one = list(cur.read(ws, ws + 1))                 # window 0 entered; the read-ahead of 1 starts next
    Source.read = slow
    try:
        cur.finish()                                  # window 1 now decodes in the background
        assert started.wait(30) and cur._next is not None
        pid = os.fork()
        if pid == 0:                                  # the child: a DataLoader worker would be here
            Source.read = orig
            try:
                got = [t.column("id").to_pylist() for t in cur.read(order.window_span(1)[0], order.window_span(1)[1])]
                cur.close()
                os._exit(0 if got == want else 3)
            except BaseException:
                os._exit(4)
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked reader waited for its parent's read-ahead")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        Source.read = orig
        cur.close()
        settle_read_ahead()
    assert one and want
