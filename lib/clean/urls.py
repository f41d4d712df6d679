"""URL block lists for the clean stage (`[url_filter]`): categories in UT1's layout (a folder
per category holding `domains` and/or `urls`, one entry a line, `#` comment lines) and banned
words, checked over an Arrow array of URLs.

`UrlFilter.from_config(section)` reads the lists once, on the driver; `labels(urls)` gives each
URL the category that blocks it, `"banned_word"`, `"soft_banned_words"` or None (kept; a null
URL is never blocked). `reason(label)` is the reject reason. The rules follow datatrove's
URLFilter (pipeline/filters/url_filter.py), with the differences noted:

- Hosts and list entries are normalised alike: lowercased, scheme, user info, port and
  trailing dots dropped, one leading `www.` dropped (and a leading `.` of a domain entry). A
  URL is blocked by a category when its host or any parent domain of it is in the category's
  `domains` (`a.b.example.com` by `example.com` or `b.example.com`, never `notexample.com`;
  datatrove checks the registered domain and the full host only, through the public suffix
  list); an IP address host is looked up as it is. Or when its host plus path (query
  included, fragment dropped, trailing `/` dropped) or a leading part of that path cut at a
  `/` is in the category's `urls`: squidGuard's meaning of a UT1 `urls` entry, which names a
  page or everything below a directory, on that host only (datatrove compares the raw URL
  string, which never equals a UT1 entry, as those have no scheme). Hosts are compared as
  written: an internationalised name in Unicode does not match its punycode entry.
- A URL listed by several categories gets the first of them in `blocklists` order.
- Banned words: the lowercased URL is split into tokens at every run of characters other
  than a-z and 0-9; a banned word equal to a token blocks it (`banned_word`), as do
  `soft_word_threshold` or more distinct soft banned words (`soft_banned_words`).
  datatrove does not lowercase the URL, so its banned words never match upper-case tokens.
  The category rules come first, then banned words, then soft banned words. datatrove's
  banned subwords (any substring of the URL) are not offered.

Shipping: the lists travel as one bytes blob per category and kind (distinct entries, sorted,
newline-joined: cheap to pickle), and each Python worker builds its lookup tables from them
once, cached by their digest, not once per task. Memory: a dict entry per distinct entry
(BENCHMARKS.md, "URL filter", measures it). The result of `labels` depends only on the URL
and the lists' content (deterministic, independent of batching).
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardforge.config import UrlFilterSection

BANNED_WORD = "banned_word"
SOFT_BANNED_WORDS = "soft_banned_words"
LIST_FILES = ("domains", "urls")

# A lowercased URL is [scheme:]//[user info@]host[:port][/path][?query][#fragment]; every part
# but the host may be missing. Parsed with whole-array passes that need no capture groups
# (one regex extracting the parts cost 5x more).
_SCHEME = r"^(?:[a-z][a-z0-9+.\-]*:)?//"
_AUTHORITY_END = r"[/?#]"
_USERINFO = r"^[^@]*@"
_WWW = r"^www\."
_PORT = r":[0-9]*$"
_TOKEN_SPLIT = r"[^a-z0-9]+"


class BlocklistError(ValueError):
    """A block list path that cannot be used; the message names the path."""


def category_folders(paths) -> list[tuple[str, str]]:
    """(category, folder) for each path of `blocklists`, in order: a folder holding `domains`
    or `urls` is one category; any other folder is a collection whose subfolders (sorted by
    name) are categories, each of which must hold one of them. The category is the folder's
    name. Raises BlocklistError naming a missing path, an empty collection or a subfolder
    without lists. Reads no list (cheap: for checking a config before Spark starts)."""
    out: list[tuple[str, str]] = []
    for p in paths:
        if not os.path.isdir(p):
            raise BlocklistError(f"url_filter.blocklists: {p!r} is not a folder")
        if _has_lists(p):
            out.append((os.path.basename(os.path.normpath(p)), p))
            continue
        subs = sorted(d for d in os.listdir(p) if os.path.isdir(os.path.join(p, d)))
        if not subs:
            raise BlocklistError(f"url_filter.blocklists: {p!r} holds neither `domains` nor `urls` "
                                 "nor category folders")
        for d in subs:
            if not _has_lists(os.path.join(p, d)):
                raise BlocklistError(f"url_filter.blocklists: {os.path.join(p, d)!r} holds neither "
                                     "`domains` nor `urls`")
            out.append((d, os.path.join(p, d)))
    for name in (BANNED_WORD, SOFT_BANNED_WORDS):
        if any(c == name for c, _ in out):
            raise BlocklistError(f"url_filter.blocklists: a category may not be named {name!r} "
                                 "(a label of the banned-word rules)")
    return out


def _has_lists(folder: str) -> bool:
    return any(os.path.isfile(os.path.join(folder, f)) for f in LIST_FILES)


def _read_list(path: str) -> pa.Array:
    """A list file's entries: lines stripped and lowercased, blank and `#` lines left out.
    Bytes that are not UTF-8 become U+FFFD (such an entry matches no URL)."""
    with open(path, "rb") as fh:
        lines = pa.array(fh.read().decode("utf-8", errors="replace").split("\n"), pa.string())
    lines = pc.utf8_lower(pc.utf8_trim_whitespace(lines))
    keep = pc.and_(pc.greater(pc.utf8_length(lines), 0), pc.invert(pc.starts_with(lines, "#")))
    return lines.filter(keep)


def _domain_entries(lines: pa.Array) -> pa.Array:
    """`domains` entries as hosts: leading dots and one `www.`, trailing dots removed."""
    return pc.utf8_rtrim(pc.replace_substring_regex(lines, r"^\.*(?:www\.)?", ""), ".")


def _hosts(lowered: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Each lowercased URL without its scheme, and its host (user info, port, one leading
    `www.` and trailing dots removed)."""
    rest = pc.replace_substring_regex(lowered, _SCHEME, "", max_replacements=1)
    authority = pc.list_element(pc.split_pattern_regex(rest, _AUTHORITY_END, max_splits=1), 0)
    host = pc.replace_substring_regex(authority, _USERINFO, "", max_replacements=1)
    host = pc.replace_substring_regex(host, _WWW, "", max_replacements=1)   # two passes: 2x faster than one
    return rest, pc.utf8_rtrim(pc.replace_substring_regex(host, _PORT, "", max_replacements=1), ".")


