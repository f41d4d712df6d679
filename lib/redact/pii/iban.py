"""IBAN: country code, two check digits and a BBAN of the country's registered
length, electronic (no spaces) or printed (groups of four), passing ISO 7064
mod-97. Lower-case IBANs are not matched."""
from __future__ import annotations

import re

from shardforge.redact.pii.spans import Span

_CAND = re.compile(r"[A-Z](?<![A-Za-z0-9_][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]){8,32}+")

LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
    "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
    "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
_EXAMPLES = frozenset({"GB82WEST12345698765432", "DE89370400440532013000", "GB29NWBK60161331926819",
                       "FR1420041010050500013M02606", "NL91ABNA0417164300"})


def mod97_ok(iban: str) -> bool:
    """ISO 7064 MOD 97-10 over an IBAN without spaces."""
    moved = iban[4:] + iban[:4]
    num = "".join(str(int(ch, 36)) for ch in moved)
    return int(num) % 97 == 1


# Upper-case ASCII letters to "A", digits to "0": every IBAN starts where "AA00" is found
# in the translated text (a plain substring search, much faster than a character-class scan).
_SHAPE = str.maketrans({**{c: "A" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}, **{c: "0" for c in "0123456789"}})
# the same map over bytes: an ASCII text's bytes have its offsets, and bytes.translate is ~4x faster
_SHAPE_BYTES = bytes(65 if 65 <= i <= 90 else 48 if 48 <= i <= 57 else i for i in range(256))


def heads(text: str) -> list[int]:
    """Offsets of two upper-case ASCII letters followed by two ASCII digits: where an
    IBAN may start."""
    if text.isascii():
        shape, head = text.encode("ascii").translate(_SHAPE_BYTES), b"AA00"
    else:
        shape, head = text.translate(_SHAPE), "AA00"
    out = []
    s = shape.find(head)
    while s != -1:
        out.append(s)
        s = shape.find(head, s + 1)
    return out


def find(text: str, include_reserved: bool = False, at: list[int] | None = None) -> list[Span]:
    """IBAN spans (the printed form may contain single spaces). `at`: `heads(text)`,
    computed when not given."""
    out = []
    n = len(text)
    pos = 0
    for s in heads(text) if at is None else at:
        if s < pos:
            continue
        m = _CAND.match(text, s)
        pos = s + 1
        if m is None:
            continue
        pos = s + 2                         # a rejected candidate: look again just after its start
        length = LENGTHS.get(text[s:s + 2])
        if length is None:
            continue
        raw = m.group()
        count, end = 0, s
        for i, ch in enumerate(raw):        # take exactly `length` alphanumerics
            if ch != " ":
                count += 1
            if count == length:
                end = s + i + 1
                break
        if count != length:
            continue
        if end < n and (text[end].isalnum() or text[end] == "_"):
            continue
        cand = text[s:end]
        if " " in cand:
            groups = cand.split(" ")
            if any(len(g) != 4 for g in groups[:-1]) or not 1 <= len(groups[-1]) <= 4:
                continue
        iban = cand.replace(" ", "")
        if not mod97_ok(iban):
            continue
        if not include_reserved and iban in _EXAMPLES:
            continue
        out.append(Span(s, end, "IBAN"))
        pos = end
    return out
