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
    counts = audit.groupBy("stage").count().collect()
    by_stage = {r["stage"]: r["count"] for r in counts}
    sizes = audit.select("duplicate_of", "cluster_size").distinct()
    label = None
    bounds = list(BUCKETS) + [None]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        name = str(lo) if hi == lo + 1 else (f"{lo}-{hi - 1}" if hi else f"{lo}+")
        cond = (F.col("cluster_size") >= lo) & ((F.col("cluster_size") < hi) if hi else F.lit(True))
        label = F.when(cond, F.lit(name)) if label is None else label.when(cond, F.lit(name))
    hist = sizes.groupBy(label.alias("bucket")).count().collect()
    order = {(str(lo) if hi == lo + 1 else (f"{lo}-{hi - 1}" if hi else f"{lo}+")): i
             for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))}
    return {
        "removed_exact": int(by_stage.get("exact", 0)),
        "removed_near": int(by_stage.get("near", 0)),
        "clusters": int(sum(r["count"] for r in hist)),
        "cluster_sizes": {r["bucket"]: int(r["count"]) for r in sorted(hist, key=lambda r: order[r["bucket"]])},
    }
