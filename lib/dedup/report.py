"""The dedup part of the run report, computed in Spark from the audit table."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

BUCKETS = (2, 3, 5, 10, 100, 1000)


def summary(audit: DataFrame) -> dict:
    """{'removed_exact', 'removed_near', 'clusters', 'cluster_sizes': {'2': n, '3-4': n, ...}}.

    A cluster is a kept representative with the documents removed as its duplicates
    (`cluster_size` in the audit). Aggregated in Spark: only the small result rows reach
    the driver, never the data.
    """
    label = None
    bounds = list(BUCKETS) + [None]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        name = str(lo) if hi == lo + 1 else (f"{lo}-{hi - 1}" if hi else f"{lo}+")
        cond = (F.col("cluster_size") >= lo) & ((F.col("cluster_size") < hi) if hi else F.lit(True))
        label = F.when(cond, F.lit(name)) if label is None else label.when(cond, F.lit(name))
    # one query (a job costs a fixed part whatever its size): a cluster's rows share their
    # duplicate_of and cluster_size, so its bucket counts it once
    rows = audit.groupBy(label.alias("bucket")).agg(
        F.count_if(F.col("stage") == "exact").alias("exact"), F.count_if(F.col("stage") == "near").alias("near"),
        F.count_distinct("duplicate_of").alias("clusters")).collect()
    order = {(str(lo) if hi == lo + 1 else (f"{lo}-{hi - 1}" if hi else f"{lo}+")): i
             for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))}
    hist = [r for r in rows if r["clusters"]]
    return {
        "removed_exact": int(sum(r["exact"] for r in rows)),
        "removed_near": int(sum(r["near"] for r in rows)),
        "clusters": int(sum(r["clusters"] for r in hist)),
        "cluster_sizes": {r["bucket"]: int(r["clusters"]) for r in sorted(hist, key=lambda r: order[r["bucket"]])},
    }
