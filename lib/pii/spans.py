"""Span type, overlap resolution and small validation helpers shared by the detectors."""
from __future__ import annotations

import math
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
    """Non-overlapping spans sorted by start. Deterministic: ties break on priority,
    length, then position, never on detector order."""
    cands = sorted(set(spans), key=lambda s: (-PRIORITY.get(s.kind, 0), -(s.end - s.start), s.start))
    kept: list[Span] = []
    for s in cands:
        if all(s.end <= k.start or s.start >= k.end for k in kept):
            kept.append(s)
    return sorted(kept)


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


def is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
