"""The Delta tables a pipeline keeps: curated documents, rejects, and their history.

`merge_new(spark, df, path, key)` adds only rows whose key is not in the table yet
(Delta MERGE, insert-when-not-matched). When nothing is new it does not commit at
all, so rerunning a batch leaves the table version unchanged. Reads can be pinned
to a version (`read_table(..., version=N)`) so a shard build can be repeated
byte for byte later.
"""
from __future__ import annotations

import logging
import os
import re
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

log = logging.getLogger("shardforge.curated.tables")


class MergeOutcome(NamedTuple):
    inserted: int
    version: int          # the table version after the merge (unchanged when inserted == 0)


def is_delta(path: str) -> bool:
    local = path[len("file://"):] if path.startswith("file://") else path
    if "://" in local:
        from delta.tables import DeltaTable
        from pyspark.sql import SparkSession

        return DeltaTable.isDeltaTable(SparkSession.getActiveSession(), path)
    # a table has a commit (or a checkpoint) in its log: a first write killed before its commit
    # leaves a `_delta_log` folder with none, which is no table yet (the next write creates it)
    try:
        with os.scandir(os.path.join(local, "_delta_log")) as entries:
            return any(_LOG_ENTRY.match(e.name) for e in entries)
    except OSError:
        return False


# a commit file or a checkpoint (classic, multi-part or v2) of a Delta log, or its pointer
_LOG_ENTRY = re.compile(r"^(\d{20}\.(json|checkpoint\..+)|_last_checkpoint)$")


def table_version(spark: SparkSession, path: str) -> int:
    return last_commit(spark, path)[0]


def last_commit(spark: SparkSession, path: str) -> tuple[int, dict[str, str]]:
    """The table's latest version and that commit's operation metrics (Delta records them
    in the commit: `numOutputRows` for a write, `numTargetRowsInserted` for a merge)."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).history(1).select("version", "operationMetrics").first()
    return int(row[0]), dict(row[1] or {})


def first_commit_metrics(spark: SparkSession, path: str) -> dict[str, str]:
    """The operation metrics of version 0 of the table at `path`, read from its commit file
    (`_delta_log/00000000000000000000.json`, one action per line; the protocol's `commitInfo`
    action holds them), with no Spark job: for a table this run has just created (a write
    with mode errorifexists succeeded, so version 0 is that write). Empty when the commit
    records none (`spark.databricks.delta.history.metricsEnabled=false`)."""
    import json

    from shardforge.fs import files_for

    text = files_for(path, spark).read_text(f"{path.rstrip('/')}/_delta_log/{0:020d}.json") or ""
    for line in text.splitlines():
        action = json.loads(line) if line.strip() else {}
        if "commitInfo" in action:
            return {k: str(v) for k, v in (action["commitInfo"].get("operationMetrics") or {}).items()}
    return {}


def read_table(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    return reader.load(path)


class SchemaConflict(ValueError):
    """A batch gives a column another type than the table has."""


def check_types(df: DataFrame, table: DataFrame, path: str) -> None:
    """A SchemaConflict naming every column whose type differs between `df` and `table`."""
    have = {f.name: f.dataType for f in table.schema.fields}
    bad = [f"{f.name!r} is {f.dataType.simpleString()} in this batch but {have[f.name].simpleString()} in {path}"
           for f in df.schema.fields if f.name in have and have[f.name] != f.dataType]
    if bad:
        raise SchemaConflict("column " + "; column ".join(bad) + " (a column keeps one type in a table)")


def merge_new(spark: SparkSession, df: DataFrame, path: str, key: str | list[str] = "id") -> MergeOutcome:
    """Insert the rows of `df` whose key is not in the Delta table at `path` (created if absent).

    Keys are compared null-safely. `df` must not contain the same key twice (the
    stages before guarantee it for ids); rows already present are left untouched, so
    merging the same rows again commits nothing. A column the table lacks is added to
    it (older rows read null there); a column `df` lacks is null in its rows; a column
    with another type is a SchemaConflict, before anything is written.
    """
    from delta.tables import DeltaTable

    keys = [key] if isinstance(key, str) else list(key)
    if not is_delta(path):
        df.write.format("delta").mode("errorifexists").save(path)
        version, metrics = 0, first_commit_metrics(spark, path)
        # the commit's own row count (no job reading the table back); counted when the
        # metrics are off (spark.databricks.delta.history.metricsEnabled=false)
        rows = metrics.get("numOutputRows")
        return MergeOutcome(inserted=int(rows) if rows is not None else read_table(spark, path).count(),
                            version=version)
    check_types(df, read_table(spark, path), path)
    existing = read_table(spark, path).select(*keys)
    fresh = df.join(existing, on=[df[k].eqNullSafe(existing[k]) for k in keys], how="left_anti")
    fresh = fresh.persist()
    try:
        n = fresh.count()
        if n == 0:
            return MergeOutcome(inserted=0, version=table_version(spark, path))
        cond = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
        (DeltaTable.forPath(spark, path).alias("t")
         .merge(fresh.alias("s"), cond).whenNotMatchedInsertAll().withSchemaEvolution().execute())
        return MergeOutcome(inserted=n, version=table_version(spark, path))
    finally:
        fresh.unpersist()


def append_rejects(spark: SparkSession, rejected: DataFrame, path: str) -> MergeOutcome:
    """Add reject rows not already recorded (same stage, reason, id and record), so a
    rerun of the same batch does not double-count its rejects."""
    keyed = rejected.withColumn("record_sha256", F.sha2(F.coalesce(F.col("record"), F.lit("")), 256))
    return merge_new(spark, keyed, path, key=["stage", "reason", "id", "record_sha256"])
