"""Worker batches through a reused shared-memory segment: what the training process unpickles
equals the batch made in-process, segments are handed back and reused, nothing is left in
/dev/shm, and torch's default collate for batch_size=None passes shipments through; token
sequences shipped from workers equal sequences packed by hand and num_workers=0's."""
from __future__ import annotations

import copy
import io
import os
import pickle
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from shardforge.loaders import ship as S

pytestmark = pytest.mark.skipif(not S.available(), reason="needs a writable /dev/shm")


@pytest.fixture(autouse=True)
def shm_dir(monkeypatch):
    """A /dev/shm directory of this module's own (DataLoader workers fork and inherit it), so
    the segments of loaders in tests running beside these do not count."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="shardforge-test-", dir=S.SHM_DIR)
    monkeypatch.setattr(S, "SHM_DIR", path)
    monkeypatch.setattr(S, "_RING", None)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def table(n: int = 6, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(n) + 100 * seed, pa.int64()),
        "score": pa.array(rng.random(n), pa.float32()),
        "tokens": pa.array([[i, i + 1, i + 2] for i in range(n)], pa.list_(pa.int32())),
        "ragged": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int64())),
        "text": pa.array([f"döc {i} " * (i + 1) for i in range(n)]),
        "blob": pa.array([bytes([i]) * i for i in range(n)], pa.binary()),
        "maybe": pa.array([None if i % 2 else i for i in range(n)], pa.int32()),
        "flag": pa.array([i % 3 == 0 for i in range(n)]),
    })


def expected(t: pa.Table) -> dict:
    """The batch as plain Python, straight from Arrow."""
    return {name: t.column(name).to_pylist() for name in t.column_names}


def as_python(batch: dict) -> dict:
    out = {}
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            out[k] = v.tolist()
        elif isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            out[k] = [x.tolist() for x in v]
        else:
            out[k] = list(v)
    return out


def send(obj) -> bytes:
    buf = io.BytesIO()
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def test_shipped_batch_arrives_as_the_plain_batch():
    t = table()
    shipment = S.ship(t)
    assert as_python(dict(shipment.items())) == expected(t)        # what code in the worker sees
    got = pickle.loads(send(shipment))
    assert type(got) is dict and as_python(got) == expected(t)
    assert got["tokens"].shape == (6, 3) and got["tokens"].dtype == torch.int32
    assert isinstance(got["ragged"], list) and got["text"][2] == "döc 2 " * 3
    assert not isinstance(shipment, Mapping)                        # default_convert passes it through


def test_segments_are_handed_back_and_reused():
    ring = S._ring()
    first = [S.ship(table(seed=s)) for s in range(3)]               # three in flight: three segments
    names = {sh._ref[0] for sh in first}
    assert len(names) == 3
    wires = [send(sh) for sh in first]
    got = [pickle.loads(w) for w in wires]                          # received: all handed back
    assert [g["id"].tolist()[0] for g in got] == [0, 100, 200]
    again = S.ship(table(seed=4))
    assert again._ref[0] in names and len(ring.segments) == 3
    assert pickle.loads(send(again))["id"].tolist()[0] == 400
    assert got[0]["id"].tolist()[0] == 0                            # received batches own their data


def test_copy_gives_an_independent_dict():
    shipment = S.ship(table())
    c = copy.copy(shipment)
    assert type(c) is dict and as_python(c) == expected(table())
    pickle.loads(send(shipment))                                    # frees the segment
    S.ship(table(seed=9))                                           # and overwrites it
    assert as_python(c) == expected(table())


class Batches(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        for j in range(info.id, 12, info.num_workers):
            yield S.ship(table(n=1 + j % 5, seed=j))


@pytest.mark.parametrize("collate_fn", [None, lambda b: b])
def test_through_a_dataloader_and_nothing_left_behind(collate_fn):
    before = set(os.listdir(S.SHM_DIR))
    for stop in (12, 3):                                            # to the end, and breaking early
        loader = DataLoader(Batches(), batch_size=None, num_workers=2, collate_fn=collate_fn)
        for j, b in enumerate(loader):
            assert type(b) is dict and as_python(b) == expected(table(n=1 + j % 5, seed=j))
            if j + 1 == stop:
                break
        del loader, b
    assert set(os.listdir(S.SHM_DIR)) - before == set()


def _mapped(shm_dir: str) -> list[str]:
    """This process's mappings of segments in `shm_dir`, one name per mapping."""
    with open("/proc/self/maps") as f:
        return [line.split(shm_dir + "/", 1)[1].split()[0] for line in f if shm_dir + "/" in line]


