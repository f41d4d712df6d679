"""dedup's `lower_alnum` normalisation in the compiled kernel (`normalize_arrow`), against the
pure-Python reference `normalize` (Python's str.lower and unicodedata), and in Spark
(`norm_column`, an Arrow UDF) against Spark SQL's regular expression (`normalize_expr`)."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from shardforge.dedup.normalize import norm_column, normalize, normalize_arrow, normalize_expr

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"

# pieces whose lower-casing or class is easy to get wrong: Greek final sigma in its contexts,
# Turkish dotted I (lowers to two code points), titlecase digraphs, sharp s, ligatures,
# combining marks, digits and numbers of other scripts (Nd, Nl, No), CJK, Arabic, Devanagari
# vowel signs (Mc/Mn, not letters), emoji, every kind of space and punctuation
PIECES = ["ΟΔΟΣ", "Σ", "ΑΣ.", "ΑΣ\u0301", "ΑΣ\u0301Β", "Σ'Α", "ΣΑΣ ", "ᾼ", "İstanbul", "I", "ǅ", "ǈ", "ß", "ẞ",
          "ﬁ", "e\u0301", "\u0301", "٣٤", "৭", "Ⅻ", "ⅻ", "²", "½", "①", "漢字", "かな", "カナ", "مرحبا",
          "हिन्दी", "😀", "👍🏽", "\u200d", "\u00a0", "\u2028", "\t", "\n", " ", "  ", "_", "-", "'", "’",
          "!!", "...", "Héllo", "WORLD", "42", "x", "Ω", "Ꙋ", "Ⓐ", "𝔄", "𐐀", "ſ", "K", "Å", ""]


def _generated(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))) for _ in range(n)]


def _check(texts: list[str | None]) -> None:
    got = normalize_arrow(pa.array(texts, pa.string()), "lower_alnum").to_pylist()
    want = [normalize(t, "lower_alnum") for t in texts]
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert not bad, f"{len(bad)} of {len(texts)} differ, first: {bad[:3]}"


@pytest.mark.parametrize("frame", ["A{}b", "Σ{}a", "aΣ{}", "a{}Σ"])
def test_kernel_matches_the_reference_on_every_code_point(frame):
    # every code point between letters, 64 to a text: its lower case and its class, and
    # around a capital sigma the final-sigma rule's view of it
    cps = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(frame.format(chr(c)) for c in cps[i:i + 64]) for i in range(0, len(cps), 64)]
    _check(texts)


def test_kernel_matches_the_reference_on_generated_text():
    texts = _generated(5000, seed=7) + [None, "", " ", "ΑΣ", "a  b", "  a", "a  "]
    _check(texts)
    # sliced arrays (a non-zero offset) and large_string arrays give the same values
    arr = pa.array(texts, pa.large_string())
    want = [normalize(t, "lower_alnum") for t in texts[1000:2000]]
    assert normalize_arrow(arr.slice(1000, 1000), "lower_alnum").to_pylist() == want
    assert normalize_arrow(arr.slice(0, 0), "lower_alnum").to_pylist() == []
    assert normalize_arrow(arr, "lower_alnum").type == pa.large_string()


def test_kernel_matches_the_reference_on_the_sample_documents():
    texts = []
    for f in sorted(SAMPLE.rglob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                texts.append(json.loads(line).get("text"))
            except (ValueError, AttributeError):      # the sample's deliberately damaged lines
                pass
    assert len(texts) > 50
    _check(texts)


@pytest.mark.parametrize("mode", ["none", "whitespace", "lower"])
def test_other_modes_run_the_reference(mode):
    texts = _generated(200, seed=3) + [None]
    assert normalize_arrow(pa.array(texts), mode).to_pylist() == [normalize(t, mode) for t in texts]


def test_spark_column_equals_spark_sql(spark):
    # characters of Unicode 13 or older only: Spark's JVM (Java 17) knows no newer ones
    texts = _generated(3000, seed=11) + [None, ""]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, text string").repartition(3)
    rows = df.select("i", norm_column(df.text, "lower_alnum").alias("k"),
                     normalize_expr(df.text, "lower_alnum").alias("j")).collect()
    assert len(rows) == len(texts)
    bad = [(texts[r.i], r.k, r.j) for r in rows if r.k != r.j]
    assert not bad, f"{len(bad)} differ, first: {bad[:3]}"
    assert sorted((r.i, r.k) for r in rows) == [(i, normalize(t, "lower_alnum")) for i, t in enumerate(texts)]


@pytest.mark.parametrize("mode", ["lower_alnum", "lower", "none"])
def test_exact_key_column_equals_sha256_of_the_reference(spark, mode):
    # the key made in the kernel's UDF (lower_alnum) or Spark SQL against hashlib over the
    # pure-Python reference, and against Spark's sha2 over Spark SQL's normalisation; images
    # keep their own namespace, and an empty normalised text has the documented key
    import hashlib

    from pyspark.sql import functions as F

    from shardforge.dedup.normalize import EMPTY_TEXT_KEY, exact_key_column, exact_key_expr

    texts = _generated(2000, seed=19) + [None, "", "  ", "!!", "ΑΣ", "Héllo WORLD"]
    df = spark.createDataFrame([(i, t, i == 5) for i, t in enumerate(texts)],
                               "i int, text string, img boolean").repartition(3)
    df = df.withColumn("image", F.when(F.col("img"), F.lit(b"\x89PNG")))
    rows = df.select("i", exact_key_column(F.col("text"), F.col("image"), F.col("img"), mode).alias("k"),
                     exact_key_expr(normalize_expr(F.col("text"), mode), F.col("image"), F.col("img")).alias("j")
                     ).collect()
    assert len(rows) == len(texts) and all(r.k == r.j for r in rows)
    keys = dict((r.i, r.k) for r in rows)
    assert keys[5] == "img:" + hashlib.sha256(b"\x89PNG").hexdigest()
    assert keys[len(texts) - 6] == keys[len(texts) - 5] == EMPTY_TEXT_KEY == "txt:" + hashlib.sha256(b"").hexdigest()
    if mode == "lower_alnum":      # Python's and Java's lower() and \s differ outside this mode
        want = {i: "txt:" + hashlib.sha256(normalize(t, mode).encode("utf-8")).hexdigest() for i, t in enumerate(texts)}
        want[5] = keys[5]
        assert keys == want
