"""KEY: credentials. Provider tokens by their documented formats (AWS, GitHub,
GitLab, Slack, Google, Stripe), JWTs whose header decodes to JSON with `alg`, PEM
private key blocks, passwords in URLs, high-entropy values assigned to
password/secret/token/api_key-like names, and AWS secret access keys without a cue
(40 base64 characters that look random, alone on a line or right after an access key
id). Documentation keys (`...EXAMPLE...`), placeholders (`<token>`, `${VAR}`, `xxxx`,
`changeme`) and public keys (Stripe `pk_`) are not secrets."""
from __future__ import annotations

import base64
import json
import re

from shardforge.redact.pii.spans import Span, char_classes, entropy

_BOUNDARY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# Each format starts with a literal prefix, so the regex engine jumps between its
# occurrences; the left boundary is checked in Python. (trigger, offset, kind,
# pattern): the pattern is matched `offset` characters before each trigger hit. A
# format with a long literal (GATES) is looked for only from that literal's first
# occurrence (str.find is several times faster than the regex engine's search).
_E = r"(?![A-Za-z0-9_\-])"
TOKEN_PATTERNS = [
    (None, 0, "aws_access_key_id", re.compile(r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}" + _E)),
    (None, 0, "github", re.compile(r"gh[pousr]_[A-Za-z0-9]{36,251}" + _E)),
    (None, 0, "github_pat", re.compile(r"github_pat_[A-Za-z0-9_]{70,90}" + _E)),
    (None, 0, "gitlab", re.compile(r"gl(?:pat|dt|rt|ptt|cbt|imt|soat|ffct|agent)-[A-Za-z0-9_\-]{20,64}+")),
    (None, 0, "slack", re.compile(r"xox[abposre]-[0-9A-Za-z]{8,20}(?:-[0-9A-Za-z]{6,64}){1,3}" + _E)),
    (None, 0, "slack_webhook",
     re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/[A-Za-z0-9]{20,32}")),
    (None, 0, "google_api_key", re.compile(r"AIza[0-9A-Za-z_\-]{35}" + _E)),
    (re.compile(r"k_(?:live|test)_"), 1, "stripe", re.compile(r"[sr]k_(?:live|test)_[0-9A-Za-z]{20,99}" + _E)),
    (None, 0, "jwt", re.compile(r"eyJ[A-Za-z0-9_\-]{8,2048}\.eyJ[A-Za-z0-9_\-]{2,8192}\.[A-Za-z0-9_\-]{16,1024}" + _E)),
]
GATES = {"github_pat": ("github_pat_", 0), "slack_webhook": ("hooks.slack.com/", 8), "jwt": ("eyJ", 0),
         "slack": ("xox", 0), "google_api_key": ("AIza", 0)}     # kind: (literal, its offset in a match)
# For the shared scan (scan.py), every format: literals one of which every match holds at
# `offset` from its start. A format is then searched only from its literals' first occurrence.
TOKEN_LITERALS = {
    "aws_access_key_id": (("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"), 0),
    "github": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), 0),
    "github_pat": (("github_pat_",), 0),
    "gitlab": (("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "glsoat-", "glffct-", "glagent-"), 0),
    "slack": (("xox",), 0),
    "slack_webhook": (("hooks.slack.com/",), 8),
    "google_api_key": (("AIza",), 0),
    "stripe": (("k_live_", "k_test_"), 1),
    "jwt": (("eyJ",), 0),
}
PEM_LITERAL, URL_LITERAL = "-----BEGIN ", "://"
# the literal groups the shared scan looks for, in this order: the formats', PEM's, URLs'
SCAN_LITERALS = [TOKEN_LITERALS[kind][0] for _, _, kind, _ in TOKEN_PATTERNS] + [(PEM_LITERAL,), (URL_LITERAL,)]
_PEM_BEGIN = re.compile(r"-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP |SSH2 )?PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BODY = re.compile(r"(?:[ \t]*[A-Za-z0-9+/=:\-, ]{0,120}\r?\n){0,400}")
_URL_USERINFO = re.compile(r"//[^\s:/@<>\"']{1,64}:([^\s:/@<>\"']{1,128})@[A-Za-z0-9\[]")
_SCHEME_BEFORE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,15}\Z")
# Secret-like names, found with str.find on a lower-cased copy; the rest of the
# name, the operator and the value are matched right after the keyword.
KEYWORDS = ("pass", "pwd", "secret", "token", "key", "credential")
# the whole name must say what the value is ("key" alone is too common)
_SECRET_NAME = re.compile(r"(?i)pass|pwd|secret|token|credential|(?:api|access|private|auth)[_\-]?key")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_AFTER_KEYWORD = re.compile(
    r"[A-Za-z0-9_.\-]{0,40}+[\"'\]]{0,2}[ \t]{0,8}(?::=|=>|==|=|:|\bis\b|->)[ \t]{0,8}(?:[\"'`]|[bru]\")?"
    r"([^\s\"'`,;()\[\]{}<>]{8,256})")
_AFTER_FLAG = re.compile(r"[A-Za-z0-9_\-]{0,40}+[ =][\"']?([^\s\"'`,;()\[\]{}<>]{8,256})")
_EMAILISH = re.compile(r"[^@\s]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+")
_AWS_SECRET_NAME = re.compile(r"(?i)aws.{0,20}secret|secret.?access.?key")
# AWS secret access keys with no cue: 40 base64 characters alone on a line (indented,
# quoted, behind a comment marker or before a trailing comma are fine) ...
_LINE_40_BODY = (r"[ \t]{0,32}(?:(?:#|//|--|;|\*)[ \t]{0,8})?([\"'`]?)([A-Za-z0-9+/]{40})\1[ \t]{0,8},?[ \t]{0,8}"
                 r"(?=\r?\n|\Z)")
_LINE_40 = re.compile(r"\n" + _LINE_40_BODY)
_LINE_40_AT_START = re.compile(_LINE_40_BODY)
# ... or right after an access key id, as in credentials CSVs (`AKIA...,<secret>`).
_AFTER_KEY_ID = re.compile(r"[ \t]{0,8}[,;:|\t ][ \t]{0,8}[\"']?([A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=_\-])")
_BLOB_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/=]{40,}[ \t]*\Z")
_CAMEL_WORD = re.compile(r"[A-Z][a-z]{3}")
_PLACEHOLDER = re.compile(
    r"(?i)^(?:x+|\*+|\.+|-+|_+|#+|0+|1234.*|abc.*|change.?me.*|your.*|my.?(?:pass|secret|token|key).*"
    r"|placeholder.*|example.*|sample.*|dummy.*|fake.*|test(?:ing)?|redacted.*|secret.*|password.*|token.*"
    r"|none|null|nil|undefined|true|false|required|optional|string|env.*|process\.env.*|os\.environ.*"
    r"|config\..*|settings\..*|self\..*|args\..*)$")
_EXAMPLE = re.compile(r"EXAMPLE|example|XXXX|xxxx|0000000000|1234567890|abcdef123456|\.\.\.")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$|^[a-z]+(?:_[a-z]+)*$|^[A-Z]+(?:_[A-Z0-9]+)*$")


def _jwt_ok(token: str) -> bool:
    head = token.split(".", 1)[0]
    try:
        obj = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and "alg" in obj


def _high_entropy_secret(value: str) -> bool:
    """A value that looks like a real secret rather than a word, an expression or a placeholder."""
    if _PLACEHOLDER.match(value) or _EXAMPLE.search(value) or _IDENT.match(value):
        return False
    if _EMAILISH.fullmatch(value) or value[0] in "$%{<" or value.startswith(("http://", "https://", "/", "./", "~")):
        return False
    if value.isdigit() or value.replace(".", "").isdigit():
        return False
    if len(set(value)) < 5:
        return False
    classes = char_classes(value)
    ent = entropy(value)
    if len(value) >= 16:
        return classes >= 2 and ent >= 3.0
    return classes >= 3 and ent >= 2.5


def looks_like_aws_secret(value: str) -> bool:
    """A 40-character base64 value that looks random, as AWS secret access keys do:
    upper case, lower case and digits all present, at least 16 changes of character
    class between neighbours, entropy >= 4.0 bits per character and at most four
    CamelCase words. Random keys pass 99.7% of the time; hex digests (one case),
    identifiers (`AbstractSingletonProxyFactoryBean...`), repeated characters and
    documentation keys (`...EXAMPLE...`) do not."""
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)):
        return False
    changes = sum(1 for a, b in zip(value, value[1:]) if _char_class(a) != _char_class(b))
    return (changes >= 16 and entropy(value) >= 4.0 and len(_CAMEL_WORD.findall(value)) <= 4
            and not _EXAMPLE.search(value))


