"""The dedup stage: exact duplicates by normalised-text (or image-bytes) hash, then
near duplicates by MinHash LSH with connected components, against the batch itself
and, incrementally, against the side table of documents kept before.
"""
from __future__ import annotations

import time
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shardforge.config import DedupSection

from shardforge.dedup import minhash as mh
from shardforge.dedup.components import Materializer, connected_components
from shardforge.dedup.near import (KernelTimes, candidate_edges, local_near_map, passes, signatures_df,
                                   verify_pairs)
from shardforge.dedup.normalize import EMPTY_TEXT_KEY, NATIVE_MODES, exact_key_column, norm_column
from shardforge.dedup.side_table import SIDE_TABLE, SideTableMismatch
from shardforge.keys import hashable_columns


class DedupResult(NamedTuple):
    kept: DataFrame        # input rows kept, every input column passed through
    rejected: DataFrame    # REJECT rows: duplicate_of:<id>, invalid:empty_text, ...
    audit: DataFrame       # DEDUP_AUDIT, one row per removed duplicate
    signatures: DataFrame  # SIDE_TABLE rows of the kept documents (for update_side_table)
    timings: dict = {}     # seconds per eager phase: signatures, candidates, components, ...
    reused: tuple = ()     # materialised results read back from an earlier attempt (`checkpoint_token`)
    scratch: str = ""      # the folder of the materialised results ("" for local checkpoints): the
                           # returned frames read it, so delete it only after they are written


def resolve_params(cfg: DedupSection) -> mh.MinHashParams:
    """MinHash parameters of a config: bands x rows as set, or derived from the threshold
    by `minhash.derive_bands_rows` when either is 0."""
    if cfg.bands and cfg.rows:
        b, r = cfg.bands, cfg.rows
    else:
        b, r = mh.derive_bands_rows(cfg.threshold, cfg.num_perm)
    return mh.MinHashParams(num_perm=cfg.num_perm, shingle_size=cfg.shingle_size, bands=b, rows=r, seed=cfg.seed)


def params_key(cfg: DedupSection) -> str:
    return f"{resolve_params(cfg).key};norm={cfg.normalization}"


def _rank(cfg: DedupSection, df: DataFrame, length: Column) -> Column:
    """Smaller is better: -length, -quality (nulls last), or 0 (smallest id decides)."""
    if cfg.rank_by == "length":
        return (-length).cast("double")
    if cfg.rank_by == "quality":
        if "quality" not in df.columns:
            from shardforge.config import ConfigError

            raise ConfigError("dedup.rank_by: 'quality' needs a `quality` column in the input")
        return F.coalesce(-F.col("quality").cast("double"), F.lit(float("inf")))
    return F.lit(0.0)


def _prep(df: DataFrame, cfg: DedupSection) -> DataFrame:
    """Input rows plus _img, _len, _key (exact key), _empty (normalised text is empty),
    _rowh (a hash of the whole row), _rk and _grp. The normalised text is not kept: the key
    is made from the text in one pass, and the normalised text again later only for the rows
    that need it."""
    cols = df.columns
    kind = F.col("kind") if "kind" in cols else F.lit(None).cast("string")
    image = F.col("image") if "image" in cols else F.lit(None).cast("binary")
    is_img = F.coalesce(kind == F.lit("image"), F.lit(False))
    length = F.when(is_img, F.coalesce(F.octet_length(image), F.lit(0))).otherwise(
        F.coalesce(F.char_length(F.col("text")), F.lit(0))).cast("long")
    # the exact key straight from the text (the normalised text is not kept); the row hash
    # over the columns themselves, with a null flag each (xxhash64 skips nulls), maps as JSON
    key = exact_key_column(F.col("text"), image, is_img, cfg.normalization)
    flags = [F.isnull(F.col(f"`{c}`")) for c in cols]
    out = df.select(
        "*",
        is_img.alias("_img"),
        length.alias("_len"),
        F.xxhash64(*hashable_columns(df.schema.fields), *flags).alias("_rowh"),
        key.alias("_key"),
    )
    out = out.withColumn("_empty", ~F.col("_img") & (F.col("_key") == F.lit(EMPTY_TEXT_KEY)))
    out = out.withColumn("_rk", _rank(cfg, df, F.col("_len")))
    group = F.col("_key") if cfg.exact else F.concat_ws("|", F.col("_key"), F.col("id"))
    return out.withColumn("_grp", group)