def _path_query(rest: str) -> tuple[str, str]:
    """A URL's path (trailing `/` removed) and query (with its `?`), from the URL without its
    scheme: what follows the authority, the fragment left out."""
    cut = len(rest)
    for ch in "/?#":
        i = rest.find(ch, 0, cut)
        if i >= 0:
            cut = i
    path, q, query = rest[cut:].partition("#")[0].partition("?")
    return path.rstrip("/"), q + query


def _url_entries(lines: pa.Array) -> list[str]:
    """`urls` entries normalised as the URLs they are compared with: host + path (+ query)."""
    rest, host = _hosts(lines)
    return [h + "".join(_path_query(r)) for h, r in zip(host.to_pylist(), rest.to_pylist())]


def _blob(values) -> bytes:
    """Distinct non-empty entries, sorted, newline-joined."""
    values = pa.array(values, pa.string()) if isinstance(values, list) else values
    values = pc.unique(values.filter(pc.greater(pc.utf8_length(values), 0)))
    return "\n".join(values.take(pc.sort_indices(values)).to_pylist()).encode()


@dataclass(frozen=True)
class UrlFilter:
    categories: tuple[str, ...]
    domains: tuple[bytes, ...]      # per category: distinct normalised entries, newline-joined
    urls: tuple[bytes, ...]
    banned_words: tuple[str, ...]
    soft_banned_words: tuple[str, ...]
    soft_word_threshold: int
    digest: str

    @classmethod
    def from_config(cls, section: UrlFilterSection) -> "UrlFilter | None":
        """The filter `[url_filter]` describes, or None when it sets nothing."""
        if not (section.blocklists or section.banned_words or section.soft_banned_words):
            return None
        return cls.build(section.blocklists, section.banned_words, section.soft_banned_words,
                         section.soft_word_threshold)

    @classmethod
    def build(cls, blocklists=(), banned_words=(), soft_banned_words=(), soft_word_threshold=2) -> "UrlFilter":
        """Read the lists (BlocklistError names a bad path) and keep them compactly."""
        banned_words = tuple(sorted({w.lower() for w in banned_words}))
        soft_banned_words = tuple(sorted({w.lower() for w in soft_banned_words}))
        cats, doms, urls = [], [], []
        for name, folder in category_folders(blocklists):
            d = os.path.join(folder, "domains")
            u = os.path.join(folder, "urls")
            cats.append(name)
            doms.append(_blob(_domain_entries(_read_list(d))) if os.path.isfile(d) else b"")
            urls.append(_blob(_url_entries(_read_list(u))) if os.path.isfile(u) else b"")
        h = hashlib.sha256()
        for part in (*cats, *doms, *urls, "\0", *banned_words, "\0", *soft_banned_words, str(soft_word_threshold)):
            h.update(part.encode() if isinstance(part, str) else part)
            h.update(b"\xff")
        return cls(tuple(cats), tuple(doms), tuple(urls), tuple(banned_words), tuple(soft_banned_words),
                   soft_word_threshold, h.hexdigest())

    @property
    def active(self) -> bool:
        return bool(self.categories or self.banned_words or self.soft_banned_words)

    def _tables(self) -> tuple[dict, dict, frozenset]:
        """{entry: first category index} for domains and for urls, and the hosts the urls
        entries name; built once per process."""
        got = _TABLES.get(self.digest)
        if got is None:
            listed = _index(self.urls)
            got = (_index(self.domains), listed, frozenset(e.split("/", 1)[0].split("?", 1)[0] for e in listed))
            _TABLES.clear()   # one filter at a time: a new config's lists replace the old ones
            _TABLES[self.digest] = got
        return got

    def labels(self, urls: pa.Array) -> list[str | None]:
        """Per URL: the blocking category's name, BANNED_WORD, SOFT_BANNED_WORDS, or None."""
        n = len(urls)
        out: list[str | None] = [None] * n
        if not n or not self.active:
            return out
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(urls.cast(pa.string())))
        if self.categories:
            domains, listed, listed_hosts = self._tables()
            rest, host = _hosts(lowered)
            for i, h in enumerate(host.to_pylist()):
                if not h:
                    continue
                c = _domain_hit(h, domains) if domains else None
                if h in listed_hosts:   # few URLs: their path is looked at only then
                    c2 = _url_hit(h, *_path_query(rest[i].as_py()), listed)
                    if c2 is not None and (c is None or c2 < c):
                        c = c2
                if c is not None:
                    out[i] = self.categories[c]
        words = self.banned_words + self.soft_banned_words
        if words:
            # a word that is a token is a substring: one DFA pass picks the few URLs to tokenise
            some = pc.fill_null(pc.match_substring_regex(lowered, "|".join(map(re.escape, words))), False)
            rows = np.flatnonzero(some.to_numpy(zero_copy_only=False))
            banned, soft = _word_hits(lowered.take(pa.array(rows, pa.int64())), self.banned_words,
                                      self.soft_banned_words, self.soft_word_threshold)
            for i, b, s in zip(rows.tolist(), banned.tolist(), soft.tolist()):
                if out[i] is None and (b or s):
                    out[i] = BANNED_WORD if b else SOFT_BANNED_WORDS
        return out


