"""Reading document files into DOCUMENT rows: JSONL, Parquet and plain text.

`read_documents(spark, paths, cfg)` returns a StageResult: rows that became
documents, and REJECT rows for lines that could not (`invalid:malformed_json`,
`invalid:not_an_object`, `invalid:blank_line`, `invalid:missing_text`). Ids are
taken from the id column when present and non-null, otherwise derived from
content and source (`shardforge.keys.derived_id_expr`), never from position.
`source` is the file's path relative to the input root, so a corpus that moves
keeps its ids. Every other column of a Parquet or Delta input is kept with its own
type (columns whose name starts with `_` are Spark's or ours and are left out); JSONL
fields are kept as JSON in `meta`, except those `[ingest] columns` declares with a type,
which become columns of that type (a value that does not fit is `invalid:column_type`).
Inputs that give one column two types are an InputError naming the column.
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
    """input_file_name() made relative to the input root (stable when the corpus moves): a
    file's own name, or its path below the folder given. A URL root (`hdfs://`, `s3a://`)
    is compared by its path alone, as Spark names the file with the host it resolved."""
    if "://" in root and not root.startswith("file://"):
        from urllib.parse import urlsplit

        base_path = urlsplit(root).path.rstrip("/")
        name = F.input_file_name()
        path = F.regexp_replace(name, r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*", "")
        below = F.regexp_replace(path, "^" + re.escape(base_path + "/"), "")
        return (F.when(path == base_path, F.lit(base_path.rsplit("/", 1)[-1]))
                 .when(path.startswith(base_path + "/"), below).otherwise(name))
    base = Path(root[len("file://"):] if root.startswith("file://") else root).resolve()
    prefix = base.as_uri() if base.is_dir() else base.parent.as_uri()
    name = F.input_file_name()
    rel = F.regexp_replace(name, "^" + re.escape(prefix.rstrip("/") + "/"), "")
    return F.when(name.startswith(prefix), rel).otherwise(name)


def _finish(df: DataFrame) -> DataFrame:
    """DOCUMENT columns first (id derived where missing, kind 'document' unless the input
    says), then the input's own columns with their types."""
    from shardforge.schemas import documents

    doc = df.withColumn("id", F.coalesce(F.col("id"), derived_id_expr("text", "source")))
    kind = F.coalesce(F.col("kind").cast("string"), F.lit("document")) if "kind" in df.columns else F.lit("document")
    return documents(doc.withColumn("kind", kind))


