"""Reader processes (`reader_processes=K`): a rank's pass decoded in K torch-free child
interpreters and handed to the training process in order. The sequence is the one the
same dataset yields read in the training process (num_workers=0), the state resumes
exactly, the readers never load torch, and their errors, deaths and early stops reach
the training process as errors or clean exits, never as a gap."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from loader_helpers import damage, build_ids, make_build
from shardforge.loaders import LoaderError, MixedDataset, ShardedDataset, StateError, TokenDataset
from shardforge.loaders.procread import RemoteTraceback
from shardforge.shards.manifest import ManifestError

SIZES = [37, 0, 64, 9, 51, 23]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("procread")
    make_build(root, SIZES, row_group_rows=8)
    return str(root)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """8 MB of text: more than the readers' pipes (1 MB each) hold, so readers are still
    running, blocked on their pipes, while the test looks at them."""
    import pyarrow as pa

    from shardforge.shards.writer import WriterSettings, write_build

    root = tmp_path_factory.mktemp("procread-big")
    tables = [pa.table({"id": pa.array(range(s * 100_000, s * 100_000 + 2000), pa.int64()),
                        "text": pa.array([f"{s}-{i}-" + "x" * 2000 for i in range(2000)])}) for s in range(2)]
    write_build(str(root), tables, settings=WriterSettings(row_group_rows=100))
    return str(root)


def ids(items) -> list[int]:
    out = []
    for item in items:
        out += [int(i) for i in (item["id"] if isinstance(item, dict) else item)]
    return out


def readers_of_this_process() -> list[int]:
    """Pids of this process's children that run shardforge.loaders.procread (from /proc)."""
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and b"shardforge.loaders.procread" in cmd:
            out.append(int(d.name))
    return out


