"""Schemas are code: the StructTypes every stage boundary asserts.

DOCUMENT is the core of the row that flows from ingest to the curated Delta table and
into the shards. Every other column travels with it, with its own type: the user's
columns (from Parquet and Delta inputs, and JSONL fields declared in `[ingest] columns`),
the image columns (only in batches the download stage fetched), and the columns stages
own (redact: pii_counts; tokenize: the token list and num_tokens).
REJECT is the one shape of every rejects table: every input row that does not
reach the curated table lands there with a machine-readable reason
(`download:<status>`, `filter:<rule>`, `duplicate_of:<id>`, `invalid:<why>`).
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import (BinaryType, DoubleType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType)

# Field metadata key of an integer list column stored narrower than Spark's types say
# (the tokenize stage's uint16 token ids); the shard writer reads it
DTYPE_KEY = "shardforge.dtype"

DOCUMENT = StructType([
    StructField("id", StringType(), False),
    StructField("text", StringType(), True),
    StructField("source", StringType(), True),
    StructField("url", StringType(), True),
    StructField("kind", StringType(), True),        # document | page | image
    StructField("meta", StringType(), True),        # JSON object of undeclared JSONL fields
])

IMAGE = StructType([                                # rows of kind "image" fill them
    StructField("image", BinaryType(), True),
    StructField("image_width", IntegerType(), True),
    StructField("image_height", IntegerType(), True),
])

PII_COUNTS = StructField("pii_counts", MapType(StringType(), IntegerType()), True)
QUALITY = StructField("quality", DoubleType(), True)

CURATED = StructType(DOCUMENT.fields + [PII_COUNTS])

REJECT = StructType([
    StructField("id", StringType(), True),
    StructField("stage", StringType(), False),
    StructField("reason", StringType(), False),
    StructField("detail", StringType(), True),
    StructField("source", StringType(), True),
    StructField("record", StringType(), True),      # the rejected row as JSON, so nothing is lost
])

DEDUP_AUDIT = StructType([
    StructField("id", StringType(), False),
    StructField("duplicate_of", StringType(), False),
    StructField("stage", StringType(), False),       # exact | near
    StructField("estimated_similarity", DoubleType(), True),
    StructField("jaccard", DoubleType(), True),
    StructField("cluster_size", LongType(), True),
])


class SchemaMismatch(ValueError):
    """A DataFrame at a job boundary does not have the expected columns and types."""


def assert_schema(df: DataFrame, expected: StructType, where: str, *, extra_ok: bool = False) -> None:
    """Checks names and types (not nullability) of `df` against `expected`."""
    have = {f.name: f.dataType for f in df.schema.fields}
    missing = [f.name for f in expected.fields if f.name not in have]
    wrong = [f"{f.name}: {have[f.name].simpleString()} (expected {f.dataType.simpleString()})"
             for f in expected.fields if f.name in have and have[f.name] != f.dataType]
    extra = [] if extra_ok else [n for n in have if n not in expected.fieldNames()]
    if missing or wrong or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if wrong:
            parts.append(f"wrong types {wrong}")
        if extra:
            parts.append(f"unexpected {extra}")
        raise SchemaMismatch(f"{where}: schema does not match: " + "; ".join(parts))


def documents(df: DataFrame) -> DataFrame:
    """DOCUMENT's columns first, in its order and types (absent ones null), then every other
    column of `df` as it is: user columns keep their types."""
    from pyspark.sql import functions as F

    have = set(df.columns)
    core = [(F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name) for f in DOCUMENT.fields]
    rest = [F.col(f"`{c}`") for c in df.columns if c not in DOCUMENT.fieldNames()]
    return df.select(*core, *rest)


def conform(df: DataFrame, expected: StructType) -> DataFrame:
    """Select `expected`'s columns in its order, casting; absent columns become nulls."""
    from pyspark.sql import functions as F

    have = set(df.columns)
    return df.select([(F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
                      for f in expected.fields])
