"""Reading URL lists: CSV, TSV, JSONL and Parquet with a url column, optional caption
and kind columns, every other column kept as a JSON object in `meta`."""
from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

FORMATS = ("csv", "tsv", "jsonl", "parquet")
_EXT = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl",
        ".parquet": "parquet", ".pq": "parquet"}


def guess_format(path: str) -> str:
    """The list format from the file extension (of the path, or of the files in a directory)."""
    p = path.rstrip("/")
    for suffix in (".gz", ".bz2", ".zst"):
        if p.endswith(suffix):
            p = p[: -len(suffix)]
    ext = os.path.splitext(p)[1].lower()
    if ext in _EXT:
        return _EXT[ext]
    if os.path.isdir(path):
        exts = {_EXT.get(os.path.splitext(n)[1].lower()) for n in os.listdir(path) if not n.startswith(("_", "."))}
        exts.discard(None)
        if len(exts) == 1:
            return exts.pop()
    raise ValueError(f"cannot tell the format of URL list {path!r}: use a .csv, .tsv, .jsonl or .parquet "
                     f"name, or pass fmt=")


def read_url_list(spark: SparkSession, path: str, cfg, *, fmt: str = "auto") -> DataFrame:
    """Read a URL list into (url, caption, expect, meta, source) rows, one per line/record.

    `url` comes from `cfg.url_column`, `caption` from `cfg.caption_column`, the
    expected kind from `cfg.kind_column` (image | page | auto) when present;
    every other column goes into `meta` as a JSON object (null when there is none);
    `source` is the list's file name (not its full path, so a list that moves, or the
    same list under another output folder, gives the same rows). CSV/TSV need a header row. A missing url column is a
    ValueError naming the columns found."""
    fmt = guess_format(path) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise ValueError(f"URL list format {fmt!r} is not one of {', '.join(FORMATS)}")
    if not os.path.exists(path) and "://" not in path:
        raise FileNotFoundError(f"URL list not found: {path}")
    reader = spark.read
    if fmt in ("csv", "tsv"):
        df = reader.options(header=True, sep="\t" if fmt == "tsv" else ",", quote='"', escape='"',
                            multiLine=False, inferSchema=False).csv(path)
    elif fmt == "jsonl":
        df = reader.option("mode", "PERMISSIVE").json(path)
    else:
        df = reader.parquet(path)
    cols = df.columns
    if cfg.url_column not in cols:
        raise ValueError(f"URL list {path}: no {cfg.url_column!r} column (columns: {', '.join(cols)})")
    special = {cfg.url_column, cfg.caption_column, cfg.kind_column, "_corrupt_record"}
    others = [c for c in cols if c not in special]
    meta = F.to_json(F.struct(*[F.col(f"`{c}`") for c in sorted(others)])) if others else F.lit(None)
    return df.select(
        F.trim(F.col(f"`{cfg.url_column}`").cast("string")).alias("url"),
        (F.col(f"`{cfg.caption_column}`").cast("string") if cfg.caption_column in cols
         else F.lit(None).cast("string")).alias("caption"),
        (F.lower(F.col(f"`{cfg.kind_column}`").cast("string")) if cfg.kind_column in cols
         else F.lit(None).cast("string")).alias("expect"),
        meta.cast("string").alias("meta"),
        F.lit(path.rstrip("/").rsplit("/", 1)[-1]).alias("source"),
    )
