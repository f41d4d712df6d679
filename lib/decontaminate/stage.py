"""The decontaminate stage: documents that hold a benchmark's word n-gram, GPT-3 style.

`load_index(cfg)` reads `[decontaminate] benchmarks` on the driver (`benchmarks.read_items`)
and builds the index of their n-grams once (`ngrams.build_index`: sorted 64-bit hashes, each
with the set of benchmarks holding it); the last index built is kept for the process, so
the runner's check before Spark starts and the stage share one build. `decontaminate(df, ...)`
broadcasts it and scans each Arrow batch's `text` with `mapInArrow` (`ngrams.scan`, numpy on
whole arrays). A document holding any indexed n-gram is rejected as
`contaminated:<benchmark>`, naming the first benchmark in config order among those it
matches; with `[quality] mode = "annotate"` it is kept instead, and every document gets
`signals.contaminated_ngrams` (distinct benchmark n-grams found, 0 for a clean document) and
`signals.contaminated_benchmark` (that benchmark's name, or null). Images' captions are
checked like any text; a null text has no n-grams. rows in = kept + rejected; each
document's result depends on its text and the benchmark files only, not on partitioning.
"""
from __future__ import annotations

import os
import time
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from shardforge.config import ConfigError, DecontaminateSection
from shardforge.decontaminate.benchmarks import read_items
from shardforge.decontaminate.ngrams import Index, build_index, first_benchmark, ngram_texts, scan
from shardforge.stage import StageResult, empty_rejects, rejects, with_signals

COUNT, MASK, FIRST, HITS = "_decon_ngrams", "_decon_benchmarks", "_decon_benchmark", "_decon_hashes"
SIGNAL_COUNT, SIGNAL_BENCHMARK = "contaminated_ngrams", "contaminated_benchmark"
TOP = 10                          # most-hit n-grams in the report
_BUILT: dict = {}                 # the last index built in this process, by what it was built from
_EXECUTOR: dict[str, Index] = {}  # the broadcast index on an executor, by digest (its filter built once)


def benchmark_items(cfg: DecontaminateSection) -> list[tuple[str, pa.Array]]:
    """(name, item texts) of every benchmark, in config order; ConfigError naming the key otherwise."""
    if not cfg.benchmarks:
        raise ConfigError("decontaminate.benchmarks: the decontaminate stage needs at least one benchmark "
                          '(a table { name = "...", path = "items.jsonl", text_field = "text" })')
    return [(b.name, read_items(i, b)) for i, b in enumerate(cfg.benchmarks)]


