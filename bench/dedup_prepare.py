"""The JVM side of dedup's prepare phase, part by part, in one warm session: what reading,
normalising, hashing and shuffling the input cost on realistic documents.

    python bench/dedup_prepare.py --corpus /work/bench18/corpus-100k.jsonl [--rounds 2]

The corpus (bench/corpus.py) is converted to Parquet once (like the stage's input); then each
part runs as a Spark job that writes nothing (`noop`), in a session made as the CLI makes it
(`get_spark`: loopback only, the project's settings) on local[2] with 2g of driver memory and
8 shuffle partitions, each after the one before it, `rounds` times; the
report gives the median wall time of each part and its cost over the plain scan.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def parts(df):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from shardforge.dedup.normalize import normalize_expr

    norm = normalize_expr(F.col("text"), "lower_alnum")
    return {
        "scan (id, text)": df.select("id", "text"),
        "lower case only": df.select("id", F.lower("text").alias("n")),
        "normalise (lower_alnum)": df.select("id", norm.alias("n")),
        "normalise + sha256 (exact key)": df.select("id", F.sha2(norm, 256).alias("k")),
        "row hash (xxhash64 of the row as JSON)": df.select("id", F.xxhash64(F.to_json(F.struct("id", "text"))).alias("h")),
        "window by id over full rows (a shuffle and sort)": df.withColumn(
            "x", F.first("text").over(Window.partitionBy("id").orderBy("text"))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/shardforge-bench-prepare"))
    args = ap.parse_args()
    from shardforge.config import SparkSection
    from shardforge.engine.session import get_spark

    spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=8, properties={
        "spark.ui.enabled": "false", "spark.driver.memory": "2g"}))
    src = args.work / (args.corpus.stem + ".parquet")
    if not src.exists():
        spark.read.json(str(args.corpus)).select("id", "text").write.parquet(str(src))
    df = spark.read.parquet(str(src))
    n = df.count()
    times: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, frame in parts(df).items():
            t0 = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            times.setdefault(name, []).append(time.perf_counter() - t0)
    spark.stop()
    scan = statistics.median(times["scan (id, text)"])
    print(f"{n:,} documents from {args.corpus}; median of {args.rounds} rounds, wall seconds on local[2]")
    print("| part | seconds | over the scan |\n|---|---:|---:|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.1f} | {med - scan:+.1f} |")


if __name__ == "__main__":
    main()