def wait_until(cond, what: str, seconds: float = 60.0) -> None:
    """Wait for an event; the deadline only keeps a broken build from hanging the suite."""
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize("readers,lanes", [(1, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("batched", [True, False])
def test_reader_processes_yield_the_in_process_sequence(build, readers, lanes, batched):
    kw = dict(rank=0, world_size=1, seed=4, window=2, lanes=lanes, batch_size=5, batched=batched)
    expected = ids(ShardedDataset(build, **kw)) if batched else [int(s["id"]) for s in ShardedDataset(build, **kw)]
    assert sorted(expected) == build_ids(SIZES)
    ds = ShardedDataset(build, reader_processes=readers, **kw)
    if batched:
        got = list(ds)
        assert ids(got) == expected
        assert all(isinstance(b["score"], torch.Tensor) and b["text"][0].startswith("doc-") for b in got)
    else:
        assert [int(s["id"]) for s in ds] == expected
    assert sum(s["rows"] for s in ds.reader_stats) == len(expected)
    assert all(s["peak_rss"] > 0 for s in ds.reader_stats)


def test_token_and_mixed_datasets_read_in_processes(build, tmp_path):
    kw = dict(rank=0, world_size=1, seed=2, window=2, sequence_length=6, batch_size=3, batched=True, lanes=2)
    plain = [b.clone() for b in TokenDataset(build, **kw)]
    got = list(TokenDataset(build, reader_processes=2, **kw))
    assert len(got) == len(plain) > 3 and all(torch.equal(a, b) for a, b in zip(got, plain))
    other = tmp_path / "other"
    make_build(other, [30, 30], row_group_rows=8)
    mkw = dict(rank=0, world_size=1, seed=1, window=2, batch_size=4, batched=True, columns=["id", "score"], lanes=2)
    mixed = ids(MixedDataset([(build, 0.7), (str(other), 0.3)], **mkw))
    assert ids(MixedDataset([(build, 0.7), (str(other), 0.3)], reader_processes=2, **mkw)) == mixed


@pytest.mark.parametrize("stop_after", [1, 7])
def test_state_taken_while_reading_in_processes_resumes_exactly(build, stop_after):
    kw = dict(rank=0, world_size=1, seed=9, window=2, lanes=2, batch_size=4, batched=True)
    whole = ids(ShardedDataset(build, **kw))
    ds = ShardedDataset(build, reader_processes=2, **kw)
    it = iter(ds)
    head = ids(next(it) for _ in range(stop_after))
    state = ds.state_dict()
    it.close()
    assert state["consumed"] == len(head) == 4 * stop_after
    for readers in (2, 0):          # resumed in processes, or in the training process
        again = ShardedDataset(build, reader_processes=readers, **kw)
        again.load_state_dict(state)
        assert head + ids(again) == whole
    # elastic: the unread rest is split over 2 ranks, disjoint, nothing lost beyond `drop`
    rest = set(whole) - set(head)
    parts = []
    for rank in range(2):
        r = ShardedDataset(build, **{**kw, "rank": rank, "world_size": 2}, reader_processes=2)
        r.load_state_dict(state)
        parts.append(ids(r))
    assert len(parts[0]) == len(parts[1]) and not set(parts[0]) & set(parts[1])
    assert set(parts[0]) | set(parts[1]) <= rest and len(rest) - 2 * len(parts[0]) < 2


def reading(build):
    """An iterator over `build` read by 2 reader processes, its first batch taken, and their pids."""
    ds = ShardedDataset(build, rank=0, world_size=1, window=1, batch_size=2, batched=True, reader_processes=2,
                        lanes=2)
    it = iter(ds)
    next(it)
    return it, readers_of_this_process()


def test_reader_processes_do_not_load_torch(big):
    it, pids = reading(big)
    assert len(pids) == 2
    for pid in pids:
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "libarrow" in maps               # a reader really reads with pyarrow
        assert "libtorch" not in maps and "/torch/" not in maps
    rest = list(it)
    assert len(rest) > 100
    wait_until(lambda: not readers_of_this_process(), "reader processes still running after the pass")


def test_a_damaged_shard_stops_the_training_process_with_the_readers_error(tmp_path):
    m = make_build(tmp_path, [40, 40], row_group_rows=8)
    damage(m.path_of(m.shards[1]))
    ds = ShardedDataset(tmp_path, rank=0, world_size=1, shuffle=False, verify=True, window=1, batch_size=4,
                        batched=True, reader_processes=1)
    got = []
    with pytest.raises(ManifestError, match="checksum mismatch for shard 1") as err:
        for batch in ds:
            got += batch["id"].tolist()
    assert sorted(got) == list(range(40))       # every row before the damage, no gap
    assert isinstance(err.value.__cause__, RemoteTraceback) and "reader process 0" in str(err.value.__cause__)
    wait_until(lambda: not readers_of_this_process(), "reader process left running after its error")


def test_a_killed_reader_is_an_error_naming_it(big):
    it, pids = reading(big)
    os.kill(max(pids), signal.SIGKILL)
    with pytest.raises(LoaderError, match=r"reader process \d \(pid \d+\) exited with code -9"):
        for _ in it:
            pass
    wait_until(lambda: not readers_of_this_process(), "the other reader left running")


def test_stopping_early_ends_the_readers(big):
    ds = ShardedDataset(big, rank=0, world_size=1, window=1, batch_size=2, batched=True, reader_processes=2,
                        lanes=2)
    for i, _ in enumerate(ds):
        if i == 2:
            break
    wait_until(lambda: not readers_of_this_process(), "reader processes left running after a break")


def test_bad_settings_are_named(build):
    from torch.utils.data import DataLoader

    with pytest.raises(LoaderError, match="reader_processes must be >= 0"):
        ShardedDataset(build, reader_processes=-1)
    ds = ShardedDataset(build, rank=0, world_size=1, batch_size=4, batched=True, reader_processes=2, lanes=2)
    with pytest.raises(LoaderError, match="use it with num_workers=0"):
        list(DataLoader(ds, batch_size=None, num_workers=2))
    with pytest.warns(UserWarning, match="readers share lanes"):
        list(ShardedDataset(build, rank=0, world_size=1, batch_size=4, batched=True, reader_processes=2))
    worker_state = {**ds.state_dict(), "worker": {"id": 0, "num_workers": 2, "chunk": 4, "yielded": 4}}
    ds.load_state_dict(worker_state)
    with pytest.raises(StateError, match="one DataLoader worker's state"):
        list(ds)


def test_a_stateful_loader_checkpoint_resumes_reader_processes_exactly(build):
    """torchdata's StatefulDataLoader with num_workers=0 asks the dataset for its state in the
    training process; with reader processes that state must still be exact."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    kw = dict(rank=0, world_size=1, seed=6, window=2, lanes=2, batch_size=4, batched=True, reader_processes=2)
    whole = ids(ShardedDataset(build, **{**kw, "reader_processes": 0}))
    loader = StatefulDataLoader(ShardedDataset(build, **kw), batch_size=None, num_workers=0)
    head = []
    for j, batch in enumerate(loader):
        head += batch["id"].tolist()
        if j == 4:
            break
    saved = loader.state_dict()
    again = StatefulDataLoader(ShardedDataset(build, **kw), batch_size=None, num_workers=0)
    again.load_state_dict(saved)
    assert len(head) == 20 and head + ids(again) == whole


def test_a_reader_that_cannot_start_is_an_error_naming_it(build, tmp_path, monkeypatch):
    """An interpreter that exits at once (here a stand-in for a Python that cannot import the
    package): a LoaderError with its exit code, whether it died before or after taking its job."""
    import sys

    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    ds = ShardedDataset(build, rank=0, world_size=1, batch_size=4, batched=True, reader_processes=1)
    monkeypatch.setattr(sys, "executable", str(broken))
    with pytest.raises(LoaderError, match=r"reader process 0 \(pid \d+\) exited with code 3"):
        list(ds)


def test_a_frame_is_written_whole_even_when_the_pipe_takes_part_of_a_write():
    """A raw write to a pipe may take fewer bytes than it was given (a signal in the middle):
    the reader must go on writing the rest, or the training process reads a torn frame."""
    from shardforge.loaders.procread import _send

    class Trickle:      # takes at most 5 bytes a write, as a pipe interrupted mid-write can
        def __init__(self):
            self.got = bytearray()

        def write(self, view) -> int:
            part = bytes(view[:5])
            self.got += part
            return len(part)

    out = Trickle()
    arr = np.arange(12, dtype=np.int32).reshape(3, 4)
    _send(out, b"head", arr, memoryview(b"tail"))
    assert bytes(out.got) == b"head" + arr.tobytes() + b"tail"
