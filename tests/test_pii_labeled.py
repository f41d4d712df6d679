"""Accuracy of the PII detectors on the labeled set (tests/data/pii): per kind,
precision >= 0.97 and recall >= 0.95, on the generated set and the handwritten one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pii_data import data_module

DATA = Path(__file__).resolve().parent / "data" / "pii"
KINDS = ("EMAIL", "IP_ADDRESS", "PHONE", "CREDIT_CARD", "US_SSN", "IBAN", "KEY")
NEGATIVE_GROUPS = {"version", "uuid", "git_sha", "hex_colour", "date_time", "luhn_invalid", "base64",
                   "placeholder", "private_ip", "code_tokens", "numbers"}


def _module(name):
    return data_module("pii", name)


@pytest.fixture(scope="module")
def rows():
    return _module("score").load() + _module("handwritten").load()


def test_labeled_set_is_committed_and_reproducible(tmp_path, monkeypatch):
    gen = _module("make_labeled")
    monkeypatch.setattr(gen, "HERE", tmp_path)
    gen.main()
    assert (tmp_path / "labeled.jsonl").read_bytes() == (DATA / "labeled.jsonl").read_bytes()


def test_labeled_set_covers_every_kind_and_hard_negative(rows):
    assert len(rows) >= 600
    groups = {r["group"] for r in rows}
    assert {f"neg:{g}" for g in NEGATIVE_GROUPS} <= groups
    assert {f"pos:{k}" for k in KINDS} <= groups
    support = {k: sum(1 for r in rows for s in r["spans"] if s[2] == k) for k in KINDS}
    assert min(support.values()) >= 80, support
    for r in rows:                               # gold spans are well-formed
        for s, e, _ in r["spans"]:
            assert 0 <= s < e <= len(r["text"]) and r["text"][s:e].strip() == r["text"][s:e]


def test_precision_and_recall_per_kind(rows):
    score = _module("score")
    stats, errors = score.score(rows)
    report = score.table(stats) + "\n" + "\n".join(f"{e[0]} {e[2]} {e[3]!r} in {e[4][:100]!r}" for e in errors[:20])
    for k in KINDS:
        assert stats[k]["precision"] >= 0.97, report
        assert stats[k]["recall"] >= 0.95, report


def test_scorer_counts_errors():
    score = _module("score")
    rows = [{"id": "a", "group": "x", "text": "mail ann.lee@fabrikam.io now", "spans": [[5, 21, "EMAIL"]]},
            {"id": "b", "group": "x", "text": "no pii", "spans": [[0, 2, "KEY"]]}]
    stats, errors = score.score(rows, detect=lambda t: [(0, 4, "EMAIL")] if t.startswith("mail") else [])
    assert stats["EMAIL"]["fp"] == 1 and stats["EMAIL"]["fn"] == 1 and stats["EMAIL"]["tp"] == 0
    assert stats["KEY"]["recall"] == 0.0 and len(errors) == 3
    assert json.dumps(stats)   # plain numbers, ready for a report