def _ids_repeat(df: DataFrame) -> bool:
    """Whether some id is on more than one row (null counts as an id). One Spark job that reads
    and shuffles the id column only."""
    return bool(df.groupBy("id").agg(F.count(F.lit(1)).alias("_c")).where(F.col("_c") > 1).limit(1).count())


# a near map of at most this many bytes (ids plus 40 per row) is broadcast to the assembly
# instead of joined by a shuffle; above it, every row's outcome is materialised once (the
# outputs then read it). Below Spark's 10 MB broadcast threshold, which the no-funnel check
# also holds every broadcast to.
BROADCAST_NEAR_MAP_BYTES = 8 << 20
# a near map's size as that limit counts it: its ids plus 40 bytes per row (observed as the
# map is written, so no job reads it back to measure it)
def _near_map_bytes() -> Column:
    return F.sum(F.octet_length("_e") + F.octet_length("_r") + F.lit(40))


def dedup(df: DataFrame, cfg: DedupSection, *, previous: DataFrame | None = None,
          previous_docs: DataFrame | None = None, checkpoint_dir: str = "",
          checkpoint_token: str | None = None, ids_unique: bool = False) -> DedupResult:
    """Remove exact and near duplicates from `df` (DOCUMENT columns, any extra columns).

    Promises: every input row is in `kept` or `rejected` exactly once; the kept set and
    the audit table depend only on the input rows and `cfg`, not on partitioning.
    `previous` is the side table (`read_side_table`) of documents kept before: they
    are never removed, and new rows that duplicate them are. `previous_docs` (id, text)
    of those documents enables the exact Jaccard check against them (else the MinHash
    estimate is used for those pairs). Runs its jobs eagerly (the prepared rows,
    signatures, edges and component labels are materialised under `checkpoint_dir`, which
    the returned frames read from: remove it only after they are written); the returned
    frames are lazy. With `checkpoint_token` (one per input and settings:
    the stage engine passes its output and stage fingerprint), those results go under
    `<checkpoint_dir>/dedup-<token>/` and an earlier attempt's finished ones are read back
    instead of recomputed (`reused`): a run killed in the middle of dedup keeps its
    prepared rows, signatures and edges. With `ids_unique` the caller vouches that `df` has one
    row per id (a batch from `ingest`), and no job looks for repeated ones.
    """
    for c in ("id", "text"):
        if c not in df.columns:
            raise ValueError(f"dedup: input has no `{c}` column (columns: {df.columns})")
    spark = df.sparkSession
    params = resolve_params(cfg)
    pkey = params_key(cfg)
    orig = [c for c in df.columns if not c.startswith("_")]
    d = _prep(df, cfg)

    # 1. rows that cannot be deduplicated by content are rejected with a reason
    invalid = (F.when(F.col("id").isNull(), F.lit("invalid:null_id"))
               .when(F.col("_img") & F.col("image").isNull() if "image" in df.columns else F.lit(False),
                     F.lit("invalid:missing_image"))
               .when(F.col("_empty"), F.lit("invalid:empty_text")))
    d = d.withColumn("_reason", invalid)

    # 2. one id, one content: later rows reusing an id for other content are rejected. A batch
    # from `ingest` has unique ids: one job over the id column finds that out, and then no row
    # is shuffled by id
    if not ids_unique and _ids_repeat(df):
        by_id = Window.partitionBy("id").orderBy("_rk", "_key", "_rowh")
        d = d.withColumn("_id_key", F.first("_key").over(by_id.rowsBetween(Window.unboundedPreceding, 0)))
        d = d.withColumn("_reason", F.coalesce("_reason", F.when(F.col("_key") != F.col("_id_key"),
                                                                 F.lit("invalid:duplicate_id"))))
    prev = None
    if previous is not None:
        prev = previous.select("id", "exact_key", "length", "quality", "signature", "bands", "params")
        clash = prev.select(F.col("id").alias("_pid"), F.col("exact_key").alias("_pkey"))
        d = d.join(clash, d["id"] == clash["_pid"], "left").withColumn(
            "_reason", F.coalesce("_reason", F.when(F.col("_pkey").isNotNull() & (F.col("_pkey") != F.col("_key")),
                                                    F.lit("invalid:id_exists")))).drop("_pid", "_pkey")

    # 3. exact: the best row of each group is its representative; earlier documents win.
    # One pass over all rows (no union of a valid and an invalid branch, which would read,
    # normalise and shuffle the input twice): invalid rows get window keys of their own,
    # spread by row hash, and their outcome columns are masked.
    valid = F.col("_reason").isNull()
    d = d.withColumn("_wgrp", F.when(valid, F.col("_grp")).otherwise(
        F.concat(F.lit("\u0000invalid|"), F.col("_rowh").cast("string"))))
    w = Window.partitionBy("_wgrp").orderBy("_rk", "id", "_rowh")
    d = d.withColumn("_rn", F.row_number().over(w)).withColumn("_batch_rep", F.first("id").over(w))
    if prev is not None:
        pk = prev.select(F.when(F.lit(cfg.exact), F.col("exact_key"))
                         .otherwise(F.concat_ws("|", "exact_key", "id")).alias("_wgrp"),
                         _rank(cfg, prev.withColumn("quality", F.col("quality")), F.col("length")).alias("_ork"),
                         F.col("id").alias("_oid"))
        pk = pk.groupBy("_wgrp").agg(F.min(F.struct("_ork", "_oid"))["_oid"].alias("_old_rep"))
        d = d.join(pk, "_wgrp", "left")
    else:
        d = d.withColumn("_old_rep", F.lit(None).cast("string"))
    d = d.withColumn("_exact_rep", F.when(valid, F.coalesce("_old_rep", "_batch_rep"))).withColumn(
        "_is_rep", valid & F.col("_old_rep").isNull() & (F.col("_rn") == 1))

    # one materialisation of every row with its exact-dedup outcome: the near-dedup phases
    # and the outputs read it, so the input is read, normalised and shuffled once
    mat = Materializer(spark, checkpoint_dir, token=checkpoint_token, reuse=checkpoint_token is not None)
    times = KernelTimes(spark)
    timings: dict[str, float] = {}
    prep_cols = [*orig, "_img", "_key", "_len", "_rk", "_reason", "_exact_rep", "_is_rep"]
    t0 = time.perf_counter()
    prepared = mat(d.select(*prep_cols), "prepared")
    timings["prepare"] = time.perf_counter() - t0
    reps = prepared.where(F.col("_is_rep") & ~F.col("_img"))
    sigs = None
    if cfg.near:
        t0 = time.perf_counter()
        if cfg.normalization in NATIVE_MODES:     # normalised inside the signature kernel
            sig_in, mode = reps.select("id", "text", "_rk"), cfg.normalization
        else:
            sig_in, mode = reps.select("id", norm_column(F.col("text"), cfg.normalization).alias("norm"), "_rk"), None
        sigs = mat(signatures_df(sig_in, params, times, normalization=mode), "signatures",
                   observe={"nodes": F.count_if(F.col("signature").isNotNull())})
        timings["signatures"] = time.perf_counter() - t0
        near_map = _near(spark, cfg, params, pkey, reps, sigs, prev, previous_docs, mat, timings, times)
    else:
        near_map = None

    # 4. assemble: every row is kept or removed, pointing at the final representative
    t0 = time.perf_counter()
    state = prepared
    if near_map is not None:
        seen = mat.metrics("near-map")
        size = (seen["bytes"] if seen is not None else near_map.agg(_near_map_bytes().alias("bytes")).first()[0]) or 0
        small = size <= BROADCAST_NEAR_MAP_BYTES
        nm = F.broadcast(near_map) if small else near_map
        state = state.join(nm, state["_exact_rep"] == nm["_e"], "left").drop("_e")
    else:
        small = True
        state = (state.withColumn("_r", F.lit(None).cast("string")).withColumn("_est", F.lit(None).cast("double"))
                 .withColumn("_jac", F.lit(None).cast("double")))
    # `_is_rep` holds only for valid rows, so kept rows are valid
    state = state.withColumn("_kept", F.col("_is_rep") & F.col("_r").isNull()).withColumn(
        "_dup", F.when(valid & ~F.col("_kept"), F.coalesce("_r", "_exact_rep"))).withColumn(
        "_stage", F.when(~valid | F.col("_kept"), F.lit(None)).when(F.col("_r").isNull(), F.lit("exact"))
        .otherwise(F.lit("near")))
    state = state.select(*orig, "_img", "_key", "_len", "_kept", "_dup", "_stage", "_est", "_jac", "_reason")
    if not small:
        state = mat(state, "state")
    timings["assemble"] = time.perf_counter() - t0
    timings.update(sorted(times.value.items()))
    kept = state.where(F.col("_kept"))
    removed = state.where(~F.col("_kept") & F.col("_reason").isNull())
    bad = state.where(F.col("_reason").isNotNull())
    audit = removed.select(
        F.col("id"), F.col("_dup").alias("duplicate_of"), F.col("_stage").alias("stage"),
        F.when(F.col("_stage") == "exact", F.lit(1.0)).otherwise(F.col("_est")).alias("estimated_similarity"),
        F.when(F.col("_stage") == "exact", F.lit(1.0)).otherwise(F.col("_jac")).alias("jaccard"))
    audit = audit.withColumn("cluster_size", F.count(F.lit(1)).over(Window.partitionBy("duplicate_of")) + 1)
    from shardforge.schemas import DEDUP_AUDIT, conform
    from shardforge.stage import rejects

    audit = conform(audit, DEDUP_AUDIT)
    rej_dup = rejects(removed.select(*orig, "_dup", "_stage"), "dedup",
                      F.concat(F.lit("duplicate_of:"), F.col("_dup")), F.col("_stage"))
    rej_bad = rejects(bad.select(*orig, "_reason"), "dedup", F.col("_reason"))
    side = _side_rows(kept, sigs, pkey)
    return DedupResult(kept.select(*orig), rej_bad.unionByName(rej_dup), audit, side, timings, tuple(mat.reused),
                       mat.folder)


