"""The PII detectors' shortcuts change no span. The shared scan (shardforge.redact.pii.scan,
the compiled kernel) is held field by field to the Python computation each field replaces;
raw detection with that scan, and with the detectors' own scans (as from the --py-files
zip), to `_raw_detect_reference` (every detector on its own, scanning for itself, no
shortcut); the right-anchored keyword rules behind their lookahead to the rules as written;
the quick checks of version names and contexts to the checks without them. On the labeled
sets, the benchmark's documents, adversarial runs and generated text, ASCII and not."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from shardforge.redact.pii import Redactor, ip, phone, secrets, ssn
from shardforge.redact.pii import iban
from shardforge.redact.pii.redaction import _TAIL_ANY
from shardforge.redact.pii.scan import COMPILED, FOLDS_TO_ASCII, scan
from shardforge.redact.pii.spans import number_starts

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parent.parent


def _jsonl(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _texts() -> list[str]:
    sys.path.insert(0, str(ROOT / "bench"))
    import redact_corpus

    texts = _jsonl(DATA / "pii" / "labeled.jsonl") + _jsonl(DATA / "pii_independent" / "independent.jsonl")
    texts += redact_corpus.documents(200_000, seed=3, pii_every=500, doc_bytes=(800, 1_200))
    texts += redact_corpus.documents(200_000, seed=4)
    texts += [redact_corpus.adversarial(name, 5_000) for name in redact_corpus.ADVERSARIAL]
    return texts


TEXTS = _texts()


def python_scan(text: str) -> tuple:
    """The scan's fields computed the way the detectors compute them without it (the IBAN
    heads and the base64 run by a plain regex)."""
    first = []
    for group in secrets.SCAN_LITERALS:
        hits = [i for i in (text.find(lit) for lit in group) if i != -1]
        first.append(min(hits) if hits else -1)
    folds = any(c in text for c in FOLDS_TO_ASCII)
    return (number_starts(text), first, None if folds else secrets._keyword_hits(text),
            None if folds else ssn._keyword_starts(text),
            [m.start() for m in re.finditer(r"(?=[A-Z]{2}[0-9]{2})", text)],
            bool(re.search(r"[A-Za-z0-9+/]{40}", text)),
            any("::" in run or run.count(":") >= 6 for run in re.findall(r"[0-9A-Fa-f:.]+", text)))


# non-ASCII characters: letters, a digit of another script, an emoji, a lone surrogate, and
# those whose lower case is ASCII or two characters (the scan leaves the keywords to Python)
NON_ASCII = ["é", "’", "\u0663", "\U0001f600", "\ud800", "\u017f", "\u212a", "\u0130"]


def _non_ascii(texts: list[str]) -> list[str]:
    return [t[: len(t) // 2] + NON_ASCII[i % len(NON_ASCII)] + t[len(t) // 2:] for i, t in enumerate(texts)]


def test_scan_equals_the_python_scans_on_real_text():
    texts = TEXTS + _non_ascii(TEXTS[:2_000])
    differ = [t for t in texts if tuple(scan(t)) != python_scan(t)]
    assert not differ, (len(differ), differ[0][:300])
    # the comparison saw every field at work
    scans = [scan(t) for t in texts]
    assert sum(bool(s.starts) for s in scans) > 1_000 and sum(bool(s.keyword_ends) for s in scans) > 100
    assert sum(bool(s.ssn_keywords) for s in scans) > 50 and sum(bool(s.iban_heads) for s in scans) > 100
    assert sum(s.b64_run for s in scans) > 100 and sum(s.keyword_ends is None for s in scans) > 100
    assert sum(s.v6_run for s in scans) > 100 and sum(":" in t and not s.v6_run for t, s in zip(texts, scans)) > 100
    assert all(sum(s.first[i] != -1 for s in scans) > 0 for i in range(len(secrets.SCAN_LITERALS)))


def test_only_the_listed_characters_lower_to_ascii_or_to_more_than_one_character():
    """What lets the scan match keywords ASCII case-insensitively on a text without them."""
    found = [c for c in map(chr, range(128, sys.maxunicode + 1))
             if len(c.lower()) != 1 or c.lower().isascii()]
    assert sorted(found) == sorted(FOLDS_TO_ASCII)


def test_iban_heads_equal_a_plain_search():
    for t in TEXTS + [t + " ÄB12 DE44 é" for t in TEXTS[:300]]:
        assert iban.heads(t) == [m.start() for m in re.finditer(r"(?=[A-Z]{2}[0-9]{2})", t)], t[:200]


def test_every_key_format_holds_one_of_its_literals():
    """What lets the scan skip a format, or start its search late: every match holds one of
    the format's literals at its offset."""
    seen = set()
    for t in TEXTS:
        for _, _, kind, pattern in secrets.TOKEN_PATTERNS:
            literals, at = secrets.TOKEN_LITERALS[kind]
            for m in pattern.finditer(t):
                assert t.startswith(literals, m.start() + at), (kind, m.group())
                seen.add(kind)
    assert seen == set(secrets.TOKEN_LITERALS)


REDACTORS = [Redactor(), Redactor(include_reserved=True), Redactor(["PHONE", "US_SSN", "KEY"]),
             Redactor(["CREDIT_CARD", "IBAN", "EMAIL", "IP_ADDRESS"])]