def reason(label: str) -> str:
    """The reject reason of a label: filter:url_blocklist:<category>, filter:url_banned_word,
    filter:url_soft_banned_words."""
    if label in (BANNED_WORD, SOFT_BANNED_WORDS):
        return f"filter:url_{label}"
    return f"filter:url_blocklist:{label}"


_TABLES: dict[str, tuple[dict, dict, frozenset]] = {}


def _index(blobs: tuple[bytes, ...]) -> dict[str, int]:
    """entry -> index of the first category listing it (later categories written first, so
    earlier ones overwrite them)."""
    table: dict[str, int] = {}
    for c in range(len(blobs) - 1, -1, -1):
        if blobs[c]:
            part = dict.fromkeys(blobs[c].decode().split("\n"), c)
            if table:
                table.update(part)
            else:
                table = part   # no copy of the (often only) list
    return table


def _domain_hit(host: str, domains: dict) -> int | None:
    """The first category listing the host or one of its parent domains."""
    if host[-1].isdigit() or host[0] == "[":   # an IP address: no parent domains
        return domains.get(host)
    best = None
    while True:
        c = domains.get(host)
        if c is not None and (best is None or c < best):
            best = c
        dot = host.find(".")
        if dot < 0:
            return best
        host = host[dot + 1:]


def _url_hit(host: str, path: str, query: str, listed: dict) -> int | None:
    """The first category listing host+path+query, or host + the path cut before any `/`."""
    best = listed.get(host + path + query) if query else None
    end = len(path)
    while True:
        c = listed.get(host + path[:end])
        if c is not None and (best is None or c < best):
            best = c
        if end == 0:
            return best
        end = path.rfind("/", 0, end)
        if end < 0:
            return best


def _word_hits(lowered: pa.Array, banned, soft, threshold: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows with a banned word among their tokens, and rows with >= threshold distinct soft
    banned words among them (vectorised: one regex split, one set lookup per token)."""
    n = len(lowered)
    tokens = pc.split_pattern_regex(lowered, _TOKEN_SPLIT)
    flat = pc.list_flatten(tokens)
    parents = pc.list_parent_indices(tokens).to_numpy()
    hard = np.zeros(n, bool)
    if banned:
        hard[parents[pc.is_in(flat, value_set=pa.array(banned, pa.string())).to_numpy(zero_copy_only=False)]] = True
    many = np.zeros(n, bool)
    if soft:
        idx = pc.index_in(flat, value_set=pa.array(soft, pa.string()))
        hit = pc.is_valid(idx).to_numpy(zero_copy_only=False)
        pairs = np.unique(parents[hit].astype(np.int64) * len(soft) + idx.filter(pc.is_valid(idx)).to_numpy())
        many = np.bincount(pairs // len(soft), minlength=n) >= threshold
    return hard, many
