"""PHONE: North American numbers in separated formats, and international numbers
written with `+` or `00` and a valid country calling code.

Policy: a number is a phone by its numbering plan, with or without a cue word. NANP
numbers need separators or a `+1`, an area code the plan can assign (not N11, N9X,
37X, 96X) and an exchange that is not N11; 555-0100..555-0199 is for fiction.
International numbers need `+`/`00`, an assigned E.164 country code and, where the
country's plan fixes it, the national number's length. A bare run of digits is not a
phone number (too many ids look alike); numbers after `ISBN`, `#` (glued),
`No.`/`order` are ids.
"""
from __future__ import annotations

import re

from shardforge.redact.pii.spans import Span, number_starts, right_anchored

_NOT_BEFORE = frozenset("+#$€£=")     # besides what `number_starts` already excludes
# the written forms, tried at each token start (anchored, bounded, no nesting)
_FORMS = re.compile(
    r"(?:\+1[ .\-]?|1[ .\-])?(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])[2-9][0-9]{2}[ .\-][0-9]{4}"   # NANP
    r"|\+1[2-9][0-9]{2}[2-9][0-9]{6}"                                                           # +1 E.164
    r"|(?:\+|00 ?)[1-9][0-9]{0,2}(?:[ .\-]?\(0\))?(?:[ .\-]?\(?[0-9]{1,5}\)?){1,7}")              # international
_NANP = re.compile(
    r"(?:\+?1[ .\-]?)?(?:\(([2-9][0-9]{2})\) ?|([2-9][0-9]{2})([ .\-]))([2-9][0-9]{2})[ .\-]([0-9]{4})\Z")
_NANP_PLUS = re.compile(r"\+1([2-9][0-9]{2})([2-9][0-9]{2})([0-9]{4})\Z")
_INTL = re.compile(r"(?:\+|00 ?)([1-9][0-9]{0,2})(?:[ .\-]?\(?0?\)?[ .\-]?)?((?:[ .\-]?\(?[0-9]{1,5}\)?){2,7})\Z")
_INTL_E164 = re.compile(r"\+([1-9][0-9]{7,14})\Z")
# `#` marks a number only when glued to it (`#916.701.9744`); `# 916.701.9744` is a comment.
_ID_BEFORE_REF, _ID_BEFORE = right_anchored(
    r"(?:#|(?:isbn(?:-1[03])?|\bno\.?|\border|\binvoice|\bref|\bid|\bserial|\bticket)\s*[:#]?\s*)\Z",
    r"[#i]|\b[norst]")
_SEPARATED_GROUPS = re.compile(r"[0-9]+")

COUNTRY_CODES = frozenset(
    "1 7 20 27 30 31 32 33 34 36 39 40 41 43 44 45 46 47 48 49 51 52 53 54 55 56 57 58 60 61 62 63 64 "
    "65 66 81 82 84 86 90 91 92 93 94 95 98 211 212 213 216 218 220 221 222 223 224 225 226 227 228 "
    "229 230 231 232 233 234 235 236 237 238 239 240 241 242 243 244 245 246 248 249 250 251 252 253 "
    "254 255 256 257 258 260 261 262 263 264 265 266 267 268 269 290 291 297 298 299 350 351 352 353 "
    "354 355 356 357 358 359 370 371 372 373 374 375 376 377 378 380 381 382 383 385 386 387 389 420 "
    "421 423 500 501 502 503 504 505 506 507 508 509 590 591 592 593 594 595 596 597 598 599 670 672 "
    "673 674 675 676 677 678 679 680 681 682 683 685 686 687 688 689 690 691 692 850 852 853 855 856 "
    "880 886 960 961 962 963 964 965 966 967 968 970 971 972 973 974 975 976 977 992 993 994 995 996 "
    "998".split())


