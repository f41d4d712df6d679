"""The detectors' shared scan of an ASCII text: one pass of the compiled kernel
(`shardforge._native.PiiScan`, native/src/pii.rs) instead of a dozen scans of their own.

`scan(text)` gives, for an ASCII text, what each detector would otherwise look for itself:
number starts (`spans.number_starts`, for PHONE, CREDIT_CARD and US_SSN), the first
offset of each KEY format's literals (`secrets.SCAN_LITERALS`), the KEY and US_SSN
keywords (`secrets._keyword_hits`, `ssn._keyword_starts`), IBAN heads (`iban.heads`)
and whether a 40-character base64 run occurs (none: no AWS secret key). Each equals the
Python computation it replaces: tests/test_pii_scan.py holds every field to it, and
`Redactor._raw_detect` to `Redactor._raw_detect_reference` (every detector on its own).
A non-ASCII text is scanned by the detectors themselves: the kernel would have to count
characters rather than bytes, and Python's lower-casing of non-ASCII letters is not
ASCII case folding. A missing kernel is an ImportError that says how to build it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from shardforge.redact.pii import secrets, ssn

MISSING = ("shardforge's compiled kernel (shardforge._native) is not installed: install shardforge from "
           "source with `pip install -e .` (needs cargo and rustc; README.md), or the wheel `make package` builds")


class Scanned(NamedTuple):
    """One ASCII text's scan; offsets are character offsets, lists are sorted."""
    starts: list[int]                   # spans.number_starts
    first: list[int]                    # per secrets.SCAN_LITERALS group: its first offset, -1 if none
    keyword_ends: list[int]             # secrets._keyword_hits
    ssn_keywords: list[int]             # ssn._keyword_starts
    iban_heads: list[int]               # iban.heads
    b64_run: bool                       # a run of 40 [A-Za-z0-9+/] occurs


@lru_cache(maxsize=1)
def kernel():
    """The process's `PiiScan`, built once from the detectors' literals and keywords."""
    try:
        from shardforge._native import PiiScan
    except ImportError as e:
        raise ImportError(MISSING) from e
    return PiiScan([list(g) for g in secrets.SCAN_LITERALS], [list(secrets.KEYWORDS), list(ssn.KEYWORDS)])


def scan(text: str) -> Scanned:
    """The shared scan of an ASCII `text` (a ValueError for any other)."""
    starts, first, ((_, key_ends), (ssn_starts, _)), heads, b64 = kernel().scan(text)
    return Scanned(starts, first, key_ends, ssn_starts, heads, b64)
