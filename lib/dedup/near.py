"""The Spark side of near-dedup: MinHash signatures per Arrow batch, candidate pairs
from equal band hashes, and verification of candidate pairs (exact Jaccard or the
MinHash estimate). The numpy kernels live in `minhash`.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, DoubleType, IntegerType, LongType,
                               StringType, StructField, StructType)

from . import minhash as mh

SUB_BATCH_ROWS = 512    # rows per numpy pass inside an Arrow batch (bounds memory)

SIGNATURE_OUT = StructType([
    StructField("id", StringType(), False),
    StructField("num_tokens", IntegerType(), False),
    StructField("signature", BinaryType(), True),
    StructField("bands", ArrayType(LongType(), True), True),
    StructField("norm", StringType(), True),       # passed through, so later phases need no re-join
    StructField("_rk", DoubleType(), True),
])

VERIFY_OUT = StructType([
    StructField("a", LongType(), False),
    StructField("b", LongType(), False),
    StructField("estimated", DoubleType(), False),
    StructField("jaccard", DoubleType(), True),
])


def _sig_batches(batches: Iterator[pa.RecordBatch], params: mh.MinHashParams) -> Iterator[pa.RecordBatch]:
    for big in batches:
        for start in range(0, big.num_rows, SUB_BATCH_ROWS):
            rb = big.slice(start, SUB_BATCH_ROWS)
            texts = rb.column("norm")
            tokens = mh.tokenize(texts)       # split once: for the signature and the token count
            sig, has = mh.signatures(texts, params, tokens)
            ntok = tokens[1].astype(np.int32)
            bands = mh.band_hashes(sig, params)
            mask = pa.array(~has)
            sig_arr = pa.compute.if_else(mask, pa.scalar(None, pa.binary()), mh.signature_to_bytes(sig))
            offsets = pa.array(np.arange(rb.num_rows + 1, dtype=np.int32) * params.bands)
            band_list = pa.ListArray.from_arrays(offsets, pa.array(bands.reshape(-1)), mask=mask)
            yield pa.RecordBatch.from_arrays(
                [rb.column("id"), pa.array(ntok), sig_arr, band_list, texts, rb.column("_rk")],
                schema=pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in SIGNATURE_OUT.fields]))


def _arrow_type(dt):
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(dt)


def signatures_df(docs: DataFrame, params: mh.MinHashParams) -> DataFrame:
    """(id, num_tokens, signature, bands, norm, _rk) for docs(id, norm, _rk). signature and
    bands are null for documents with fewer tokens than the shingle size. Deterministic per row."""
    def fn(it):
        return _sig_batches(it, params)
    return docs.select("id", "norm", F.col("_rk").cast("double")).mapInArrow(fn, SIGNATURE_OUT)


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
    stats = (buckets.groupBy("band", "h")
             .agg(F.min(F.struct("node", "old")).alias("m"), F.count(F.lit(1)).alias("n"),
                  F.max(F.when(~F.col("old"), 1).otherwise(0)).alias("has_new"))
             .where((F.col("n") > 1) & (F.col("has_new") == 1)))
    edges = (buckets.join(stats, ["band", "h"])
             .where((F.col("node") != F.col("m.node")) & ~(F.col("old") & F.col("m.old")))
             .select(F.least("node", "m.node").alias("src"), F.greatest("node", "m.node").alias("dst")))
    return edges.distinct()


def verify_pairs(pairs: DataFrame, params: mh.MinHashParams, *, exact: bool) -> DataFrame:
    """(a, b, estimated, jaccard) for pairs(a, b, sig_a, sig_b, norm_a, norm_b).

    `estimated` is the share of agreeing signature rows; `jaccard` the exact shingle
    Jaccard when `exact` and both texts are present, else null. Vectorised per batch
    except the exact set intersection (one numpy call per pair).
    """
    def fn(it):
        for big in it:
            for start in range(0, big.num_rows, SUB_BATCH_ROWS):
                rb = big.slice(start, SUB_BATCH_ROWS)
                sa = mh.signature_from_bytes(rb.column("sig_a"), params.num_perm)
                sb = mh.signature_from_bytes(rb.column("sig_b"), params.num_perm)
                est = mh.estimated_jaccard(sa, sb)
                jac = np.full(rb.num_rows, np.nan)
                if exact:
                    na, nb = rb.column("norm_a"), rb.column("norm_b")
                    ok = ~(np.asarray(na.is_null().to_numpy(zero_copy_only=False))
                           | np.asarray(nb.is_null().to_numpy(zero_copy_only=False)))
                    if ok.any():
                        idx = pa.array(np.flatnonzero(ok))
                        jac[ok] = mh.exact_jaccard(na.take(idx), nb.take(idx), params.shingle_size)
                yield pa.RecordBatch.from_arrays(
                    [rb.column("a"), rb.column("b"), pa.array(est), pa.array(jac, from_pandas=True)],
                    names=["a", "b", "estimated", "jaccard"])
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
