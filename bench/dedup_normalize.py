"""dedup's `lower_alnum` normalisation: the compiled kernel against Spark SQL's regular
expression, in Spark and in one process.

    .venv/bin/python bench/dedup_normalize.py [--docs 20000] [--rounds 3]

In one embedded local[2] session, on the corpus's texts written once as Parquet, each variant
computes the exact key of every text (sha256 of the normalised text, as `_prep` does) and
keeps the largest (one row to the driver); variants alternate within a round:
- `read + sha256 (floor)`: sha2 of the text itself, no normalisation;
- `spark sql`: sha2(`normalize_expr`): lower, then regexp_replace of `[^\\p{L}\\p{N}]+` (how every
  normalisation ran before 2026-12-03);
- `kernel`: sha2(`norm_column`): the compiled kernel in an Arrow UDF (how it runs now).
Counts the rows on which the two differ (characters newer than the JVM's Unicode: the kernel
follows the Python reference). Then, in this process, `normalize_arrow` on all texts (after one
warm-up call that builds the kernel; median of 3) against the Python reference `normalize` on the first
2,000 (MB/s of UTF-8 text, one core). Prints a table and writes
bench/results/dedup_normalize.json.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    from session_bench import session_bench

    with session_bench(__doc__.splitlines()[0], "sf-norm-") as (args, corpus, spark, work):
        run(args, corpus, spark, work)


def run(args, corpus, spark, work) -> None:
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from session_bench import machine, save

    from shardforge.dedup.normalize import norm_column, normalize, normalize_arrow, normalize_expr

    spark.read.json(str(corpus)).select("text").repartition(6).write.parquet(str(work / "texts"))
    df = spark.read.parquet(str(work / "texts"))
    text = F.col("text")
    variants = {
        "read + sha256 (floor)": F.sha2(F.coalesce(text, F.lit("")), 256),
        "spark sql": F.sha2(normalize_expr(text, "lower_alnum"), 256),
        "kernel": F.sha2(norm_column(text, "lower_alnum"), 256),
    }
    for col in variants.values():                      # warm-up: the JVM's first jobs, the Python workers
        df.select(F.max(col)).collect()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, col in variants.items():
            t = time.perf_counter()
            df.select(F.max(col)).collect()
            times[name].append(time.perf_counter() - t)
    same = df.where(normalize_expr(text, "lower_alnum") != norm_column(text, "lower_alnum")).count()

    texts = pq.read_table(str(work / "texts")).column("text").combine_chunks()
    mb = sum(len(t.encode()) for t in texts.to_pylist() if t) / 1e6
    normalize_arrow(texts.slice(0, 10), "lower_alnum")  # the kernel's classes, built once per process
    laps = []
    for _ in range(3):
        t = time.perf_counter()
        normalize_arrow(texts, "lower_alnum")
        laps.append(time.perf_counter() - t)
    kernel_s = statistics.median(laps)
    sub = texts.slice(0, 2000).to_pylist()
    sub_mb = sum(len(x.encode()) for x in sub if x) / 1e6
    t = time.perf_counter()
    [normalize(x, "lower_alnum") for x in sub]
    ref_s = time.perf_counter() - t

    med = {k: statistics.median(v) for k, v in times.items()}
    over = {k: med[k] - med["read + sha256 (floor)"] for k in med}
    ratio = statistics.median((s - f) / (k - f) for s, k, f in zip(times["spark sql"], times["kernel"],
                                                                    times["read + sha256 (floor)"]))
    result = {"docs": args.docs, "text_mb": round(mb, 1), "rounds": args.rounds,
              "machine": machine(),
              "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
              "median_s": {k: round(v, 2) for k, v in med.items()},
              "normalisation_spark_sql_over_kernel": round(ratio, 2),
              "rows_that_differ": same,
              "in_process_mb_per_s": {"kernel": round(mb / kernel_s, 1), "python reference": round(sub_mb / ref_s, 1)}}
    print(f"{args.docs} documents, {mb:.1f} MB of text, local[2], medians of {args.rounds} (s):")
    for k, v in med.items():
        print(f"  {k:22s} {v:6.2f}  (over the floor: {over[k]:+.2f})")
    print(f"  normalisation, same-round ratio spark sql / kernel (over the floor): {ratio:.2f}x; rows that differ: {same}")
    print(f"  one process: kernel {mb / kernel_s:.0f} MB/s, Python reference {sub_mb / ref_s:.1f} MB/s")
    save("dedup_normalize", result)


if __name__ == "__main__":
    main()
