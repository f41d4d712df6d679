"""Building a shard build from a DataFrame on Spark: the shard contract's Spark side.

`build_shards(df, output, cfg, ...)` assigns `shard = pmod(xxhash64(key), n)`,
hash-partitions the rows by shard and sorts each partition by (shard, xxhash64(key),
key, row hash) in the JVM (the sort spills to disk); a `mapInArrow` task then streams
each partition's Arrow batches through the one writer in `shardio`, one shard after
another, so a Python worker holds one batch and one row group, never a whole shard.
Empty shards are written on the driver; then the build is published atomically.
Only per-shard statistics (one small row per shard) reach the driver.
On an object store (no rename) the sorted rows are persisted and pass through the writer
twice: once only to hash the shards (which names the build), then to write each shard
once under its final `b-<build id>/` name; the second pass must reproduce the first's
checksums, and one listing must find every shard at its size, before the manifest PUT
(shardio explains the publication). Overlapping attempts of one task (speculation, off by
default) could replace a shard's object with a half-written one; the listing then refuses.
The bytes depend on the rows and the writer settings only: not on partitioning,
executor count, task retries or time.
"""
from __future__ import annotations

import json
import logging
import math
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from shardforge.config import ShardsSection
from shardforge.keys import hashable_columns, key_hash_expr, shard_expr
from shardforge.shards.writer import (ShardWriter, WriterSettings, begin_direct_build, build_id_of, check_written,
                      new_staging_dir, publish_build, shard_name, write_shard)
from shardforge.shards.manifest import ShardInfo
from shardforge.fs import StorageOptions, is_object_store, qualify

log = logging.getLogger("shardforge.shards.build")

_STATS = "shard int, rows long, bytes long, sha256 string, row_groups string, list_lengths string"
_SIZE_TYPES = ("string", "binary")


class ShardBuildError(ValueError):
    """The input cannot be built into shards (missing or null key, bad sizing)."""