def _char_class(ch: str) -> int:
    return 0 if ch.isupper() else 1 if ch.islower() else 2 if ch.isdigit() else 3


def _line_at(text: str, pos: int, step: int) -> str:
    """The line before (step -1) or after (step 1) the line holding `pos`."""
    if step < 0:
        end = text.rfind("\n", 0, pos)
        return "" if end == -1 else text[text.rfind("\n", 0, end) + 1:end]
    start = text.find("\n", pos)
    if start == -1:
        return ""
    end = text.find("\n", start + 1)
    return text[start + 1:] if end == -1 else text[start + 1:end]


def _aws_secrets(text: str, key_id_ends: list[int]) -> list[Span]:
    """Cue-less AWS secret access keys (see `looks_like_aws_secret`). A line next to
    a run of 40+ base64 characters is part of a wrapped blob (a certificate's last
    line), not a key."""
    out = []
    matches = list(_LINE_40.finditer(text)) if "\n" in text else []
    first = _LINE_40_AT_START.match(text)
    if first:
        matches.insert(0, first)
    for m in matches:
        s, e = m.span(2)
        if not looks_like_aws_secret(m.group(2)):
            continue
        if _BLOB_LINE.match(_line_at(text, s, -1).rstrip("\r")) or _BLOB_LINE.match(_line_at(text, s, 1).rstrip("\r")):
            continue
        out.append(Span(s, e, "KEY"))
    for end in key_id_ends:
        m = _AFTER_KEY_ID.match(text, end)
        if m and looks_like_aws_secret(m.group(1)):
            out.append(Span(m.start(1), m.end(1), "KEY"))
    return out


