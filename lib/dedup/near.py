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


LOCAL_NEAR_OUT = StructType([
    StructField("_e", StringType(), False),
    StructField("_r", StringType(), False),
    StructField("_est", DoubleType(), False),
    StructField("_jac", DoubleType(), True),
])


def _agreement(sig: np.ndarray, ia: np.ndarray, ib: np.ndarray, chunk: int = 1 << 15) -> np.ndarray:
    """`minhash.estimated_jaccard` of the row pairs (sig[ia[i]], sig[ib[i]]), a chunk of pairs at
    a time (a graph of n documents has up to n x bands candidate pairs)."""
    out = np.empty(len(ia), dtype=np.float64)
    for s in range(0, len(ia), chunk):
        out[s:s + chunk] = mh.estimated_jaccard(sig[ia[s:s + chunk]], sig[ib[s:s + chunk]])
    return out


def _rank_key(rk: float) -> tuple[int, float]:
    # Spark orders NaN above every other double (and equal to itself); -0.0 equals 0.0 in both
    return (1, 0.0) if rk != rk else (0, rk)


def near_map_in_memory(node: np.ndarray, ids: list[str], old: np.ndarray, rk: np.ndarray, sig: np.ndarray,
                       bands: np.ndarray, floor: float) -> tuple[list[str], list[str], np.ndarray]:
    """The near map of one graph held in memory: the same result as the distributed phases
    (`candidate_edges`, the MinHash check of `verify_pairs` and `passes` without the exact
    check, `connected_components`, then each component's best document by (earlier batch,
    rank, id, node)), computed in numpy. Rows are documents: `node` (xxhash64 of the id),
    `ids`, `old` (kept by an earlier batch), `rk` (rank, smaller is better), `sig` (n x
    num_perm) and `bands` (n x bands) of the documents with a signature. Returns (removed ids,
    their representatives' ids, estimated similarity to the representative) for the new
    documents that are not their component's best, ordered by removed id."""
    from shardforge.dedup.components import local_stars

    n = len(node)
    us, vs = [], []
    if n:
        for j in range(bands.shape[1]):
            h = bands[:, j]
            order = np.lexsort((node, h))                  # each bucket's members, smallest node first
            hs, ns, olds = h[order], node[order], old[order]
            start = np.ones(n, dtype=bool)
            start[1:] = hs[1:] != hs[:-1]
            first = np.flatnonzero(start)
            g = np.cumsum(start) - 1                       # each row's bucket
            m = first[g]                                   # the bucket's smallest member, per row
            size = np.diff(np.append(first, n))[g]
            has_new = (np.add.reduceat((~olds).astype(np.int64), first) > 0)[g]
            keep = (size > 1) & has_new & (ns != ns[m]) & ~(olds & olds[m])
            a, b = ns[keep], ns[m[keep]]
            us.append(np.minimum(a, b))
            vs.append(np.maximum(a, b))
    if not us or not sum(len(u) for u in us):
        return [], [], np.zeros(0)
    pairs = np.unique(np.stack([np.concatenate(us), np.concatenate(vs)], axis=1), axis=0)
    uniq, row_of = np.unique(node, return_index=True)     # a node's signature: its first row
    ia = row_of[np.searchsorted(uniq, pairs[:, 0])]
    ib = row_of[np.searchsorted(uniq, pairs[:, 1])]
    verified = pairs[_agreement(sig, ia, ib) >= floor]
    if not len(verified):
        return [], [], np.zeros(0)
    centre, leaf = local_stars(verified[:, 0], verified[:, 1])
    members = np.unique(verified.reshape(-1))
    comp = dict(zip(members.tolist(), members.tolist()))
    comp.update(zip(leaf.tolist(), centre.tolist()))
    rows = np.flatnonzero(np.isin(node, members))         # every row of a member node
    best: dict[int, tuple] = {}
    for r in rows.tolist():
        key = (0 if old[r] else 1, _rank_key(float(rk[r])), ids[r], int(node[r]))
        c = comp[int(node[r])]
        if c not in best or key < best[c][0]:
            best[c] = (key, r)
    moved = [(ids[r], best[comp[int(node[r])]][1], r) for r in rows.tolist()
             if not old[r] and ids[r] != ids[best[comp[int(node[r])]][1]]]
    moved.sort()
    if not moved:
        return [], [], np.zeros(0)
    rep_rows = np.array([m[1] for m in moved])
    own_rows = np.array([m[2] for m in moved])
    # the similarity to the representative from the representative node's signature (its first row)
    rep_sig_rows = row_of[np.searchsorted(uniq, node[rep_rows])]
    own_sig_rows = row_of[np.searchsorted(uniq, node[own_rows])]
    est = _agreement(sig, own_sig_rows, rep_sig_rows)
    return [m[0] for m in moved], [ids[r] for r in rep_rows.tolist()], est


def local_near_map(nodes: DataFrame, params: mh.MinHashParams, floor: float,
                   times: KernelTimes | None = None) -> DataFrame:
    """(_e, _r, _est, _jac) of `near_map_in_memory` over nodes(node, id, old, _rk, signature,
    bands): the whole graph in one task (`coalesce(1)`), for graphs the caller has counted
    and bounded (`dedup.local_graph_max_nodes`); without the exact check, so `_jac` is null.
    On a small graph this one task replaces the dozen small Spark jobs of the distributed
    phases; the result is the same."""
    acc = times.acc() if times is not None else None
    num_perm = params.num_perm

    def fn(it):
        laps = _Laps("local_graph")
        batches = list(it)
        laps.lap("jvm_in")
        if not batches:
            return
        t = pa.Table.from_batches(batches)
        bands_col = t.column("bands").combine_chunks()
        n = t.num_rows
        bands = (bands_col.flatten().to_numpy(zero_copy_only=False).reshape(n, -1) if n
                 else np.zeros((0, params.bands), dtype=np.int64))
        e, r, est = near_map_in_memory(
            t.column("node").to_numpy(), t.column("id").to_pylist(),
            np.asarray(t.column("old").to_numpy(zero_copy_only=False), dtype=bool),
            np.asarray(t.column("_rk").to_numpy(zero_copy_only=False), dtype=np.float64),
            mh.signature_from_bytes(t.column("signature"), num_perm), bands, floor)
        laps.lap("graph")
        yield pa.RecordBatch.from_arrays(
            [pa.array(e, pa.string()), pa.array(r, pa.string()), pa.array(est, pa.float64()),
             pa.nulls(len(e), pa.float64())], names=["_e", "_r", "_est", "_jac"])
        laps.lap("jvm_out")
        if acc is not None:
            acc.add(laps.totals)

    return (nodes.select("node", "id", "old", F.col("_rk").cast("double"), "signature", "bands")
            .coalesce(1).mapInArrow(fn, LOCAL_NEAR_OUT))
