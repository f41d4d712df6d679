"""The clean stage on a real SparkSession: accounting, reasons, pass-through columns,
image captions, bad input and determinism."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from shardforge.clean.stage import clean, drops_by_rule  # noqa: E402
from shardforge.config import CleanSection, load_config  # noqa: E402
from shardforge.schemas import DOCUMENT, REJECT, assert_schema  # noqa: E402

PROSE = "The committee met on Tuesday to discuss the budget for the coming year in detail."


def _doc(i, text, kind="document", **extra):
    row = {"id": f"d{i}", "text": text, "source": "test", "url": None, "kind": kind, "meta": None,
           "image": None, "image_width": None, "image_height": None}
    row.update(extra)
    return row


def _df(spark, rows):
    return spark.createDataFrame(rows, DOCUMENT)


def test_clean_normalises_filters_and_accounts(spark):
    cfg = CleanSection(min_words=5, max_duplicate_line_fraction=0.3, max_boilerplate_line_fraction=0.5)
    rows = [
        _doc(0, "Cafe\u0301  au\u00a0lait\x00 is   served here every single morning.\r\n"),
        _doc(1, "too short"),
        _doc(2, "\n".join(["same line again and again here"] * 5)),
        _doc(3, None),
        _doc(4, "   \t\n "),
        _doc(5, "We use cookies to improve this site.\nPrivacy policy and terms of use apply."),
        _doc(6, "a\u200bb caption", kind="image"),
        _doc(7, None, kind="image"),
        _doc(8, PROSE),
    ]
    res = clean(_df(spark, rows), cfg)
    assert_schema(res.kept, DOCUMENT, "clean.kept", extra_ok=True)
    assert res.kept.columns[-2:] == ["language", "language_score"]
    assert_schema(res.rejected, REJECT, "clean.rejected")
    kept = {r["id"]: r["text"] for r in res.kept.collect()}
    reasons = {r["id"]: r["reason"] for r in res.rejected.collect()}
    assert len(kept) + len(reasons) == len(rows)
    assert kept == {"d0": "Caf\u00e9 au lait is served here every single morning.",
                    "d6": "ab caption", "d7": None, "d8": PROSE}
    assert reasons == {"d1": "filter:min_words", "d2": "filter:max_duplicate_line_fraction",
                       "d3": "invalid:null_text", "d4": "filter:min_chars",
                       "d5": "filter:max_boilerplate_line_fraction"}
    assert drops_by_rule(res.rejected) == {"filter:max_boilerplate_line_fraction": 1,
                                           "filter:max_duplicate_line_fraction": 1, "filter:min_chars": 1,
                                           "filter:min_words": 1, "invalid:null_text": 1}
    # the reject record keeps the original text, not the normalised one
    rec = json.loads(res.rejected.filter(F.col("id") == "d2").first()["record"])
    assert rec["text"] == rows[2]["text"]


def test_without_rejected_texts_the_rows_and_reasons_are_the_same_and_rejects_carry_no_text(spark):
    """rejected_text=False (a rejects table keeping no record): the same kept rows, the same
    reasons, every other column of a rejected row as it was, and its text empty."""
    cfg = CleanSection(min_words=5, max_duplicate_line_fraction=0.3, max_boilerplate_line_fraction=0.5)
    rows = [_doc(0, "Cafe\u0301  au\u00a0lait is   served here every single morning.\r\n"),
            _doc(1, "too short"), _doc(2, "\n".join(["same line again and again here"] * 5)),
            _doc(3, None), _doc(4, PROSE, url="http://example.com/a")]
    df = _df(spark, rows)
    full, bare = clean(df, cfg), clean(df, cfg, rejected_text=False)
    assert sorted(map(tuple, bare.kept.collect())) == sorted(map(tuple, full.kept.collect()))
    assert {r["id"] for r in bare.kept.collect()} == {"d0", "d4"}
    reasons = {r["id"]: r["reason"] for r in bare.rejected.collect()}
    assert reasons == {r["id"]: r["reason"] for r in full.rejected.collect()} == {
        "d1": "filter:min_words", "d2": "filter:max_duplicate_line_fraction", "d3": "invalid:null_text"}
    records = {r["id"]: json.loads(r["record"]) for r in bare.rejected.collect()}
    assert {i: rec.get("text") for i, rec in records.items()} == {"d1": "", "d2": "", "d3": ""}
    assert {i: rec["source"] for i, rec in records.items()} == {"d1": "test", "d2": "test", "d3": "test"}


def test_clean_passes_extra_columns_and_is_partition_independent(spark):
    rows = [_doc(i, f"  document number {i}  with   spaces ", extra_col=i * 10) for i in range(40)]
    from pyspark.sql.types import LongType, StructField, StructType
    schema = StructType(DOCUMENT.fields + [StructField("extra_col", LongType())])
    df = spark.createDataFrame(rows, schema)
    a = clean(df.repartition(1), CleanSection()).kept
    b = clean(df.repartition(7), CleanSection()).kept
    assert a.columns == df.columns + ["language", "language_score"]
    ra = sorted(map(tuple, a.collect()))
    assert ra == sorted(map(tuple, b.collect()))
    assert ("d3", "document number 3 with spaces") in {(r[0], r[1]) for r in ra}
    assert {r[a.columns.index("extra_col")] for r in ra} == {i * 10 for i in range(40)}


def test_clean_bad_unicode_from_json(spark, tmp_path):
    # JSON escapes for lone surrogates: the JVM turns them into '?' on the way to
    # Python; no crash, the row is kept and its text is valid UTF-8
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "x1", "text": "bad \\ud800 surrogate \\udfff here", "kind": "document"}\n'
                    '{"id": "x2", "text": "", "kind": "document"}\n', encoding="utf-8")
    df = spark.read.schema(DOCUMENT).json(str(path))
    res = clean(df, CleanSection())
    kept = {r["id"]: r["text"] for r in res.kept.collect()}
    rej = {r["id"]: r["reason"] for r in res.rejected.collect()}
    assert set(kept) | set(rej) == {"x1", "x2"}
    assert rej == {"x2": "filter:min_chars"}
    assert kept["x1"].startswith("bad ") and kept["x1"].endswith(" here")
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in kept["x1"])


def test_clean_invalid_utf8_bytes(spark):
    # binary -> string casts let invalid UTF-8 (an encoded lone surrogate, a stray
    # continuation byte) reach the kernel: decoded with U+FFFD, per row, no crash
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType
    raw = spark.createDataFrame(
        [("b1", b"ok \xed\xa0\x80 and \x80 end"), ("b2", b"fine text")],
        StructType([StructField("id", StringType(), False), StructField("b", BinaryType())]))
    df = raw.select("id", F.col("b").cast("string").alias("text"), F.lit("document").alias("kind"))
    res = clean(df, CleanSection())
    kept = {r["id"]: r["text"] for r in res.kept.collect()}
    assert res.rejected.count() == 0
    assert kept["b2"] == "fine text"
    assert kept["b1"].startswith("ok ") and kept["b1"].endswith(" end") and "\ufffd" in kept["b1"]


def test_clean_config_from_toml(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[clean]\nmin_words = 3\nunicode_form = "NFKC"\nboilerplate_phrases = ["buy now"]\n')
    cfg = load_config(p).clean
    assert cfg.min_words == 3 and cfg.unicode_form == "NFKC" and cfg.boilerplate_phrases == ("buy now",)
    from shardforge.config import ConfigError
    with pytest.raises(ConfigError, match="clean.unicode_form"):
        load_config(None, ['clean.unicode_form="NFD"'])
