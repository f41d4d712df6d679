"""The clean stage: Unicode/whitespace normalisation and quality filters over a
DataFrame, run per Arrow batch with `mapInArrow` (kernels in `shardforge.textclean`).

`clean(df, cfg)` keeps every input column (extra ones pass through) with `text`
normalised; rejected rows carry `filter:<rule>` or `invalid:null_text` and their
original text. Rows of kind "image" are normalised but never filtered (captions).
rows in = kept + rejected; the result does not depend on partitioning.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from .config import CleanSection
from .stage import StageResult, rejects
from .textclean import Rules, clean_one, from_pylist, to_pylist_safe

REASON_COL = "_clean_reason"


def rules_from_config(cfg: CleanSection) -> Rules:
    """The kernel's `Rules` from the [clean] section."""
    return Rules(
        min_chars=cfg.min_chars, max_chars=cfg.max_chars, min_words=cfg.min_words, max_words=cfg.max_words,
        min_mean_word_length=cfg.min_mean_word_length, max_mean_word_length=cfg.max_mean_word_length,
        max_symbol_ratio=cfg.max_symbol_ratio, max_non_alnum_ratio=cfg.max_non_alnum_ratio,
        min_alpha_word_fraction=cfg.min_alpha_word_fraction,
        max_duplicate_line_fraction=cfg.max_duplicate_line_fraction,
        max_duplicate_paragraph_fraction=cfg.max_duplicate_paragraph_fraction,
        max_ellipsis_line_fraction=cfg.max_ellipsis_line_fraction,
        max_bullet_line_fraction=cfg.max_bullet_line_fraction,
        max_boilerplate_line_fraction=cfg.max_boilerplate_line_fraction,
        boilerplate_phrases=tuple(cfg.boilerplate_phrases))


def clean_batch(batch: pa.RecordBatch, rules: Rules, form: str) -> pa.RecordBatch:
    """One Arrow batch in, the same columns out (text normalised for kept rows,
    original for rejected ones) plus the reject reason (null = kept)."""
    texts = to_pylist_safe(batch.column("text"))
    kinds = batch.column("kind").to_pylist() if "kind" in batch.schema.names else [None] * len(texts)
    out_text, reasons = [], []
    for text, kind in zip(texts, kinds):
        new, reason = clean_one(text, kind, rules, form)
        out_text.append(new if reason is None else text)
        reasons.append(reason)
    cols = [from_pylist(out_text, batch.schema.field("text").type) if name == "text" else batch.column(i)
            for i, name in enumerate(batch.schema.names)]
    return pa.RecordBatch.from_arrays(cols + [pa.array(reasons, pa.string())],
                                      names=batch.schema.names + [REASON_COL])


def clean(df: DataFrame, cfg: CleanSection) -> StageResult:
    """Normalise and filter documents. Kept: same columns as `df`; rejected: REJECT rows."""
    if "text" not in df.columns:
        raise ValueError("clean: input has no `text` column")
    rules = rules_from_config(cfg)
    form = cfg.unicode_form if cfg.normalize_unicode else ""
    out_schema = StructType(df.schema.fields + [StructField(REASON_COL, StringType(), True)])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield clean_batch(batch, rules, form)

    marked = df.mapInArrow(run, out_schema)
    kept = marked.filter(F.col(REASON_COL).isNull()).drop(REASON_COL)
    rejected = rejects(marked.filter(F.col(REASON_COL).isNotNull()), "clean", F.col(REASON_COL))
    return StageResult(kept, rejected, shared=marked)


def drops_by_rule(rejected: DataFrame) -> dict[str, int]:
    """Rejected rows counted by reason (`filter:<rule>` / `invalid:<why>`), computed
    by a Spark aggregation; only the small per-reason table reaches the driver."""
    rows = rejected.groupBy("reason").count().collect()
    return {r["reason"]: int(r["count"]) for r in sorted(rows, key=lambda r: r["reason"])}
