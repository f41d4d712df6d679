"""What every run pays regardless of its size, before and after this project's cuts, alternated
in one run, each measurement a fresh process:

- session: `get_spark` of an embedded local[2] session, then its first JVM job (a 1,000-row
  aggregate), its first Python job (mapInArrow) and one Delta commit of 10 rows (write, then
  read back), an append and a merge by key (as the curated and raw tables take their rows): with the class-data archive (shardforge/engine/cds.py; `make setup` builds it)
  and without (`SHARDFORGE_CDS=0`);
- delta: the same commit with `spark.databricks.delta.snapshotPartitions` at Delta's 50 and at
  the session's default (one per core);
- kernel: the quality kernel's construction in a fresh Python process, from the cached tables
  and from spaCy (the cache folder emptied first).

    .venv/bin/python bench/fixed_costs.py --rounds 3

Prints one JSON object and writes bench/results/fixed_costs.json (medians per variant).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SESSION = r"""
import json, sys, tempfile, time
t0 = time.perf_counter()
from shardforge.config import SparkSection
from shardforge.engine.session import get_spark
props = {"spark.ui.enabled": "false"}
if sys.argv[1]:
    props["spark.databricks.delta.snapshotPartitions"] = sys.argv[1]
spark = get_spark(SparkSection(master="local[2]", properties=props))
out = {"session_s": time.perf_counter() - t0}
t = time.perf_counter(); spark.range(1000).selectExpr("sum(id)").collect(); out["first_jvm_job_s"] = time.perf_counter() - t
def same(b):
    yield from b
t = time.perf_counter(); spark.range(0, 1000, 1, 2).mapInArrow(same, "id long").collect(); out["first_python_job_s"] = time.perf_counter() - t
path = tempfile.mkdtemp() + "/t"
t = time.perf_counter(); spark.range(10).write.format("delta").save(path); out["delta_commit_s"] = time.perf_counter() - t
t = time.perf_counter(); spark.range(10).write.format("delta").mode("append").save(path); out["delta_append_s"] = time.perf_counter() - t
from delta.tables import DeltaTable
new = spark.range(5, 20)
t = time.perf_counter()
DeltaTable.forPath(spark, path).alias("t").merge(new.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
out["delta_merge_s"] = time.perf_counter() - t
print(json.dumps({k: round(v, 3) for k, v in out.items()}))
"""

KERNEL = r"""
import json, time
t = time.perf_counter()
from shardforge.clean.quality.native import kernel
kernel()
print(json.dumps({"kernel_s": round(time.perf_counter() - t, 3)}))
"""


def _run(code: str, args: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"fixed_costs: a measurement failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "fixed_costs.json"))
    args = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", "PYSPARK_GATEWAY_PORT")}
    base.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    base["SPARK_LOCAL_IP"] = "127.0.0.1"
    from shardforge.engine.session import build_class_archive

    build_class_archive()
    variants = {
        "archive, snapshotPartitions=cores": (SESSION, [""], {}),
        "no archive, snapshotPartitions=cores": (SESSION, [""], {"SHARDFORGE_CDS": "0"}),
        "archive, snapshotPartitions=50": (SESSION, ["50"], {}),
    }
    got: dict[str, list[dict]] = {k: [] for k in [*variants, "kernel, cached tables", "kernel, from spaCy"]}
    for _ in range(args.rounds):
        for name, (code, a, extra) in variants.items():
            got[name].append(_run(code, a, {**base, **extra}))
        with tempfile.TemporaryDirectory() as cache:
            got["kernel, from spaCy"].append(_run(KERNEL, [], {**base, "SHARDFORGE_CACHE": cache}))
            got["kernel, cached tables"].append(_run(KERNEL, [], {**base, "SHARDFORGE_CACHE": cache}))
    med = {name: {k: round(statistics.median(r[k] for r in rows), 2) for k in rows[0]} for name, rows in got.items()}
    out = {"command": f"bench/fixed_costs.py --rounds {args.rounds}",
           "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
                      f"load {os.getloadavg()[0]:.1f} at the end",
           "medians": med, "rounds": got}
    print(json.dumps(out["medians"], indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
