"""Ingest and clean in one pass over local JSONL files, when a plan runs them back to back.

Run as two stages, a web build moves every document's text five times before the clean stage
has judged it: from the reading Python task to the JVM, into the cache, into ingest's Parquet,
back out of it, and to clean's Python task. Most of that text is then rejected (on web data,
nine documents in ten). Here the reading task also runs the clean stage's kernels
(`shardforge.clean.stage.clean_batch`) on each line it decodes, and only what clean keeps comes
back with its text; a rejected document comes back as its id, source, url, the sha256 of its
text and the reason.

The result is the two stages' own: the same kept rows, rejects and counts (tests compare both
paths byte for byte, and the shards' build id):
- a line the reader declines (other keys than the four named ones, odd JSON, a reader reject,
  no text) takes ingest's usual path (`ingest.stage._parse_jsonl`), and the documents it gives
  take clean's usual `mapInArrow`;
- the repeated-id check (`ingest.stage.unique_ids`) ranks every document by the sha256 of its
  text as before (computed in the task for the decoded lines), and clean's result of a
  document that loses its id is dropped with it. Clean judges each row alone, so that is
  what running the stages in order gives.

What changes is resume: ingest's kept rows are never written, so ingest's checkpoint is reused
only together with clean's (`runner`), and a run that stops inside this pass starts it again
from the input files.

`blocker(cfg, plan, i)` says why a plan cannot take this path (None: it can); `read_and_clean`
builds the two stages' outputs.
"""
from __future__ import annotations

import hashlib
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shardforge.config import Config
from shardforge.stage import StageResult, rejects

# the pass's rows: the reader's (readers.spark.JSONL_FIELDS), and for a decoded document
# (`_fused` true) its final id in _f0, clean's text (kept) or "" (rejected) in _f1, its source
# in _f2, url in _f3, the sha256 of its text as read, and clean's language columns and reason
SHA_COL = "_text_sha"


def blocker(cfg: Config, plan: tuple[str, ...], i: int) -> str | None:
    """Why `plan[i]` (ingest) cannot run fused with the clean stage after it, or None."""
    from shardforge.ingest.readers import spark as pyread
    from shardforge.ingest.readers.files import list_inputs
    from shardforge.ingest.stage import named_keys

    p, ing = cfg.pipeline, cfg.ingest
    if plan[i] != "ingest" or i + 1 >= len(plan) or plan[i + 1] != "clean":
        return "clean does not follow ingest"
    if not p.fuse:
        return "pipeline.fuse is off"
    if p.urls:
        return "the run downloads URLs"
    if p.write_raw:
        return "pipeline.write_raw keeps ingest's rows as a table"
    if cfg.rejects.record != "none":
        return "the rejects table keeps records (rejects.record)"
    if cfg.quality.mode == "annotate" and cfg.quality.filters:
        return "quality.mode is annotate"
    if ing.columns or len(set(named_keys(ing))) != 4 or not pyread.COMPILED:
        return "the reader cannot decode the named fields ([ingest] columns, or no compiled kernel)"
    if p.input_format not in ("auto", "", "jsonl") or not p.input:
        return "the input is not JSONL files"
    for path in p.input:
        local = path[len("file://"):] if path.startswith("file://") else path
        if "://" in local:
            return "an input is not on the local filesystem"
        files = list_inputs(path)
        if not files or any(not f.format.startswith("jsonl") for f in files):
            return "an input holds files other than JSONL"
    return None


