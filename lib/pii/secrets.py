"""KEY: credentials. Provider tokens by their documented formats (AWS, GitHub,
GitLab, Slack, Google, Stripe), JWTs whose header decodes to JSON with `alg`, PEM
private key blocks, passwords in URLs, and high-entropy values assigned to
password/secret/token/api_key-like names. Documentation keys (`...EXAMPLE...`),
placeholders (`<token>`, `${VAR}`, `xxxx`, `changeme`) and public keys (Stripe
`pk_`) are not secrets."""
from __future__ import annotations

import base64
import json
import re

from .spans import Span, char_classes, entropy

_B = r"(?<![A-Za-z0-9_\-])"          # left boundary for token formats
_E = r"(?![A-Za-z0-9_\-])"            # right boundary
TOKEN_PATTERNS = [
    ("aws_access_key_id", re.compile(_B + r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}" + _E)),
    ("github", re.compile(_B + r"gh[pousr]_[A-Za-z0-9]{36,251}" + _E)),
    ("github_pat", re.compile(_B + r"github_pat_[A-Za-z0-9_]{70,90}" + _E)),
    ("gitlab", re.compile(_B + r"gl(?:pat|dt|rt|ptt|cbt|imt|soat|ffct|agent)-[A-Za-z0-9_\-]{20,64}+")),
    ("slack", re.compile(_B + r"xox[abposre]-[0-9A-Za-z]{8,20}(?:-[0-9A-Za-z]{6,64}){1,3}" + _E)),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/[A-Za-z0-9]{20,32}")),
    ("google_api_key", re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E)),
    ("stripe", re.compile(_B + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,99}" + _E)),
    ("jwt", re.compile(_B + r"eyJ[A-Za-z0-9_\-]{8,2048}\.eyJ[A-Za-z0-9_\-]{2,8192}\.[A-Za-z0-9_\-]{16,1024}" + _E)),
]
_PEM_BEGIN = re.compile(r"-----BEGIN ((?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP |SSH2 )?PRIVATE KEY(?: BLOCK)?)-----")
_PEM_BODY = re.compile(r"(?:[ \t]*[A-Za-z0-9+/=:\-, ]{0,120}\r?\n){0,400}")
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{1,15}://[^\s:/@<>\"']{1,64}:([^\s:/@<>\"']{1,128})@[A-Za-z0-9\[]")
_NAME = (r"[A-Za-z0-9_.\-]{0,40}(?:[Pp][Aa][Ss][Ss](?:[Ww](?:[Oo][Rr])?[Dd])?|[Pp][Ww][Dd]|[Ss][Ee][Cc][Rr][Ee][Tt]"
         r"|[Tt][Oo][Kk][Ee][Nn]|[Aa][Pp][Ii][_\-]?[Kk][Ee][Yy]|[Aa][Cc][Cc][Ee][Ss][Ss][_\-]?[Kk][Ee][Yy]"
         r"|[Pp][Rr][Ii][Vv][Aa][Tt][Ee][_\-]?[Kk][Ee][Yy]|[Aa][Uu][Tt][Hh][_\-]?[Kk][Ee][Yy]"
         r"|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll][Ss]?)[A-Za-z0-9_.\-]{0,40}")
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.\-])" + _NAME
                     + r"[\"'\]]{0,2}[ \t]{0,8}(?::=|=>|==|=|:|\bis\b|->)[ \t]{0,8}(?:[\"'`]|[bru]\")?"
                     r"([^\s\"'`,;()\[\]{}<>]{8,256})")
_CLI_FLAG = re.compile(r"(?<![A-Za-z0-9_\-])--?[A-Za-z\-]{0,20}(?:password|passwd|token|secret|api-key|apikey)[ =]"
                       r"[\"']?([^\s\"'`,;()\[\]{}<>]{8,256})")
_EMAILISH = re.compile(r"[^@\s]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+")
_AWS_SECRET_NAME = re.compile(r"(?i)aws.{0,20}secret|secret.?access.?key")
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


def find(text: str, include_reserved: bool = False) -> list[Span]:
    """KEY spans. Each pattern is bounded and anchored on a literal or a name, so
    the scan is linear in the input."""
    out: list[Span] = []
    for kind, pattern in TOKEN_PATTERNS:
        for m in pattern.finditer(text):
            if include_reserved or _token_ok(kind, m.group()):
                out.append(Span(m.start(), m.end(), "KEY"))
    if "-----BEGIN " in text:
        out += _pem(text)
    if "://" in text:
        for m in _URL_PASSWORD.finditer(text):
            pw = m.group(1)
            if include_reserved or not (_PLACEHOLDER.match(pw) or pw[0] in "$%{<*" or _EXAMPLE.search(pw)):
                out.append(Span(m.start(1), m.end(1), "KEY"))
    if "-" in text:
        for m in _CLI_FLAG.finditer(text):
            if _high_entropy_secret(m.group(1)):
                out.append(Span(m.start(1), m.end(1), "KEY"))
    for m in _ASSIGN.finditer(text):
        value = m.group(1)
        s, e = m.span(1)
        if value[-1] in ".:" and len(value) > 8:
            value = value[:-1]
            e -= 1
        if e < len(text) and text[e] == "(":
            continue                                   # a call: token = make_token(...)
        name = m.group(0)[:s - m.start()]
        if _AWS_SECRET_NAME.search(name) and len(value) == 40 and not _EXAMPLE.search(value):
            out.append(Span(s, e, "KEY"))
        elif include_reserved and not _PLACEHOLDER.match(value) or _high_entropy_secret(value):
            out.append(Span(s, e, "KEY"))
    return out
