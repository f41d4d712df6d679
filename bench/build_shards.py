"""Shard-build throughput on local[2]: rows/s for 100k and 1M synthetic ~2 KB documents.

    .venv/bin/python bench/build_shards.py [--sizes 100000 1000000] [--out bench/results/build_shards.md]

For each size the input is generated once into Parquet (not timed). Then, in the
same session, the baseline `df.write.parquet` of the same rows (Spark's own writer,
no shard contract) and `build_shards` (hash partition, in-shard sort, pyarrow
writer, checksums, manifest) are timed. The ratio to the baseline is the figure to
compare across machines; the growth from 100k to 1M shows the scaling.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procmem import PeakRss  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "build_shards.md"))
    ap.add_argument("--target-bytes", type=int, default=128_000_000)
    args = ap.parse_args()

    from shardforge.config import ShardsSection, SparkSection
    from shardforge.engine.session import get_spark
    from shardforge.shards.build import build_shards

    spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=8, properties={
        "spark.ui.enabled": "false", "spark.driver.memory": "4g",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2000"}))
    work = tempfile.mkdtemp(prefix="sf-bench-shards-")
    rows = []
    try:
        for n in args.sizes:
            src = os.path.join(work, f"in-{n}")
            (spark.range(n).selectExpr(
                "concat('doc-', cast(id as string)) AS id",
                # ~2 KB of words that vary per row (so compression does not flatter the numbers)
                "concat_ws(' ', transform(sequence(1, 290), i -> substr(sha2(cast(id * 1000 + i as string), 256), 1, 6))) AS text",
                "'bench' AS source")
             .write.mode("overwrite").parquet(src))
            df = spark.read.parquet(src)
            t0 = time.perf_counter()
            df.write.mode("overwrite").parquet(os.path.join(work, f"plain-{n}"))
            base = time.perf_counter() - t0
            # Spark's own way to hash-partition and sort: same shuffle and sort, Spark's writer,
            # but no fixed bytes, no row-group-in-rows, no checksums, no manifest.
            from pyspark.sql import functions as F

            k = max(1, -(-n * 2000 // args.target_bytes))
            t0 = time.perf_counter()
            (df.withColumn("_shard", F.expr(f"pmod(xxhash64(id), {k})")).withColumn("_h", F.xxhash64("id"))
             .repartition(k, "_shard").sortWithinPartitions("_shard", "_h", "id")
             .drop("_shard", "_h").write.mode("overwrite").parquet(os.path.join(work, f"sorted-{n}")))
            native = time.perf_counter() - t0
            mon = PeakRss(spark.sparkContext._gateway.proc.pid)
            t0 = time.perf_counter()
            m = build_shards(df, os.path.join(work, f"shards-{n}"),
                             ShardsSection(target_bytes=args.target_bytes, row_group_rows=1024),
                             config={}, source={"bench": n})
            took = time.perf_counter() - t0
            mon.stop()
            workers_gb, jvm_gb = mon.peak_children_pss / 2**30, mon.peak_root / 2**30
            assert m["total_rows"] == n
            rows.append((n, m["num_shards"], base, native, took, workers_gb, jvm_gb))
            print(f"{n:>9} rows  {m['num_shards']:>3} shards  plain parquet {base:7.1f} s  "
                  f"repartition+sort+parquet {native:7.1f} s  build_shards {took:7.1f} s  "
                  f"({n / took:,.0f} rows/s, {took / native:.2f}x Spark's own); peak PSS of the "
                  f"Python workers {workers_gb:.2f} GB, JVM RSS {jvm_gb:.2f} GB", flush=True)
            for d in (f"plain-{n}", f"sorted-{n}", f"shards-{n}", f"in-{n}"):
                shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    lines = ["## Shard build (`bench/build_shards.py`)", "",
             f"Command: `.venv/bin/python bench/build_shards.py --sizes {' '.join(map(str, args.sizes))}`; "
             f"machine: {os.cpu_count()} cores, {platform.machine()}, Spark local[2]; "
             "documents of ~2 KB (290 random 6-char words).", "",
             "Baselines measured in the same run on the same rows: Spark's plain `df.write.parquet` "
             "(no shuffle: the floor) and Spark's own hash-partition + sort + write "
             "(`repartition(k, pmod(xxhash64(id), k)).sortWithinPartitions(...).write.parquet`: the same "
             "work without fixed bytes, row groups in rows, checksums or a manifest).", "",
             "Memory: peak PSS of the Python workers (all of them together) and peak RSS of the JVM "
             "while `build_shards` runs (`bench/procmem.py`, polled twice a second).", "",
             "| rows | shards | plain write (s) | Spark repartition+sort+write (s) | `build_shards` (s) "
             "| rows/s | time vs Spark's own | time vs plain | Python workers peak PSS | JVM peak RSS |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, k, base, native, took, workers_gb, jvm_gb in rows:
        lines.append(f"| {n:,} | {k} | {base:.1f} | {native:.1f} | {took:.1f} | {n / took:,.0f} "
                     f"| {took / native:.2f}x | {took / base:.2f}x | {workers_gb:.2f} GB | {jvm_gb:.2f} GB |")
    if len(rows) >= 2:
        (n0, _, b0, _, t0_, _, _), (n1, _, b1, _, t1, _, _) = rows[0], rows[-1]
        lines += ["", f"Growth from {n0:,} to {n1:,} rows ({n1 / n0:.0f}x): build time x{t1 / t0_:.2f}, "
                      f"plain write x{b1 / b0:.2f} (linear would be x{n1 / n0:.0f})."]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
