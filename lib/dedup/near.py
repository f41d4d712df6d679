"""The Spark side of near-dedup: MinHash signatures per Arrow batch, candidate pairs
from equal band hashes, and verification of candidate pairs (exact Jaccard or the
MinHash estimate). The numpy kernels live in `minhash`.
"""
from __future__ import annotations

import time
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, DoubleType, IntegerType, LongType,
                               StringType, StructField, StructType)

from shardforge.dedup import minhash as mh
from shardforge.dedup.normalize import normalize_arrow

SUB_BATCH_ROWS = 512    # rows per numpy pass inside an Arrow batch (bounds memory)

SIGNATURE_OUT = StructType([
    StructField("id", StringType(), False),
    StructField("num_tokens", IntegerType(), False),
    StructField("signature", BinaryType(), True),
    StructField("bands", ArrayType(LongType(), True), True),
    StructField("_rk", DoubleType(), True),
])

VERIFY_OUT = StructType([
    StructField("a", LongType(), False),
    StructField("b", LongType(), False),
    StructField("estimated", DoubleType(), False),
    StructField("jaccard", DoubleType(), True),
])


class KernelTimes:
    """Seconds each step of a Python kernel took, summed over its tasks: a Spark
    accumulator the kernels add to when a partition ends. `jvm_in` is the time a kernel
    waited for its next input batch (the JVM reading, computing and sending it), `jvm_out`
    the time the JVM took to take an output batch. Each is the wall clock inside the Python
    worker, summed over tasks (on a busy machine it includes waiting for a core); a retried
    task adds its time again."""

    def __init__(self, spark):
        self._acc = spark.sparkContext.accumulator({}, _SumByKey())

    def acc(self):
        return self._acc

    @property
    def value(self) -> dict[str, float]:
        return dict(self._acc.value)


class _SumByKey(AccumulatorParam):
    def zero(self, value):
        return {}

    def addInPlace(self, a, b):
        for k, v in b.items():
            a[k] = a.get(k, 0.0) + v
        return a


class _Laps:
    """Stopwatch of a kernel: `lap(name)` adds the time since the previous lap to `name`."""

    def __init__(self, prefix: str):
        self.prefix, self.totals, self.t = prefix, {}, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        key = f"{self.prefix}.{name}"
        self.totals[key] = self.totals.get(key, 0.0) + now - self.t
        self.t = now


def _sig_batches(batches: Iterator[pa.RecordBatch], params: mh.MinHashParams, acc=None,
                 normalization: str | None = None) -> Iterator[pa.RecordBatch]:
    laps = _Laps("signatures")
    schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in SIGNATURE_OUT.fields])
    for big in batches:
        laps.lap("jvm_in")
        for start in range(0, big.num_rows, SUB_BATCH_ROWS):
            rb = big.slice(start, SUB_BATCH_ROWS)
            texts = rb.column("norm")
            if normalization is not None:
                texts = normalize_arrow(texts, normalization)
                laps.lap("normalize")
            tokens = mh.tokenize(texts)       # split once: for the signature and the token count
            laps.lap("tokenize")
            shingles = mh.shingle_hashes(texts, params.shingle_size, tokens)
            laps.lap("shingle_hash")
            sig, has = mh.signatures_of_shingles(*shingles, params)
            laps.lap("permutations")
            bands = mh.band_hashes(sig, params)
            laps.lap("bands")
            ntok = tokens[1].astype(np.int32)
            mask = pa.array(~has)
            sig_arr = pa.compute.if_else(mask, pa.scalar(None, pa.binary()), mh.signature_to_bytes(sig))
            offsets = pa.array(np.arange(rb.num_rows + 1, dtype=np.int32) * params.bands)
            band_list = pa.ListArray.from_arrays(offsets, pa.array(bands.reshape(-1)), mask=mask)
            out = pa.RecordBatch.from_arrays([rb.column("id"), pa.array(ntok), sig_arr, band_list, rb.column("_rk")],
                                             schema=schema)
            laps.lap("output")
            yield out
            laps.lap("jvm_out")
    if acc is not None:
        acc.add(laps.totals)


def _arrow_type(dt):
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(dt)


def signatures_df(docs: DataFrame, params: mh.MinHashParams, times: KernelTimes | None = None,
                  normalization: str | None = None) -> DataFrame:
    """(id, num_tokens, signature, bands, _rk) for docs(id, norm, _rk), or, with
    `normalization` (a `dedup.normalization` mode), for docs(id, text, _rk), whose texts the
    kernel normalises itself (`normalize_arrow`: no second pass of the text through the JVM).
    signature and bands are null for documents with fewer tokens than the shingle size.
    Deterministic per row. `times`: the kernel adds its seconds per step to it."""
    acc = times.acc() if times is not None else None
    col = "norm" if normalization is None else "text"

    def fn(it):
        return _sig_batches(it, params, acc, normalization)
    return docs.select("id", F.col(col).alias("norm"), F.col("_rk").cast("double")).mapInArrow(fn, SIGNATURE_OUT)


