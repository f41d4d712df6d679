"""Reading the benchmark items `[decontaminate] benchmarks` names, on the driver.

A benchmark is a local JSONL file (`.jsonl`, `.json`, `.ndjson`, each optionally `.gz`: one
object per line, blank lines skipped) or Parquet (a `.parquet` file, or a folder of them read as
one dataset; files named `_*` or `.*` are skipped, as Spark and pyarrow skip them). Each item's
text is its `text_field`. Anything that keeps an item from being read is a ConfigError naming
the benchmark's key and the file (and line): a missing or unreadable file, a line that is not
JSON, an item without a string in its `text_field`, a Parquet column that is missing or not
text, a file without items.
Nothing is skipped silently.
"""
from __future__ import annotations

import gzip
import json
import os
import zlib

import pyarrow as pa

from shardforge.config import Benchmark, ConfigError

JSONL = (".jsonl", ".json", ".ndjson")


def _where(i: int) -> str:
    return f"decontaminate.benchmarks[{i}]"


def read_items(i: int, b: Benchmark) -> pa.Array:
    """The item texts of benchmark `i` (large_string, no nulls), in file order."""
    path = b.path
    if not os.path.exists(path):
        raise ConfigError(f"{_where(i)}.path: {path}: no such file or folder")
    if os.path.isdir(path) or path.endswith(".parquet"):
        items = _parquet(i, b)
    elif path.endswith(JSONL) or path.endswith(tuple(e + ".gz" for e in JSONL)):
        items = _jsonl(i, b)
    else:
        raise ConfigError(f"{_where(i)}.path: {path}: not a benchmark file (expected .jsonl, .json or .ndjson, "
                          f"optionally .gz, a .parquet file or a folder of Parquet files)")
    if not len(items):
        raise ConfigError(f"{_where(i)}.path: {path} holds no benchmark items")
    return items


def _jsonl(i: int, b: Benchmark) -> pa.Array:
    texts, line = [], 0
    opener = gzip.open if b.path.endswith(".gz") else open
    try:
        with opener(b.path, "rt", encoding="utf-8") as fh:
            for line, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    item = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{_where(i)}.path: {b.path} line {line}: not valid JSON ({exc.msg})") from None
                text = item.get(b.text_field) if isinstance(item, dict) else None
                if not isinstance(text, str):
                    raise ConfigError(f"{_where(i)}.text_field: {b.path} line {line}: no string field "
                                      f"{b.text_field!r} (got {type(text).__name__ if text is not None else 'none'})")
                texts.append(text)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise ConfigError(f"{_where(i)}.path: cannot read {b.path} (after line {line}): {why}") from None
    return pa.array(texts, pa.large_string())


def _parquet(i: int, b: Benchmark) -> pa.Array:
    import pyarrow.parquet as pq

    try:
        schema = pq.ParquetDataset(b.path).schema
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"{_where(i)}.path: cannot read {b.path} as Parquet: {exc}") from None
    if b.text_field not in schema.names:
        raise ConfigError(f"{_where(i)}.text_field: {b.path} has no column {b.text_field!r} "
                          f"(columns: {', '.join(schema.names)})")
    kind = schema.field(b.text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ConfigError(f"{_where(i)}.text_field: column {b.text_field!r} of {b.path} is {kind}, not text")
    try:
        col = pq.read_table(b.path, columns=[b.text_field]).column(0)
    except (OSError, pa.ArrowException) as exc:
        raise ConfigError(f"{_where(i)}.path: cannot read {b.path} as Parquet: {exc}") from None
    if col.null_count:
        raise ConfigError(f"{_where(i)}.text_field: {col.null_count} items of {b.path} have a null "
                          f"{b.text_field!r}")
    col = col.cast(pa.large_string())
    return col.combine_chunks() if col.num_chunks else pa.array([], pa.large_string())
