"""Who reads what: pure functions from (plan, world size, policy, workers) to positions.

A *plan* is the part of an epoch a run still has to read: a list of [start, stop)
intervals of epoch positions, in order (at the start of an epoch `[[0, total]]`).
Ranks take contiguous, equal-sized slices of the plan laid end to end, so each
rank decodes only its own stretch of row groups:

* `drop`: every rank takes `len // W` samples; the last `len % W` are skipped.
* `pad`: every rank takes `ceil(len / W)`; the missing `< W` slots repeat the plan
  from its start (as `DistributedSampler` pads), and appear in the rank's part as
  explicit intervals, so a saved state describes them exactly.

Inside a rank, the part is read as a *pass*: a sequence of batches of `chunk`
samples drawn from `lanes` lanes, contiguous stretches of the part, in turn
(batch j comes from lane j mod L, and is that lane's (j // L)-th batch). With one
lane the pass is the part in order. A lane reads its own stretch of the epoch
order, so each lane decodes only its own row groups. The layout depends on
(part length, chunk, lanes) only; the one short batch (the part's last samples)
is always the pass's last batch.

DataLoader worker w of K reads the pass's remaining batches numbered w, w+K,
w+2K, ...: the order in which a DataLoader collects its workers' batches, so a
rank yields the same sequence whatever K is, and "this rank consumed n samples"
is a prefix of its pass. When K divides L, worker w reads only lanes w, w+K, ...,
so no two workers decode the same row groups.

Nothing here touches files or torch; every function is O(len(plan) + W + L).
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


def remaining(plan: Plan, world_size: int, policy: str, consumed: int, *, chunk: int = 1,
              lanes: int = 1) -> Plan:
    """The new plan once every rank has consumed `consumed` samples of its pass (of
    `chunk`-sample batches from `lanes` lanes): the ranks' unread positions laid end
    to end (rank 0's first, each rank's in part order). With one lane that is each
    rank's tail. Pad slots still unread stay in it, dropped positions do not."""
    q = per_rank(length(plan), world_size, policy)
    if not 0 <= consumed <= q:
        raise ValueError(f"consumed={consumed} is outside 0..{q} (samples per rank of this plan)")
    unread = Pass(q, chunk, lanes).unread(consumed) if lanes > 1 else [[consumed, q]]
    out: Plan = []
    for r in range(world_size):
        for a, b in unread:
            out += slice_plan(plan, r * q + a, r * q + b)
    return normalise(out)


class Pass:
    """The batches of a rank's part of n samples: `chunk` samples each (the last one
    may be shorter), drawn from `lanes` contiguous lanes in turn."""

    def __init__(self, n: int, chunk: int, lanes: int = 1):
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, got {lanes}")
        self.n, self.chunk, self.lanes = int(n), int(chunk), int(lanes)
        self.num_batches = -(-self.n // self.chunk)
        nb, lanes = self.num_batches, self.lanes
        self.lane_batches = [nb // lanes + (1 if lane < nb % lanes else 0) for lane in range(lanes)]
        # lanes sit in the part in the order r, r+1, ..., L-1, 0, ..., r-1 (r = nb mod L), so
        # the lane holding the short last batch of the part also yields the pass's last batch
        first = [0] * lanes
        at = 0
        for i in range(lanes):
            lane = (nb % lanes + i) % lanes
            first[lane] = at
            at += self.lane_batches[lane]
        self.lane_first = first

    def lane_of(self, j: int) -> int:
        return j % self.lanes

    def batch(self, j: int) -> tuple[int, int]:
        """[start, stop) offsets in the part of the pass's batch j."""
        start = (self.lane_first[j % self.lanes] + j // self.lanes) * self.chunk
        return start, min(start + self.chunk, self.n)

    def lane_span(self, lane: int) -> tuple[int, int]:
        start = self.lane_first[lane] * self.chunk
        return start, min(start + self.lane_batches[lane] * self.chunk, self.n)

    def pieces(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        """Samples [start, stop) of the pass sequence as (lane, part start, part stop)
        pieces, in order. Every batch but the last is full, so position p of the
        sequence is sample p % chunk of batch p // chunk."""
        out = []
        p = start
        while p < stop:
            j, k = divmod(p, self.chunk)
            a, b = self.batch(j)
            take = min(b - a - k, stop - p)
            out.append((self.lane_of(j), a + k, a + k + take))
            p += take
        return out

    def unread(self, consumed: int) -> Plan:
        """Offsets of the part not among the first `consumed` samples of the pass, in
        part order (what an elastic restart hands to the new ranks)."""
        if not 0 <= consumed <= self.n:
            raise ValueError(f"consumed={consumed} is outside 0..{self.n}")
        m, k = divmod(consumed, self.chunk)
        out = []
        for lane in range(self.lanes):
            a, b = self.lane_span(lane)
            done = (m - lane + self.lanes - 1) // self.lanes if m > lane else 0   # j < m with j % L == lane
            start = min(b, a + done * self.chunk + (k if m < self.num_batches and m % self.lanes == lane else 0))
            out.append([start, b])
        return normalise(sorted(out))


def worker_chunks(n: int, chunk: int, worker: int, num_workers: int) -> Iterator[tuple[int, int]]:
    """[start, stop) offsets, in a sequence of n samples, of the chunks worker `worker`
    of `num_workers` reads: chunks worker, worker+K, ... of `chunk` samples."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    k = max(1, num_workers)
    if not 0 <= worker < k:
        raise ValueError(f"worker {worker} is not in 0..{k - 1}")
    for start in range(worker * chunk, n, k * chunk):
        yield start, min(start + chunk, n)


def worker_pieces(layout: Pass, worker: int, num_workers: int, *,
                  start: int = 0) -> Iterator[list[tuple[int, int, int]]]:
    """What worker `worker` of `num_workers` reads of a pass, once its first `start`
    samples are consumed: chunks worker, worker+K, ... of `chunk` samples of the rest,
    each as (lane, part start, part stop) pieces (one piece when `start` is a
    multiple of `chunk`, that is, at every batch boundary)."""
    for a, b in worker_chunks(layout.n - start, layout.chunk, worker, num_workers):
        yield layout.pieces(start + a, start + b)


def positions(plan: Plan) -> list[int]:
    """Every position of a plan, in order (for tests and small tools; O(len))."""
    return [p for s, e in plan for p in range(s, e)]
