"""The Python-read formats on Spark: one task per file (up to `max_tasks`), rows streamed out
in Arrow batches of at most `BATCH_ROWS` rows or `BATCH_BYTES` bytes of text.

`jsonl(spark, files, max_record_bytes, known)`, `warc(spark, files, limits)` and `webdataset(spark,
files, limits)` return the *marked* frame: every row the readers made, with `_reason` set on the
rejected ones. The caller filters documents, rejects and skipped units (WARC record types,
tar directories) from it and persists it once.
Deterministic: rows depend only on the files, never on how tasks were assigned.
"""
from __future__ import annotations

import os
import zipimport
from functools import lru_cache
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from shardforge.ingest.readers.files import InputFile
from shardforge.ingest.readers.pages import PageLimits
from shardforge.ingest.readers.wds import TarLimits

BATCH_ROWS = 256
BATCH_BYTES = 32 << 20
# up to this many splits the splits frame is a literal array (`splits_frame`), above it a
# parallelized list
LITERAL_SPLITS = 4096

LINES = pa.schema([("_line", pa.string()), ("_file", pa.string()), ("_reason", pa.string()),
                   ("_detail", pa.string())])
# JSONL lines with `_others`: does the line's object have a top-level key beyond the stage's known
# ones (true / false, null: the scan cannot tell, and Spark is asked; see `other_keys`)
JSONL_LINES = pa.schema(list(LINES) + [pa.field("_others", pa.bool_())])
# with the named fields decoded by the reader (`named_fields`): `_parsed` is true where they
# were, and then `_line` is null and `_f0`.. hold the fields in `named` order (null: absent or
# JSON null); false where Spark parses `_line` as before
FIELDS = tuple(f"_f{k}" for k in range(4))
JSONL_FIELDS = pa.schema(list(JSONL_LINES) + [pa.field("_parsed", pa.bool_())]
                         + [pa.field(f, pa.string()) for f in FIELDS])
# lines longer than this are never decoded by the reader (Spark parses them, as it parses
# every line the reader declines): far above a web document, and below any limit Spark's JSON
# parser puts on one string
PARSE_MAX_LINE_BYTES = 4 << 20
WARC = pa.schema([("_rtype", pa.string()), ("_file", pa.string()), ("id", pa.string()), ("url", pa.string()),
                  ("http_status", pa.int32()), ("content_type", pa.string()), ("charset", pa.string()),
                  ("text", pa.string()), ("meta", pa.string()), ("_reason", pa.string()), ("_detail", pa.string())])

WDS = pa.schema([("_file", pa.string()), ("_unit", pa.string()), ("_members", pa.int32()), ("_key", pa.string()),
                 ("id", pa.string()), ("text", pa.string()), ("url", pa.string()), ("kind", pa.string()),
                 ("meta", pa.string()), ("image", pa.binary()), ("image_width", pa.int32()),
                 ("image_height", pa.int32()), ("_json", pa.string()), ("_reason", pa.string()),
                 ("_detail", pa.string())])


def _spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _files_frame(spark: SparkSession, files: list[InputFile], max_tasks: int = 10_000) -> DataFrame:
    rows = [(f.path, f.source, f.format) for f in files]
    n = max(1, min(len(rows), max_tasks))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, n), "path string, source string, format string")