def declared_schema(cfg: IngestSection):
    """The StructType of `[ingest] columns` (name -> Spark SQL type); a ConfigError names a
    type Spark cannot parse. Needs a session (Spark parses the types)."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    from .config import ConfigError

    fields = []
    for name, ddl in cfg.columns.items():
        try:
            fields.append(StructField(name, _parse_datatype_string(ddl), True))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"ingest.columns.{name}: {ddl!r} is not a Spark SQL type ({first})") from None
    return StructType(fields)


def _read_jsonl(spark: SparkSession, path: str, cfg: IngestSection) -> StageResult:
    lines = spark.read.text(path).select(F.col("value").alias("_line"),
                                         _relative_source(path).alias("_file"))
    declared = declared_schema(cfg)
    named_cols = (cfg.id_column, cfg.text_column, cfg.source_column, "url")
    known = f"`{cfg.id_column}` string, `{cfg.text_column}` string, `{cfg.source_column}` string, url string"
    typed = "".join(f", `{f.name}` {f.dataType.simpleString()}" for f in declared.fields if f.name not in named_cols)
    parsed = lines.select(
        "_line", "_file",
        F.from_json("_line", known + typed + ", _corrupt string",
                    {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}).alias("_j"),
        F.from_json("_line", "map<string,string>").alias("_m"),
    )
    blank = F.trim(F.col("_line")) == ""
    not_json = F.col("_m").isNull()
    malformed = F.col("_j").isNull() | F.col("_j._corrupt").isNotNull()
    not_object = ~F.trim(F.col("_line")).startswith("{")
    ok = parsed.filter(~blank & ~malformed)
    skip = [*named_cols, *declared.fieldNames()]
    extras = F.map_filter("_m", lambda k, v: ~k.isin(*skip))
    named = ok.select(
        F.col(f"_j.`{cfg.id_column}`").alias("id"),
        F.col(f"_j.`{cfg.text_column}`").alias("text"),
        F.coalesce(F.col(f"_j.`{cfg.source_column}`"), F.col("_file")).alias("source"),
        F.col("_j.url").alias("url"),
        F.when(F.size(extras) > 0, F.to_json(extras)).alias("meta"),
        *[F.col(f"_j.`{f.name}`").alias(f.name) for f in declared.fields if f.name not in named_cols],
    )
    docs, missing = _split_missing_text(named)
    bad = parsed.filter(blank | malformed).select(
        F.lit(None).cast("string").alias("id"), F.col("_file").alias("source"),
        F.col("_line").alias("line"),
        F.when(blank, "invalid:blank_line").when(not_object, "invalid:not_an_object")
         .when(not_json, "invalid:malformed_json").otherwise(
            F.lit("invalid:column_type" if len(declared) else "invalid:malformed_json")).alias("_reason"))
    rej = rejects(bad, "ingest", F.col("_reason"), F.substring("line", 1, 200)).unionByName(
        rejects(missing, "ingest", "invalid:missing_text"))
    return StageResult(_finish(docs), rej)


def _split_missing_text(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    return df.filter(F.col("text").isNotNull()), df.filter(F.col("text").isNull())


def _read_table(df: DataFrame, path: str, cfg: IngestSection, *, file_source) -> StageResult:
    cols = set(df.columns)
    if cfg.text_column not in cols:
        raise InputError(f"{path}: no text column {cfg.text_column!r} (columns: {sorted(cols)}); "
                         f"set ingest.text_column")
    named = (cfg.id_column, cfg.text_column, cfg.source_column, "url")
    extra = [c for c in df.columns if c not in named and not c.startswith("_")]
    meta = []
    if "meta" in extra and df.schema["meta"].dataType.typeName() != "string":
        meta = [F.to_json(F.col("meta")).alias("meta")]          # a struct or map: kept as JSON text
        extra.remove("meta")
    out = df.select(
        (F.col(cfg.id_column).cast("string") if cfg.id_column in cols else F.lit(None).cast("string")).alias("id"),
        F.col(cfg.text_column).cast("string").alias("text"),
        (F.coalesce(F.col(cfg.source_column).cast("string"), file_source) if cfg.source_column in cols
         else file_source).alias("source"),
        (F.col("url").cast("string") if "url" in cols else F.lit(None).cast("string")).alias("url"),
        *meta,
        *[F.col(f"`{c}`") for c in extra],
    )
    docs, missing = _split_missing_text(out)
    return StageResult(_finish(docs), rejects(missing, "ingest", "invalid:missing_text"))


def union_documents(frames: list[tuple[str, DataFrame]]) -> DataFrame:
    """The frames' rows by column name (a column one lacks is null there). A column with
    two types is an InputError naming it and the two inputs."""
    seen: dict[str, tuple[str, object]] = {}
    for where, df in frames:
        for f in df.schema.fields:
            if f.name in seen and seen[f.name][1] != f.dataType:
                first, t = seen[f.name]
                raise InputError(f"column {f.name!r} is {t.simpleString()} in {first} but "
                                 f"{f.dataType.simpleString()} in {where}; give it one type")
            seen.setdefault(f.name, (where, f.dataType))
    out = frames[0][1]
    for _, df in frames[1:]:
        out = out.unionByName(df, allowMissingColumns=True)
    return out


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
    kept = union_documents([(p, r.kept) for p, r in zip(paths, results)])
    rejected = results[0].rejected
    for r in results[1:]:
        rejected = rejected.unionByName(r.rejected)
    return StageResult(kept, rejected)
