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

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from shardforge.config import IngestSection
from shardforge.keys import derived_id_expr
from shardforge.ingest.readers.files import PYTHON_READ
from shardforge.stage import StageResult, empty_rejects, rejects

KNOWN = ("id", "text", "source", "url")


class InputError(ValueError):
    """An input path that cannot be read as documents."""


def detect_format(path: str) -> str:
    """jsonl | parquet | text | warc | webdataset | mixed | delta, from the path: a Delta table has
    _delta_log/; a folder whose files are all of one format is that format, one that mixes
    formats is `mixed` (each file then read by its own extension, `shardforge.ingest.readers.files`).
    Compressed JSONL (.gz, .bz2, .zst) is `jsonl`."""
    from shardforge.ingest.readers.files import format_of, list_inputs, unknown_files

    p = path.rstrip("/")
    local = p[len("file://"):] if p.startswith("file://") else p
    if "://" not in local and os.path.isdir(local):
        if os.path.isdir(os.path.join(local, "_delta_log")):
            return "delta"
        unknown = unknown_files(local)
        kinds = {_family(f.format) for f in list_inputs(local)}
        if unknown or not kinds:
            shown = ", ".join(unknown[:3]) + (" ..." if len(unknown) > 3 else "")
            raise InputError(f"{path}: cannot tell the format of this folder's files"
                             + (f" ({shown} has no known extension)" if unknown else " (no input files)")
                             + "; set pipeline.input_format")
        return kinds.pop() if len(kinds) == 1 else "mixed"
    fmt = format_of(local)
    if fmt is None:
        raise InputError(f"{path}: unknown document format (expected .jsonl[.gz|.bz2|.zst], .parquet, .txt, "
                         f".warc[.gz], .wet[.gz], WebDataset .tar[.gz]/.tgz, a folder of them, or a Delta table); "
                         f"set pipeline.input_format")
    return _family(fmt)


def _family(fmt: str) -> str:
    return "jsonl" if fmt.startswith("jsonl") else fmt


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

    from shardforge.config import ConfigError

    fields = []
    for name, ddl in cfg.columns.items():
        try:
            fields.append(StructField(name, _parse_datatype_string(ddl), True))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"ingest.columns.{name}: {ddl!r} is not a Spark SQL type ({first})") from None
    return StructType(fields)


def _read_jsonl(spark: SparkSession, path: str | list[str], cfg: IngestSection, root: str) -> StageResult:
    """Plain JSONL files on a remote filesystem (a path or a list of files) by Spark's text
    reader (splittable). A line over `ingest.max_record_bytes` is rejected after Spark read it
    (local files go through the bounded Python reader instead, `readers.spark.jsonl`)."""
    lines = spark.read.text(path).select(F.col("value").alias("_line"), _relative_source(root).alias("_file"))
    big = F.octet_length("_line") > cfg.max_record_bytes
    res = _parse_jsonl(lines.filter(~big), cfg)
    over = lines.filter(big).select(F.col("_file").alias("source"), F.octet_length("_line").alias("_size"))
    return StageResult(res.kept, res.rejected.unionByName(_too_large(over, cfg, "line")), shared=res.shared)


def named_keys(cfg: IngestSection) -> tuple[str, ...]:
    """The JSONL keys read into the document's own columns."""
    return (cfg.id_column, cfg.text_column, cfg.source_column, "url")


def known_keys(cfg: IngestSection) -> tuple[str, ...]:
    """The JSONL keys the stage reads into columns ([ingest] id, text and source columns, url,
    and `[ingest] columns`); a line's other keys go into `meta`."""
    return (*named_keys(cfg), *cfg.columns)


