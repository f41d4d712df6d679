"""The detectors' shared scan of a text: one pass of the compiled kernel
(`shardforge._native.PiiScan`, native/src/pii.rs) instead of a dozen scans of their own.

`scan(text)` gives what each detector would otherwise look for itself: number starts
(`spans.number_starts`, for PHONE, CREDIT_CARD and US_SSN), the first offset of each KEY
format's literals and of PEM and URL markers (`secrets.SCAN_LITERALS`), the KEY and US_SSN
keywords (`secrets._keyword_hits`, `ssn._keyword_starts`), IBAN heads (`iban.heads`),
whether a 40-character base64 run occurs (if not, no AWS secret key can) and whether a
run of IPv6 characters holds `::` or six colons (if not, no IPv6 address can). Each equals the
Python computation it replaces: tests/test_pii_scan.py holds every field to it, and
`Redactor._raw_detect` to `Redactor._raw_detect_reference` (every detector on its own).

The kernel reads the text as ASCII with every other character replaced by `?`: one byte
per character, so its offsets are Python's, and every rule it applies reads ASCII
characters only (a `?` belongs to none of them). The keywords are matched ASCII
case-insensitively, which is what Python's lower-casing gives unless the text holds a
character whose lower case is ASCII or longer than one character (FOLDS_TO_ASCII); for such
a text the keyword fields are None and the detectors look for the keywords themselves.

Where the scan runs is decided by how shardforge was loaded, never by a failed import:
installed (a wheel, a venv, `pip install -e .`), it runs in the kernel, and a missing
kernel is an ImportError that says how to build it; imported from the `--py-files` zip,
which cannot carry a compiled module (docs/cluster.md), COMPILED is False and the
detectors scan for themselves (`Redactor._detect_scanned(text, None)`): the same spans,
about 1.8x the CPU time on ASCII text and 3.3x on other text (BENCHMARKS.md).
"""
from __future__ import annotations

import zipimport
from functools import lru_cache
from typing import NamedTuple

from shardforge.redact.pii import secrets, ssn

COMPILED = not isinstance(__spec__.loader, zipimport.zipimporter)
# The non-ASCII characters whose lower case is ASCII (KELVIN SIGN -> "k") or longer than one
# character (CAPITAL I WITH DOT ABOVE -> "i" + COMBINING DOT ABOVE); tests/test_pii_scan.py
# checks that no other code point does either.
FOLDS_TO_ASCII = ("\u212a", "\u0130")


class Scanned(NamedTuple):
    """One text's scan; offsets are character offsets, lists are sorted."""
    starts: list[int]                   # spans.number_starts
    first: list[int]                    # per secrets.SCAN_LITERALS group: its first offset, -1 if none
    keyword_ends: list[int] | None      # secrets._keyword_hits (None: not known, see above)
    ssn_keywords: list[int] | None      # ssn._keyword_starts (None: not known)
    iban_heads: list[int]               # iban.heads
    b64_run: bool                       # a run of 40 [A-Za-z0-9+/] occurs
    v6_run: bool                        # a run of [0-9A-Fa-f:.] holds "::" or six colons


@lru_cache(maxsize=1)
def kernel():
    """The process's `PiiScan`, built once from the detectors' literals and keywords."""
    from shardforge.native import compiled

    PiiScan = compiled("PiiScan")
    return PiiScan([list(g) for g in secrets.SCAN_LITERALS], [list(secrets.KEYWORDS), list(ssn.KEYWORDS)])


def scan(text: str) -> Scanned:
    """The shared scan of `text` (any string, lone surrogates included)."""
    starts, first, ((_, key_ends), (ssn_starts, _)), heads, b64, v6 = kernel().scan(text.encode("ascii", "replace"))
    if not text.isascii() and (FOLDS_TO_ASCII[0] in text or FOLDS_TO_ASCII[1] in text):
        key_ends = ssn_starts = None
    return Scanned(starts, first, key_ends, ssn_starts, heads, b64, v6)
