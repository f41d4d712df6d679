"""The contract of a stage kernel: a DataFrame in, kept and rejected rows out.

`StageResult(kept, rejected)`: `kept` goes on to the next stage, `rejected` has the
REJECT schema (see `shardforge.schemas`). For every stage, rows in = kept + rejected
(the runner, `shardforge.engine.runner`, checks it); `rejects(...)` builds rejected rows
without losing the original record.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


@dataclass(frozen=True)
class StageResult:
    """Unpacks as `kept, rejected`. `shared` is the frame both are filtered from (for
    example a mapInArrow output with a reason column), or a tuple of such frames: the
    runner persists them while it writes both, so the stage's kernels run once. `extras`
    are named frames the stage also keeps (e.g. WARC record counts by type)."""
    kept: DataFrame
    rejected: DataFrame
    shared: DataFrame | tuple[DataFrame, ...] | None = None
    extras: dict[str, DataFrame] = field(default_factory=dict)

    def __iter__(self):
        yield self.kept
        yield self.rejected


def rejects(df: DataFrame, stage: str, reason: Column | str, detail: Column | str | None = None) -> DataFrame:
    """Turn rows of `df` into REJECT rows: reason like `filter:min_chars`, the whole row as JSON."""
    from shardforge.schemas import REJECT, conform

    reason_col = F.lit(reason) if isinstance(reason, str) else reason
    if detail is None:
        detail_col = F.lit(None).cast("string")
    else:
        detail_col = F.lit(detail) if isinstance(detail, str) else detail
    record_cols = [c for c in df.columns if not c.startswith("_")]
    out = df.select(
        (F.col("id") if "id" in df.columns else F.lit(None)).cast("string").alias("id"),
        F.lit(stage).alias("stage"),
        reason_col.cast("string").alias("reason"),
        detail_col.cast("string").alias("detail"),
        (F.col("source") if "source" in df.columns else F.lit(None)).cast("string").alias("source"),
        F.to_json(F.struct(*[F.col(c) for c in record_cols])).alias("record"),
    )
    return conform(out, REJECT)


def empty_rejects(spark) -> DataFrame:
    """No REJECT rows, with REJECT's schema (nullability included), made in the JVM:
    `createDataFrame([])` would start a Python worker of a second kind (a PythonRDD) for
    nothing, a second or more at a run's start."""
    from shardforge.schemas import REJECT

    return spark.range(0, 0, 1, 1).select(*[(F.lit(None) if f.nullable else F.lit("")).cast(f.dataType).alias(f.name)
                                            for f in REJECT.fields])


SIGNALS = "signals"


def with_signals(df: DataFrame, fields: dict[str, Column]) -> DataFrame:
    """`df` with `fields` set in its `signals` struct column (created when absent; a field of
    the same name is replaced). Stages that annotate documents (clean in annotate mode,
    score, decontaminate) write their per-document quantities here, one field each."""
    if not fields:
        return df
    if SIGNALS in df.columns:
        # Spark's withField leaves a null struct null: a row without signals (an image in
        # annotate mode) gets a struct of null fields first, so the new fields are not lost
        empty = F.struct(*[F.lit(None).cast(f.dataType).alias(f.name) for f in df.schema[SIGNALS].dataType.fields])
        col = F.when(F.col(SIGNALS).isNull(), empty).otherwise(F.col(SIGNALS))
        for name, value in fields.items():
            col = col.withField(name, value)
        return df.withColumn(SIGNALS, col)
    return df.withColumn(SIGNALS, F.struct(*[v.alias(k) for k, v in fields.items()]))
