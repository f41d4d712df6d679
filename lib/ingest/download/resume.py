"""Resume support: read what earlier runs recorded (the downloads Delta table and the
spool a killed run left), and merge new results into the table by url.

The spool is a write-ahead log: each task appends finished rows (content included) to
an Arrow stream file as they complete. A file cut short by a kill is read up to its last
complete batch. The run keeps it until it ends, then removes it.

The downloads table records what happened to each URL, not what it returned: no text,
title, image, caption or meta (which may hold PII), and URLs without their credentials
(`shardforge.redact.privacy`). A URL an earlier run fetched ok is therefore not fetched again:
it comes back as status `fetched_before` (its document went through that run).
"""
from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shardforge.ingest.download.stage import RESULT, _best_per_url
from shardforge.ingest.download.worker import _fs, read_spool_file, spool_files


def read_spool(spark: SparkSession, directory: str) -> Optional[DataFrame]:
    """Every row in the spool as a RESULT DataFrame (read on the executors), or None."""
    files = spool_files(directory)
    if not files:
        return None

    def read(batches):
        for b in batches:
            for path in b.column("path").to_pylist():
                yield from read_spool_file(path)

    paths = spark.createDataFrame([(p,) for p in files], "path string").repartition(min(len(files), 64))
    return paths.mapInArrow(read, RESULT)


def clear_spool(directory: str) -> int:
    """Delete the spool files (after their rows are merged into the results table)."""
    files = spool_files(directory)
    for f in files:
        fs, p = _fs(f)
        fs.delete_file(p)
    return len(files)


def _delta_exists(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    try:
        return DeltaTable.isDeltaTable(spark, path)
    except Exception:
        return False


FETCHED_BEFORE = "fetched_before"
CONTENT_COLS = ("caption", "meta", "title", "text", "image")


def load_previous(spark: SparkSession, results_path: Optional[str] = None,
                  spool_dir: Optional[str] = None) -> Optional[DataFrame]:
    """The earlier results to resume from, best row per url: the spool (this run's own
    finished rows, with their content) and the downloads table at `results_path`, whose
    ok rows (content-free, from earlier runs) come back as `fetched_before`. None when
    there is nothing."""
    parts = []
    if results_path and _delta_exists(spark, results_path):
        table = spark.read.format("delta").load(results_path)
        cols = [F.col(c) if c in table.columns else F.lit(None).cast(RESULT[c].dataType).alias(c)
                for c in RESULT.fieldNames()]
        table = table.select(*cols).withColumn(
            "status", F.when(F.col("status") == "ok", F.lit(FETCHED_BEFORE)).otherwise(F.col("status")))
        parts.append(table)
    spooled = read_spool(spark, spool_dir) if spool_dir else None
    if spooled is not None:
        parts.append(spooled)
    if not parts:
        return None
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    return _best_per_url(df.where(F.col("status") != "duplicate_url"))


def fetch_record(results: DataFrame) -> DataFrame:
    """What the downloads table keeps of results: no content, URLs without credentials."""
    from shardforge.redact.privacy import without_url_credentials

    return without_url_credentials(results.drop(*CONTENT_COLS), ("url", "final_url", "source"))


def merge_results(spark: SparkSession, results: DataFrame, path: str) -> None:
    """Merge the fetch records of `results` into the Delta table at `path` by url (created if
    absent): one row per url; a new row replaces an old one unless the old is ok and the
    new is not (an ok result is never downgraded). Rows of status duplicate_url or
    fetched_before are not stored (they describe list rows, or what the table has)."""
    from delta.tables import DeltaTable

    src = fetch_record(_best_per_url(results.where(~F.col("status").isin("duplicate_url", FETCHED_BEFORE))
                                     .where(F.col("url").isNotNull())))
    src = _best_per_url(src)    # two URLs that differ only in their credentials are one row
    if not _delta_exists(spark, path):
        src.write.format("delta").mode("errorifexists").save(path)
        return
    (DeltaTable.forPath(spark, path).alias("t")
     .merge(src.alias("s"), "t.url = s.url")
     .whenMatchedUpdateAll(condition="NOT (t.status = 'ok' AND s.status <> 'ok')")
     .whenNotMatchedInsertAll()
     .execute())
