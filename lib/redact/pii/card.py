"""CREDIT_CARD: 13-19 digit card numbers, plain or in the usual groups (spaces or
hyphens), with a known issuer prefix and a valid Luhn check digit. The processors'
published test numbers (4111 1111 1111 1111, 4242..., ...) are examples, not PII."""
from __future__ import annotations

import re

from shardforge.redact.pii.spans import Span, luhn_ok, number_starts

# The written forms (plain, 4-4-4-4[-3], 4-6-5, 4-6-4, 4-4-4-1) with one kind of
# separator; the first digit must not continue a word or number on its left.
_CAND = re.compile(
    r"[0-9]"
    r"(?:[0-9]{3}([ \-])[0-9]{4}\1[0-9]{4}\1[0-9]{4}(?:\1[0-9]{3})?"
    r"|[0-9]{3}([ \-])[0-9]{6}\2[0-9]{4,5}"
    r"|[0-9]{3}([ \-])[0-9]{4}\3[0-9]{4}\3[0-9]"
    r"|[0-9]{12,18})")
# digits only, or groups split by ONE kind of separator
_GROUPINGS = {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 1)}
_IBAN_HEAD = re.compile(r"[A-Z]{2}[0-9]{2}[ \-]?\Z")     # the rest of an IBAN is not a card
TEST_NUMBERS = frozenset({
    "4111111111111111", "4242424242424242", "4012888888881881", "4000056655665556", "4222222222222",
    "5555555555554444", "5105105105105100", "5200828282828210", "2223003122003222",
    "378282246310005", "371449635398431", "378734493671000", "6011111111111117", "6011000990139424",
    "3530111333300000", "3566002020360505", "30569309025904", "38520000023237", "6200000000000005",
    "4000000000000002", "4000000000000077", "4000000000000069", "4000000000000119"})


def brand_ok(digits: str) -> bool:
    """True if the issuer prefix and the length fit a known card network."""
    n = len(digits)
    p2, p3, p4, p6 = int(digits[:2]), int(digits[:3]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4":
        return n in (13, 16, 19)                                   # Visa
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16                                             # Mastercard
    if p2 in (34, 37):
        return n == 15                                             # American Express
    if p4 == 6011 or p2 == 65 or 644 <= p3 <= 649 or 622126 <= p6 <= 622925:
        return 16 <= n <= 19                                       # Discover
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19                                       # JCB
    if 300 <= p3 <= 305 or p2 in (36, 38, 39) or p4 == 3095:
        return 14 <= n <= 19                                       # Diners Club
    if p2 == 62:
        return 16 <= n <= 19                                       # UnionPay
    if p2 in (50, 56, 57, 58, 63, 67) or p2 == 68 or p2 == 69 or p2 == 60:
        return 12 <= n <= 19                                       # Maestro and others
    return False


def _runs_on(text: str, e: int) -> bool:
    """True if the number ending at `e` continues: a word character follows, or `.` or
    `-` followed by a digit. A comma ends it (`4539...6467,08/27`: the next CSV field;
    a 13-19 digit run is never a thousands-grouped number)."""
    n = len(text)
    return e < n and (text[e].isalnum() or text[e] == "_" or (text[e] in ".-" and e + 1 < n and text[e + 1].isdigit()))


def _checksums_ok(digits: str) -> bool:
    return brand_ok(digits) and luhn_ok(digits)


def find(text: str, include_reserved: bool = False, starts: list[int] | None = None) -> list[Span]:
    """CREDIT_CARD spans; validated by grouping, issuer prefix and Luhn. `starts`:
    the shared `number_starts(text)`, computed here when not given."""
    out = []
    last_end = -1
    for s in number_starts(text) if starts is None else starts:
        if s < last_end or not text[s].isdigit() or (s > 0 and text[s - 1] == "+"):
            continue                                # +4915619885754: an international phone number
        m = _CAND.match(text, s)
        if m is None:
            continue
        e = m.end()
        if m.group(1) and e - s == 23 and (_runs_on(text, e) or not _checksums_ok(text[s:e].replace(" ", "").replace("-", ""))):
            e -= 4                                  # 4-4-4-4-3 failed: the 3 may start the next number
        while e > s and not text[e - 1].isdigit():
            e -= 1
        if _runs_on(text, e):
            continue
        cand = text[s:e]
        seps = {ch for ch in cand if not ch.isdigit()}
        if len(seps) > 1:
            continue
        if seps:
            sep = seps.pop()
            groups = cand.split(sep)
            if any(not g for g in groups) or tuple(len(g) for g in groups) not in _GROUPINGS:
                continue
        digits = cand.replace(" ", "").replace("-", "")
        if _IBAN_HEAD.search(text, max(0, s - 5), s):
            continue
        if not 13 <= len(digits) <= 19 or not _checksums_ok(digits):
            continue
        if not include_reserved and (digits in TEST_NUMBERS or len(set(digits)) <= 2):
            continue                                # test numbers, 4444 4444 4444 4448 and the like
        out.append(Span(s, e, "CREDIT_CARD"))
        last_end = e
    return out