def selection(df: DataFrame, where: str):
    """The Spark SQL boolean expression `where` as a Column over `df`, null counting as false.
    An expression that does not parse, names an unknown column or is not boolean is a
    ShardBuildError naming it (raised before anything is read or written)."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql.types import BooleanType

    # pyspark logs an analysis error with its whole JVM stack before raising it; the one-line
    # message below says all a user needs
    quiet = [logging.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    were = [q.disabled for q in quiet]
    try:
        for q in quiet:
            q.disabled = True
        cond = F.expr(where)
        kind = df.select(cond.alias("_selected")).schema["_selected"].dataType
    except (ParseException, AnalysisException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ShardBuildError(f"select.where: {where!r} cannot be used: {first}") from None
    finally:
        for q, w in zip(quiet, were):
            q.disabled = w
    if not isinstance(kind, BooleanType):
        raise ShardBuildError(f"select.where: {where!r} is of type {kind.simpleString()}, not boolean")
    return F.coalesce(cond, F.lit(False))


def settings_of(cfg: ShardsSection) -> WriterSettings:
    return WriterSettings(row_group_rows=cfg.row_group_rows, compression=cfg.compression,
                          compression_level=cfg.compression_level)


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The shards' Arrow schema: Spark's types, every field nullable (fixed, whatever the plan).
    An integer list whose Spark field names a narrower type in its metadata (the tokenize
    stage's `shardforge.dtype`, e.g. uint16) is stored as a list of that type."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from shardforge.schemas import DTYPE_KEY

    schema = to_arrow_schema(df.schema, timezone="UTC")
    fields = []
    for spark_field, f in zip(df.schema.fields, schema):
        t, narrow = f.type, (spark_field.metadata or {}).get(DTYPE_KEY)
        if narrow and pa.types.is_list(t) and pa.types.is_integer(t.value_type):
            t = pa.list_(pa.field(t.value_field.name, pa.from_numpy_dtype(np.dtype(narrow)), t.value_field.nullable))
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema(fields)


def drop_unused_image_columns(df: DataFrame) -> DataFrame:
    """The image columns go only into builds that have image rows (kind = 'image')."""
    from shardforge.schemas import IMAGE

    present = [c for c in IMAGE.fieldNames() if c in df.columns]
    if not present or ("kind" in df.columns and df.where(F.col("kind") == "image").limit(1).count()):
        return df
    return df.drop(*present)


def size_input(df: DataFrame, cfg: ShardsSection, selected=None) -> tuple[int, int, int]:
    """(num_shards, total rows, rows of `df`) in one pass, which also checks the key: a missing,
    map-typed or null key is a ShardBuildError. num_shards is as set, or derived from
    target rows or bytes (bytes estimated from the string and binary columns' lengths).
    `selected` (a boolean Column): only the rows where it is true count."""
    key = cfg.key
    if key not in df.columns:
        raise ShardBuildError(f"shards.key: column {key!r} is not in the input (columns: {df.columns})")
    if isinstance(df.schema[key].dataType, MapType):
        raise ShardBuildError(f"shards.key: column {key!r} is a map; keys must be strings or integers")
    sizes = [F.coalesce(F.octet_length(F.col(f"`{f.name}`")), F.lit(0))
             for f in df.schema.fields if f.dataType.typeName() in _SIZE_TYPES]
    est = sum(sizes[1:], sizes[0]) if sizes else F.lit(0)
    sel = selected if selected is not None else F.lit(True)
    row = df.agg(F.count(F.when(sel, 1)).alias("n"), F.count(F.when(sel, F.col(f"`{key}`"))).alias("k"),
                 F.sum(F.when(sel, est)).alias("b"), F.count(F.lit(1)).alias("all")).first()
    n, b, everything = int(row["n"]), int(row["b"] or 0), int(row["all"])
    if n != row["k"]:
        raise ShardBuildError(f"shards.key: column {key!r} has {n - row['k']} null value(s); every row "
                              f"needs a key (ingest derives ids for documents without one)")
    if cfg.num_shards:
        return cfg.num_shards, n, everything
    if cfg.target_rows:
        return max(1, math.ceil(n / cfg.target_rows)), n, everything
    if cfg.target_bytes:
        return max(1, math.ceil(b / cfg.target_bytes)), n, everything
    raise ShardBuildError("shards: set num_shards, target_rows or target_bytes")


def _writer(staging: str | None, num_shards: int, schema: pa.Schema, settings: WriterSettings,
            storage: StorageOptions | None = None):
    """The mapInArrow function: batches sorted by (shard, hash, key, row hash) in, one
    statistics row per shard written out (`staging` None: hashed, not written)."""
    names = schema.names

    def stats(info):
        return pa.RecordBatch.from_pydict(
            {"shard": pa.array([info.index], pa.int32()), "rows": pa.array([info.rows], pa.int64()),
             "bytes": pa.array([info.bytes], pa.int64()), "sha256": [info.sha256],
             "row_groups": [json.dumps(list(info.row_groups))],
             "list_lengths": [json.dumps({k: list(v) for k, v in sorted(info.list_lengths.items())})]})

    def write_partition(batches):  # no annotations: pyspark infers the UDF kind from them
        writer, done = None, set()
        try:
            for rb in batches:
                shard = rb.column("_shard").to_numpy()
                cuts = [0, *(np.flatnonzero(shard[1:] != shard[:-1]) + 1).tolist(), rb.num_rows]
                for start, end in zip(cuts, cuts[1:]):
                    index = int(shard[start])
                    if writer is None or writer.index != index:
                        if writer is not None:
                            yield stats(writer.close())
                            writer = None
                        if index in done:
                            raise RuntimeError(f"shards: rows of shard {index} arrived out of order")
                        done.add(index)
                        writer = ShardWriter(staging, index, num_shards, schema, settings, storage)
                    writer.write(pa.Table.from_batches([rb.slice(start, end - start)]).select(names))
            if writer is not None:
                yield stats(writer.close())
                writer = None
        finally:
            if writer is not None:
                writer.abort()

    return write_partition


def build_shards(df: DataFrame, output: str, cfg: ShardsSection, *, source: dict[str, Any],
                 config: dict[str, Any], where: str = "") -> dict[str, Any]:
    """Write and publish a build of `df` at `output` (a folder; `manifest.json` inside),
    of the rows where the Spark SQL expression `where` is true (all rows when empty; the
    manifest's `source.select` records it with the rows selected and not selected).

    Returns the manifest dict. Raises ShardBuildError for a missing or null key or a bad `where`.
    """
    selected = None
    if where:               # kept as a column while the projection below runs
        df, selected = df.withColumn("_selected", selection(df, where)), F.col("_selected")
    if cfg.columns:
        missing = [c for c in cfg.columns if c not in df.columns]
        if missing:
            raise ShardBuildError(f"shards.columns: {missing} not in the input (columns: {df.columns})")
        cols = list(dict.fromkeys([cfg.key, *cfg.columns])) + (["_selected"] if where else [])
        df = df.select(*[F.col(f"`{c}`") for c in cols])
    num_shards, total, everything = size_input(df, cfg, selected)
    if selected is not None:
        source = {**source, "select": {"where": where, "selected": total, "not_selected": everything - total}}
        log.info("select.where %r: %d of %d rows selected", where, total, everything)
        df = df.where(selected).drop("_selected")
    df = drop_unused_image_columns(df)
    schema = arrow_schema(df)
    settings = settings_of(cfg)
    output = qualify(df.sparkSession, output)
    storage = StorageOptions.from_spark(df.sparkSession)
    direct = is_object_store(output)
    log.info("building %d rows into %d shards at %s", total, num_shards, output)
    # rows that share a key are ordered by a hash of the whole row (maps as JSON text)
    hashable = hashable_columns(df.schema.fields)
    keyed = df.select("*", shard_expr(cfg.key, num_shards).alias("_shard"),
                      key_hash_expr(cfg.key).alias("_h"), F.xxhash64(*hashable).alias("_rh"))
    ordered = keyed.repartition("_shard").sortWithinPartitions("_shard", "_h", F.col(f"`{cfg.key}`"), "_rh")

    def write(folder: str | None) -> dict[int, ShardInfo]:
        stats = ordered.mapInArrow(_writer(folder, num_shards, schema, settings, storage), _STATS).collect()
        infos = {r["shard"]: ShardInfo(index=r["shard"], file=shard_name(r["shard"], num_shards), rows=r["rows"],
                                       bytes=r["bytes"], sha256=r["sha256"],
                                       row_groups=tuple(json.loads(r["row_groups"])),
                                       list_lengths={k: tuple(v) for k, v in json.loads(r["list_lengths"]).items()})
                 for r in stats}
        if len(infos) != len(stats):
            raise RuntimeError("shards: a shard was written twice; refusing to publish")
        empty = schema.empty_table()
        for i in range(num_shards):
            if i not in infos:
                infos[i] = write_shard(empty, folder, i, num_shards, settings, storage)
        return infos

    if direct:
        from pyspark import StorageLevel

        ordered = ordered.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            infos = write(None)
            build_id = build_id_of(list(infos.values()))
            if begin_direct_build(output, build_id, storage):
                folder = f"{output.rstrip('/')}/{build_id}"
                written = write(folder)
                if written != infos:
                    raise RuntimeError(f"shards: writing {build_id} gave other checksums than hashing it did "
                                       f"(the input is not deterministic); nothing was published")
                check_written(folder, list(written.values()), storage)
        finally:
            ordered.unpersist()
        staging = None
    else:
        staging = new_staging_dir(output, storage)
        infos = write(staging)
    written = sum(s.rows for s in infos.values())
    if written != total:
        raise RuntimeError(f"shards: wrote {written} rows but the input has {total}; refusing to publish")
    manifest = publish_build(output, staging, list(infos.values()), schema, key=cfg.key, config=config,
                             source=source, settings=settings, keep_builds=cfg.keep_builds, storage=storage)
    log.info("published build %s: %d rows in %d shards", manifest["build_id"], total, num_shards)
    return manifest

