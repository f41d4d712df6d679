"""The loader under a real torch.distributed job: gloo on CPU, 2 and 3 processes started
here, deliberately uneven shards, a tiny DDP model. Every rank takes the same number of
steps (no hang), ranks read disjoint rows, and every rank's state_dict is the same."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from loader_helpers import make_build
from shardforge.loaders import assignment as A

SIZES = [50, 0, 3, 17, 1, 90, 0, 7]
TOTAL = sum(SIZES)
HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("world,policy,workers", [(2, "drop", "1"), (3, "pad", "0"), (2, "pad", "r2")])
def test_ddp_ranks_step_together_on_uneven_shards(tmp_path, world, policy, workers):
    """workers: the DataLoader's num_workers, or "r2": 2 torch-free reader processes per rank."""
    build = tmp_path / "build"
    make_build(build, SIZES, row_group_rows=8)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world),
               GLOO_SOCKET_IFNAME="lo", PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, str(HERE / "loader_ddp_worker.py"), str(build), policy,
                               str(tmp_path / f"rank{r}.json"), workers], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    q = A.per_rank(TOTAL, world, policy)
    assert {r["steps"] for r in results} == {-(-q // 4)}
    assert {len(r["ids"]) for r in results} == {q}
    assert len({r["weight"] for r in results}) == 1                   # DDP kept the replicas equal
    seen = [i for r in results for i in r["ids"]]
    if policy == "drop":
        assert len(seen) == len(set(seen)) == world * (TOTAL // world)  # disjoint
    else:
        assert len(set(seen)) == TOTAL                                  # all rows, pads repeat < W
        assert len(seen) - TOTAL < world
        for a in range(world):                                          # real rows disjoint by rank
            for b in range(a + 1, world):
                pads = len(seen) - TOTAL
                assert len(set(results[a]["ids"]) & set(results[b]["ids"])) <= pads
    states = [s for r in results for s in r["states"]]
    assert all(s == states[0] for s in states)                        # any rank's state is the job's
    assert states[0]["consumed"] == q and A.length(A.remaining(
        states[0]["plan"], world, policy, states[0]["consumed"])) == 0