def _count_segment_opens(shm_dir: str, monkeypatch) -> list[str]:
    """The names of the shared-memory segments this process opens from now on (the module's
    mapping cache emptied first), collected into the list returned."""
    opened: list[str] = []
    real_open = os.open

    def counting_open(path, *args, **kw):
        if str(path).startswith(shm_dir + "/"):
            opened.append(os.path.basename(path))
        return real_open(path, *args, **kw)

    monkeypatch.setattr(S, "_MAPPINGS", None)
    monkeypatch.setattr(os, "open", counting_open)
    return opened


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_the_training_process_maps_a_segment_once_and_drops_a_gone_workers(shm_dir, monkeypatch):
    """Receiving a batch maps the worker's segment once, not per batch; the mappings of an
    epoch's workers, which exit at its end, are dropped once the next epoch's batches come."""
    opened = _count_segment_opens(shm_dir, monkeypatch)
    for epoch in range(3):
        del opened[:]
        got = [as_python(b) for b in DataLoader(Batches(), batch_size=None, num_workers=2)]
        assert got == [expected(table(n=1 + j % 5, seed=j)) for j in range(12)]
        received = [n for n in opened if not n.startswith(f"shardforge-{os.getpid()}-")]
        workers = {n.split("-")[1] for n in received}
        assert len(workers) == 2, received
        assert len(received) == len(set(received)) <= 6, received         # 12 batches, each segment opened once
        maps = _mapped(shm_dir)
        assert {n.split("-")[1] for n in maps} == workers, (epoch, maps)   # no earlier epoch's worker's


def _ship_and_wait(ready, go):
    S.ship(table())
    S.ship(table(n=200))
    ready.set()
    go.wait(60)


def test_a_terminated_worker_unlinks_its_segments(shm_dir):
    """torch terminates (SIGTERM) a worker that is slow to exit at the loader's shutdown."""
    import multiprocessing as mp
    import signal

    ctx = mp.get_context("fork")
    ready, go = ctx.Event(), ctx.Event()
    worker = ctx.Process(target=_ship_and_wait, args=(ready, go))
    worker.start()
    assert ready.wait(60)
    mine = [n for n in os.listdir(shm_dir) if n.startswith(f"shardforge-{worker.pid}-")]
    assert len(mine) == 2
    worker.terminate()
    worker.join(60)
    assert worker.exitcode == -signal.SIGTERM
    assert os.listdir(shm_dir) == []


def test_segments_of_dead_processes_are_swept(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = os.path.join(S.SHM_DIR, f"shardforge-{dead}-0123456789ab")
    mine = os.path.join(S.SHM_DIR, f"shardforge-{os.getpid()}-0123456789ab")
    for path in (stale, mine):
        open(path, "wb").close()
    try:
        S._sweep()
        assert not os.path.exists(stale) and os.path.exists(mine)
    finally:
        for path in (stale, mine):
            if os.path.exists(path):
                os.unlink(path)


def test_without_dev_shm_batches_travel_the_usual_way(tmp_path, monkeypatch):
    """No writable /dev/shm (macOS, some containers): workers hand plain dicts to torch."""
    from loader_helpers import make_build
    from shardforge.loaders import ShardedDataset

    make_build(tmp_path, [20, 7], row_group_rows=4)
    monkeypatch.setattr(S, "SHM_DIR", str(tmp_path / "no-such-dir"))
    ds = ShardedDataset(str(tmp_path), rank=0, world_size=1, seed=1, batch_size=4, batched=True)
    got = [int(i) for b in DataLoader(ds, batch_size=None, num_workers=2) for i in b["id"]]
    assert sorted(got) == sorted(list(range(20)) + [100_000 + i for i in range(7)])


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="counts segment opens like the test above")
@pytest.mark.parametrize("dtype,eos", [(pa.uint16(), None), (pa.int32(), 7)])
def test_token_sequences_from_workers_are_the_hand_packed_epoch(tmp_path, shm_dir, monkeypatch, dtype, eos):
    """TokenDataset's batches leave DataLoader workers as ArrayShipments (ship_array): what
    the training process gets equals sequences packed by hand from the documented epoch
    order, and num_workers=0's batches, in the token column's type."""
    import random

    from loader_helpers import pack
    from order_reference import column_in_order
    from shardforge.loaders import TokenDataset
    from shardforge.shards.writer import WriterSettings, write_build

    rng = random.Random(4)
    write_build(str(tmp_path / "b"), [pa.table({
        "id": pa.array(range(s * 1000, s * 1000 + n), pa.int64()),
        "tokens": pa.array([[rng.randrange(8, 60000) for _ in range(rng.choice([0, 1, 3, 9, 20]))] for _ in range(n)],
                           pa.list_(dtype))}) for s, n in enumerate([30, 0, 41, 17])],
        settings=WriterSettings(row_group_rows=6))
    length, batch = 8, 3
    want = pack(column_in_order(str(tmp_path / "b"), "tokens", seed=3, window=2), length, eos)
    assert len(want) > 10 * batch

    def batches(workers: int) -> list:
        ds = TokenDataset(str(tmp_path / "b"), sequence_length=length, eos_id=eos, rank=0, world_size=1, seed=3,
                          window=2, batch_size=batch, batched=True)
        return list(DataLoader(ds, batch_size=None, num_workers=workers))

    opened = _count_segment_opens(shm_dir, monkeypatch)
    shipped = batches(2)
    assert {n.split("-")[1] for n in opened} - {str(os.getpid())}, "no batch came through a worker's segment"
    in_process = batches(0)
    want_dtype = torch.uint16 if dtype == pa.uint16() else torch.int32
    assert all(type(b) is torch.Tensor and b.dtype == want_dtype for b in shipped)
    assert [b.tolist() for b in shipped] == [[list(s) for s in want[i:i + batch]] for i in range(0, len(want), batch)]
    assert [b.tolist() for b in shipped] == [b.tolist() for b in in_process]
