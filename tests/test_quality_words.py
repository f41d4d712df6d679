"""The quality rules' words equal datatrove's: tricky strings (contractions, abbreviations, URLs,
paths, code, emoticons, units, quotes, non-Latin scripts, odd whitespace) whose expected words
and symbol-word flags were labelled once by datatrove 0.10.1's own `split_into_words` (spaCy's
English tokenizer) in its venv, before and apart from shardforge's code
(tests/data/quality/make_spacy_words.py), and committed as data."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pyarrow as pa
import pytest

W = importlib.import_module("shardforge.clean.quality.words")   # the package re-exports the function `words`

CASES = json.loads((Path(__file__).parent / "data" / "quality" / "spacy_words.json").read_text(encoding="utf-8"))["cases"]


def _per_doc(p) -> list[list]:
    out: list[list] = [[] for _ in range(p.n)]
    for t, d in zip(p.flat.to_pylist(), p.doc.tolist()):
        out[d].append(t)
    return out


@pytest.fixture(autouse=True)
def _cold_memo():
    W._memo.clear()                       # every test starts from spaCy, not from an earlier test's memo
    yield
    W._memo.clear()


def test_words_equal_datatrove_on_labelled_strings_in_one_batch():
    got = _per_doc(W.words(pa.array([c["text"] for c in CASES], pa.string())))
    for case, g in zip(CASES, got):
        assert g == case["words"], case["text"]


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_words_and_symbol_flags_equal_datatrove_per_string(case):
    p = W.words(pa.array([case["text"]], pa.string()))
    assert _per_doc(p)[0] == case["words"]
    assert W.is_symbol(p).tolist() == case["symbol"]
    # again, now from the memo
    assert _per_doc(W.words(pa.array([case["text"]], pa.string())))[0] == case["words"]
