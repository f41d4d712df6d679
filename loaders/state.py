"""The loader's saved position: a small JSON dict, its fields, checks and edits.

Fields (all plain JSON; see loaders/README.md):
  format, version  "shardforge.loader.state", 2 (version 1 states load, read as
                   window_bytes null, lanes 1)
  build            fingerprint of the shard build (16 hex chars over the shards' sha256)
  total            samples per epoch in that build
  seed, shuffle, window, window_bytes, lanes   the order settings (they must match on load)
  epoch            the epoch the position is in
  plan             [[start, stop], ...] epoch positions this pass reads, in order
  world_size, policy      how the plan is split over ranks ("drop" or "pad")
  chunk            the pass's batch size (with lanes > 1 it decides which lane
                   each batch comes from)
  consumed         samples EACH rank has consumed of its pass
  worker           (only in states taken inside a DataLoader worker, as
                   torchdata's StatefulDataLoader does) {"id", "num_workers",
                   "chunk", "yielded"}: that worker's own progress.

Ranks move in lockstep, so any rank's state describes the whole job: the part
still to read is `rest(state)`.
"""
from __future__ import annotations

import json
from typing import Any

from . import assignment
from .source import LoaderError

FORMAT = "shardforge.loader.state"
VERSION = 2
_REQUIRED = ("build", "total", "seed", "shuffle", "window", "epoch", "plan", "world_size", "policy",
             "consumed")
_V1_DEFAULTS = {"window_bytes": None, "lanes": 1, "chunk": 1}   # what a version 1 state meant


class StateError(LoaderError):
    """A saved loader state that does not fit this dataset (with the field that differs)."""


def _int_or_none(v):
    return None if v is None else int(v)


def make(*, build: str, total: int, seed: int, shuffle: bool, window: int | None,
         window_bytes: int | None, lanes: int, epoch: int, plan, world_size: int, policy: str,
         chunk: int, consumed: int, worker: dict | None = None) -> dict[str, Any]:
    state = {"format": FORMAT, "version": VERSION, "build": build, "total": int(total),
             "seed": int(seed), "shuffle": bool(shuffle), "window": _int_or_none(window),
             "window_bytes": _int_or_none(window_bytes), "lanes": int(lanes), "epoch": int(epoch),
             "plan": [list(map(int, iv)) for iv in plan], "world_size": int(world_size),
             "policy": policy, "chunk": int(chunk), "consumed": int(consumed)}
    if worker is not None:
        state["worker"] = {k: int(worker[k]) for k in ("id", "num_workers", "chunk", "yielded")}
    return state


def check(state: Any, *, build: str, total: int, seed: int, shuffle: bool, window: int | None,
          window_bytes: int | None, lanes: int) -> dict:
    """Validate a state for a dataset with these settings; returns a normalised copy.
    Raises StateError naming the first field that is missing, malformed or different."""
    if isinstance(state, (str, bytes)):
        state = json.loads(state)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise StateError(f"not a shardforge loader state (expected \"format\": \"{FORMAT}\")")
    if state.get("version") == 1:
        state = {**_V1_DEFAULTS, **state}
    elif state.get("version") != VERSION:
        raise StateError(f"loader state version {state.get('version')!r} is not {VERSION}")
    missing = [k for k in _REQUIRED + tuple(_V1_DEFAULTS) if k not in state]
    if missing:
        raise StateError(f"loader state lacks field(s) {missing}")
    if state["build"] != build:
        raise StateError(f"loader state is from another shard build: state build {state['build']!r}, "
                         f"this dataset's build {build!r} (the shards changed since it was saved)")
    if int(state["total"]) != total:
        raise StateError(f"loader state total {state['total']} != this build's {total} samples")
    for name, mine in (("seed", seed), ("shuffle", shuffle), ("window", window),
                       ("window_bytes", window_bytes), ("lanes", lanes)):
        if state[name] != mine:
            raise StateError(f"loader state has {name}={state[name]!r} but this dataset has "
                             f"{name}={mine!r}; the epoch order would differ")
    try:
        plan = assignment.normalise(state["plan"])
    except (TypeError, ValueError) as exc:
        raise StateError(f"loader state plan: {exc}") from None
    if any(e > total for _, e in plan):
        raise StateError(f"loader state plan reaches past the epoch's {total} samples")
    out = make(build=build, total=total, seed=seed, shuffle=shuffle, window=window,
               window_bytes=window_bytes, lanes=lanes, epoch=state["epoch"], plan=plan,
               world_size=state["world_size"], policy=state["policy"], chunk=state["chunk"],
               consumed=state["consumed"], worker=state.get("worker"))
    if out["chunk"] < 1:
        raise StateError(f"loader state chunk={out['chunk']} is not >= 1")
    try:
        q = assignment.per_rank(assignment.length(plan), out["world_size"], out["policy"])
    except ValueError as exc:
        raise StateError(f"loader state: {exc}") from None
    if not 0 <= out["consumed"] <= q:
        raise StateError(f"loader state consumed={out['consumed']} is outside 0..{q} "
                         f"(samples per rank of its plan)")
    return out


def rest(state: dict) -> list[list[int]]:
    """The positions of the state's epoch that the job has not read yet, in order."""
    return assignment.remaining(state["plan"], state["world_size"], state["policy"], state["consumed"],
                                chunk=state.get("chunk", 1), lanes=state.get("lanes", 1))


def skip(state: dict, samples_per_rank: int) -> dict:
    """A copy of `state` that skips the next `samples_per_rank` samples on every rank
    (for example the batches around a loss spike: steps x batch size)."""
    out = dict(state)
    q = assignment.per_rank(assignment.length(state["plan"]), state["world_size"], state["policy"])
    out["consumed"] = min(q, int(state["consumed"]) + int(samples_per_rank))
    out.pop("worker", None)
    return out


def from_stateful_loader(loader_state: dict) -> dict:
    """The job-level state inside a torchdata StatefulDataLoader state_dict (taken
    with num_workers 0 or more): its workers' progress summed into `consumed`.
    Use it to restart elastically (new world size or worker count) from a
    StatefulDataLoader checkpoint."""
    found = []

    def walk(obj):
        if isinstance(obj, dict):
            if obj.get("format") == FORMAT:
                found.append(obj)
                return
            for v in obj.values():
                walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)

    walk(loader_state)
    if not found:
        raise StateError("no shardforge loader state inside this StatefulDataLoader state")
    base = {k: v for k, v in found[0].items() if k != "worker"}
    workers = [s for s in found if "worker" in s]
    if not workers:
        return base
    extra = sum(s["worker"]["yielded"] for s in {s["worker"]["id"]: s for s in workers}.values())
    base["consumed"] = int(base["consumed"]) + extra
    return base
