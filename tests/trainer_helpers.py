"""Shared helpers for the trainer-integration tests: launch W local processes with the
environment `torchrun` / `accelerate launch` set (127.0.0.1, a free port, gloo on lo), read a
build's ids and row groups independently of the loader (pyarrow over the manifest's files), and
check one epoch's trained ids against the documented rank split and drop/pad policy.
(The test modules register this module for pytest's assertion rewriting.)"""
from __future__ import annotations

import json
from collections import Counter
import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script: str, args: list[str], *, world: int = 2, timeout: float = 120,
           wait_for: int | None = None) -> list[int]:
    """Run `script args` as ranks 0..world-1; return their exit codes. With `wait_for`, wait for
    that rank only and kill the others (a rank that refused to start leaves the rest waiting)."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world),
               LOCAL_WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
               PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, str(HERE / script), *args],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    codes = [None] * world
    try:
        order = [wait_for] if wait_for is not None else range(world)
        for r in order:
            _, err = procs[r].communicate(timeout=timeout)
            codes[r] = procs[r].returncode
            if wait_for is None:
                assert codes[r] == 0, err[-4000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return codes


def build_ids(build) -> list[int]:
    """Every id of a build, read from its shard files with pyarrow (not through the loader)."""
    manifest = json.loads((Path(build) / "manifest.json").read_text())
    files = [s["file"] for s in manifest["shards"]]
    return [i for f in files for i in pq.read_table(Path(build) / f, columns=["id"])["id"].to_pylist()]


def results(paths) -> list[dict]:
    return [json.loads(Path(p).read_text()) for p in paths]


def group_ids(build) -> dict[tuple[int, int], list[int]]:
    """{(shard index in the manifest, row group): the ids it holds}, read with pyarrow."""
    manifest = json.loads((Path(build) / "manifest.json").read_text())
    out = {}
    for k, shard in enumerate(manifest["shards"]):
        pf = pq.ParquetFile(Path(build) / shard["file"])
        for g in range(pf.num_row_groups):
            out[(k, g)] = pf.read_row_group(g, columns=["id"])["id"].to_pylist()
    return out


def check_epoch(trained: list[list[int]], ids: list[int], *, policy: str, batch: int, completed: bool,
                ordered: bool, workers: int = 0, resumed_at: int = 0) -> list[list[int]]:
    """Check one epoch's ids per rank (`trained[r]`, in training order) against what
    loaders/README.md promises, from the build's `ids` alone; return each rank's part.

    * rank r of W reads q samples: q = N // W under "drop", ceil(N / W) under "pad";
    * `completed` (Accelerate's IterableDatasetShard, drop_last=False): a rank's last short batch
      is completed to `batch` samples with the first samples its reading process took in this pass
      (the pass began `resumed_at` samples into the part; with `workers` DataLoader workers, the
      process is the worker that reads the pass's last batch: its first batch is the pass's
      batch number (last batch's number mod workers));
    * "drop": no id twice, N % W ids unread; "pad": every id, and the W*q - N extra slots repeat
      the first samples of the epoch, which rank 0 reads first;
    * `ordered` (lanes=1): the parts laid end to end are the padded epoch order, so the pad
      slots at the end of the last rank's part are the first ids of rank 0's part.
    """
    world, n = len(trained), len(ids)
    q = n // world if policy == "drop" else -(-n // world)
    fill = (-q) % batch if completed else 0
    last = -(-(q - resumed_at) // batch) - 1                  # the pass's last batch
    first = resumed_at + (last % workers if workers else 0) * batch
    assert [len(t) for t in trained] == [q + fill] * world
    assert [t[q:] for t in trained] == [t[first:first + fill] for t in trained]
    parts = [t[:q] for t in trained]
    flat = [i for p in parts for i in p]
    counts = Counter(flat)
    assert set(flat) <= set(ids)
    if policy == "drop":
        assert max(counts.values()) == 1
        assert len(set(ids) - set(flat)) == n % world
    else:
        assert set(flat) == set(ids)
        extra = sorted(i for i, c in counts.items() for _ in range(c - 1))
        assert len(extra) == world * q - n
        assert set(extra) <= set(parts[0][:world * q - n] if ordered else parts[0])
        if ordered:
            assert flat[n:] == flat[:world * q - n]
    return parts
