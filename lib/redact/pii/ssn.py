"""US_SSN: `AAA-GG-SSSS` (hyphens or spaces) with a valid area (not 000, 666,
900-999), group (not 00) and serial (not 0000), with or without a cue word; nine
bare digits only right after `SSN`/`social security`. Advertised and documentation
numbers (078-05-1120, 219-09-9999, 123-45-6789) are examples, not PII. An SSN-shaped
number right after an id word (`case no.`, `order`, `#818-...` glued) is an id."""
from __future__ import annotations

import re

from shardforge.redact.pii.spans import Span, number_starts, right_anchored

_SEP = re.compile(r"[0-9]{3}(?:-[0-9]{2}-| [0-9]{2} )[0-9]{4}")
_SSN_BEFORE = re.compile(r"(?i)\bssn|social[ \-]security")
_BARE_AT = re.compile(r"(?i:ssn|social[ \-]security(?:[ \-]n(?:umber|o\.?))?)[ \t:#=\-]{0,6}+([0-9]{9})")
# `#` marks a number only when glued to it (`#818-66-4938`); `# 818-66-4938` is a comment.
_ID_BEFORE_REF, _ID_BEFORE = right_anchored(
    r"(?:#|(?:\bno\.?|\bnumber|\bcase|\border|\binvoice|\bref|\bid|\bticket|\bdocket|\bpart|\bmodel)"
    r"\s*[:#]?\s*)\Z",
    r"#|\b[cdimnoprt]")
EXAMPLES = frozenset({"078051120", "219099999", "123456789", "457555462"})


def valid(digits: str) -> bool:
    """The SSA's structural rules for a 9-digit SSN."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


KEYWORDS = ("ssn", "social")


def _keyword_starts(text: str, low: str | None = None) -> list[int]:
    """Where "ssn" or "social" starts (case-insensitive), sorted. `low`: `text.lower()`,
    computed when not given."""
    low = text.lower() if low is None else low
    if len(low) != len(text):
        low = text                                  # case mapping changed offsets: exact case only
    out = []
    for kw in KEYWORDS:
        i = low.find(kw)
        while i != -1:
            out.append(i)
            i = low.find(kw, i + 1)
    return sorted(out)


def _bare_matches(text: str, starts: list[int]):
    """`SSN 536228127`-style matches, anchored on each keyword start in `starts`."""
    for i in starts:
        if i == 0 or not text[i - 1].isalnum():
            m = _BARE_AT.match(text, i)
            if m:
                yield m


def find(text: str, include_reserved: bool = False, starts: list[int] | None = None,
         low: str | None = None, keyword_starts: list[int] | None = None) -> list[Span]:
    """US_SSN spans. `starts`: the shared `number_starts(text)`, `low`: `text.lower()`,
    `keyword_starts`: `_keyword_starts(text)`; each computed when not given."""
    out = []
    n = len(text)
    for s in number_starts(text) if starts is None else starts:
        if not text[s].isdigit() or (s > 0 and text[s - 1] in "+$"):
            continue
        if s > 1 and text[s - 1] == ":" and (text[s - 2].isdigit() or text[s - 2] == ":"):
            continue                                 # 12:818-..., a::818-...: a time or an address
        m = _SEP.match(text, s)
        if m is None:
            continue
        e = m.end()
        if e < n and (text[e].isalnum() or text[e] == "_" or (text[e] in ".-/" and e + 1 < n and text[e + 1].isdigit())):
            continue
        if _ID_BEFORE.search(text, max(0, s - 12), s) and not _SSN_BEFORE.search(
                text, max(0, s - 40, text.rfind("\n", max(0, s - 40), s) + 1), s):
            continue                                 # case no. 431-35-7579: an id in SSN shape (a cue must be on the line)
        digits = m.group().replace("-", "").replace(" ", "")
        if valid(digits) and (include_reserved or digits not in EXAMPLES):
            out.append(Span(s, e, "US_SSN"))
    for m in _bare_matches(text, _keyword_starts(text, low) if keyword_starts is None else keyword_starts):
        s, e = m.span(1)
        if e < n and text[e].isalnum():
            continue
        if valid(m.group(1)) and (include_reserved or m.group(1) not in EXAMPLES):
            out.append(Span(s, e, "US_SSN"))
    return out