def _batches(rows: Iterator[dict], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Rows to record batches, flushed by row count and by text bytes (bounded memory)."""
    buf: list[dict] = []
    size = 0
    for row in rows:
        buf.append(row)
        size += len(row.get("text") or row.get("_line") or "") + len(row.get("image") or b"")
        if len(buf) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield _record_batch(buf, schema)
            buf, size = [], 0
    if buf:
        yield _record_batch(buf, schema)


def _record_batch(rows: list[dict], schema: pa.Schema) -> pa.RecordBatch:
    """`pa.RecordBatch.from_pylist(rows, schema)` (a key a row lacks is null, keys beyond the
    schema are ignored), built a column at a time: Arrow converts a list of values in one call,
    about 40 times faster than it walks a list of dicts (0.2 s against 5 ms for 14 MB of lines)."""
    return pa.RecordBatch.from_arrays([pa.array([r.get(f.name) for r in rows], f.type) for f in schema],
                                      schema=schema)


def _paths(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[str, str, str]]:
    for b in batches:
        yield from zip(*(b.column(i).to_pylist() for i in range(3)))


def split_bytes_of(spark: SparkSession, total_bytes: int = 0, files: int = 0) -> int:
    """The split size of plain JSONL files, by the rule Spark sizes every other file source's
    splits with (FilePartition.maxSplitBytes): `spark.sql.files.maxPartitionBytes` (128 MiB by
    default), made smaller when the input would give fewer tasks than
    `spark.sql.files.minPartitionNum` (default: the default parallelism), but never below
    `spark.sql.files.openCostInBytes` (4 MiB). One 100 MB file thus fills every core."""
    def conf_bytes(key: str, default: str) -> int:
        value = spark.conf.get(key, default)
        return int(spark.sparkContext._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(value))

    max_bytes = conf_bytes("spark.sql.files.maxPartitionBytes", "128m")
    open_cost = conf_bytes("spark.sql.files.openCostInBytes", "4m")
    min_parts = int(spark.conf.get("spark.sql.files.minPartitionNum", None) or spark.sparkContext.defaultParallelism)
    per_core = (total_bytes + files * open_cost) // max(1, min_parts)
    return max(1, min(max_bytes, max(open_cost, per_core)))


def jsonl_splits(files: list[InputFile], split_bytes: int) -> list[tuple[str, str, str, int, int]]:
    """(path, source, format, start, end) per task: a plain local JSONL file in byte ranges of
    `split_bytes` (each split reads the lines that start in it), any other file whole (end -1)."""
    out = []
    for f in files:
        local = f.path[len("file://"):] if f.path.startswith("file://") else f.path
        if f.format == "jsonl" and "://" not in local:
            size = os.path.getsize(local)
            for start in range(0, max(size, 1), split_bytes):
                out.append((f.path, f.source, f.format, start, min(start + split_bytes, size)))
        else:
            out.append((f.path, f.source, f.format, 0, -1))
    return out


def splits_frame(spark: SparkSession, files: list[InputFile]) -> DataFrame:
    """One row per `jsonl_splits` split of `files` (path, source, format, start, end), sized for
    the plain local JSONL files' total size; the rows `split_lines` reads."""
    plain = [f.path[len("file://"):] if f.path.startswith("file://") else f.path for f in files if f.format == "jsonl"]
    plain = [p for p in plain if "://" not in p]
    total = sum(os.path.getsize(p) for p in plain)
    splits = jsonl_splits(files, split_bytes_of(spark, total, len(plain)))
    n = max(1, min(len(splits), 10_000))
    schema = "path string, source string, format string, start long, end long"
    if len(splits) > LITERAL_SPLITS:
        return spark.createDataFrame(spark.sparkContext.parallelize(splits, n), schema)
    # the splits as a literal array indexed by a range of n partitions: no Python worker
    # converts them (a Python RDD would start a second set of workers beside the readers')
    from pyspark.sql import functions as F

    arr = F.array(*[F.struct(F.lit(p).alias("path"), F.lit(src).alias("source"), F.lit(fmt).alias("format"),
                             F.lit(start).cast("long").alias("start"), F.lit(end).cast("long").alias("end"))
                    for p, src, fmt, start, end in splits])
    return spark.range(0, len(splits), 1, n).select(F.inline(F.array(F.element_at(arr, (F.col("id") + 1).cast("int")))))


def split_lines(batches: Iterator[pa.RecordBatch], max_record_bytes: int) -> Iterator[pa.RecordBatch]:
    """LINES batches of the splits in `batches` (rows of `jsonl_splits`), read in order."""
    from shardforge.ingest.readers.streams import jsonl_lines

    def rows():
        for b in batches:
            for path, source, fmt, start, end in zip(*(b.column(i).to_pylist() for i in range(5))):
                yield from jsonl_lines(path, source, fmt, max_record_bytes, start, None if end < 0 else end)
    return _batches(rows(), LINES)


def jsonl(spark: SparkSession, files: list[InputFile], max_record_bytes: int, known: tuple[str, ...] = (),
          named: tuple[str, ...] = (), parse_max: int = PARSE_MAX_LINE_BYTES) -> DataFrame:
    """Lines of JSONL files, plain (local, in byte-range splits of `split_bytes_of` for their
    total size) or .gz, .bz2, .zst: `_line`, `_file`; a line over `max_record_bytes` is a row with
    `_reason` invalid:record_too_large (never held whole), an unreadable or truncated file one row
    with invalid:unreadable_file. `_others` answers, per line, whether its object has top-level keys
    other than `known` (`other_keys`). With `named` (the four keys read into id, text, source and
    url; `known` must then be those alone) the reader also decodes them where JSON leaves no
    doubt (`named_fields`: JSONL_FIELDS), so Spark parses only the lines it declines."""
    if named and (len(named) != len(FIELDS) or set(known) != set(named)):
        raise ValueError(f"jsonl: named keys {named!r} must be {len(FIELDS)} and the only known ones ({known!r})")
    decode = bool(named) and COMPILED

    def run(batches):
        for batch in split_lines(batches, max_record_bytes):
            if decode:
                yield named_fields(batch, named, parse_max)
            else:
                yield batch.append_column(JSONL_LINES.field("_others"), other_keys(batch.column("_line"), known))

    return splits_frame(spark, files).mapInArrow(run, _spark_schema(JSONL_FIELDS if decode else JSONL_LINES))


# the compiled kernel answers `other_keys`; from the `--py-files` zip (no compiled module) every
# answer is null and Spark's `json_object_keys` decides, as before the kernel
COMPILED = not isinstance(__spec__.loader, zipimport.zipimporter)


@lru_cache(maxsize=4)
def _keys_kernel(known: tuple[str, ...]):
    from shardforge.native import compiled

    return compiled("KnownKeys")(list(known))


def other_keys(lines: pa.Array, known: tuple[str, ...]) -> pa.Array:
    """Per line (an Arrow string array): true when it is a JSON object with a top-level key not
    in `known`, false when all its keys are known, null when one scan of its bytes cannot tell
    (not one object, an escaped key, malformed, null; or no compiled kernel)."""
    import numpy as np

    n = len(lines)
    if not COMPILED or not known or n == 0:
        return pa.nulls(n, pa.bool_())
    _, offsets, data = lines.buffers()
    offs = np.frombuffer(offsets, dtype=np.int32)[lines.offset:lines.offset + n + 1]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    got = np.frombuffer(_keys_kernel(known).other_keys(offs, raw), dtype=np.uint8)
    return pa.array(got == 1, mask=got == 2)


@lru_cache(maxsize=4)
def _fields_kernel(named: tuple[str, ...], parse_max: int):
    from shardforge.native import compiled

    return compiled("NamedFields")(list(named), list(named), parse_max)


def named_fields(batch: pa.RecordBatch, named: tuple[str, ...], parse_max: int = PARSE_MAX_LINE_BYTES) -> pa.RecordBatch:
    """A LINES batch as a JSONL_FIELDS one: per line, `_others` (as `other_keys` with `named` as
    the known keys), and where the line is one JSON object of `named` keys only, each at most
    once, each a string or null written as JSON writes them, and at most `parse_max` bytes:
    `_parsed` true, the decoded fields in `_f0`.., and `_line` null. Other lines keep `_line`
    for Spark (`_parsed` false, fields null)."""
    import numpy as np
    import pyarrow.compute as pc

    lines = batch.column("_line")
    n = len(lines)
    if n == 0:
        return pa.RecordBatch.from_arrays(list(batch.columns) + [pa.array([], pa.bool_()), pa.array([], pa.bool_())]
                                          + [pa.array([], pa.string())] * len(FIELDS), schema=JSONL_FIELDS)
    _, offsets, data = lines.buffers()
    offs = np.frombuffer(offsets, dtype=np.int32)[lines.offset:lines.offset + n + 1]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    others, parsed, cols = _fields_kernel(tuple(named), parse_max).read(offs, raw)
    got = np.frombuffer(others, dtype=np.uint8)
    done = np.frombuffer(parsed, dtype=np.uint8).astype(bool)
    fields = []
    for off, values, valid in cols:
        mask = np.packbits(np.frombuffer(valid, dtype=np.uint8), bitorder="little")
        fields.append(pa.Array.from_buffers(pa.string(), n, [pa.py_buffer(mask.tobytes()), pa.py_buffer(off),
                                                              pa.py_buffer(values)]))
    parsed_arr = pa.array(done)
    kept_line = pc.if_else(parsed_arr, pa.scalar(None, pa.string()), lines) if done.any() else lines
    cols_out = [kept_line if name == "_line" else batch.column(name) for name in batch.schema.names]
    return pa.RecordBatch.from_arrays(cols_out + [pa.array(got == 1, mask=got == 2), parsed_arr] + fields,
                                      schema=JSONL_FIELDS)


def warc(spark: SparkSession, files: list[InputFile], limits: PageLimits) -> DataFrame:
    """One row per WARC record of every file (see `streams.warc_rows`); page rows carry the
    extracted text and `meta` (title, WARC date). Each task runs one extraction sandbox."""
    from shardforge.ingest.extract import Sandbox

    from shardforge.ingest.readers.streams import title_meta, warc_rows

    def run(batches):
        def rows(sandbox):
            for path, source, _ in _paths(batches):
                for row in warc_rows(path, source, limits, sandbox):
                    row["meta"] = title_meta(row.pop("_title", None), row.pop("_date", None))
                    yield row
        with Sandbox(limits.extract_timeout) as sandbox:
            yield from _batches(rows(sandbox), WARC)

    return _files_frame(spark, files).mapInArrow(run, _spark_schema(WARC))


def webdataset(spark: SparkSession, files: list[InputFile], limits: TarLimits) -> DataFrame:
    """One row per sample, per member that belongs to no sample, per directory (`_unit`
    skipped) and per damaged file of every tar (see `wds.tar_rows`)."""
    from shardforge.ingest.readers.wds import webdataset_rows

    def run(batches):
        def rows():
            for path, source, _ in _paths(batches):
                yield from webdataset_rows(path, source, limits)
        yield from _batches(rows(), WDS)

    return _files_frame(spark, files).mapInArrow(run, _spark_schema(WDS))
