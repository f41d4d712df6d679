"""EMAIL: addresses with a valid domain. URL user-info, scp-style remotes, file names
like `logo@2x.png` and template placeholders (`user@example.com`, `you@domain.com`,
`your.email@...`) are not personal addresses. Other addresses at reserved example
domains (`alice.smith@example.org`) stand in for real ones and are redacted."""
from __future__ import annotations

import re

from shardforge.redact.pii.spans import Span

_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_DOMAIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\Z")
_TLD = re.compile(r"(?:[A-Za-z]{2,24}|xn--[A-Za-z0-9\-]{2,59})\Z")

FILE_EXTENSIONS = frozenset(
    "png jpg jpeg gif svg webp bmp ico tif tiff avif css js mjs ts tsx jsx json xml html htm "
    "pdf txt md py rb go rs java zip gz tgz tar bz2 xz mp3 mp4 wav ogg webm mov woff woff2 ttf "
    "eot otf map min lock yml yaml toml cfg ini".split())
RESERVED_TLDS = frozenset({"example", "test", "invalid", "localhost", "local"})
RESERVED_DOMAINS = frozenset({"example.com", "example.net", "example.org", "example.edu"})
PLACEHOLDER_DOMAINS = frozenset({"domain.com", "yourdomain.com", "mydomain.com", "yourcompany.com",
                                 "xxx.com", "email.tld", "domain.tld"})
# always placeholders, at any domain
PLACEHOLDER_LOCALS = frozenset({"xxx", "your.email", "youremail", "your.name", "yourname",
                                "your_email", "your-email", "email.address", "emailaddress",
                                "your.address", "firstname.lastname", "first.last"})
# placeholders when the domain is reserved (example.com, *.test) or a template domain
GENERIC_LOCALS = frozenset({"user", "username", "user1", "user2", "you", "me", "name", "email", "mail",
                            "someone", "somebody", "foo", "bar", "test", "example", "john.doe",
                            "jane.doe", "johndoe", "janedoe", "admin", "info", "contact", "noreply",
                            "no-reply", "hello", "support", "alice", "bob"})


def is_reserved_domain(domain: str) -> bool:
    d = domain.lower()
    tld = d.rsplit(".", 1)[-1]
    return (tld in RESERVED_TLDS or d in RESERVED_DOMAINS or d in PLACEHOLDER_DOMAINS
            or any(d.endswith("." + r) for r in RESERVED_DOMAINS))


def is_placeholder(local: str, domain: str) -> bool:
    """A template address from documentation, not anyone's address."""
    low = local.lower()
    return low in PLACEHOLDER_LOCALS or (low in GENERIC_LOCALS and is_reserved_domain(domain))


def _domain_ok(domain: str) -> bool:
    if len(domain) > 253 or ".." in domain:
        return False
    labels = domain.split(".")
    if len(labels) < 2 or not all(_LABEL.match(lab) for lab in labels):
        return False
    tld = labels[-1]
    return bool(_TLD.match(tld)) and tld.lower() not in FILE_EXTENSIONS


def find(text: str, include_reserved: bool = False) -> list[Span]:
    """EMAIL spans. Anchored on each '@': at most 64 characters back for the local
    part and one bounded domain match forward, so the cost is linear."""
    if "@" not in text:
        return []
    out = []
    n = len(text)
    at = text.find("@")
    while at != -1:
        nxt = text.find("@", at + 1)
        start = at
        lo = max(0, at - 64)
        while start > lo and text[start - 1] in _LOCAL_CHARS:
            start -= 1
        m = _DOMAIN.match(text, at + 1) if start < at else None
        if m is None or (start == lo and lo > 0 and text[lo - 1] in _LOCAL_CHARS):
            at = nxt                      # no local part, or one longer than 64 chars
            continue
        at_pos, at = at, nxt
        local, domain = text[start:at_pos], m.group()
        end = m.end()
        # Trailing dots/hyphens of a sentence are not part of the domain.
        if local.startswith(".") or local.endswith(".") or ".." in local:
            continue
        if not _domain_ok(domain):
            continue
        if end < n and text[end] == "@":
            continue                        # a@b.c@d: not a single address
        if end + 1 < n and text[end] == ":" and (text[end + 1].isalnum() or text[end + 1] in "~/"):
            continue                        # git@host:org/repo.git (scp-style remote)
        lo = max(0, start - 512)
        line_start = max(text.rfind(" ", lo, start), text.rfind("\n", lo, start), lo - 1)
        if "://" in text[line_start + 1:start]:
            continue                        # user-info of a URL (scheme://user:pass@host)
        if not include_reserved and is_placeholder(local, domain):
            continue
        out.append(Span(start, end, "EMAIL"))
    return out