def _parse_jsonl(lines: DataFrame, cfg: IngestSection) -> StageResult:
    """JSONL lines (`_line`, `_file`; with the Python reader's `_reason` and `_detail`, its
    rows already rejected) to documents and rejects. Every line is parsed once: `shared` (for
    the runner to persist) holds the parsed fields, the other keys as JSON text, and the
    line itself only where it is rejected, so kept rows and rejects both read it."""
    declared = declared_schema(cfg)
    named_cols = named_keys(cfg)
    known = f"`{cfg.id_column}` string, `{cfg.text_column}` string, `{cfg.source_column}` string, url string"
    typed = "".join(f", `{f.name}` {f.dataType.simpleString()}" for f in declared.fields if f.name not in named_cols)
    parse = F.from_json("_line", known + typed + ", _corrupt string",
                        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"})
    marked = "_reason" in lines.columns
    # the reader decoded the named fields of most lines already (`readers.spark.named_fields`:
    # `_parsed`, `_line` null there); Spark parses the others
    decoded = "_parsed" in lines.columns
    if decoded:
        if declared.fields:
            raise ValueError("_parse_jsonl: the reader decodes named fields only without [ingest] columns")
        from shardforge.ingest.readers.spark import FIELDS

        names = [cfg.id_column, cfg.text_column, cfg.source_column, "url"]
        fast = F.struct(*[F.col(f).alias(k) for f, k in zip(FIELDS, names)],
                        F.lit(None).cast("string").alias("_corrupt"))
        parse = F.when(F.col("_parsed"), fast).otherwise(parse)
    # a one-element explode keeps the parsed struct a column of its own: through a plain
    # projection the optimizer pushes the filters below into the parse's place, and the line
    # was parsed once per condition and again after them
    parsed = lines.select("*", F.explode(F.array(parse)).alias("_j"))
    line_ok = F.col("_reason").isNull() if marked else F.lit(True)
    blank = F.trim(F.col("_line")) == ""
    # a decoded line's `_line` is null: it is not blank
    line_blank = F.when(F.col("_parsed"), F.lit(False)).otherwise(blank) if decoded else blank
    malformed = F.col("_j").isNull() | F.col("_j._corrupt").isNotNull()
    skip = list(known_keys(cfg))
    # the line's other keys as JSON text; parsed as a map only on lines that have such keys
    # (a second whole parse of every 6 KB line cost more than the typed parse itself). The
    # Python reader has already scanned each line's keys (`_others`); Spark's json_object_keys
    # (another whole parse) asks only where that scan could not tell, or did not run.
    has_extras = F.exists(F.json_object_keys("_line"), lambda k: ~k.isin(*skip))
    if "_others" in lines.columns:
        has_extras = F.coalesce(F.col("_others"), has_extras)
    extras = F.map_filter(F.from_json("_line", "map<string,string>"), lambda k, v: ~k.isin(*skip))
    good = line_ok & ~line_blank & ~malformed
    shared = parsed.select(
        "_file", "_j", good.alias("_good"),
        F.when(good, F.when(has_extras, F.to_json(extras))).alias("_meta"),
        F.when(~good, F.col("_line")).alias("_line"),
        (F.col("_reason") if marked else F.lit(None).cast("string")).alias("_reason"),
        (F.col("_detail") if marked else F.lit(None).cast("string")).alias("_detail"))
    doc_cols = [
        F.col(f"_j.`{cfg.id_column}`").alias("id"),
        F.col(f"_j.`{cfg.text_column}`").alias("text"),
        F.coalesce(F.col(f"_j.`{cfg.source_column}`"), F.col("_file")).alias("source"),
        F.col("_j.url").alias("url"),
        F.col("_meta").alias("meta"),
        *[F.col(f"_j.`{f.name}`").alias(f.name) for f in declared.fields if f.name not in named_cols],
    ]
    docs = shared.filter(F.col("_good") & F.col(f"_j.`{cfg.text_column}`").isNotNull()).select(*doc_cols)
    return StageResult(_finish(docs), _jsonl_rejects(shared, doc_cols, cfg, typed_columns=bool(len(declared))),
                       shared=(shared,))


def _jsonl_rejects(shared: DataFrame, doc_cols: list, cfg: IngestSection, typed_columns: bool) -> DataFrame:
    """The REJECT rows of `_parse_jsonl`'s shared frame in one pass over it: a line the reader
    marked (`_reason`: too large, unreadable file; record {source}), a line that is not a
    document (blank, not an object, malformed, a declared column of another type; record
    {source, line}, detail its first 200 characters), a document without text (record: the
    document's columns, as `rejects` writes a row)."""
    from shardforge.schemas import REJECT, conform

    text = F.col(f"_j.`{cfg.text_column}`")
    unread = F.col("_reason").isNotNull()
    bad = ~F.col("_good") & ~unread
    line = F.col("_line")
    not_json = F.from_json(line, "map<string,string>").isNull()
    bad_reason = (F.when(F.trim(line) == "", "invalid:blank_line")
                  .when(~F.trim(line).startswith("{"), "invalid:not_an_object")
                  .when(not_json, "invalid:malformed_json")
                  .otherwise(F.lit("invalid:column_type" if typed_columns else "invalid:malformed_json")))
    doc_id = F.col(f"_j.`{cfg.id_column}`")
    doc_source = F.coalesce(F.col(f"_j.`{cfg.source_column}`"), F.col("_file"))
    out = shared.filter(~F.col("_good") | text.isNull()).select(
        F.when(F.col("_good"), doc_id).cast("string").alias("id"),
        F.lit("ingest").alias("stage"),
        F.when(unread, F.col("_reason")).when(bad, bad_reason).otherwise(F.lit("invalid:missing_text"))
        .alias("reason"),
        F.when(unread, F.col("_detail")).when(bad, F.substring(line, 1, 200)).cast("string").alias("detail"),
        F.when(F.col("_good"), doc_source).otherwise(F.col("_file")).cast("string").alias("source"),
        F.when(unread, F.to_json(F.struct(F.col("_file").alias("source"))))
        .when(bad, F.to_json(F.struct(F.lit(None).cast("string").alias("id"), F.col("_file").alias("source"),
                                      line.alias("line"))))
        .otherwise(F.to_json(F.struct(*doc_cols))).alias("record"))
    return conform(out, REJECT)


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
    big = F.octet_length("text") > cfg.max_record_bytes
    docs, missing = _split_missing_text(out)
    over = docs.filter(big).select("id", "source", F.octet_length("text").alias("_size"))
    return StageResult(_finish(docs.filter(~big)), rejects(missing, "ingest", "invalid:missing_text")
                       .unionByName(_too_large(over, cfg, "text")))


def _too_large(df: DataFrame, cfg: IngestSection, what: str) -> DataFrame:
    """REJECT rows `invalid:record_too_large` for rows of (`source`, `_size`[, `id`]): the record
    is not kept in the rejects table (its size is the problem), only where it came from."""
    return rejects(df.select(*(["id"] if "id" in df.columns else []), "source", "_size"), "ingest",
                   "invalid:record_too_large",
                   F.concat(F.col("source"), F.lit(f": {what} of "), F.col("_size").cast("string"),
                            F.lit(f" bytes > ingest.max_record_bytes {cfg.max_record_bytes}")))


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


def _python_read(spark: SparkSession, files: list, cfg: IngestSection) -> list[tuple[StageResult, DataFrame | None]]:
    """JSONL (plain local files and compressed ones), WARC and WebDataset files, read by Python
    tasks (shardforge.ingest.readers), a record at a time under `ingest.max_record_bytes`. Each part
    comes with its marked frame (persisted once by the runner) and, for WARC, the count of
    records by type (`input_records`)."""
    from shardforge.ingest.readers import spark as pyread
    from shardforge.ingest.readers.pages import PageLimits

    out = []
    jsonl = [f for f in files if f.format.startswith("jsonl")]
    if jsonl:
        # the reader decodes the four named fields itself (not with typed [ingest] columns)
        named = named_keys(cfg) if not cfg.columns and len(set(named_keys(cfg))) == 4 else ()
        out.append((_parse_jsonl(pyread.jsonl(spark, jsonl, cfg.max_record_bytes, known_keys(cfg), named), cfg), None))
    warc = [f for f in files if f.format == "warc"]
    if warc:
        marked = pyread.warc(spark, warc, PageLimits(cfg.max_page_bytes, cfg.extract_timeout))
        page = F.col("_rtype").isin("response", "conversion") | F.col("_rtype").isNull()
        pages = marked.filter(page & F.col("_reason").isNull()).select(
            "id", "text", F.col("_file").alias("source"), "url", F.lit("page").alias("kind"), "meta",
            "http_status", "content_type", "charset")
        bad = marked.filter(page & F.col("_reason").isNotNull()).withColumnRenamed("_file", "source")
        counts = marked.groupBy(F.col("_file").alias("source"), F.coalesce("_rtype", F.lit("unreadable"))
                                .alias("record_type")).count()
        out.append((StageResult(_finish(pages), rejects(bad, "ingest", F.col("_reason"), F.col("_detail")),
                                shared=(marked,), extras={"input_records": counts}), counts))
    tars = [f for f in files if f.format == "webdataset"]
    if tars:
        out.append(_read_webdataset(spark, pyread, tars, cfg))
    return out


def _read_webdataset(spark: SparkSession, pyread, files: list, cfg: IngestSection) -> tuple[StageResult, DataFrame]:
    """WebDataset tars (`readers.wds`): one document per sample (kind `image` when it has an
    image, with the IMAGE columns; else `document`), a reject per bad sample, stray member or
    damaged file; directories are counted (`tar_members`), not rows. Fields of the json member
    that `[ingest] columns` declares become typed columns (`invalid:column_type` when a value
    does not fit), as for JSONL."""
    from shardforge.schemas import IMAGE

    from shardforge.ingest.readers.wds import TarLimits

    declared = [f for f in declared_schema(cfg).fields if f.name not in ("id", "text", "source", "url", "kind",
                                                                          "meta", *IMAGE.fieldNames())]
    limits = TarLimits(cfg.max_member_bytes, cfg.image_max_pixels, cfg.id_column, tuple(f.name for f in declared))
    marked = pyread.webdataset(spark, files, limits)
    rows = marked.filter(F.col("_unit") != "skipped")
    if declared:
        ddl = "".join(f"`{f.name}` {f.dataType.simpleString()}, " for f in declared) + "_corrupt string"
        rows = rows.withColumn("_t", F.from_json("_json", ddl, {"mode": "PERMISSIVE",
                                                                "columnNameOfCorruptRecord": "_corrupt"}))
        misfit = F.col("_reason").isNull() & F.col("_t._corrupt").isNotNull()
        rows = rows.withColumn("_reason", F.when(misfit, F.lit("invalid:column_type")).otherwise(F.col("_reason")))
        rows = rows.withColumn("_detail", F.when(misfit, F.concat(F.lit("json of sample "), F.col("_key"), F.lit(": "),
                                                                  F.substring("_json", 1, 200)))
                               .otherwise(F.col("_detail")))
    docs = rows.filter(F.col("_reason").isNull()).select(
        "id", "text", F.col("_file").alias("source"), "url", "kind", "meta",
        *[F.col(f.name).cast(f.dataType) for f in IMAGE.fields],
        *[F.col(f"_t.`{f.name}`").alias(f.name) for f in declared])
    bad = rows.filter(F.col("_reason").isNotNull()).drop("image").withColumnRenamed("_file", "source")
    counts = marked.groupBy(F.col("_file").alias("source"), F.col("_unit").alias("unit")).agg(
        F.count(F.lit(1)).alias("rows"), F.sum("_members").alias("members"),
        F.sum(F.when(F.col("_reason").isNotNull(), F.col("_members")).otherwise(0)).alias("rejected_members"))
    return (StageResult(_finish(docs), rejects(bad, "ingest", F.col("_reason"), F.col("_detail")), shared=(marked,),
                        extras={"tar_members": counts}), counts)


def _read_files(spark: SparkSession, path: str, cfg: IngestSection) -> list[StageResult]:
    """A local file or folder read file by file, each by its own extension."""
    from shardforge.ingest.readers.files import list_inputs

    files = list_inputs(path)
    by = {fmt: [f for f in files if f.format == fmt] for fmt in {f.format for f in files}}
    parts = []
    if "parquet" in by:
        parts.append(_read_table(spark.read.parquet(*[f.path for f in by["parquet"]]), path, cfg,
                                 file_source=_relative_source(path)))
    if "text" in by:
        parts.append(_read_text_files(spark, by["text"], path, cfg))
    parts += [r for r, _ in _python_read(spark, [f for f in files if f.format in PYTHON_READ], cfg)]
    return parts


def _read_text_files(spark: SparkSession, files: list, root: str, cfg: IngestSection) -> StageResult:
    """Local text files, one document each; a file over `ingest.max_record_bytes` is not read:
    it is one `invalid:record_too_large` reject naming it."""
    sizes = [(f, os.path.getsize(f.path[len("file://"):] if f.path.startswith("file://") else f.path)) for f in files]
    small = [f.path for f, size in sizes if size <= cfg.max_record_bytes]
    big = [(f.source, size) for f, size in sizes if size > cfg.max_record_bytes]
    if small:
        res = _read_text(spark, small, root, cfg)
    else:
        empty = spark.createDataFrame([], f"`{cfg.text_column}` string, _src string")
        res = _read_table(empty, root, cfg, file_source=F.col("_src"))
    if big:
        over = spark.createDataFrame(big, "source string, _size long")
        res = StageResult(res.kept, res.rejected.unionByName(_too_large(over, cfg, "file")))
    return res


def _read_text(spark: SparkSession, paths, root: str, cfg: IngestSection) -> StageResult:
    df = spark.read.text(paths, wholetext=True).select(F.col("value").alias(cfg.text_column),
                                                       _relative_source(root).alias("_src"))
    return _read_table(df, root, cfg, file_source=F.col("_src"))


def _read_path(spark: SparkSession, path: str, cfg: IngestSection, fmt: str) -> list[StageResult]:
    from shardforge.ingest.readers.files import InputFile, format_of

    local = path[len("file://"):] if path.startswith("file://") else path
    kind = detect_format(path) if fmt in ("auto", "", None) else fmt
    if kind == "delta":
        return [_read_table(spark.read.format("delta").load(path), path, cfg, file_source=F.lit(Path(path).name))]
    if fmt in ("auto", "", None) and "://" not in local:
        return _read_files(spark, path, cfg)          # per file, by extension (mixed folders too)
    if kind in ("warc", "webdataset") or (kind == "jsonl" and ("://" not in local
                                                               or (format_of(local) or "").startswith("jsonl."))):
        if "://" not in local and os.path.isdir(local):
            from shardforge.ingest.readers.files import list_inputs

            files = [InputFile(f.path, f.source, kind if kind in ("warc", "webdataset") else f.format)
                     for f in list_inputs(path)]
        else:
            name = Path(local.split("?", 1)[0]).name
            files = [InputFile(path, name, kind if kind in ("warc", "webdataset") else format_of(local) or "jsonl")]
        return [r for r, _ in _python_read(spark, files, cfg)]
    if kind == "jsonl":
        return [_read_jsonl(spark, path, cfg, path)]
    if kind == "parquet":
        return [_read_table(spark.read.parquet(path), path, cfg, file_source=_relative_source(path))]
    if kind == "text":
        return [_read_text(spark, path, path, cfg)]
    raise InputError(f"{path}: unsupported input format {kind!r}")


def read_documents(spark: SparkSession, paths: str | list[str] | tuple[str, ...], cfg: IngestSection,
                   fmt: str = "auto") -> StageResult:
    """Read every path as documents; kept and rejected together account for every input row
    (a WARC record of a type other than response/conversion is not a row: it is counted in
    the `input_records` extra, by file and type). `shared` holds the frames the Python readers
    mark, for the runner to persist once."""
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise InputError("no input given: pass --input PATH or set pipeline.input")
    results: list[tuple[str, StageResult]] = []
    for path in paths:
        check_exists(path)
        results += [(path, r) for r in _read_path(spark, path, cfg, fmt)]
    return merge_results(results)


def merge_results(results: list[tuple[str, StageResult]]) -> StageResult:
    """Kept rows by column name (`union_documents`), rejects appended, shared frames and
    extras (unioned by name) carried along."""
    kept = union_documents([(p, r.kept) for p, r in results])
    rejected = results[0][1].rejected
    for _, r in results[1:]:
        rejected = rejected.unionByName(r.rejected)
    shared = tuple(f for _, r in results for f in _frames(r.shared))
    extras: dict[str, DataFrame] = {}
    for _, r in results:
        for k, v in r.extras.items():
            extras[k] = extras[k].unionByName(v) if k in extras else v
    return StageResult(kept, rejected, shared=shared or None, extras=extras)


def _frames(shared) -> tuple:
    if shared is None:
        return ()
    return tuple(shared) if isinstance(shared, (tuple, list)) else (shared,)


# ids that occur more than once in a batch are few; up to this many they are broadcast to the
# rows, so only those rows are shuffled by id, not the whole batch (ids are short: 100,000 of
# them stay far below Spark's 10 MB broadcast threshold)
BROADCAST_REPEATED_IDS = 100_000


def unique_ids(df: DataFrame, sha_col: str | None = None) -> StageResult:
    """One row per id: of rows sharing an id, the one with the smallest (sha256(text), source)
    is kept; the others are rejected as `invalid:duplicate_id` (exact copies included:
    the dedup stage only sees distinct ids). `sha_col`: a column holding sha256(text) already
    (hex, as `sha2`), for rows whose text is no longer the text read (`ingest.fused`).

    One job counts the repeated ids (a shuffle of the ids alone). None: the rows pass as they
    are. A few: only the rows with those ids are ranked. Many: every row is ranked by id.
    Runs that job eagerly, so `df` should be cheap to read twice (persisted, or files)."""
    repeated = df.groupBy("id").agg(F.count(F.lit(1)).alias("_c")).where(F.col("_c") > 1).select("id")
    n = repeated.count()
    if n == 0:
        return StageResult(df, empty_rejects(df.sparkSession))
    if n > BROADCAST_REPEATED_IDS:
        ranked = _rank_by_id(df, sha_col)
        return StageResult(ranked.filter("_n = 1").drop("_n"),
                           rejects(ranked.filter("_n > 1"), "ingest", "invalid:duplicate_id"))
    marks = F.broadcast(repeated.select(F.col("id").alias("_rid"), F.lit(True).alias("_rep")))
    flagged = df.join(marks, df["id"].eqNullSafe(marks["_rid"]), "left").drop("_rid")
    ranked = _rank_by_id(flagged.where(F.col("_rep")).drop("_rep"), sha_col)
    kept = flagged.where(F.col("_rep").isNull()).drop("_rep").unionByName(ranked.filter("_n = 1").drop("_n"))
    return StageResult(kept, rejects(ranked.filter("_n > 1"), "ingest", "invalid:duplicate_id"))


def _rank_by_id(df: DataFrame, sha_col: str | None = None) -> DataFrame:
    """`df` with _n: 1 for the row that keeps its id, 2, 3, ... for the others."""
    image = F.col("image") if "image" in df.columns else F.lit(None).cast("binary")
    sha = F.col(sha_col) if sha_col else F.sha2(F.coalesce("text", F.lit("")), 256)
    w = Window.partitionBy("id").orderBy(sha, F.col("source"),
                                         F.sha2(F.coalesce(image, F.lit(b"").cast("binary")), 256))
    return df.withColumn("_n", F.row_number().over(w))
