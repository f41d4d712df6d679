"""The download stage on Spark: URL list in, one result row per input row out,
plus the DOCUMENT rows of successful fetches and REJECT rows of the others.

Fetching runs in `mapInArrow` tasks (see worker.py). The fetched rows are
checkpointed once, so writing results, kept and rejected never fetches twice.
Resume: rows of a `previous` results table are reused (ok always, failures unless
they are transient and `retry_transient_failures` is on); `load_previous` reads
that table together with any spool a killed run left behind.
"""
from __future__ import annotations

import uuid
from typing import NamedTuple, Optional

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, DoubleType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from shardforge.ingest.download.fetch import TRANSIENT
from shardforge.ingest.download.worker import DUPLICATE_ERROR, INPUT as INPUT_COLS

RESULT = StructType([
    StructField("url", StringType()), StructField("caption", StringType()), StructField("meta", StringType()),
    StructField("source", StringType()), StructField("expect", StringType()), StructField("kind", StringType()),
    StructField("status", StringType()), StructField("error", StringType()),
    StructField("http_status", IntegerType()), StructField("attempts", IntegerType()),
    StructField("final_url", StringType()), StructField("content_type", StringType()),
    StructField("fetched_at", TimestampType()), StructField("fetch_seconds", DoubleType()),
    StructField("bytes", LongType()), StructField("sha256", StringType()), StructField("charset", StringType()),
    StructField("title", StringType()), StructField("text", StringType()), StructField("image", BinaryType()),
    StructField("image_width", IntegerType()), StructField("image_height", IntegerType()),
    StructField("original_width", IntegerType()), StructField("original_height", IntegerType()),
    StructField("image_format", StringType()),
])
FETCH_COLS = tuple(f.name for f in RESULT.fields if f.name not in INPUT_COLS)
# Columns that differ between two runs of the same list by nature (wall clock).
TIMING_COLS = ("fetched_at", "fetch_seconds")


class DownloadResult(NamedTuple):
    results: DataFrame      # RESULT: one row per input row
    kept: DataFrame         # DOCUMENT rows of status ok
    rejected: DataFrame     # REJECT rows, reason download:<status>


def url_id_expr(col: str = "url"):
    """The document id of a downloaded URL: 32 hex chars of sha256(url)."""
    return F.substring(F.sha2(F.coalesce(F.col(col), F.lit("")), 256), 1, 32)


def url_id(url: Optional[str]) -> str:
    """Pure-Python twin of `url_id_expr`."""
    import hashlib

    return hashlib.sha256((url or "").encode("utf-8")).hexdigest()[:32]


def check_config(cfg) -> None:
    """Raise ConfigError naming the [download] setting the stage cannot run with. The values
    are checked when the config is loaded (`shardforge.config`); this builds what the stage
    builds from them."""
    from shardforge.config import ConfigError

    from shardforge.ingest.download.guard import AddressPolicy

    try:
        AddressPolicy.from_config(cfg.allow_private_addresses, cfg.allowed_networks)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _prepare(urls_df: DataFrame, cfg) -> DataFrame:
    cols = set(urls_df.columns)
    if "url" not in cols and cfg.url_column not in cols:
        raise ValueError(f"download: the URL list has no {cfg.url_column!r} column (columns: {sorted(cols)})")

    def pick(name, *alts):
        for c in (name, *alts):
            if c and c in cols:
                return F.col(c).cast("string")
        return F.lit(None).cast("string")

    return urls_df.select(
        pick("url", cfg.url_column).alias("url"),
        pick("caption", cfg.caption_column).alias("caption"),
        pick("meta").alias("meta"),
        pick("source").alias("source"),
        F.lower(F.coalesce(pick("expect", cfg.kind_column), F.lit(cfg.expect))).alias("expect"),
    )


def _best_per_url(df: DataFrame) -> DataFrame:
    """One row per url: an ok row first, then the smallest (status, sha256, fetched_at)."""
    w = Window.partitionBy("url").orderBy((F.col("status") != "ok").cast("int"), "status",
                                          F.col("sha256").asc_nulls_last(), "fetched_at")
    return df.withColumn("_r", F.row_number().over(w)).where("_r = 1").drop("_r")


def _materialize(df: DataFrame) -> DataFrame:
    """Run the fetch job once; later actions read the checkpoint, never the network."""
    sc = df.sparkSession.sparkContext
    return df.checkpoint(eager=True) if sc.getCheckpointDir() else df.localCheckpoint(eager=True)


