"""The compiled quality kernel (shardforge._native) against its definitions: its tokens equal
spaCy's own tokenizer (the pinned one, called here) on real and generated chunks, and equal
datatrove's labelled words; its decisions and C4 texts equal `apply_reference` (the pyarrow,
numpy and spaCy implementation) on generated documents (unicode, punctuation, whitespace
kinds, contractions, URLs, numbers, repeated lines, paragraphs and n-grams) and on real text,
for each group alone and all four chained; bad input is an error."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardforge.clean.quality import apply, apply_reference
from shardforge.clean.quality.native import kernel
from shardforge.clean.quality.words import _nlp
from shardforge.config import QualitySection
from test_quality import GOOD

ROOT = Path(__file__).resolve().parent.parent
CASES = json.loads((ROOT / "tests" / "data" / "quality" / "spacy_words.json").read_text(encoding="utf-8"))["cases"]
ALL = ("gopher_repetition", "gopher_quality", "c4", "fineweb")
CONFIGS = [QualitySection(filters=(g,)) for g in ALL] + [
    QualitySection(filters=ALL),
    QualitySection(filters=ALL, c4_terminal_punct=False),                       # as FineWeb runs C4
    QualitySection(filters=("gopher_quality", "c4"), gopher_min_words=3, c4_min_words_per_line=1,
                   c4_min_sentences=2, gopher_min_stop_words=0, c4_remove_citations=False),
    QualitySection(filters=("gopher_repetition", "fineweb"), gopher_max_dup_line_frac=0, gopher_max_dup_para_frac=0,
                   gopher_max_top_ngram_char_frac=(0.3, 0, 0.2), fineweb_min_line_punct_ratio=0,
                   fineweb_max_short_line_ratio=0),
]


PROSE = "\n".join(GOOD.split("\n")[:6])   # six lines of test_quality's kept prose


def _real_texts() -> list[str]:
    """Real text of this repository (its documentation) and the labelled strings."""
    docs = [c["text"] for c in CASES]
    for p in [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]:
        paras = p.read_text(encoding="utf-8").split("\n\n")
        docs += ["\n\n".join(paras[i:i + 6]) for i in range(0, len(paras), 6)]
    return docs


def _spacy(chunks: list[str]) -> list[list[str]]:
    tok = _nlp().tokenizer
    with _nlp().memory_zone():
        return [[t.text for t in tok(c)] for c in chunks]


def _same_as_reference(docs: list[str], q: QualitySection) -> None:
    arr = pa.array(docs, pa.string())
    got, got_texts = apply(arr, q)
    want, want_texts = apply_reference(arr, q)
    assert got == want
    assert got_texts.to_pylist() == want_texts.to_pylist()


# --- tokens -------------------------------------------------------------------------------

def test_tokens_equal_spacy_on_real_chunks():
    chunks = sorted({c for t in _real_texts() for c in t.split()})
    assert len(chunks) > 3000
    assert kernel().tokenize_chunks(chunks) == _spacy(chunks)


def test_words_equal_datatrove_labels():
    got = kernel().words([c["text"] for c in CASES])
    assert got == [c["words"] for c in CASES]


PIECES = ["n't", "'s", "'ll", "’s", "'", "’", '"', "“", "”", "«", "»", "(", ")", "[", "]", "{", "}", "<", ">", ".", ",",
          ":", ";", "!", "?", "...", "…", "-", "--", "–", "—", "/", "\\", "@", "#", "$", "%", "&", "*", "+", "=", "_",
          "~", "`", "^", "|", "°C", "km", "kg", "US$", "€", "£", "http://", "https://", "www.", ".com", ".org", "/a?b=1",
          "e.g.", "i.e.", "U.S.", "Mr.", "Dr.", "a.m.", "p.m.", ":)", ":-)", "<3", "^_^", "C++", "don", "do", "ca",
          "wo", "gon", "na", "Let", "y'all", "ma'am", "o'clock", "10", "3.5", "1,000", "2024-01-01", "12:30", "1/2",
          "the", "a", "word", "Straße", "naïve", "東京", "。", "！", "Привет", "مرحبا", "ツ", "😀", "\u0301", "x", "Z"]


@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(st.characters(blacklist_categories=("Cs",)), max_size=3)),
                min_size=1, max_size=6))
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_tokens_equal_spacy_on_generated_chunks(parts):
    chunk = "".join(ch for ch in "".join(parts) if not ch.isspace())
    if chunk:
        assert kernel().tokenize_chunks([chunk]) == _spacy([chunk])


# --- decisions and C4 texts ----------------------------------------------------------------

WS = [" ", " ", " ", "  ", "\t", "\u00a0", "\u3000", "\u2009"]
BREAKS = ["\n", "\n", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n \n", "\x0b", "\u2028", "\x1c"]
WORDS = PIECES + ["the", "be", "to", "of", "and", "that", "have", "with", "river", "garden", "market", "quietly",
                  "lorem", "ipsum", "Lorem ipsum", "JavaScript", "javascript", "privacy policy", "terms of use",
                  "[1]", "[23]", "[edit]", "[citation needed]", "•", "- item", "#tag", "supercalifragilisticexpialidocious"]


@st.composite
def documents(draw):
    """A document of lines from a small pool (so lines, paragraphs and n-grams repeat)."""
    pool = draw(st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=14), min_size=1, max_size=6))
    lines = []
    for _ in range(draw(st.integers(0, 14))):
        words = draw(st.sampled_from(pool))
        seps = draw(st.lists(st.sampled_from(WS), min_size=len(words), max_size=len(words)))
        line = "".join(w + s for w, s in zip(words, seps)).rstrip(" ")
        lines.append(line + draw(st.sampled_from(["", "", ".", ".", "!", "?", "...", "…", '"', ":", " "])))
    breaks = draw(st.lists(st.sampled_from(BREAKS), min_size=len(lines), max_size=len(lines)))
    return "".join(line + b for line, b in zip(lines, breaks)).rstrip("\n") if lines else draw(st.sampled_from(["", " ", "\n"]))


@given(st.lists(documents(), min_size=1, max_size=6))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_decisions_and_texts_equal_the_reference_on_generated_documents(docs):
    for q in CONFIGS:
        _same_as_reference(docs, q)


@given(st.lists(st.text(max_size=200), min_size=1, max_size=5))
@settings(max_examples=120, deadline=None)
def test_decisions_and_texts_equal_the_reference_on_any_unicode(docs):
    for q in CONFIGS:
        _same_as_reference(docs, replace(q, gopher_min_words=2, c4_min_sentences=1, c4_min_words_per_line=1))


def test_decisions_and_texts_equal_the_reference_on_real_text():
    docs = _real_texts()
    # and the same text with repeated lines and paragraphs, as boilerplate-heavy pages have
    docs += [d + "\n" + "\n".join(d.split("\n")[:3]) * 3 for d in docs[::4]]
    docs += ["\n\n".join([d] * 3) for d in docs[::9]]
    for q in CONFIGS:
        _same_as_reference(docs, q)


def test_batch_forms_sliced_chunked_large_and_empty():
    docs = _real_texts()[:40]
    q = QualitySection(filters=ALL)
    want, want_texts = apply_reference(pa.array(docs[5:30]), q)
    for arr in (pa.array(docs)[5:30], pa.chunked_array([docs[5:12], docs[12:30]]), pa.array(docs[5:30], pa.large_string())):
        got, texts = apply(arr, q)
        assert got == want
        assert texts.to_pylist() == want_texts.to_pylist()
    assert apply(pa.array([], pa.string()), q)[0] == []


def test_a_null_text_is_an_error():
    with pytest.raises(ValueError, match="null text"):
        apply(pa.array(["a text", None]), QualitySection(filters=ALL))


def test_a_missing_kernel_is_an_install_error():
    code = ("import sys; sys.modules['shardforge._native'] = None\n"
            "import pyarrow as pa\n"
            "from shardforge.clean.quality import apply\n"
            "from shardforge.config import QualitySection\n"
            "apply(pa.array(['x']), QualitySection(filters=('c4',)))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode != 0
    assert "ImportError: shardforge's compiled quality kernel (shardforge._native) is not installed" in p.stderr
    assert "pip install -e ." in p.stderr and "make package" in p.stderr


def test_the_clean_stage_runs_the_kernel_in_spark_workers(spark):
    """Through mapInArrow on a real SparkSession: Python workers load the kernel, and kept texts
    and reasons are the reference's on the normalised texts."""
    from shardforge.clean.stage import clean
    from shardforge.clean.text import normalize
    from shardforge.config import CleanSection

    docs = [d for d in _real_texts()[:60] if normalize(d)]      # (an empty text is clean's own reject)
    docs += [d + "\n" + "\n".join(d.split("\n")[:3]) * 3 for d in docs[::3]]
    docs += [PROSE, PROSE + "\nPlease enable JavaScript to view the comments.\nShare this page"]   # kept; C4 cuts lines
    q = QualitySection(filters=ALL, c4_terminal_punct=False)
    df = spark.createDataFrame([(f"d{i}", t) for i, t in enumerate(docs)], "id string, text string").repartition(3)
    res = clean(df, CleanSection(detect_language=False), q)
    got = {r["id"]: ("kept", r["text"]) for r in res.kept.collect()}
    got.update({r["id"]: ("rejected", r["reason"]) for r in res.rejected.collect()})
    norm = [normalize(d) for d in docs]
    reasons, texts = apply_reference(pa.array(norm), q)
    want = {f"d{i}": ("kept", t) if r is None else ("rejected", f"filter:{r}")
            for i, (r, t) in enumerate(zip(reasons, texts.to_pylist()))}
    assert sorted(got.items()) == sorted(want.items())
    assert {k for k, (kind, _) in want.items() if kind == "kept"} and {k for k, (kind, _) in want.items() if kind == "rejected"}


def test_the_kernel_arguments_cached_on_disk_are_the_derived_ones(tmp_path, monkeypatch):
    """A Python worker reads the kernel's arguments from the cache folder instead of importing
    spaCy: what it reads equals what derivation gives; a damaged file is derived again."""
    from shardforge.clean.quality import native

    monkeypatch.setenv("SHARDFORGE_CACHE", str(tmp_path))
    derived = native.derive_args()
    assert native.kernel_args() == derived                    # derived, then written
    (cached,) = tmp_path.glob("quality-kernel-*.json")
    assert native.kernel_args() == derived                    # read back
    cached.write_text('{"prefix": [')
    assert native.kernel_args() == derived                    # damaged: derived again, and rewritten
    assert native.kernel_args() == derived and json.loads(cached.read_text())["url"] is not None