def _token_ok(kind: str, token: str) -> bool:
    if _EXAMPLE.search(token):
        return False
    if kind == "jwt":
        return _jwt_ok(token)
    body = token.split("_", 2)[-1] if kind in ("github", "stripe", "github_pat") else token
    return entropy(body) >= 3.0 and len(set(body)) >= 8


def _pem(text: str) -> list[Span]:
    out = []
    pos = 0
    end_search_from = -1
    end_at = -1
    while True:
        m = _PEM_BEGIN.search(text, pos)
        if not m:
            return out
        if end_at < m.end():                         # the next END marker after this BEGIN (found once)
            end_search_from = max(end_search_from, m.end())
            end_at = text.find("-----END ", end_search_from)
            if end_at == -1:
                end_at = len(text) + 1
        label = m.group(1)
        closing = f"-----END {label}-----"
        if end_at <= len(text) and text.startswith(closing, end_at) and end_at - m.end() <= 64_000:
            stop = end_at + len(closing)
        else:                                        # no END: the header and the base64 lines after it
            body = _PEM_BODY.match(text, m.end() + 1 if text[m.end():m.end() + 1] == "\n" else m.end())
            stop = body.end() if body else m.end()
            while stop > m.end() and text[stop - 1] in "\r\n":
                stop -= 1
        out.append(Span(m.start(), stop, "KEY"))
        pos = max(stop, m.end())


def _keyword_hits(text: str, low: str | None = None) -> list[int]:
    """End offsets of secret-like keywords in `text` (case-insensitive), sorted, unique.
    `low`: `text.lower()`, computed when not given."""
    low = text.lower() if low is None else low
    ends: set[int] = set()
    if len(low) != len(text):                 # case mapping changed offsets
        for m in _KEYWORD_RE.finditer(text):
            ends.add(m.end())
        return sorted(ends)
    for kw in KEYWORDS:
        i = low.find(kw)
        while i != -1:
            ends.add(i + len(kw))
            i = low.find(kw, i + 1)
    return sorted(ends)


