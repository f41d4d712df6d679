"""Span type, overlap resolution and small validation helpers shared by the detectors."""
from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from typing import Iterable, NamedTuple


class Span(NamedTuple):
    """A detected value: text[start:end] is of `kind` (EMAIL, IP_ADDRESS, ...)."""
    start: int
    end: int
    kind: str


# When two detections overlap, the higher priority wins, then the longer span.
PRIORITY = {"KEY": 7, "EMAIL": 6, "IBAN": 5, "CREDIT_CARD": 4, "US_SSN": 3, "PHONE": 2, "IP_ADDRESS": 1}


def resolve(spans: Iterable[Span]) -> list[Span]:
    """Non-overlapping spans sorted by start. Where spans overlap, the higher priority
    wins, then the longer span, then the earlier one: deterministic, never dependent
    on detector order. Cost O(n log n) for n spans: spans are swept into clusters of
    mutually overlapping ones and only a cluster with two or more spans is arbitrated."""
    ordered = sorted(set(spans))
    out: list[Span] = []
    i, n = 0, len(ordered)
    while i < n:
        j, end = i + 1, ordered[i].end
        while j < n and ordered[j].start < end:
            end = max(end, ordered[j].end)
            j += 1
        if j == i + 1:
            out.append(ordered[i])
        else:
            out.extend(_arbitrate(ordered[i:j]))
        i = j
    return out


def _arbitrate(cluster: list[Span]) -> list[Span]:
    cands = sorted(cluster, key=lambda s: (-PRIORITY.get(s.kind, 0), -(s.end - s.start), s.start))
    starts: list[int] = []
    kept: list[Span] = []
    for s in cands:
        k = bisect.bisect_right(starts, s.start)
        if k > 0 and kept[k - 1].end > s.start:
            continue
        if k < len(kept) and kept[k].start < s.end:
            continue
        starts.insert(k, s.start)
        kept.insert(k, s)
    return kept


def drop_overlapping(spans: list[Span], protected: list[tuple[int, int]]) -> list[Span]:
    """Spans that do not touch any protected (start, end) region (both sorted by start)."""
    if not protected:
        return spans
    out = []
    for s in spans:
        if not any(s.start < e and s.end > b for b, e in protected):
            out.append(s)
    return out


def entropy(value: str) -> float:
    """Shannon entropy in bits per character (0.0 for an empty string)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def char_classes(value: str) -> int:
    """How many of lower, upper, digit, other appear in `value`."""
    return (any(c.islower() for c in value) + any(c.isupper() for c in value)
            + any(c.isdigit() for c in value) + any(not c.isalnum() for c in value))


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod-10) check over a string of ASCII digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# ... and at least six more digits follow, each after at most three of ` .-()`: every
# phone (8+ digits), card (13+) and SSN (9) written in the forms the detectors take.
_NUMBER_START = re.compile(r"[+(0-9](?<![A-Za-z0-9_.\-/][+(0-9])(?=(?:[ .\-()]{0,3}[0-9]){6})")


def number_starts(text: str) -> list[int]:
    """Offsets where a number of seven or more digits may begin: a digit, '+' or '('
    not glued to a word, number, dotted run, hyphenated run or path on its left. One
    scan, shared by the PHONE, CREDIT_CARD and US_SSN detectors (each adds its own
    left-side rules); short numbers (dates, counts, times) never reach them."""
    return [m.start() for m in _NUMBER_START.finditer(text)]


def right_anchored(rule: str, first: str) -> tuple[re.Pattern, re.Pattern]:
    """A case-insensitive rule that ends in `\\Z` ("a keyword right before here"),
    compiled twice: as written (the reference, for tests) and behind the lookahead
    `first`, which holds at the start of every match (the first characters of the
    rule's alternatives). Both find the same matches; the second is several times
    faster, since a search skips the positions where no alternative can start
    instead of trying each of them there."""
    return re.compile("(?i)" + rule), re.compile("(?i)(?=" + first + ")(?:" + rule + ")")


def is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
