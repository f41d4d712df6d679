"""The embedded session's JIT (`[spark] jit`): the FineWeb recipe's first two stages and the
run's table writes with Java's default compiler tiers ("full") and with the first tier only
("quick"), alternated, each a fresh `shardforge pipeline` process on the same input.

    SHARDFORGE_JARS=.jars .venv/bin/python bench/jit.py --docs 20000 --rounds 3

Input: bench/recipe.py's split of `.bench/corpus-<docs>.jsonl` (made by a run of that script).
Times: the run's wall time (process start to exit) and the stage and step times its log gives.
Prints one JSON object and writes bench/results/jit-<docs>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DONE = re.compile(r"(?:stage|step) ([a-z-]+): done in ([0-9.]+) s")


def one(inp: Path, out: Path, jit: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--conf", str(ROOT / "conf/recipes/fineweb.toml"),
           "--input", str(inp), "--output", str(out), "--set", 'pipeline.stages=["ingest","clean"]',
           "--set", 'spark.master="local[2]"', "--set", f'spark.jit="{jit}"',
           "--set", 'spark.properties={"spark.ui.enabled" = "false"}']
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    for k in ("SPARK_SUBMIT_OPTS", "PYSPARK_GATEWAY_PORT"):
        env.pop(k, None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"jit={jit}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return {"wall_s": round(wall, 1), **{k: float(v) for k, v in DONE.findall(proc.stderr)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sf-jit"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    inp = ROOT / ".bench" / f"recipe-input-{args.docs}"
    if not inp.with_suffix(".done").exists():
        raise SystemExit(f"{inp} is missing: run bench/recipe.py --docs {args.docs} once first")
    runs: dict[str, list[dict]] = {"full": [], "quick": []}
    ratios = []
    for _ in range(args.rounds):
        for jit in ("full", "quick"):
            runs[jit].append(one(inp, args.work / "out", jit))
        ratios.append(runs["full"][-1]["wall_s"] / runs["quick"][-1]["wall_s"])
    keys = [k for k in runs["full"][0] if all(k in r for r in runs["full"] + runs["quick"])]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result = {
        "command": f"python bench/jit.py --docs {args.docs} --rounds {args.rounds}",
        "commit": commit, "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
        "megabytes": round(sum(p.stat().st_size for p in inp.glob("*.jsonl")) / 1e6, 1),
        "median_s": {jit: {k: statistics.median(r[k] for r in rs) for k in keys} for jit, rs in runs.items()},
        "full_over_quick_wall": [round(x, 3) for x in ratios],
        "median_full_over_quick_wall": round(statistics.median(ratios), 3),
        "runs": runs,
    }
    out = args.out or ROOT / "bench" / "results" / f"jit-{args.docs}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
