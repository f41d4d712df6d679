"""The redact stage: PII detection and replacement over a DataFrame, run per Arrow
batch with `mapInArrow` (kernels in `shardforge.redact.pii`).

`redact(df, cfg)` keeps every input column with `text` redacted and adds
`pii_counts` (map kind -> count, empty when nothing was found). Rejected:
`invalid:null_text` (null text on a non-image row) and `invalid:too_large`
(more than redact.max_chars characters; its text is withheld from the reject record,
since it could not be redacted). Deterministic:
placeholders, or keyed pseudonyms that do not depend on the executor.
"""
from __future__ import annotations

import logging
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from shardforge.config import RedactSection
from shardforge.redact.pii import Redactor
from shardforge.redact.privacy import resolve_pseudonym_key, without_url_credentials
from shardforge.stage import StageResult, rejects
from shardforge.clean.text import from_pylist, to_pylist_safe

log = logging.getLogger("shardforge.redact")

REASON_COL = "_redact_reason"
DETAIL_COL = "_redact_detail"
COUNTS_TYPE = pa.map_(pa.string(), pa.int32())


def redactor_from_config(cfg: RedactSection) -> Redactor:
    """The kernel's `Redactor` for the [redact] section (the key resolved from its env
    variable, file or literal)."""
    return Redactor(cfg.kinds, mode=cfg.mode, placeholders=cfg.placeholders,
                    pseudonym_key=resolve_pseudonym_key(cfg), include_reserved=cfg.include_reserved)


def redact_batch(batch: pa.RecordBatch, redactor: Redactor, max_chars: int) -> pa.RecordBatch:
    """One Arrow batch in; the same columns (text redacted on kept rows), `pii_counts`
    (kinds in sorted order) and the reject reason (null = kept) out."""
    texts = to_pylist_safe(batch.column("text"))
    kinds = batch.column("kind").to_pylist() if "kind" in batch.schema.names else [None] * len(texts)
    out_text, counts, reasons, details = [], [], [], []
    for text, kind in zip(texts, kinds):
        if text is None:
            reason = None if kind == "image" else "invalid:null_text"
            out_text.append(None)
            counts.append([])
            reasons.append(reason)
            details.append(None)
            continue
        if len(text) > max_chars:
            # Unredacted text must not reach the rejects table: it is withheld.
            out_text.append(None)
            counts.append([])
            reasons.append("invalid:too_large")
            details.append(f"{len(text)} chars > redact.max_chars {max_chars}; text withheld")
            continue
        new, found = redactor.redact(text)
        out_text.append(new)
        counts.append(sorted(found.items()))
        reasons.append(None)
        details.append(None)
    names = batch.schema.names
    cols = [from_pylist(out_text, batch.schema.field("text").type) if name == "text" else batch.column(i)
            for i, name in enumerate(names)]
    cols += [pa.array(counts, COUNTS_TYPE), pa.array(reasons, pa.string()), pa.array(details, pa.string())]
    return pa.RecordBatch.from_arrays(cols, names=names + ["pii_counts", REASON_COL, DETAIL_COL])


def redact(df: DataFrame, cfg: RedactSection) -> StageResult:
    """Redact PII. Kept: input columns + `pii_counts`; rejected: REJECT rows."""
    from shardforge.schemas import PII_COUNTS

    if "text" not in df.columns:
        raise ValueError("redact: input has no `text` column")
    base = df.drop("pii_counts") if "pii_counts" in df.columns else df
    redactor = redactor_from_config(cfg)       # fails here, on the driver, for a bad config
    kinds, mode, placeholders = tuple(cfg.kinds), cfg.mode, dict(cfg.placeholders)
    key, reserved, max_chars = resolve_pseudonym_key(cfg), cfg.include_reserved, cfg.max_chars
    out_schema = StructType(base.schema.fields + [PII_COUNTS, StructField(REASON_COL, StringType(), True),
                                                  StructField(DETAIL_COL, StringType(), True)])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        r = Redactor(kinds, mode=mode, placeholders=placeholders, pseudonym_key=key, include_reserved=reserved)
        for batch in batches:
            yield redact_batch(batch, r, max_chars)

    del redactor
    marked = base.mapInArrow(run, out_schema)
    kept = marked.filter(F.col(REASON_COL).isNull()).drop(REASON_COL, DETAIL_COL)
    bad = marked.filter(F.col(REASON_COL).isNotNull()).drop("pii_counts")
    return StageResult(kept, rejects(bad, "redact", F.col(REASON_COL), F.col(DETAIL_COL)), shared=marked)


