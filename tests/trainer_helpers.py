"""Shared helpers for the trainer-integration tests: launch W local processes with the
environment `torchrun` / `accelerate launch` set (127.0.0.1, a free port, gloo on lo), and
read a build's ids independently of the loader (pyarrow over the manifest's files)."""
from __future__ import annotations

import json
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