# National significant number lengths (digits after the country code, no trunk 0)
# for the plans that fix them; other country codes only get E.164's 8-15 in total.
NATIONAL_LENGTHS = {
    "7": (10, 10), "20": (8, 10), "27": (9, 9), "30": (10, 10), "31": (9, 9), "32": (8, 9), "33": (9, 9),
    "34": (9, 9), "36": (8, 9), "39": (6, 11), "40": (9, 9), "41": (9, 9), "44": (7, 10), "45": (8, 8),
    "47": (8, 8), "48": (9, 9), "52": (10, 10), "54": (10, 11), "55": (10, 11), "56": (9, 9), "60": (8, 10),
    "61": (9, 9), "63": (8, 10), "64": (8, 10), "65": (8, 8), "66": (8, 9), "81": (9, 10), "82": (8, 10),
    "84": (9, 10), "86": (10, 11), "90": (10, 10), "91": (10, 10), "92": (9, 10), "351": (9, 9),
    "353": (7, 9), "380": (9, 9), "420": (9, 9), "421": (9, 9), "852": (8, 8), "853": (8, 8),
    "886": (8, 9), "966": (8, 9), "971": (8, 9), "972": (8, 9)}
_TRUNK = re.compile(r"\(0\)")


def _nanp_ok(npa: str, nxx: str, line: str) -> bool:
    if npa[1:] == "11" or nxx[1:] == "11":
        return False                               # N11 service codes
    if npa[1] == "9" or npa[:2] in ("37", "96"):
        return False                               # N9X, 37X, 96X: reserved, never assigned
    if nxx == "555" and line.startswith("01"):
        return False                               # 555-0100..0199: reserved for fiction
    return True


def _intl_ok(cand: str) -> bool:
    digits = "".join(ch for ch in _TRUNK.sub("", cand) if ch.isdigit())
    if cand.startswith("00"):
        digits = digits[2:]
    if not 8 <= len(digits) <= 15:
        return False
    cc = next((digits[:k] for k in (1, 2, 3) if digits[:k] in COUNTRY_CODES), None)   # a prefix code
    if cc is None:
        return False
    bounds = NATIONAL_LENGTHS.get(cc)
    if bounds and not bounds[0] <= len(digits) - len(cc) <= bounds[1]:
        return False
    if cc == "1":
        rest = digits[1:]
        return len(rest) == 10 and rest[0] in "23456789" and rest[3] in "23456789" and \
            _nanp_ok(rest[:3], rest[3:6], rest[6:])
    groups = _SEPARATED_GROUPS.findall(cand)
    if len(groups) == 1:
        return bool(_INTL_E164.match(cand))
    return bool(_INTL.match(cand))


def find(text: str, include_reserved: bool = False, starts: list[int] | None = None) -> list[Span]:
    """PHONE spans: each number start is tried against the written forms, then
    validated. `starts`: the shared `number_starts(text)`, computed when not given."""
    out = []
    n = len(text)
    last_end = -1
    for s in number_starts(text) if starts is None else starts:
        if s < last_end or (s > 0 and text[s - 1] in _NOT_BEFORE):
            continue
        m = _FORMS.match(text, s)
        if m is None:
            continue
        e = m.end()
        while e > s and not text[e - 1].isdigit() and text[e - 1] != ")":
            e -= 1
        if text[e - 1] == ")" and text.count("(", s, e) < text.count(")", s, e):
            e -= 1                                  # "(call 555-123-4567)": the closing paren is prose
            while e > s and not text[e - 1].isdigit():
                e -= 1
        cand = text[s:e]
        if e < n and (text[e].isalnum() or text[e] == "_" or (text[e] in ".-/" and e + 1 < n and text[e + 1].isdigit())):
            continue
        if cand.count("(") != cand.count(")"):
            continue
        if _ID_BEFORE.search(text, max(0, s - 12), s):
            continue
        if cand[0] == "+" or cand.startswith("00"):
            ok = _intl_ok(cand)
            while not ok and " " in cand.rstrip():
                # "+44 20 7946 0958 4539 ...": the groups ran on into the next number
                cand = cand[:cand.rstrip().rindex(" ")].rstrip(" .-(")
                e = s + len(cand)
                ok = cand.count("(") == cand.count(")") and _intl_ok(cand)
        else:
            mm = _NANP.match(cand)
            ok = bool(mm) and _nanp_ok(mm.group(1) or mm.group(2), mm.group(4), mm.group(5)) and (
                mm.group(3) is None or cand.count(mm.group(3)) >= 2)
        if ok:
            out.append(Span(s, e, "PHONE"))
            last_end = e
    return out