_KEYWORD_RE = re.compile("|".join(re.escape(k) for k in KEYWORDS), re.I)


def _assignments(text: str, include_reserved: bool, low: str | None = None,
                 keyword_ends: list[int] | None = None) -> list[Span]:
    out = []
    seen: set[int] = set()
    n = len(text)
    for kend in _keyword_hits(text, low) if keyword_ends is None else keyword_ends:
        m = _AFTER_KEYWORD.match(text, kend)
        flag = False
        if not m:
            m = _AFTER_FLAG.match(text, kend)
            flag = True
            if not m:
                continue
        s, e = m.span(1)
        if s in seen:
            continue
        # the whole name: back from the keyword over name characters
        b = kend
        while b > 0 and kend - b < 60 and text[b - 1] in _NAME_CHARS:
            b -= 1
        name = text[b:m.start(1)]
        if not _SECRET_NAME.search(name):
            continue
        if flag and not name.startswith("-"):
            continue                                   # "pass the 12345678" is no flag
        value = text[s:e]
        if value[-1] in ".:" and len(value) > 8:
            value = value[:-1]
            e -= 1
        if e < n and text[e] == "(":
            continue                                   # a call: token = make_token(...)
        if _AWS_SECRET_NAME.search(name) and len(value) == 40 and not _EXAMPLE.search(value):
            ok = True
        else:
            ok = (include_reserved and not _PLACEHOLDER.match(value)) or _high_entropy_secret(value)
        if ok:
            seen.add(s)
            out.append(Span(s, e, "KEY"))
    return out


def find(text: str, include_reserved: bool = False, low: str | None = None, *,
         first: list[int] | None = None, keyword_ends: list[int] | None = None,
         b64_run: bool = True) -> list[Span]:
    """KEY spans. Every scan is anchored on a literal or a keyword and bounded, so
    the cost is linear in the input and small when no trigger occurs.

    What the shared scan (scan.py) already knows, when the caller has it: `low`,
    `text.lower()`; `first`, the first offset of each SCAN_LITERALS group (-1: none);
    `keyword_ends`, `_keyword_hits(text)`; `b64_run`, False when no run of 40
    `[A-Za-z0-9+/]` occurs (then no AWS secret key can)."""
    out: list[Span] = []
    key_id_ends: list[int] = []
    for i, (trigger, offset, kind, pattern) in enumerate(TOKEN_PATTERNS):
        if first is not None:                          # from the first literal a match holds
            at = first[i]
            if at == -1:
                continue
            pos = max(0, at - TOKEN_LITERALS[kind][1])
        elif kind in GATES:
            literal, back = GATES[kind]
            at = text.find(literal)
            if at == -1:
                continue
            pos = max(0, at - back)
        else:
            at = pos = 0
        if trigger is None:
            matches = pattern.finditer(text, pos)
        else:
            matches = (pattern.match(text, t.start() - offset)
                       for t in trigger.finditer(text, at) if t.start() >= offset)
        for m in matches:
            if m is None:
                continue
            s = m.start()
            if s > 0 and text[s - 1] in _BOUNDARY:
                continue
            if include_reserved or _token_ok(kind, m.group()):
                out.append(Span(s, m.end(), "KEY"))
                if kind == "aws_access_key_id":
                    key_id_ends.append(m.end())
    if (first[-2] != -1) if first is not None else PEM_LITERAL in text:
        out += _pem(text)
    i = first[-1] if first is not None else text.find(URL_LITERAL)
    while i != -1:
        m = _URL_USERINFO.match(text, i + 1)
        if m and _SCHEME_BEFORE.search(text, max(0, i - 16), i):
            pw = m.group(1)
            if include_reserved or not (_PLACEHOLDER.match(pw) or pw[0] in "$%{<*" or _EXAMPLE.search(pw)):
                out.append(Span(m.start(1), m.end(1), "KEY"))
        i = text.find(URL_LITERAL, i + 3)
    out += _assignments(text, include_reserved, low, keyword_ends)
    if b64_run:
        out += _aws_secrets(text, key_id_ends)
    return out