def _task(cfg: Config, urls):
    """The mapInArrow function: rows of `readers.spark.splits_frame` in, rows of `fused_schema` out."""
    from shardforge.clean.stage import REASON_COL, clean_batch, rules_from_config
    from shardforge.ingest.readers.spark import named_fields, split_lines
    from shardforge.ingest.stage import named_keys

    ing, cl, q = cfg.ingest, cfg.clean, cfg.quality
    rules = rules_from_config(cl)
    form = cl.unicode_form if cl.normalize_unicode else ""
    named = named_keys(ing)
    cap = ing.max_record_bytes
    schema = fused_schema(cfg)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow.compute as pc

        for batch in split_lines(batches, cap):
            f = named_fields(batch, named)
            n = f.num_rows
            fused = np.asarray(f.column("_parsed").to_numpy(zero_copy_only=False), dtype=bool)
            fused &= np.asarray(f.column("_reason").is_null().to_numpy(zero_copy_only=False), dtype=bool)
            fused &= np.asarray(f.column("_f1").is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            idx = np.flatnonzero(fused)
            cols = {name: f.column(name) for name in f.schema.names}
            extra = {"_fused": pa.array(fused), SHA_COL: pa.nulls(n, pa.string())}
            if cl.detect_language:
                extra["language"] = pa.nulls(n, pa.string())
                extra["language_score"] = pa.nulls(n, pa.float64())
            extra[REASON_COL] = pa.nulls(n, pa.string())
            if len(idx):
                take = pa.array(idx)
                text = f.column("_f1").take(take)
                files = f.column("_file").take(take)
                source = pc.coalesce(f.column("_f2").take(take), files)
                ids = _ids(f.column("_f0").take(take), text, source)
                m = len(idx)
                docs = pa.RecordBatch.from_arrays(
                    [ids, text, source, f.column("_f3").take(take), pa.array(["document"] * m, pa.string()),
                     pa.nulls(m, pa.string())], names=["id", "text", "source", "url", "kind", "meta"])
                out = clean_batch(docs, rules, form, cl, q, urls, False)
                cols["_f0"] = _scatter(cols["_f0"], idx, ids)
                cols["_f1"] = _scatter(cols["_f1"], idx, out.column("text"))
                cols["_f2"] = _scatter(cols["_f2"], idx, source)
                extra[SHA_COL] = _scatter(extra[SHA_COL], idx, _sha256(text))
                for name in ("language", "language_score", REASON_COL):
                    if name in extra:
                        extra[name] = _scatter(extra[name], idx, out.column(name))
            yield pa.RecordBatch.from_arrays([cols[name] if name in cols else extra[name] for name in schema.names],
                                             schema=schema)

    return run


def fused_schema(cfg: Config) -> pa.Schema:
    """The pass's rows: the reader's (`readers.spark.JSONL_FIELDS`), `_fused`, the text's
    sha256, clean's language columns (when it detects language) and clean's reason."""
    from shardforge.clean.stage import REASON_COL
    from shardforge.ingest.readers.spark import JSONL_FIELDS

    fields = list(JSONL_FIELDS) + [pa.field("_fused", pa.bool_()), pa.field(SHA_COL, pa.string())]
    if cfg.clean.detect_language:
        fields += [pa.field("language", pa.string()), pa.field("language_score", pa.float64())]
    return pa.schema(fields + [pa.field(REASON_COL, pa.string())])


def _values(arr: pa.Array) -> Iterator[bytes | None]:
    """The UTF-8 bytes of each value of a string array (None for nulls), without decoding."""
    import numpy as np

    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    _, offsets, data = arr.buffers()[:3]
    offs = np.frombuffer(offsets, dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    raw = memoryview(data) if data is not None else memoryview(b"")
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    for k in range(len(arr)):
        yield bytes(raw[offs[k]:offs[k + 1]]) if valid[k] else None


def _sha256(text: pa.Array) -> pa.Array:
    """sha256 of each value's UTF-8 bytes in lowercase hex, as Spark's `sha2(text, 256)`."""
    return pa.array([hashlib.sha256(v or b"").hexdigest() for v in _values(text)], pa.string())


def _ids(given: pa.Array, text: pa.Array, source: pa.Array) -> pa.Array:
    """The id column: the line's own id, or `keys.derived_id` of its text and source where it
    has none (the expression ingest applies, `keys.derived_id_expr`)."""
    if given.null_count == 0:
        return given
    out = given.to_pylist()
    for k, (t, s) in enumerate(zip(_values(text), _values(source))):
        if out[k] is None:
            out[k] = hashlib.sha256((s or b"") + b"\x1f" + (t or b"")).hexdigest()[:32]
    return pa.array(out, pa.string())


def _scatter(base: pa.Array, idx, values: pa.Array) -> pa.Array:
    """`base` with the rows at `idx` replaced by `values` (same type)."""
    if len(idx) == len(base):
        return values.cast(base.type)
    out = base.to_pylist()
    for k, v in zip(idx.tolist(), values.to_pylist()):
        out[k] = v
    return pa.array(out, base.type)


class Fused:
    """The two stages' outputs of one pass: `ingest` (kept: the documents that keep their id,
    with helper columns; rejected), `clean` (kept, rejected), and `marked`, the pass's frame,
    persisted: the caller unpersists it once both are written."""

    def __init__(self, marked: DataFrame, ingest: StageResult, clean: StageResult):
        self.marked, self.ingest, self.clean = marked, ingest, clean


def read_and_clean(spark: SparkSession, cfg: Config, urls=None) -> Fused:
    """Run the pass, then build both stages' outputs from it. Its first job fills the pass's
    cache and tells whether any line took ingest's usual path and which decoded ids repeat;
    without such lines (clean JSONL, the usual case) the outputs are plain filters of the
    cache, with none of that path's parsing, unions and second clean."""
    from pyspark import StorageLevel

    from shardforge.clean.stage import LANGUAGE_FIELDS, REASON_COL, clean, split_marked
    from shardforge.ingest.readers.files import list_inputs
    from shardforge.ingest.readers.spark import JSONL_FIELDS, _spark_schema, splits_frame
    from shardforge.ingest.stage import _parse_jsonl, unique_ids
    from shardforge.schemas import DOCUMENT, documents
    from shardforge.stage import empty_rejects

    files = [f for path in cfg.pipeline.input for f in list_inputs(path)]
    # persisted before its first job; the caller unpersists it
    marked = (splits_frame(spark, files).mapInArrow(_task(cfg, urls), _spark_schema(fused_schema(cfg)))
              .persist(StorageLevel.MEMORY_AND_DISK))
    # one job: the lines left to ingest's usual path (key null), and decoded ids seen twice
    stats = (marked.groupBy(F.when(F.col("_fused"), F.col("_f0")).alias("k")).agg(F.count(F.lit(1)).alias("n"))
             .where(F.col("k").isNull() | (F.col("n") > 1)).limit(2).collect())
    undecoded = sum(int(r["n"]) for r in stats if r["k"] is None)
    repeats = any(r["k"] is not None for r in stats)
    lang = [f.name for f in LANGUAGE_FIELDS] if cfg.clean.detect_language else []
    doc_cols = [F.col(f.name) for f in DOCUMENT.fields]
    # the documents the task decoded and judged
    decoded = documents(marked.filter(F.col("_fused")).select(
        F.col("_f0").alias("id"), F.col("_f1").alias("text"), F.col("_f2").alias("source"), F.col("_f3").alias("url"),
        F.lit("document").alias("kind"), F.lit(None).cast("string").alias("meta"),
        F.col(SHA_COL), *[F.col(c) for c in lang], F.col(REASON_COL), F.lit(True).alias("_fused")))
    if not undecoded:
        ids = unique_ids(decoded, sha_col=SHA_COL) if repeats else StageResult(decoded, empty_rejects(spark))
        judged = ids.kept.select(*doc_cols, *[F.col(c) for c in lang], F.col(REASON_COL))
        kept, rejected = split_marked(judged, annotate_urls=False)
        return Fused(marked, StageResult(ids.kept, ids.rejected), StageResult(kept, rejected))
    # every other line, as ingest reads it; its documents are cleaned after the id check
    rest = _parse_jsonl(marked.filter(~F.col("_fused")).select(*JSONL_FIELDS.names), cfg.ingest)
    parsed = rest.kept.select("*", F.sha2(F.coalesce("text", F.lit("")), 256).alias(SHA_COL),
                              *[F.lit(None).cast(t).alias(c) for c, t in (("language", "string"),
                                                                          ("language_score", "double"))
                                if c in lang],
                              F.lit(None).cast("string").alias(REASON_COL), F.lit(False).alias("_fused"))
    ids = unique_ids(decoded.unionByName(parsed), sha_col=SHA_COL)
    ingest = StageResult(ids.kept, rest.rejected.unionByName(ids.rejected), shared=rest.shared)
    judged = ids.kept.filter(F.col("_fused")).select(*doc_cols, *[F.col(c) for c in lang], F.col(REASON_COL))
    later = clean(ids.kept.filter(~F.col("_fused")).select(*doc_cols), cfg.clean, cfg.quality, urls,
                  rejected_text=False)
    kept, rejected = split_marked(later.shared.unionByName(judged), annotate_urls=False)
    return Fused(marked, ingest, StageResult(kept, rejected, shared=later.shared))
