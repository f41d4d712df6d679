"""The loader benchmark's readers, one measurement per process (`python bench/loader_readers.py
KIND JSON-ARGS` prints one JSON line): only the reading loop is timed; CPU seconds include
the DataLoader workers. Memory is polled from /proc every 0.1 s: peak RSS (VmHWM) of the
process and of its largest worker, and peak anonymous + shared-memory RSS (RSS less the
pages of mapped files, such as torch's libraries).

Readers: `limit` (pyarrow `iter_batches` + the same tensor conversion), `limit_pylist`
(pyarrow + `to_pylist`, the per-sample limit), `floor` (a DataLoader whose workers yield
ready-made batches of the build's own rows, fresh tensors each time: what the DataLoader
itself costs to move such batches), `sharded` (ShardedDataset in batch or per-sample
mode, in the training process, in DataLoader workers, or fed by torch-free reader processes:
`readers`), `first_batch` (fresh epoch vs resume, alternated in one process), `baseline`
(the imports alone), `plain` (`ShardReader.iter_batches` in a process without torch) and
`plain_baseline` (its imports alone). HF datasets runs from `HF_SCRIPT` in its own venv: streaming,
`with_format("numpy")`, a DataLoader with a collate_fn that stacks the tokens (the fastest of
the ways tried: `with_format("torch")` and the default collate, or plain Python rows, were
slower).
"""
from __future__ import annotations

import json
import os
import sys
import textwrap
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Peaks:
    """Peak memory of this process and of its children (DataLoader workers), polled."""

    def __init__(self, every: float = 0.1):
        self.me = os.getpid()
        self.peak: dict[int, dict] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._t.start()

    def _poll(self) -> None:
        pids = [self.me]
        for task in os.listdir(f"/proc/{self.me}/task"):
            try:
                pids += [int(p) for p in open(f"/proc/{self.me}/task/{task}/children").read().split()]
            except OSError:
                pass
        for pid in pids:
            try:
                f = {line.split(":")[0]: int(line.split()[1]) for line in open(f"/proc/{pid}/status")
                     if line.startswith(("VmHWM", "RssAnon", "RssShmem"))}
            except (OSError, ValueError, IndexError):
                continue
            p = self.peak.setdefault(pid, {"hwm": 0, "anon": 0})
            p["hwm"] = max(p["hwm"], f.get("VmHWM", 0))
            p["anon"] = max(p["anon"], f.get("RssAnon", 0) + f.get("RssShmem", 0))

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self._poll()

    def result(self) -> dict:
        self._poll()
        self._stop.set()
        own = self.peak.get(self.me, {"hwm": 0, "anon": 0})
        kids = [v for k, v in self.peak.items() if k != self.me] or [{"hwm": 0, "anon": 0}]
        return {"rss_mb": own["hwm"] / 1024, "anon_mb": own["anon"] / 1024,
                "worker_rss_mb": max(k["hwm"] for k in kids) / 1024,
                "worker_anon_mb": max(k["anon"] for k in kids) / 1024}


def timed(fn) -> dict:
    t0, c0 = time.perf_counter(), cpu()
    n = fn()
    return {"samples": n, "seconds": time.perf_counter() - t0, "cpu_seconds": cpu() - c0}


def files_of(build: str) -> list[str]:
    from shardforge.shards.manifest import read_manifest

    m = read_manifest(build)
    return [m.path_of(s) for s in m.shards]


def limit(build, columns, batch, pylist=False, **_):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from shardforge.loaders.convert import table_to_batch

    def run():
        n = 0
        for f in files_of(build):
            for b in pq.ParquetFile(f).iter_batches(batch_size=batch, columns=columns):
                if pylist:
                    n += sum(1 for _row in b.to_pylist())
                else:
                    n += len(table_to_batch(pa.Table.from_batches([b]))["id"])
        return n

    return timed(run)