def candidate_edges(new_bands: DataFrame, old_bands: DataFrame | None) -> DataFrame:
    """Candidate edges (src, dst) from equal (band, hash) pairs.

    Inputs have columns (node: bigint, old: boolean, bands: array<bigint>). Each bucket
    with at least two members and at least one new member yields a star from its
    smallest node to every other member; edges between two old documents are dropped
    (old documents were deduplicated against each other already).
    """
    def explode(df):
        return df.select("node", "old", F.posexplode("bands").alias("band", "h"))

    nb = explode(new_bands)
    buckets = nb
    if old_bands is not None:
        ob = explode(old_bands).join(nb.select("band", "h").distinct(), ["band", "h"], "left_semi")
        buckets = nb.unionByName(ob)
    # each bucket's smallest member, size and whether it holds a new document, as windows
    # over the bucket: one shuffle where an aggregate joined back would take two
    w = Window.partitionBy("band", "h")
    members = buckets.select(
        "node", "old", F.min(F.struct("node", "old")).over(w).alias("m"), F.count(F.lit(1)).over(w).alias("n"),
        F.max(F.when(~F.col("old"), 1).otherwise(0)).over(w).alias("has_new"))
    edges = (members.where((F.col("n") > 1) & (F.col("has_new") == 1) & (F.col("node") != F.col("m.node"))
                           & ~(F.col("old") & F.col("m.old")))
             .select(F.least("node", "m.node").alias("src"), F.greatest("node", "m.node").alias("dst")))
    return edges.distinct()


def verify_pairs(pairs: DataFrame, params: mh.MinHashParams, *, exact: bool,
                 times: KernelTimes | None = None, name: str = "verify") -> DataFrame:
    """(a, b, estimated, jaccard) for pairs(a, b, sig_a, sig_b, norm_a, norm_b).

    `estimated` is the share of agreeing signature rows; `jaccard` the exact shingle
    Jaccard when `exact` and both texts are present, else null. Vectorised per batch
    except the exact set intersection (one numpy call per pair). `times`: the kernel adds
    its seconds per step to it, under `name`.
    """
    acc = times.acc() if times is not None else None

    def fn(it):
        laps = _Laps(name)
        for big in it:
            laps.lap("jvm_in")
            for start in range(0, big.num_rows, SUB_BATCH_ROWS):
                rb = big.slice(start, SUB_BATCH_ROWS)
                sa = mh.signature_from_bytes(rb.column("sig_a"), params.num_perm)
                sb = mh.signature_from_bytes(rb.column("sig_b"), params.num_perm)
                est = mh.estimated_jaccard(sa, sb)
                laps.lap("estimate")
                jac = np.full(rb.num_rows, np.nan)
                if exact:
                    na, nb = rb.column("norm_a"), rb.column("norm_b")
                    ok = ~(np.asarray(na.is_null().to_numpy(zero_copy_only=False))
                           | np.asarray(nb.is_null().to_numpy(zero_copy_only=False)))
                    if ok.any():
                        idx = pa.array(np.flatnonzero(ok))
                        jac[ok] = mh.exact_jaccard(na.take(idx), nb.take(idx), params.shingle_size)
                laps.lap("exact_jaccard")
                out = pa.RecordBatch.from_arrays(
                    [rb.column("a"), rb.column("b"), pa.array(est), pa.array(jac, from_pandas=True)],
                    names=["a", "b", "estimated", "jaccard"])
                yield out
                laps.lap("jvm_out")
        if acc is not None:
            acc.add(laps.totals)
    cols = pairs.select("a", "b", "sig_a", "sig_b",
                        *(["norm_a", "norm_b"] if exact else [F.lit(None).cast("string").alias("norm_a"),
                                                               F.lit(None).cast("string").alias("norm_b")]))
    return cols.mapInArrow(fn, VERIFY_OUT)


def passes(threshold: float, num_perm: int):
    """Column predicate over verify output: exact Jaccard >= threshold when known, else the
    estimate >= `minhash.estimate_floor(threshold, num_perm)`."""
    floor = mh.estimate_floor(threshold, num_perm)
    return F.when(F.col("jaccard").isNotNull(), F.col("jaccard") >= F.lit(threshold)).otherwise(
        F.col("estimated") >= F.lit(floor))