def _side_rows(kept: DataFrame, sigs: DataFrame | None, pkey: str) -> DataFrame:
    base = kept.select("id", F.when(F.col("_img"), F.lit("image")).otherwise(F.lit("text")).alias("kind"),
                       F.col("_key").alias("exact_key"), F.col("_len").alias("length"),
                       (F.col("quality") if "quality" in kept.columns else F.lit(None)).cast("double").alias("quality"))
    if sigs is not None:
        base = base.join(sigs.select("id", "num_tokens", "signature", "bands"), "id", "left")
    out = base.withColumn("params", F.when(F.col("signature").isNotNull(), F.lit(pkey))) if sigs is not None \
        else base.withColumn("params", F.lit(None).cast("string"))
    from shardforge.schemas import conform
    return conform(out, SIDE_TABLE)


def _near(spark, cfg, params, pkey, reps, sigs, prev, previous_docs, mat, timings, times) -> DataFrame:
    """(_e, _r, _est, _jac): new exact representatives removed as near duplicates of _r."""
    new_nodes = (sigs.where(F.col("signature").isNotNull())
                 .select("id", F.xxhash64("id").alias("node"), F.lit(False).alias("old"), "signature", "bands", "_rk"))
    nodes = new_nodes
    old_nodes = None
    if prev is not None:
        wrong = prev.where(F.col("signature").isNotNull() & (F.col("params") != F.lit(pkey))).select("params").limit(1).collect()
        if wrong:
            raise SideTableMismatch(f"side table signatures were built with {wrong[0]['params']!r}, "
                                    f"this run uses {pkey!r}: rebuild the side table or use the same settings")
        old_nodes = prev.where(F.col("signature").isNotNull()).select(
            "id", F.xxhash64("id").alias("node"), F.lit(True).alias("old"), "signature", "bands",
            _rank(cfg, prev, F.col("length")).alias("_rk"))
        nodes = new_nodes.unionByName(old_nodes)
    elif not cfg.exact_jaccard_check and cfg.local_graph_max_nodes > 0:
        # a first batch's small graph is solved in one task (same result, a dozen fewer jobs);
        # one job over the materialised signatures counts it
        t0 = time.perf_counter()
        seen = mat.metrics("signatures")       # counted as they were written
        n_nodes = seen["nodes"] if seen is not None else new_nodes.count()
        if n_nodes <= cfg.local_graph_max_nodes:
            out = mat(local_near_map(new_nodes, params, mh.estimate_floor(cfg.threshold, params.num_perm), times),
                      "near-map", observe={"bytes": _near_map_bytes()})
            timings["local_graph"] = time.perf_counter() - t0
            return out
        timings["count_nodes"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    edges = mat(candidate_edges(new_nodes.select("node", "old", "bands"),
                                None if old_nodes is None else old_nodes.select("node", "old", "bands")), "candidates")
    timings["candidates"] = time.perf_counter() - t0

    # the signatures and (for the exact check) normalised texts of the candidates' ends only
    t0 = time.perf_counter()
    end_nodes = edges.select(F.col("src").alias("node")).union(edges.select(F.col("dst").alias("node"))).distinct()
    ends = nodes.select("node", "signature").join(end_nodes, "node", "left_semi")
    if cfg.exact_jaccard_check:
        texts = reps.select(F.xxhash64("id").alias("node"), "text")
        if old_nodes is not None and previous_docs is not None:
            texts = texts.unionByName(previous_docs.select(F.xxhash64("id").alias("node"), "text"))
        norms = texts.join(end_nodes, "node", "left_semi").select(
            "node", norm_column(F.col("text"), cfg.normalization).alias("norm"))
        ends = ends.join(norms, "node", "left")
    else:
        ends = ends.withColumn("norm", F.lit(None).cast("string"))
    ends = mat(ends, "ends")
    timings["ends"] = time.perf_counter() - t0

    def with_ends(pairs, a, b):
        # sort-merge joins: `ends` (signatures and texts) is small on disk but not in memory, and
        # a broadcast of it would pass through the driver
        return (pairs.join(ends.select(F.col("node").alias(a), F.col("signature").alias("sig_a"),
                                       F.col("norm").alias("norm_a")).hint("merge"), a)
                .join(ends.select(F.col("node").alias(b), F.col("signature").alias("sig_b"),
                                  F.col("norm").alias("norm_b")).hint("merge"), b))

    pairs = with_ends(edges, "src", "dst").select(F.col("src").alias("a"), F.col("dst").alias("b"),
                                                  "sig_a", "sig_b", "norm_a", "norm_b")
    t0 = time.perf_counter()
    verified = mat(verify_pairs(pairs, params, exact=cfg.exact_jaccard_check, times=times)
                   .where(passes(cfg.threshold, params.num_perm)), "edges")
    timings["verify"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    labels = connected_components(verified.select(F.col("a").alias("src"), F.col("b").alias("dst")), mat,
                                  max_iterations=cfg.max_component_iterations)
    timings["components"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    members = labels.join(nodes.select("node", "id", "old", "_rk"), "node")
    best = members.groupBy("component").agg(
        F.min(F.struct(F.when(F.col("old"), 0).otherwise(1).alias("o"), "_rk", "id", "node")).alias("rep"))
    moved = (members.join(best, "component").where(~F.col("old") & (F.col("id") != F.col("rep.id")))
             .select(F.col("node").alias("a"), F.col("rep.node").alias("b"), F.col("id").alias("_e"),
                     F.col("rep.id").alias("_r")))
    sims = verify_pairs(with_ends(moved, "a", "b").select("a", "b", "sig_a", "sig_b", "norm_a", "norm_b"), params,
                        exact=cfg.exact_jaccard_check, times=times, name="similarity")
    out = moved.join(sims, ["a", "b"]).select("_e", "_r", F.col("estimated").alias("_est"), F.col("jaccard").alias("_jac"))
    out = mat(out, "near-map", observe={"bytes": _near_map_bytes()})
    timings["representatives"] = time.perf_counter() - t0
    return out
