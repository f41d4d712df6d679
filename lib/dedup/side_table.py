"""The incremental dedup side table: one row per document kept in the curated table,
with what later batches need to be deduplicated against it (exact key, rank values,
MinHash signature and band hashes), stored as a Delta table merged by id.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import (ArrayType, BinaryType, DoubleType, IntegerType, LongType, StringType,
                               StructField, StructType)

SIDE_TABLE = StructType([
    StructField("id", StringType(), False),
    StructField("kind", StringType(), True),          # text | image
    StructField("exact_key", StringType(), False),    # 'txt:'/'img:' + sha256 (see normalize)
    StructField("length", LongType(), True),          # rank value: characters (text) or bytes (image)
    StructField("quality", DoubleType(), True),
    StructField("num_tokens", IntegerType(), True),
    StructField("signature", BinaryType(), True),     # num_perm x uint64 little-endian; null: no near-dedup
    StructField("bands", ArrayType(LongType(), True), True),
    StructField("params", StringType(), True),        # MinHashParams.key + ';norm=<mode>'
])


class SideTableMismatch(ValueError):
    """A side table built with other MinHash or normalisation settings than the current run."""


def read_side_table(spark, path: str) -> DataFrame | None:
    """The side table at `path`, or None when there is none yet (first batch)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return spark.read.format("delta").load(path)


def update_side_table(spark, signatures: DataFrame, path: str) -> None:
    """Merge a run's `DedupResult.signatures` into the side table at `path` by id
    (insert new ids, update existing ones); creates the table on the first call.
    Idempotent: merging the same rows twice leaves the same table."""
    from delta.tables import DeltaTable

    from shardforge.schemas import conform

    rows = conform(signatures, SIDE_TABLE)
    if not DeltaTable.isDeltaTable(spark, path):
        rows.write.format("delta").mode("errorifexists").save(path)
        return
    (DeltaTable.forPath(spark, path).alias("t")
     .merge(rows.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll()
     .whenNotMatchedInsertAll()
     .execute())
