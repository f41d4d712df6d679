"""The clean stage's normalisation in the compiled kernel (`normalize_many`,
native/src/normalize.rs) gives exactly what the Python reference `normalize` gives: on
generated text made of the characters every substitution treats specially, and on real
documents in ten languages."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from shardforge.clean import text as T

DATA = Path(__file__).parent / "data" / "quality" / "multilang.jsonl.gz"

# every character class a substitution names, and neighbours that must be left alone
SPECIAL = (" \t\n\r\x0b\x0c\x1c\x1f\x85\u2028\u2029"          # whitespace and line breaks
           "\x00\x07\x08\x0e\x7f\x84\x86\x9f\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2060\u2064\u2065"
           "\u2066\u206f\ufeff\ufffe\uffff"                  # controls and format characters
           "\xa0\u1680\u2000\u200a\u202f\u205f\u3000"          # Unicode spaces
           "e\u0301\u00e9\ufb01\u2460ab.\u4e2d\U0001F600"     # composable, compatibility, CJK, emoji
           "\ud800\udfff")                                    # lone surrogates
texts = st.lists(st.text(alphabet=st.sampled_from(SPECIAL), max_size=60), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None)
@given(texts, st.sampled_from(["NFC", "NFKC", ""]))
def test_the_kernel_normalises_like_the_reference_on_generated_text(batch, form):
    assert T.normalize_many(batch, form) == [T.normalize(t, form) for t in batch]


def test_the_kernel_normalises_like_the_reference_on_real_documents():
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    messy = [d.replace("\n", "\r\n").replace(" ", " \t\u00a0", 3) + "\n\n\n\n  \t " for d in docs[:50]]
    batch = docs + messy + [None, "", "   "]
    assert T.normalize_many(batch) == [None if t is None else T.normalize(t) for t in batch]
    assert T.normalize_many(docs[:5]) != docs[:5] or all(T.normalize(d) == d for d in docs[:5])


@pytest.mark.parametrize("raw, expected", [     # written out by hand, from the rules in text.py's docstring
    ("a \t b\r\nc", "a b\nc"),
    ("  indented\n\tcode  x", "indented\n\tcode x"),
    ("x\u00a0\u3000y\u200bz", "x yz"),
    ("p\n\n\n\n q \n", "p\n\n q"),
    ("a \n \t \nb", "a\n\nb"),
])
def test_known_cases(raw, expected):
    assert T.normalize_many([raw]) == [expected] == [T.normalize(raw)]
