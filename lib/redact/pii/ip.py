"""IP_ADDRESS: IPv4 and IPv6 addresses that reach the public internet.

Policy (see README.md here): only addresses routable on the internet are redacted.
Private, loopback, link-local, shared (CGNAT), unspecified, multicast, broadcast,
reserved, benchmarking and documentation (RFC 5737 TEST-NET-1/2/3, RFC 3849
2001:db8::/32) ranges identify no one and stay, unless `include_reserved`. Version
look-alikes (leading-zero octets, dotted runs longer than four, `v1.2.3.4`,
`version 1.2.3.4`, `Chrome/120.0.1.2`, `x.y.0.0`) and quads in a version context
(`__version__ = '6.5.3.38'`, `<version>1.2.3.4</version>`, `foo==3.8.3.14`) are
not addresses.
"""
from __future__ import annotations

import ipaddress
import re

from shardforge.redact.pii.spans import Span, right_anchored

# Found from its first dot (a literal the regex engine jumps to), then extended back.
_V4_DOTS = re.compile(r"\.[0-9]{1,3}+\.[0-9]{1,3}+\.[0-9]{1,3}+")
_V4 = re.compile(r"[0-9]{1,3}+(?:\.[0-9]{1,3}+){3}")
_V4_LEFT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# Any IPv6 text has two colons at most four hex digits apart: find those (the
# regex engine jumps to each ':'), then take the whole run of address characters.
_V6_SEED = re.compile(r":[0-9A-Fa-f]{0,4}:")
_V6_CHARS = "0123456789abcdefABCDEF:."
_V6_LEFT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_:.-")
_VERSION_BEFORE_REF, _VERSION_BEFORE = right_anchored(
    r"(?:\bv|\bversion|\bver\.?|\brelease|\bbuild|\bfirmware|\bfw|\bupdate|\bupgrade|\bdowngrade"
    r"|\bpatch|\bbump(?:ed)?|\brev|\bsemver|\bapi|\bspec|\bprotocol|\bsection|\bsec\.|\bchapter|\bclause"
    r"|\bfigure|\bfig\.|\btable|\bstep|\brule|\bitem|\bparagraph|\bpara\.|§)\s*[:=]?\s*(?:to\s+|from\s+)?\Z",
    r"\b[abcdfiprstuv]|§")
# "upgrade the agent from 2.14.0.3 to 2.15.1.0": a version word earlier in the clause
_VERSION_CLAUSE = re.compile(
    r"(?i)\b(?:upgrad\w*|updat\w*|downgrad\w*|install\w*|releas\w*|version\w*|bump\w*|migrat\w*)\b"
    r"[^.;,:!?\n]{0,32}\b(?:from|to|into|onto|at|is|of|=)\s+(?:[0-9][0-9.]*\s+(?:to|and|or)\s+)?\Z")
_VERSION_WORDS = ("upgrad", "updat", "downgrad", "install", "releas", "version", "bump", "migrat")
# A key whose value is a version: `__version__ = '`, `"version": "`, `<version>`,
# `AssemblyVersion("`, `#define APP_VERSION "`, `FileVersion `, `VERSIONS = ['3.9.1', '`
# (earlier items of a list of versions; an item may be a placeholder, which stands
# where a number stood).
_VERSION_KEY = re.compile(
    r"([A-Za-z_][A-Za-z0-9_.\-]{0,48}+)(?:[\"'\]]?[^\S\n]{0,4}(?::=|=>|==|[:=(])|>|[^\S\n])[^\S\n]{0,4}"
    r"(?:[(\[{][^\S\n]{0,4})?(?:[\"']?(?:[0-9][0-9A-Za-z.+\-]{0,24}|<[A-Z_]{2,16}(?:_[0-9a-f]{12})?>)[\"']?"
    r"[^\S\n]{0,4},[^\S\n]{0,4}){0,8}[\"']?\Z")
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
VERSION_NAMES = frozenset("version versions ver vers release revision rev build firmware fw".split())
_VERSION_NAME_PARTS = ("ver", "rel", "rev", "build", "firmware", "fw")    # each version name holds one
_VERSION_SUFFIXES = frozenset("str string info num number no tag id code name".split())
# A requirement specifier: `foo==3.8.3.14`, `foo >= 1.2.3.4`, `'>=1.2.3.4'`, `"^1.2.3.4"`, `~1.2.3.4`.
# A name may end in `>`, so that a placeholder (`<KEY> >= 1.2.3.4`) reads as the name it replaced.
_PIN_BEFORE = re.compile(r"(?:[A-Za-z0-9_\])>\"',][^\S\n]{0,4}(?:===?|[<>!~]=)|[\^~])[^\S\n]{0,4}\Z")
_V6_GLOBAL = ipaddress.ip_network("2000::/3")
_WORD = re.compile(r"[A-Za-z0-9_]")


def _public_v4(addr: ipaddress.IPv4Address) -> bool:
    """Routable on the internet (`is_global` leaves out the reserved and documentation ranges)."""
    return addr.is_global and not addr.is_multicast


def _public_v6(addr: ipaddress.IPv6Address) -> bool:
    if addr.ipv4_mapped is not None:
        return _public_v4(addr.ipv4_mapped)
    return addr in _V6_GLOBAL and addr.is_global


def is_version_name(name: str) -> bool:
    """True if an identifier names a version: its last word is a version word
    (`__version__`, `AssemblyVersion`, `fw_ver`, `RELEASE`), or a version word
    followed by a suffix like `_str`, `_info`, `_number` (`version_string`). Same as
    `_names_version`, which it calls only when a version word can be in the name."""
    low = name.lower()
    # every version word holds one of _VERSION_NAME_PARTS, and a word's lower case is part of `low`
    return any(part in low for part in _VERSION_NAME_PARTS) and _names_version(name)