def floor(build, columns, batch, workers=2, **_):
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    from shardforge.loaders import no_collate
    from shardforge.loaders.convert import table_to_batch
    from shardforge.shards.manifest import read_manifest

    total = read_manifest(build).total_rows

    class ReadyBatches(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            k, w = (info.num_workers, info.id) if info else (1, 0)
            it = pq.ParquetFile(files_of(build)[4]).iter_batches(batch_size=batch, columns=columns)
            ready = [table_to_batch(pa.Table.from_batches([b])) for b in itertools.islice(it, 16)]
            for j in range(w, -(-total // batch), k):
                b = ready[j % len(ready)]
                yield {k2: v.clone() if hasattr(v, "clone") else v for k2, v in b.items()}

    def run():
        return sum(len(b["id"]) for b in DataLoader(ReadyBatches(), batch_size=None, num_workers=workers,
                                                     collate_fn=no_collate))

    return timed(run)


def sharded(build, columns, batch, mode="batch", workers=0, lanes=1, window_bytes=None, readers=0, **_):
    from torch.utils.data import DataLoader

    from shardforge.loaders import ShardedDataset, collate, no_collate

    kw = {} if window_bytes is None else {"window_bytes": window_bytes}
    ds = ShardedDataset(build, rank=0, world_size=1, seed=1, columns=columns, batch_size=batch,
                        batched=mode == "batch", lanes=lanes, reader_processes=readers, **kw)

    def run():
        if mode == "batch":
            loader = DataLoader(ds, batch_size=None, num_workers=workers, collate_fn=no_collate)
            return sum(len(b["id"]) for b in loader)
        if workers == 0:
            return sum(1 for _s in ds)
        loader = DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=collate)
        return sum(len(b["id"]) for b in loader)

    out = timed(run)
    if readers:     # each reader process's own VmHWM, read by itself as it ended
        out["reader_peak_mb"] = max(s["peak_rss"] for s in ds.reader_stats) / 2**20
    return out


def first_batch(build, columns, batch, rounds=5, readers=0, lanes=1, **_):
    """Fresh epoch vs load_state_dict at 1% and 90%, alternated, num_workers=0; also the
    row groups each decodes before its first batch (in this process: with `readers`, the
    reader processes decode, and the count is 0)."""
    import statistics

    from shardforge.loaders import ShardedDataset
    from shardforge.loaders.source import Source

    decoded = []
    orig = Source.read
    Source.read = lambda self, block, **k: (decoded.append(1), orig(self, block, **k))[1]
    kw = dict(rank=0, world_size=1, seed=1, columns=columns, batch_size=batch, batched=True,
              reader_processes=readers, lanes=lanes)
    total = ShardedDataset(build, **kw).total
    states = {f: ShardedDataset(build, **kw).state_dict(consumed=int(total * f) // batch * batch)
              for f in (0.01, 0.9)}

    def first(state):
        del decoded[:]
        t0 = time.perf_counter()
        ds = ShardedDataset(build, **kw)
        if state is not None:
            ds.load_state_dict(state)
        next(iter(ds))
        return time.perf_counter() - t0, len(decoded)

    first(None)                                    # one-time set-up (imports, caches)
    times = {"fresh": [], "resume_1": [], "resume_90": []}
    groups = {}
    for _ in range(rounds):
        for key, state in (("fresh", None), ("resume_1", states[0.01]), ("resume_90", states[0.9])):
            dt, g = first(state)
            times[key].append(dt)
            groups[key] = g
    return {"seconds": {k: statistics.median(v) for k, v in times.items()}, "runs": times,
            "row_groups": groups}


def _torch_free(out: dict) -> dict:
    if "torch" in sys.modules:
        raise RuntimeError("the torch-free reader imported torch")
    return out


def plain(build, columns, batch, **_):
    """`ShardReader.iter_batches` (the loader's torch-free core) in a process without torch: what
    reading costs a process apart from torch's own memory."""
    from shardforge.loaders.reader import ShardReader

    def run():
        reader = ShardReader(build, rank=0, world_size=1, seed=1, columns=columns)
        return sum(b.num_rows for b in reader.iter_batches(batch))

    return _torch_free(timed(run))


def plain_baseline(**_):
    import pyarrow.parquet  # noqa: F401

    from shardforge.loaders.reader import ShardReader  # noqa: F401

    return _torch_free({"samples": 0, "seconds": 1.0, "cpu_seconds": 0.0})


def baseline(**_):
    import pyarrow.parquet  # noqa: F401
    import torch  # noqa: F401
    from torch.utils.data import DataLoader  # noqa: F401

    from shardforge.loaders import ShardedDataset  # noqa: F401

    return {"samples": 0, "seconds": 1.0, "cpu_seconds": 0.0}


HF_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, __HERE__)
    from loader_readers import Peaks
    peaks = Peaks()
    from datasets import load_dataset
    from datasets.distributed import split_dataset_by_node
    from torch.utils.data import DataLoader
    import numpy as np, torch
    args = json.loads(sys.argv[1])
    ds = load_dataset("parquet", data_files=args["files"], split="train", streaming=True)
    ds = split_dataset_by_node(ds, rank=0, world_size=1).select_columns(args["columns"]).with_format("numpy")
    def collate(samples):  # numpy format + stacking: HF's fastest of the ways tried (torch format: 0.6x)
        out = {"id": torch.from_numpy(np.array([s["id"] for s in samples])),
               "tokens": torch.from_numpy(np.stack([s["tokens"] for s in samples]))}
        if "text" in samples[0]:
            out["text"] = [str(s["text"]) for s in samples]
        return out
    def cpu():
        t = os.times(); return t.user + t.system + t.children_user + t.children_system
    t0, c0 = time.perf_counter(), cpu()
    n = sum(len(b["id"]) for b in DataLoader(ds, batch_size=args["batch"], num_workers=args["workers"],
                                              collate_fn=collate))
    print(json.dumps(dict(samples=n, seconds=time.perf_counter() - t0, cpu_seconds=cpu() - c0,
                          **peaks.result())))
""").replace("__HERE__", repr(HERE))

KINDS = {"limit": limit, "floor": floor, "sharded": sharded, "first_batch": first_batch, "baseline": baseline,
         "plain": plain, "plain_baseline": plain_baseline}

if __name__ == "__main__":
    kind, args = sys.argv[1], json.loads(sys.argv[2])
    peaks = Peaks()
    out = KINDS[kind](**args)
    out.update(peaks.result())
    print(json.dumps(out))