def _stamp(path: str):
    """What says a benchmark file (or folder) is unchanged: paths, sizes, modification times."""
    if not os.path.isdir(path):
        st = os.stat(path)
        return (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    out = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for n in sorted(names):
            st = os.stat(os.path.join(root, n))
            out.append((os.path.relpath(os.path.join(root, n), path), st.st_size, st.st_mtime_ns))
    return (os.path.abspath(path), tuple(out))


def load_index(cfg: DecontaminateSection) -> Index:
    """The index of `cfg`'s benchmarks, built on the driver (or the one this process last
    built from the same files and settings). Raises ConfigError naming the key and file."""
    try:
        key = (cfg, tuple(_stamp(b.path) for b in cfg.benchmarks))
    except OSError:
        key = None                # benchmark_items says which file and why
    if key is not None and _BUILT.get("key") == key:
        return _BUILT["index"]
    t0 = time.monotonic()
    index = build_index(benchmark_items(cfg), cfg.ngram, cfg.min_ngram)
    index.seconds = round(time.monotonic() - t0, 3)
    _BUILT.clear()
    _BUILT.update(key=key, index=index)
    return index


def _executor_index(shared, digest: str) -> Index:
    index = _EXECUTOR.get(digest)
    if index is None:
        _EXECUTOR.clear()
        index = _EXECUTOR[digest] = shared.value
    return index


def decontaminate(df: DataFrame, index: Index, *, annotate: bool = False) -> StageResult:
    """Kept and rejected documents (see the module docstring); `extras["contamination"]` has
    one row per contaminated document: id, benchmark (the first), benchmarks (bit set),
    ngrams (count) and hashes (the distinct n-gram hashes found, as signed longs)."""
    if "text" not in df.columns:
        raise ValueError("decontaminate: input has no `text` column")
    spark = df.sparkSession
    schema = StructType(df.schema.fields + [StructField(COUNT, LongType(), False),
                                            StructField(MASK, LongType(), False),
                                            StructField(FIRST, StringType(), True),
                                            StructField(HITS, ArrayType(LongType(), False), False)])
    shared, digest, names = spark.sparkContext.broadcast(index), index.digest, index.names

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        idx = _executor_index(shared, digest)
        for batch in batches:
            s = scan(batch.column("text"), idx)
            first = pa.array([names[i] if i >= 0 else None for i in first_benchmark(s.masks)], pa.string())
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(s.counts), pa.array(s.masks.view(np.int64)), first, s.hits],
                names=[*batch.schema.names, COUNT, MASK, FIRST, HITS])

    marked = df.mapInArrow(run, schema)
    found = F.col(COUNT) > 0
    hidden = (COUNT, MASK, FIRST, HITS)
    if annotate:
        kept = with_signals(marked, {SIGNAL_COUNT: F.col(COUNT), SIGNAL_BENCHMARK: F.col(FIRST)}).drop(*hidden)
        rejected = empty_rejects(spark)
    else:
        kept = marked.filter(~found).drop(*hidden)
        rejected = rejects(marked.filter(found), "decontaminate", F.concat(F.lit("contaminated:"), F.col(FIRST)),
                           F.concat(F.col(COUNT).cast("string"), F.lit(" benchmark n-grams")))
    contamination = marked.filter(found).select(
        F.col("id"), F.col(FIRST).alias("benchmark"), F.col(MASK).alias("benchmarks"),
        F.col(COUNT).alias("ngrams"), F.col(HITS).alias("hashes"))
    return StageResult(kept, rejected, shared=marked, extras={"contamination": contamination})


def summary(cfg: DecontaminateSection, index: Index, contamination: DataFrame, *, annotate: bool) -> dict:
    """The report's `decontamination` section, from the stage's contamination rows (aggregated
    in Spark; what reaches the driver is per-benchmark counts, the distinct n-grams found and
    the ten most-hit n-grams, whose text is read again from the benchmark files)."""
    names = index.names
    per_first = {r["benchmark"]: int(r["count"]) for r in contamination.groupBy("benchmark").count().collect()}
    anyof = contamination.agg(*[F.sum(F.shiftrightunsigned("benchmarks", b).bitwiseAND(1)).alias(f"b{b}")
                                for b in range(len(names))]).first()
    found = np.array([r["h"] for r in contamination.select(F.explode("hashes").alias("h")).distinct().collect()],
                     np.int64).view(np.uint64)
    at, masks = index.lookup(found)
    top = (contamination.select(F.explode("hashes").alias("h")).groupBy("h").count()
           .orderBy(F.desc("count"), F.asc("h")).limit(TOP).collect())
    top_hashes = [int(np.int64(r["h"]).view(np.uint64)) for r in top]
    texts = ngram_texts(benchmark_items(cfg), cfg.ngram, cfg.min_ngram, set(top_hashes)) if top else {}
    _, top_masks = index.lookup(np.array(top_hashes, np.uint64))
    benchmarks = []
    for b, (bench, name) in enumerate(zip(cfg.benchmarks, names)):
        bit = np.uint64(1) << np.uint64(b)
        benchmarks.append({"name": name, "path": bench.path, **index.stats[name],
                           "documents": per_first.get(name, 0),
                           "documents_matching": int(anyof[f"b{b}"] or 0) if anyof is not None else 0,
                           "ngrams_matched": int(((masks & bit) != 0).sum())})
    return {"mode": "annotate" if annotate else "filter", "ngram": cfg.ngram, "min_ngram": cfg.min_ngram,
            "lengths": list(index.lengths), "contaminated_documents": sum(per_first.values()),
            "ngrams_matched": int(len(at)),
            "index": {"ngrams": int(len(index.hashes)), "bytes": index.nbytes, "build_seconds": index.seconds,
                      "digest": index.digest[:16]},
            "benchmarks": benchmarks,
            "top_ngrams": [{"ngram": texts.get(h), "documents": int(r["count"]),
                            "benchmarks": [n for b, n in enumerate(names) if int(m) >> b & 1]}
                           for h, r, m in zip(top_hashes, top, top_masks)]}