def _names_version(name: str) -> bool:
    words = [w.lower() for w in _NAME_PARTS.findall(name)]
    while words and words[-1].isdigit():
        words.pop()
    if not words:
        return False
    return words[-1] in VERSION_NAMES or (
        len(words) > 1 and words[-1] in _VERSION_SUFFIXES and words[-2] in VERSION_NAMES)


def in_version_context(text: str, s: int, quick: bool = True) -> bool:
    """True if the number starting at `s` is written where a version goes: right after
    a version or outline word, in a clause that started with an upgrade word, as the
    value of a version-named key, or after a requirement operator. Reads at most 96
    characters before `s`, on the same line for the key and operator rules. `quick`:
    skip the key rule's search when the line holds no version word (same result, which
    the tests check)."""
    if _VERSION_BEFORE.search(text, max(0, s - 24), s):
        return True
    window = text[max(0, s - 80):s].lower()
    if any(w in window for w in _VERSION_WORDS) and _VERSION_CLAUSE.search(window):
        return True
    lo = max(0, s - 96, text.rfind("\n", max(0, s - 96), s) + 1)
    if _PIN_BEFORE.search(text, max(lo, s - 12), s):
        return True
    if quick:
        line = text[lo:s].lower()                    # the key's name is part of it
        if not any(part in line for part in _VERSION_NAME_PARTS):
            return False
    m = _VERSION_KEY.search(text, lo, s)
    return bool(m) and is_version_name(m.group(1))


def _v4_matches(text: str):
    """(start, end) of dotted quads not glued to a longer token on the left."""
    pos = 0
    while True:
        m = _V4_DOTS.search(text, pos)
        if m is None:
            return
        dot = m.start()
        s = dot
        while s > 0 and dot - s < 4 and text[s - 1].isdigit() and text[s - 1].isascii():
            s -= 1
        pos = dot + 1
        if s == dot or dot - s > 3 or (s > 0 and text[s - 1] in _V4_LEFT):
            continue
        q = _V4.match(text, s)
        if q:
            yield q.start(), q.end()
            pos = q.end()


def _v4_candidates(text: str, include_reserved: bool, quick: bool = True) -> list[Span]:
    out = []
    n = len(text)
    for s, e in _v4_matches(text):
        if e < n and (_WORD.match(text[e]) or (text[e] in ".-" and e + 1 < n and text[e + 1].isdigit())):
            continue                              # part of a longer dotted run or token
        quad = text[s:e]
        octets = quad.split(".")
        if any(len(o) > 1 and o[0] == "0" for o in octets) or any(int(o) > 255 for o in octets):
            continue
        if octets[2] == "0" and octets[3] == "0":
            continue                              # x.y.0.0: a network or a version, not a host
        if s > 1 and text[s - 1] == "/" and text[s - 2].isalnum():
            continue                              # Product/1.2.3.4 (user agents, tool versions)
        if not (include_reserved or _public_v4(ipaddress.IPv4Address(quad))):
            continue
        if in_version_context(text, s, quick):
            continue
        out.append(Span(s, e, "IP_ADDRESS"))
    return out


def _v6_runs(text: str):
    """(start, end) of maximal runs of address characters around each colon seed."""
    n = len(text)
    last_end = -1
    for m in _V6_SEED.finditer(text):
        if m.start() < last_end:
            continue
        before = text[max(0, m.start() - 45):m.start()]          # back and on over address characters
        s = m.start() - (len(before) - len(before.rstrip(_V6_CHARS)))
        after = text[m.end():s + 46]
        e = m.end() + (len(after) - len(after.lstrip(_V6_CHARS)))
        last_end = e
        if (s > 0 and text[s - 1] in _V6_LEFT) or e - s > 45 or e - s < 3:
            continue
        yield s, e


def _v6_candidates(text: str, include_reserved: bool) -> list[Span]:
    out = []
    n = len(text)
    for s, e in _v6_runs(text):
        cand = text[s:e]
        colons = cand.count(":")
        if colons < 2 or ("::" not in cand and colons < 7 and not (colons == 6 and "." in cand)):
            continue                              # 12:30:45 and other short colon runs
        while cand and cand[-1] == ".":
            cand = cand[:-1]
        if e < n and _WORD.match(text[e]):
            continue
        addr = None
        for c in (cand, cand.rstrip(":")):
            try:
                addr = ipaddress.IPv6Address(c)
                cand = c
                break
            except ValueError:
                continue
        if addr is None:
            continue
        groups = [g for g in cand.split(":") if g]
        if len(groups) < 3 and addr.ipv4_mapped is None:
            continue                              # a::b, dead::beef: too short to be an address
        if include_reserved or _public_v6(addr):
            out.append(Span(s, s + len(cand), "IP_ADDRESS"))
    return out


def find(text: str, include_reserved: bool = False, quick: bool = True, v6_run: bool = True) -> list[Span]:
    """IP_ADDRESS spans (IPv4 and IPv6). Linear: bounded regexes, one pass each.
    `quick`: skip what cannot find anything (IPv6 in a text with neither "::" nor six
    colons, or with no run of address characters that holds one when the shared scan
    says so in `v6_run`; the version-key rule on a line with no version word); same
    spans either way."""
    out = _v4_candidates(text, include_reserved, quick) if "." in text else []
    if ":" in text and (not quick or (v6_run and ("::" in text or text.count(":") >= 6))):
        out += _v6_candidates(text, include_reserved)          # a candidate holds "::" or six colons
    return out