def redact_columns(df: DataFrame, columns, cfg: RedactSection, credentials=()) -> DataFrame:
    """`df` with the string `columns` it has redacted by the [redact] section's redactor, and
    then the string columns of `credentials` it has cleared of URL credentials (as the JVM's
    `sanitize_urls` clears them: `strip_credentials`), in one pass per Arrow batch (used for the
    rejects table's record, detail and source)."""
    from shardforge.redact.privacy import strip_credentials

    strings = {f.name for f in df.schema.fields if f.dataType.typeName() == "string"}
    todo = [c for c in columns if c in df.columns]
    strip = [c for c in credentials if c in strings]
    if not todo and not strip:
        return df
    kinds, mode, placeholders = tuple(cfg.kinds), cfg.mode, dict(cfg.placeholders)
    key, reserved = resolve_pseudonym_key(cfg), cfg.include_reserved
    names = df.columns

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        r = Redactor(kinds, mode=mode, placeholders=placeholders, pseudonym_key=key, include_reserved=reserved)
        for batch in batches:
            cols = []
            for name, col in zip(names, batch.columns):
                if name in todo or name in strip:
                    values = col.to_pylist()
                    if name in todo:
                        values = [r.redact(t)[0] for t in values]
                    if name in strip:
                        values = strip_credentials(values)
                    col = pa.array(values, col.type)
                cols.append(col)
            yield pa.RecordBatch.from_arrays(cols, names=names)

    return df.mapInArrow(run, df.schema)


def counts_by_kind(kept: DataFrame) -> dict[str, int]:
    """Total redactions by kind over `kept` (a Spark aggregation; only the per-kind
    totals reach the driver). Kinds with no redaction are absent."""
    rows = (kept.select(F.explode("pii_counts").alias("kind", "n"))
            .groupBy("kind").agg(F.sum("n").alias("n")).collect())
    return {r["kind"]: int(r["n"]) for r in sorted(rows, key=lambda r: r["kind"])}


def counts_by_kind_aggregates(kinds: tuple[str, ...]) -> dict:
    """`counts_by_kind` as aggregates an Observation computes while the kept rows are written
    (`StageOutput.observe`): a total per configured kind, and the total over every kind found,
    which `counts_by_kind_of` checks them against."""
    counts = F.col("pii_counts")
    per = {f"pii_{k}": F.sum(F.coalesce(counts[k], F.lit(0)).cast("long")) for k in kinds}
    every = F.aggregate(F.map_values(counts), F.lit(0).cast("long"), lambda acc, x: acc + x.cast("long"))
    return {**per, "pii_all": F.sum(F.coalesce(every, F.lit(0).cast("long")))}


def counts_by_kind_of(values: dict, kinds: tuple[str, ...]) -> dict[str, int] | None:
    """The `counts_by_kind` dict from those aggregates' values, or None when some redaction is
    of a kind outside `kinds` (the caller then groups the rows)."""
    got = {k: int(values[f"pii_{k}"] or 0) for k in kinds}
    if sum(got.values()) != int(values["pii_all"] or 0):
        return None
    return {k: n for k, n in sorted(got.items()) if n}


def documents_with_pii(kept: DataFrame) -> int:
    """How many kept documents had at least one redaction."""
    return kept.filter(F.size("pii_counts") > 0).count()


def without_records(rejected):
    """REJECT rows with no record and no detail (`rejects.record = "none"`): with the columns
    replaced, Spark never computes them (the JSON copy of each rejected row)."""
    return rejected.withColumn("record", F.lit(None).cast("string")).withColumn("detail", F.lit(None).cast("string"))


def rejects_for_output(rejected, cfg):
    """The rejects as the rejects table stores them, by `rejects.record`: "redacted" (the
    record and detail through the [redact] section's redactor), "none" (no record, no
    detail), "original" (as they were: warns). URL credentials are replaced in every mode."""
    mode = cfg.rejects.record
    if mode == "none":
        rejected = without_records(rejected)
    elif mode == "redacted":
        # the Python pass that redacts the records also clears their URL credentials
        return redact_columns(rejected, ("record", "detail"), cfg.redact, credentials=("record", "detail", "source"))
    else:
        log.warning("rejects.record = \"original\": the rejects table keeps rejected rows as they came, "
                    "unredacted PII included")
    return without_url_credentials(rejected, ("record", "detail", "source"))