def download(urls_df: DataFrame, cfg, *, previous: Optional[DataFrame] = None,
             run_id: Optional[str] = None) -> DownloadResult:
    """Download every row of `urls_df` (a `url` column, optional caption/kind/meta/source).

    Promises: `results` has exactly one row per input row (a URL listed twice is
    fetched once; later copies get status `duplicate_url`); fetching happens once,
    in this call, whatever is done with the returned frames (they read a checkpoint); with `previous`, URLs
    whose previous row is reusable are not fetched again and their row is carried
    over (input columns from `urls_df`). Output content is deterministic for the same
    server responses and config; only `fetched_at` and `fetch_seconds` vary.
    """
    from shardforge.ingest.download.worker import run_partition

    check_config(cfg)
    spark = urls_df.sparkSession
    rows = _prepare(urls_df, cfg)
    reused = None
    todo = rows
    if previous is not None:
        prev = _best_per_url(previous.where(F.col("status") != "duplicate_url").select("url", *FETCH_COLS))
        if cfg.retry_transient_failures:      # ok and permanent failures stay; transient ones are refetched
            prev = prev.where(~F.col("status").isin(*TRANSIENT, "error"))
        todo = rows.join(prev.select("url"), "url", "left_anti")
        reused = _mark_duplicates(rows.join(prev, "url", "inner"))

    n = cfg.partitions or spark.sparkContext.defaultParallelism
    if cfg.per_host_connections > 0 or cfg.per_host_requests_per_second > 0:
        # Every URL of a host in one task: the per-host limits hold cluster-wide.
        part = todo.repartition(n, F.lower(F.expr("try_parse_url(url, 'HOST')")))
    else:
        part = todo.repartition(n, "url")
    # Copies of a url become neighbours, the smallest first (the worker fetches that one
    # and marks the rest duplicate_url); hashing first interleaves hosts.
    part = part.sortWithinPartitions(F.xxhash64("url"), "url", *[F.col(c).asc_nulls_first() for c in INPUT_COLS[1:]])
    rate_share = cfg.max_requests_per_second / n if cfg.max_requests_per_second > 0 else 0.0
    rid = run_id or uuid.uuid4().hex[:12]
    spool_dir = cfg.spool_dir

    def task(batches):
        yield from run_partition(batches, cfg, rate_share=rate_share, spool_dir=spool_dir, run_id=rid)

    results = part.select(*INPUT_COLS).mapInArrow(task, RESULT)
    if reused is not None:
        results = results.unionByName(_conform(reused))
    # One job fetches; everything after reads this checkpoint (not the network, not `previous`,
    # so clearing the spool afterwards is safe).
    results = _materialize(results)
    return DownloadResult(results, kept_documents(results), rejected_rows(results))


def _mark_duplicates(df: DataFrame) -> DataFrame:
    """Keep the first row per url (same order as the worker's) and turn the others into
    duplicate_url rows with no fetch columns."""
    w = Window.partitionBy("url").orderBy(*[F.col(c).asc_nulls_first() for c in INPUT_COLS[1:]])
    ranked = df.withColumn("_n", F.row_number().over(w))
    first = ranked.where("_n = 1").drop("_n")
    dups = ranked.where("_n > 1").select(*INPUT_COLS, F.lit("duplicate_url").alias("status"),
                                         F.lit(DUPLICATE_ERROR).alias("error"))
    return _conform(first).unionByName(_conform(dups))


def _conform(df: DataFrame) -> DataFrame:
    have = set(df.columns)
    return df.select([(F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
                      for f in RESULT.fields])


def kept_documents(results: DataFrame) -> DataFrame:
    """DOCUMENT rows for status ok. id = url_id(url); pages: text = extracted text;
    images: text = caption or ''. meta = the input meta object plus download facts."""
    from shardforge.schemas import IMAGE, documents

    ok = results.where(F.col("status") == "ok")
    facts = F.to_json(F.struct(
        "caption", "title", "content_type", "charset", "http_status", "final_url", "bytes", "sha256",
        "image_format", "original_width", "original_height"))
    meta_in = F.trim(F.col("meta"))
    has_meta = meta_in.rlike(r"^\{.*\S.*\}$") & ~meta_in.rlike(r"^\{\s*\}$")
    meta = F.when(has_meta, F.concat(F.regexp_replace(meta_in, r"\}$", ""), F.lit(","),
                                     F.expr("substring(_facts, 2)"))).otherwise(F.col("_facts"))
    out = ok.withColumn("_facts", facts).select(
        url_id_expr("url").alias("id"),
        F.when(F.col("kind") == "image", F.coalesce(F.col("caption"), F.lit(""))).otherwise(F.col("text")).alias("text"),
        F.coalesce(F.col("source"), F.col("url")).alias("source"),
        "url", "kind", meta.alias("meta"), *[F.col(f.name).cast(f.dataType) for f in IMAGE.fields])
    return documents(out)


def rejected_rows(results: DataFrame) -> DataFrame:
    """REJECT rows (stage 'download', reason download:<status>) for every non-ok row."""
    from shardforge.stage import rejects

    bad = results.where(F.col("status") != "ok").drop("image", "text").withColumn("id", url_id_expr("url"))
    bad = bad.withColumn("source", F.coalesce(F.col("source"), F.col("url")))
    return rejects(bad, "download", F.concat(F.lit("download:"), F.col("status")), F.col("error"))


def summary(results: DataFrame) -> DataFrame:
    """Counts by status (and kind), computed in Spark: status, kind, rows, bytes, attempts."""
    return (results.groupBy("status", "kind")
            .agg(F.count(F.lit(1)).alias("rows"), F.sum("bytes").alias("bytes"),
                 F.sum("attempts").alias("attempts"))
            .orderBy("status", F.col("kind").asc_nulls_first()))


def summary_dict(results: DataFrame) -> dict[str, int]:
    """{status: rows} for the run report."""
    return {r["status"]: r["n"] for r in results.groupBy("status").agg(F.count(F.lit(1)).alias("n")).collect()}
