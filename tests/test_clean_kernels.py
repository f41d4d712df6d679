"""textclean kernels without Spark: normalisation and each quality rule."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardforge.clean.text import Rules, clean_one, failed_rule, from_pylist, normalize, to_pylist_safe


def test_normalize():
    assert normalize("Cafe\u0301") == "Caf\u00e9"                            # NFC
    assert normalize("\ufb01le", "NFKC") == "file" and normalize("\ufb01le") == "\ufb01le"
    assert normalize("a\x00b\x07c\u200bd\ufeff") == "abcd"                    # controls, zero-width, BOM
    assert normalize("x\ud800y\udfffz") == "xyz"                               # lone surrogates
    assert normalize("a\r\nb\rc\u2028d") == "a\nb\nc\nd"
    assert normalize("a \u00a0\u3000 b\t\tc   ") == "a b c"
    assert normalize("p1\n\n\n\n  \n\np2") == "p1\n\np2"
    assert normalize("def f():\n    return  1  \n") == "def f():\n    return 1"   # indentation kept
    assert normalize(None) == "" and normalize("") == "" and normalize(" \n\t ") == ""


@given(st.text(max_size=300))
@settings(max_examples=400, deadline=None)
def test_normalize_is_idempotent_and_encodable(text):
    once = normalize(text)
    assert normalize(once) == once
    once.encode("utf-8")                                                       # no surrogates left


@pytest.mark.parametrize("rule,rules,text", [
    ("min_chars", Rules(min_chars=10), "short"),
    ("max_chars", Rules(max_chars=5), "too long text"),
    ("min_words", Rules(min_words=5), "only three words"),
    ("max_words", Rules(max_words=2), "one two three"),
    ("min_mean_word_length", Rules(min_mean_word_length=3), "a b c d e f"),
    ("max_mean_word_length", Rules(max_mean_word_length=10), "supercalifragilistic expialidocious"),
    ("max_symbol_ratio", Rules(max_symbol_ratio=0.1), "#tag #tag #tag words here"),
    ("max_non_alnum_ratio", Rules(max_non_alnum_ratio=0.3), "{[(<>)]} ;;; ok"),
    ("min_alpha_word_fraction", Rules(min_alpha_word_fraction=0.8), "1 2 3 4 five"),
    ("max_duplicate_line_fraction", Rules(max_duplicate_line_fraction=0.3), "a\na\na\nb"),
    ("max_duplicate_paragraph_fraction", Rules(max_duplicate_paragraph_fraction=0.3), "p q\n\np q\n\np q\n\nr"),
    ("max_ellipsis_line_fraction", Rules(max_ellipsis_line_fraction=0.3), "read more...\nand more…\nend"),
    ("max_bullet_line_fraction", Rules(max_bullet_line_fraction=0.5), "- a\n- b\n* c\nend"),
    ("max_boilerplate_line_fraction", Rules(max_boilerplate_line_fraction=0.4), "We use cookies.\nPrivacy Policy\nhello"),
])
def test_each_rule_fires_and_names_itself(rule, rules, text):
    assert failed_rule(text, rules) == rule
    assert failed_rule(text, Rules(min_chars=0)) is None                        # all rules off


def test_clean_one_kinds_and_nulls():
    r = Rules(min_words=3)
    assert clean_one(None, "document", r) == (None, "invalid:null_text")
    assert clean_one(None, "image", r) == (None, None)
    assert clean_one("  a  cat ", "image", r) == ("a cat", None)             # captions: never filtered
    assert clean_one("  a  cat ", "page", r) == ("a cat", "filter:min_words")
    assert clean_one("one two three", None, r) == ("one two three", None)


def test_arrow_helpers_survive_bad_bytes():
    good = pa.array(["a", None, "b"])
    assert to_pylist_safe(good) == ["a", None, "b"]
    bad = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(b"\x00\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00"),
                                                  pa.py_buffer(b"o\xff\xed")])
    assert to_pylist_safe(bad) == ["o\ufffd", "\ufffd"]
    assert from_pylist(["x\ud800y", None]).to_pylist() == ["x\ufffdy", None]
