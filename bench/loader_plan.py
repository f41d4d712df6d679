"""The loader benchmark's plan: the readers a round measures, the baseline each is compared
with, and how rounds are summarised (bench/loader.py runs it, bench/loader_report.py prints it)."""
from __future__ import annotations

import statistics

# (key, label, child kind, child args); the order is the order of a round
READERS = [
    ("limit", "pyarrow `iter_batches` + same tensor conversion (the limit)", "limit", {}),
    ("floor", "DataLoader floor: 2 workers yielding ready-made batches", "floor", {"workers": 2}),
    ("batch_0", "ShardedDataset batch mode, num_workers=0", "sharded", {"mode": "batch", "workers": 0}),
    ("batch_2", "ShardedDataset batch mode, num_workers=2, lanes=2", "sharded",
     {"mode": "batch", "workers": 2, "lanes": 2}),
    ("batch_2_l1", "ShardedDataset batch mode, num_workers=2, lanes=1 (default)", "sharded",
     {"mode": "batch", "workers": 2, "lanes": 1}),
    ("batch_p2", "ShardedDataset batch mode, reader_processes=2, lanes=2 (torch-free readers)", "sharded",
     {"mode": "batch", "workers": 0, "lanes": 2, "readers": 2}),
    ("hf_0", "HF datasets streaming, num_workers=0", "hf", {"workers": 0}),
    ("hf_2", "HF datasets streaming, num_workers=2", "hf", {"workers": 2}),
    ("limit_pylist", "pyarrow `iter_batches` + `to_pylist` (the per-sample limit)", "limit", {"pylist": True}),
    ("sample_0", "ShardedDataset per-sample, num_workers=0", "sharded", {"mode": "sample", "workers": 0}),
    ("sample_2", "ShardedDataset per-sample, num_workers=2, lanes=2", "sharded",
     {"mode": "sample", "workers": 2, "lanes": 2}),
]
BASE = {"limit": "limit", "floor": "floor", "batch_0": "limit", "batch_2": "floor", "batch_2_l1": "floor", "batch_p2": "floor",
        "hf_0": "limit", "hf_2": "floor", "limit_pylist": "limit_pylist", "sample_0": "limit_pylist",
        "sample_2": "limit_pylist"}


def med(values):
    return statistics.median(values) if values else float("nan")


def summary(R: dict) -> dict:
    """Per reader: median rate, CPU rate, RSS over the rounds, and the median of its
    per-round ratio to its baseline."""
    out = {}
    for key in R["rounds"][0]:
        runs = [rnd[key] for rnd in R["rounds"]]
        base = BASE[key]
        out[key] = {"rate": med([r["rate"] for r in runs]), "cpu_rate": med([r["cpu_rate"] for r in runs]),
                    "rss_mb": max(r["rss_mb"] for r in runs), "worker_rss_mb": max(r["worker_rss_mb"] for r in runs),
                    "reader_peak_mb": max(r.get("reader_peak_mb", 0) for r in runs),
                    "ratios": [rnd[key]["rate"] / rnd[base]["rate"] for rnd in R["rounds"] if base in rnd],
                    "base": base}
        out[key]["ratio"] = med(out[key]["ratios"])
        if "hf_2" in R["rounds"][0]:
            out[key]["vs_hf_2"] = med([rnd[key]["rate"] / rnd["hf_2"]["rate"] for rnd in R["rounds"]])
    return out
