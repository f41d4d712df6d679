"""Bad input through clean and redact on a real SparkSession: null, empty, invalid
UTF-8 and a 50 MB document are each kept or rejected with a reason, never a crash."""
from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import BinaryType, StringType, StructField, StructType  # noqa: E402

from shardforge.clean.stage import clean, drops_by_rule  # noqa: E402
from shardforge.config import CleanSection, RedactSection  # noqa: E402
from shardforge.redact.stage import counts_by_kind, redact  # noqa: E402

BLOCK = ("The survey team measured the river at dawn and again after the flood; the results "
         "were logged by the station on the hill. ") * 80          # ~10 KB of prose


def _big_document(mb: int) -> tuple[str, int]:
    parts, n = [], 0
    while sum(map(len, parts)) < mb * 1_000_000:
        parts.append(BLOCK)
        parts.append(f"Contact surveyor{n}@fabrikam.io or 8.8.{n % 250}.{n % 200 + 1} about run {n}.\n\n")
        n += 1
    return "".join(parts), n


def _df(spark, rows):
    schema = StructType([StructField("id", StringType(), False), StructField("raw", BinaryType()),
                         StructField("kind", StringType())])
    df = spark.createDataFrame(rows, schema)
    # bytes -> string without validation: invalid UTF-8 reaches the kernels as is
    return df.select("id", F.col("raw").cast("string").alias("text"), F.lit("t").alias("source"),
                     F.lit(None).cast("string").alias("url"), "kind")


@pytest.mark.slow
def test_bad_rows_and_a_50mb_document(spark):
    big, planted = _big_document(50)
    rows = [("null", None, "document"), ("empty", b"", "document"),
            ("bad-utf8", b"mail ann.lee@fabrikam.io \xed\xa0\x80 \xff end of a long enough text", "document"),
            ("big", big.encode("utf-8"), "document"), ("ok", b"Call (415) 555-2671 today, please.", "document")]
    df = _df(spark, rows)
    cleaned = clean(df, CleanSection(max_chars=0))          # 0: no length limit
    kept, rejected = cleaned.kept.persist(), cleaned.rejected.persist()   # as the pipeline does
    rej = {r["id"]: r["reason"] for r in rejected.select("id", "reason").collect()}
    assert rej == {"null": "invalid:null_text", "empty": "filter:min_chars"}
    res = redact(kept, RedactSection())
    res = dataclasses.replace(res, kept=res.kept.persist())
    summary = res.kept.select("id", F.length("text").alias("n"), "pii_counts",
                              F.col("text").contains("@fabrikam.io").alias("leak")).collect()
    by_id = {r["id"]: r for r in summary}
    assert set(by_id) == {"bad-utf8", "big", "ok"} and res.rejected.count() == 0
    assert by_id["big"]["pii_counts"] == {"EMAIL": planted, "IP_ADDRESS": planted}
    assert not any(r["leak"] for r in summary)
    assert by_id["bad-utf8"]["pii_counts"] == {"EMAIL": 1}
    assert by_id["ok"]["pii_counts"] == {"PHONE": 1}
    assert counts_by_kind(res.kept) == {"EMAIL": planted + 1, "IP_ADDRESS": planted, "PHONE": 1}
    # accounting per stage: rows in = kept + rejected
    assert kept.count() + rejected.count() == len(rows)
    assert res.kept.count() + res.rejected.count() == kept.count()
    assert drops_by_rule(rejected) == {"filter:min_chars": 1, "invalid:null_text": 1}
    for frame in (kept, rejected, res.kept):
        frame.unpersist()


@pytest.mark.slow
def test_default_limits_reject_the_50mb_document_with_a_reason(spark):
    big, _ = _big_document(50)
    df = _df(spark, [("big", big.encode("utf-8"), "document"), ("ok", b"short but fine text", "document")])
    res = clean(df, CleanSection())                          # default max_chars: 10 million
    assert {r["id"]: r["reason"] for r in res.rejected.select("id", "reason").collect()} == {"big": "filter:max_chars"}
    red = redact(df, RedactSection(max_chars=20_000_000))
    rej = red.rejected.select("id", "reason", "detail").collect()
    assert [(r["id"], r["reason"]) for r in rej] == [("big", "invalid:too_large")]
    assert "text withheld" in rej[0]["detail"]
