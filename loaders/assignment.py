"""Who reads what: pure functions from (plan, world size, policy, workers) to positions.

A *plan* is the part of an epoch a run still has to read: a list of [start, stop)
intervals of epoch positions, in order (at the start of an epoch `[[0, total]]`).
Ranks take contiguous, equal-sized slices of the plan laid end to end, so each
rank decodes only its own stretch of row groups:

* `drop`: every rank takes `len // W` samples; the last `len % W` are skipped.
* `pad`: every rank takes `ceil(len / W)`; the missing `< W` slots repeat the plan
  from its start (as `DistributedSampler` pads), and appear in the rank's part as
  explicit intervals, so a saved state describes them exactly.

Inside a rank, DataLoader worker w of K takes the rank's chunks of `chunk` samples
numbered w, w+K, w+2K, ...: that is the order in which a DataLoader hands out its
workers' batches, so the rank's output is its part in order whatever K is, and
"this rank consumed n samples" is a prefix of its part.

Nothing here touches files or torch; every function is O(len(plan) + W).
"""
from __future__ import annotations

from typing import Iterator

POLICIES = ("drop", "pad")
Plan = list[list[int]]


def normalise(plan) -> Plan:
    """Validated copy with empty intervals removed and touching ones merged."""
    out: Plan = []
    for iv in plan:
        if len(iv) != 2:
            raise ValueError(f"plan interval {iv!r} is not [start, stop]")
        s, e = int(iv[0]), int(iv[1])
        if s < 0 or e < s:
            raise ValueError(f"plan interval [{s}, {e}] is not 0 <= start <= stop")
        if e == s:
            continue
        if out and out[-1][1] == s:
            out[-1][1] = e
        else:
            out.append([s, e])
    return out


def length(plan: Plan) -> int:
    return sum(e - s for s, e in plan)


def slice_plan(plan: Plan, start: int, stop: int) -> Plan:
    """Positions [start, stop) of the plan laid end to end; indices past its end wrap
    around to its start (used for padding). Empty if the plan is empty."""
    n = length(plan)
    out: Plan = []
    if n == 0 or stop <= start:
        return out
    i = start
    while i < stop:
        base = (i // n) * n
        lo, hi = i - base, min(stop - base, n)
        off = 0
        for s, e in plan:
            size = e - s
            a, b = max(lo, off), min(hi, off + size)
            if a < b:
                out.append([s + a - off, s + b - off])
            off += size
            if off >= hi:
                break
        i = base + hi
    return normalise(out)


def per_rank(n: int, world_size: int, policy: str) -> int:
    """Samples each rank reads from a plan of n samples (the same for every rank)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if policy == "drop" or n == 0:
        return n // world_size
    return -(-n // world_size)


def rank_part(plan: Plan, rank: int, world_size: int, policy: str) -> Plan:
    """The intervals rank `rank` of `world_size` reads, in order."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    q = per_rank(length(plan), world_size, policy)
    return slice_plan(plan, rank * q, (rank + 1) * q)


def dropped(plan: Plan, world_size: int, policy: str) -> Plan:
    """Positions of the plan no rank reads (only under `drop`: fewer than world_size)."""
    n = length(plan)
    q = per_rank(n, world_size, policy)
    return slice_plan(plan, world_size * q, n) if policy == "drop" else []


def remaining(plan: Plan, world_size: int, policy: str, consumed: int) -> Plan:
    """The new plan once every rank has consumed `consumed` samples of its part:
    the ranks' unread tails laid end to end (rank 0's first). Pad slots still
    unread stay in it, dropped positions do not."""
    q = per_rank(length(plan), world_size, policy)
    if not 0 <= consumed <= q:
        raise ValueError(f"consumed={consumed} is outside 0..{q} (samples per rank of this plan)")
    out: Plan = []
    for r in range(world_size):
        out += slice_plan(plan, r * q + consumed, (r + 1) * q)
    return normalise(out)


def worker_chunks(n: int, chunk: int, worker: int, num_workers: int) -> Iterator[tuple[int, int]]:
    """[start, stop) offsets, inside a rank's part of n samples, that worker `worker`
    of `num_workers` reads: chunks worker, worker+K, ... of `chunk` samples."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    k = max(1, num_workers)
    if not 0 <= worker < k:
        raise ValueError(f"worker {worker} is not in 0..{k - 1}")
    for start in range(worker * chunk, n, k * chunk):
        yield start, min(start + chunk, n)


def positions(plan: Plan) -> list[int]:
    """Every position of a plan, in order (for tests and small tools; O(len))."""
    return [p for s, e in plan for p in range(s, e)]
