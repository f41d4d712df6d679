"""The redact stage on a real SparkSession: redaction, pii_counts, rejects for bad
input, pseudonym determinism across partitionings, and the run-report summary."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from shardforge.config import RedactSection  # noqa: E402
from shardforge.redact.stage import counts_by_kind, documents_with_pii, redact  # noqa: E402
from shardforge.schemas import CURATED, DOCUMENT, REJECT, assert_schema  # noqa: E402


def _doc(i, text, kind="document"):
    return {"id": f"r{i}", "text": text, "source": "t", "url": None, "kind": kind, "meta": None,
            "image": None, "image_width": None, "image_height": None}


ROWS = [
    _doc(0, "Mail jane.roe@fabrikam.io from 203.0.114.9 or 10.0.0.1, v1.2.3.4."),
    _doc(1, "Nothing personal here at all."),
    _doc(2, None),
    _doc(3, "Card 4539 1488 0343 6467 and key AKIAZ3MJKL7QW2RT9XYV."),
    _doc(4, "caption by bob@contoso.net", kind="image"),
    _doc(5, None, kind="image"),
    _doc(6, ""),
]


def test_redact_placeholders_counts_and_rejects(spark):
    df = spark.createDataFrame(ROWS, DOCUMENT)
    res = redact(df, RedactSection())
    assert_schema(res.kept, CURATED, "redact.kept")
    assert_schema(res.rejected, REJECT, "redact.rejected")
    kept = {r["id"]: (r["text"], r["pii_counts"]) for r in res.kept.collect()}
    rejected = {r["id"]: r["reason"] for r in res.rejected.collect()}
    assert len(kept) + len(rejected) == len(ROWS)
    assert rejected == {"r2": "invalid:null_text"}
    assert kept["r0"] == ("Mail <EMAIL> from <IP_ADDRESS> or 10.0.0.1, v1.2.3.4.", {"EMAIL": 1, "IP_ADDRESS": 1})
    assert kept["r1"] == ("Nothing personal here at all.", {})
    assert kept["r3"] == ("Card <CREDIT_CARD> and key <KEY>.", {"CREDIT_CARD": 1, "KEY": 1})
    assert kept["r4"] == ("caption by <EMAIL>", {"EMAIL": 1})
    assert kept["r5"] == (None, {}) and kept["r6"] == ("", {})
    assert counts_by_kind(res.kept) == {"CREDIT_CARD": 1, "EMAIL": 2, "IP_ADDRESS": 1, "KEY": 1}
    assert documents_with_pii(res.kept) == 3


def test_redact_too_large_is_rejected_without_its_text(spark):
    df = spark.createDataFrame([_doc(0, "x@fabrikam.io " * 10), _doc(1, "short a@fabrikam.io")], DOCUMENT)
    res = redact(df, RedactSection(max_chars=100))
    rej = res.rejected.collect()
    assert [(r["id"], r["reason"]) for r in rej] == [("r0", "invalid:too_large")]
    assert "140 chars" in rej[0]["detail"]
    assert json.loads(rej[0]["record"]).get("text") is None      # unredacted text withheld
    assert [r["text"] for r in res.kept.collect()] == ["short <EMAIL>"]


def test_redact_pseudonyms_are_deterministic_and_idempotent(spark):
    rows = [_doc(i, f"user{i % 5}@fabrikam.io called +44 20 7946 {1000 + i % 3}") for i in range(60)]
    df = spark.createDataFrame(rows, DOCUMENT)
    cfg = RedactSection(mode="pseudonym", pseudonym_key="s3cret")
    a = {r["id"]: r["text"] for r in redact(df.repartition(1), cfg).kept.collect()}
    b = {r["id"]: r["text"] for r in redact(df.repartition(5), cfg).kept.collect()}
    assert a == b
    assert a["r0"] == a["r15"] and a["r0"] != a["r1"]           # same value, same pseudonym
    assert a["r0"].startswith("<EMAIL_") and "@" not in a["r0"]
    again = redact(redact(df, cfg).kept.drop("pii_counts"), cfg).kept
    assert {r["id"]: r["text"] for r in again.collect()} == a
    assert counts_by_kind(again) == {}
    other = RedactSection(mode="pseudonym", pseudonym_key="other")
    c = {r["id"]: r["text"] for r in redact(df, other).kept.collect()}
    assert c["r0"] != a["r0"]


def test_redact_passes_extra_columns(spark):
    df = spark.createDataFrame(ROWS[:2], DOCUMENT).withColumn("lang", F.lit("en"))
    kept = redact(df, RedactSection()).kept
    assert kept.columns == df.columns + ["pii_counts"]
    assert {r["lang"] for r in kept.collect()} == {"en"}


def test_redactions_by_kind_observed_as_the_rows_are_written(spark, tmp_path):
    """The report's redactions by kind, computed by an Observation while the kept rows are
    written, are the same counts (the ones the rows made here hold); a redaction of a kind
    outside the configured ones makes the observed totals disagree, and then they are not used."""
    from pyspark.sql import Observation

    from shardforge.redact.stage import counts_by_kind_aggregates, counts_by_kind_of

    kinds = RedactSection().kinds
    res = redact(spark.createDataFrame(ROWS, DOCUMENT), RedactSection())
    obs = Observation()
    aggs = counts_by_kind_aggregates(kinds)
    res.kept.observe(obs, *[c.alias(k) for k, c in aggs.items()]).write.parquet(str(tmp_path / "kept"))
    assert counts_by_kind_of(obs.get, kinds) == {"CREDIT_CARD": 1, "EMAIL": 2, "IP_ADDRESS": 1, "KEY": 1}
    assert counts_by_kind_of(obs.get, tuple(k for k in kinds if k != "KEY")) is None
    none = Observation()
    res.kept.where("size(pii_counts) = 0").observe(none, *[c.alias(k) for k, c in aggs.items()]).write.parquet(
        str(tmp_path / "clean"))
    assert counts_by_kind_of(none.get, kinds) == {}