def test_raw_detection_equals_every_detector_on_its_own():
    """With the compiled scan, and with the detectors' own scans (shardforge from the zip)."""
    assert COMPILED
    texts = TEXTS + _non_ascii(TEXTS[:2_000])
    for r in REDACTORS:
        for how in ("compiled", "python"):
            differ = [t for t in texts
                      if r._detect_scanned(t, scan(t) if how == "compiled" else None) != r._raw_detect_reference(t)]
            assert not differ, (r.kinds, how, len(differ), differ[0][:300])
    assert sum(bool(REDACTORS[0]._raw_detect(t)) for t in texts) > 2_500


FRAGMENTS = (["0", "1", "4", "5", "7", "9", "415", "555-2671", "536-22-8127", "4539 1488 0343 6467", "+44 20 7946 0958",
              "2001:4860::8888", "fe80:1:2:3:4:5:6:7", "10:11:12.345",
              "+", "(", ")", " ", "  ", ".", "-", "/", "_", ":", "=", "#", "\n", "\t", ",", "@", "'", '"',
              "a", "Z", "x", "DE44", "GB82WEST", "AA00", "A", "aB3+/", "QWxhZGRpbjpvcGVuIHNlc2FtZQ+/9Zq3xYw8Lk2Mn5Rt",
              "AKIA", "ASIA", "ghp_", "github_pat_", "glpat-", "xoxb-", "hooks.slack.com/", "https://", "AIza",
              "sk_live_", "rk_test_", "eyJ", "-----BEGIN ", "RSA PRIVATE KEY-----", "://", "user:pw@host",
              "pass", "PASSWORD", "Pwd", "secret", "sEcReT", "token", "TOKEN", "key", "KEY", "credential",
              "ssn", "SSN", "Social", "social security", "sssn", "passs", "tokey", "secretoken",
              "Xk9mQ2pL7vRz8TwY4nB6cD1eF3gH5jK0mN2pQ4rS"] + NON_ASCII)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40))
@example(["AKIA", "Xk9mQ2pL7vRz8TwY4nB6cD1eF3gH5jK0mN2pQ4rS"])
@example(["(", "(", "415", ")", " ", "555-2671"])
@example(["415", " ", "(", ")", "555-2671"])              # three separators between digits
def test_scan_and_raw_detection_on_generated_text(parts):
    text = "".join(parts)
    assert tuple(scan(text)) == python_scan(text)
    for r in REDACTORS[:2]:
        want = r._raw_detect_reference(text)
        assert r._detect_scanned(text, scan(text)) == want and r._detect_scanned(text, None) == want


RULES = [(ip._VERSION_BEFORE, ip._VERSION_BEFORE_REF), (phone._ID_BEFORE, phone._ID_BEFORE_REF),
         (ssn._ID_BEFORE, ssn._ID_BEFORE_REF)]
WORDS = ["v", "V", "version", "VERSION", "ver", "ver.", "release", "build", "firmware", "fw", "update", "upgrade",
         "downgrade", "patch", "bump", "bumped", "rev", "semver", "api", "spec", "protocol", "section", "sec.",
         "chapter", "clause", "figure", "fig.", "table", "step", "rule", "item", "paragraph", "para.", "§",
         "isbn", "ISBN-10", "isbn-13", "no", "No.", "number", "case", "order", "invoice", "ref", "id", "ID",
         "serial", "ticket", "docket", "part", "model", "to", "from", "#", ":", "=", " ", "  ", "\n", "\t",
         "x", "a", "1", "_", ".", "-", "K", "ſ", "İ", "ı", "\u212a", "é"]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=12), st.integers(0, 8), st.integers(0, 8))
@example(["version", " ", ":", " "], 0, 0)
@example(["a", "ſ", "tep", " "], 0, 0)
def test_right_anchored_rules_find_what_the_rules_as_written_find(parts, cut_left, cut_right):
    text = "".join(parts)
    lo, hi = min(cut_left, len(text)), max(min(cut_left, len(text)), len(text) - cut_right)
    for fast, ref in RULES:
        a, b = fast.search(text, lo, hi), ref.search(text, lo, hi)
        assert (a and a.span()) == (b and b.span()), (fast.pattern[:40], text, lo, hi)
    tail = text[-24:] + " "
    assert bool(_TAIL_ANY.search(tail)) == any(ref.search(tail) for _, ref in RULES)


NAME_PARTS = ["version", "Version", "VERSION", "ver", "Vers", "release", "REVISION", "rev", "build", "firmware", "fw",
              "str", "String", "info", "num", "no", "tag", "id", "code", "name", "_", ".", "-", "1", "2", "x", "App",
              "RELEASE", "Fw", "sever", "relent", "prevent", "K", "\u212a", "İ"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(NAME_PARTS), max_size=6))
def test_version_names_are_found_with_and_without_the_quick_check(parts):
    name = "".join(parts)
    assert ip.is_version_name(name) == ip._names_version(name)


CONTEXT = ["__version__ = '", "AssemblyVersion(\"", "fw_ver=", "build_host = ", "VERSIONS = ['3.9.1', '", "<version>",
           "Server ", "release: ", "revision ", "if ip == \"", "foo==", "~", "x ", "\n", " ", "'", '"', ", ", "8.8.8.8",
           "1.2.3.4", "3.10.0.7", "<KEY> >= ", "upgrade the agent from ", "prevent ", "Firmware ", "FW: ", "fw_str = '"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(CONTEXT), max_size=10))
@example(["fw_str = '", "8.8.8.8"])
def test_version_contexts_are_found_with_and_without_the_quick_check(parts):
    text = "".join(parts)
    for s in range(len(text)):
        if text[s].isdigit():
            assert ip.in_version_context(text, s) == ip.in_version_context(text, s, quick=False), (text, s)
