"""Reading document files into DOCUMENT rows: JSONL, Parquet and plain text.

`read_documents(spark, paths, cfg)` returns a StageResult: rows that became
documents, and REJECT rows for lines that could not (`invalid:malformed_json`,
`invalid:not_an_object`, `invalid:blank_line`, `invalid:missing_text`). Ids are
taken from the id column when present and non-null, otherwise derived from
content and source (`shardforge.keys.derived_id_expr`), never from position.
`source` is the file's path relative to the input root, so a corpus that moves
keeps its ids. Columns other than id/text/source/url are kept as JSON in `meta`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .config import IngestSection
from .keys import derived_id_expr
from .stage import StageResult, rejects

KNOWN = ("id", "text", "source", "url")


class InputError(ValueError):
    """An input path that cannot be read as documents."""


def detect_format(path: str) -> str:
    """jsonl | parquet | text | delta, from the path (a Delta table has _delta_log/)."""
    p = path.rstrip("/")
    local = p[len("file://"):] if p.startswith("file://") else p
    if "://" not in local and os.path.isdir(local):
        if os.path.isdir(os.path.join(local, "_delta_log")):
            return "delta"
        names = [n for n in os.listdir(local) if not n.startswith(("_", "."))]
        if names and all(n.endswith(".parquet") for n in names):
            return "parquet"
        if names and all(n.endswith((".jsonl", ".json", ".ndjson")) for n in names):
            return "jsonl"
        if names and all(n.endswith(".txt") for n in names):
            return "text"
        raise InputError(f"{path}: cannot tell the format of this folder's files; "
                         f"set pipeline.input_format")
    for suffix, fmt in ((".jsonl", "jsonl"), (".json", "jsonl"), (".ndjson", "jsonl"),
                        (".jsonl.gz", "jsonl"), (".parquet", "parquet"), (".txt", "text")):
        if local.endswith(suffix):
            return fmt
    raise InputError(f"{path}: unknown document format (expected .jsonl, .parquet, .txt, a folder "
                     f"of them, or a Delta table); set pipeline.input_format")


def check_exists(path: str) -> None:
    local = path[len("file://"):] if path.startswith("file://") else path
    if "://" not in local and not os.path.exists(local):
        raise InputError(f"input not found: {path}")


def _relative_source(root: str):
    """input_file_name() made relative to the input root (stable when the corpus moves)."""
    base = Path(root[len("file://"):] if root.startswith("file://") else root).resolve()
    prefix = base.as_uri() if base.is_dir() else base.parent.as_uri()
    name = F.input_file_name()
    rel = F.regexp_replace(name, "^" + re.escape(prefix.rstrip("/") + "/"), "")
    return F.when(name.startswith(prefix), rel).otherwise(name)


def _finish(df: DataFrame, cfg: IngestSection) -> DataFrame:
    """id/text/source/url/meta -> DOCUMENT columns (kind 'document')."""
    from shardforge.schemas import DOCUMENT, conform

    doc = df.withColumn("id", F.coalesce(F.col("id"), derived_id_expr("text", "source")))
    doc = doc.withColumn("kind", F.lit("document"))
    return conform(doc, DOCUMENT)


def _read_jsonl(spark: SparkSession, path: str, cfg: IngestSection) -> StageResult:
    lines = spark.read.text(path).select(F.col("value").alias("_line"),
                                         _relative_source(path).alias("_file"))
    known = f"`{cfg.id_column}` string, `{cfg.text_column}` string, `{cfg.source_column}` string, url string"
    parsed = lines.select(
        "_line", "_file",
        F.from_json("_line", known + ", _corrupt string",
                    {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}).alias("_j"),
        F.from_json("_line", "map<string,string>").alias("_m"),
    )
    blank = F.trim(F.col("_line")) == ""
    malformed = F.col("_j").isNull() | F.col("_j._corrupt").isNotNull()
    not_object = ~F.trim(F.col("_line")).startswith("{")
    ok = parsed.filter(~blank & ~malformed)
    named = ok.select(
        F.col(f"_j.`{cfg.id_column}`").alias("id"),
        F.col(f"_j.`{cfg.text_column}`").alias("text"),
        F.coalesce(F.col(f"_j.`{cfg.source_column}`"), F.col("_file")).alias("source"),
        F.col("_j.url").alias("url"),
        F.when(F.size(F.map_filter("_m", lambda k, v: ~k.isin(
            cfg.id_column, cfg.text_column, cfg.source_column, "url"))) > 0,
            F.to_json(F.map_filter("_m", lambda k, v: ~k.isin(
                cfg.id_column, cfg.text_column, cfg.source_column, "url")))).alias("meta"),
    )
    docs, missing = _split_missing_text(named)
    bad = parsed.filter(blank | malformed).select(
        F.lit(None).cast("string").alias("id"), F.col("_file").alias("source"),
        F.col("_line").alias("line"),
        F.when(blank, "invalid:blank_line").when(not_object, "invalid:not_an_object")
         .otherwise("invalid:malformed_json").alias("_reason"))
    rej = rejects(bad, "ingest", F.col("_reason"), F.substring("line", 1, 200)).unionByName(
        rejects(missing, "ingest", "invalid:missing_text"))
    return StageResult(_finish(docs, cfg), rej)


def _split_missing_text(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    return df.filter(F.col("text").isNotNull()), df.filter(F.col("text").isNull())


def _read_table(df: DataFrame, path: str, cfg: IngestSection, *, file_source) -> StageResult:
    cols = set(df.columns)
    if cfg.text_column not in cols:
        raise InputError(f"{path}: no text column {cfg.text_column!r} (columns: {sorted(cols)}); "
                         f"set ingest.text_column")
    extra = [c for c in df.columns
             if c not in (cfg.id_column, cfg.text_column, cfg.source_column, "url") and not c.startswith("_")]
    named = df.select(
        (F.col(cfg.id_column).cast("string") if cfg.id_column in cols else F.lit(None).cast("string")).alias("id"),
        F.col(cfg.text_column).cast("string").alias("text"),
        (F.coalesce(F.col(cfg.source_column).cast("string"), file_source) if cfg.source_column in cols
         else file_source).alias("source"),
        (F.col("url").cast("string") if "url" in cols else F.lit(None).cast("string")).alias("url"),
        (F.to_json(F.struct(*[F.col(c) for c in extra])) if extra else F.lit(None).cast("string")).alias("meta"),
    )
    docs, missing = _split_missing_text(named)
    return StageResult(_finish(docs, cfg), rejects(missing, "ingest", "invalid:missing_text"))


def read_documents(spark: SparkSession, paths: str | list[str] | tuple[str, ...], cfg: IngestSection,
                   fmt: str = "auto") -> StageResult:
    """Read every path as documents; kept and rejected together account for every input row."""
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise InputError("no input given: pass --input PATH or set pipeline.input")
    results = []
    for path in paths:
        check_exists(path)
        kind = detect_format(path) if fmt in ("auto", "", None) else fmt
        if kind == "jsonl":
            results.append(_read_jsonl(spark, path, cfg))
        elif kind == "parquet":
            results.append(_read_table(spark.read.parquet(path), path, cfg, file_source=_relative_source(path)))
        elif kind == "delta":
            results.append(_read_table(spark.read.format("delta").load(path), path, cfg,
                                       file_source=F.lit(Path(path).name)))
        elif kind == "text":
            df = spark.read.text(path, wholetext=True).select(
                F.col("value").alias(cfg.text_column), _relative_source(path).alias("_src"))
            results.append(_read_table(df, path, cfg, file_source=F.col("_src")))
        else:
            raise InputError(f"{path}: unsupported input format {kind!r}")
    kept = results[0].kept
    rejected = results[0].rejected
    for r in results[1:]:
        kept = kept.unionByName(r.kept)
        rejected = rejected.unionByName(r.rejected)
    return StageResult(kept, rejected)
