"""Every Spark job of a run, from its event log: when it started, how long it ran, the idle gap
before it (driver-side planning, Python, Delta's bookkeeping), its name and its stages' task
counts; then the totals. How the fixed costs of BENCHMARKS.md ("Fixed costs of a run") were
found: a 50-task job after each Delta commit, a dozen small jobs per dedup step.

    shardforge pipeline ... --set 'spark.properties={"spark.eventLog.enabled"="true",
        "spark.eventLog.dir"="/tmp/sf-events"}'
    .venv/bin/python bench/eventlog_jobs.py /tmp/sf-events/<application folder or file> [--min 0.4]
"""
from __future__ import annotations

import argparse
import io
import json
from pathlib import Path


def events(path: Path):
    files = sorted(path.glob("events_*")) if path.is_dir() else [path]
    for f in files:
        raw = open(f, "rb")
        if f.suffix == ".zstd":
            import zstandard

            raw = zstandard.ZstdDecompressor().stream_reader(raw)
        for line in io.TextIOWrapper(raw, encoding="utf-8"):
            yield json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--min", type=float, default=0.0, help="list only jobs at least this many seconds long")
    args = ap.parse_args()
    jobs: dict[int, dict] = {}
    t0 = None
    for e in events(args.log):
        kind = e["Event"]
        if kind == "SparkListenerApplicationStart":
            t0 = e["Timestamp"]
        elif kind == "SparkListenerJobStart":
            infos = e["Stage Infos"]
            jobs[e["Job ID"]] = {"start": e["Submission Time"], "name": infos[-1]["Stage Name"] if infos else "",
                                 "tasks": [s["Number of Tasks"] for s in infos]}
        elif kind == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
    prev = t0
    busy = idle = 0.0
    for j, v in sorted(jobs.items()):
        dur = (v.get("end", v["start"]) - v["start"]) / 1000
        gap = (v["start"] - prev) / 1000 if prev else 0.0
        busy, idle = busy + dur, idle + max(gap, 0.0)
        prev = max(prev or 0, v.get("end", v["start"]))
        if dur >= args.min:
            print(f"job {j:4d} at {(v['start'] - t0) / 1000:7.1f} s  {dur:6.2f} s  (gap {gap:5.2f})  "
                  f"{v['name'][:50]}  tasks={v['tasks']}")
    print(f"{len(jobs)} jobs: {busy:.1f} s running, {idle:.1f} s between jobs (the first gap is the session's start)")


if __name__ == "__main__":
    main()
