"""Word n-gram statistics of Gopher's repetition rules, for a whole batch.

Tokens arrive flat with their document index and a batch-wide integer id per distinct token
(`Pieces.ids`). An n-gram is keyed by a 64-bit mix of its n ids (splitmix64 steps), so equal
n-grams have equal keys; two different n-grams share a key with probability ~2^-64.

- `top_ngram_chars`: per document, characters of its most frequent n-gram (ties: the one that
  appears first) times its count; characters as in " ".join(ngram).
- `dup_ngram_chars`: datatrove's `find_all_duplicate`: walk the positions; an n-gram seen
  before at a walked position adds its characters ("".join) and the walk jumps n positions;
  otherwise it is remembered and the walk moves one. Exact, with a Python loop over the
  positions whose n-gram occurred earlier in the document only (none in most documents).
"""
from __future__ import annotations

from bisect import bisect_left

import numpy as np

from shardforge.clean.quality.batch import repeats

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def ngram_keys(doc: np.ndarray, ids: np.ndarray, lens: np.ndarray, n: int, *, sep: int):
    """(start positions, keys, characters) of every n-gram that lies inside one document;
    characters = sum of token lengths + sep * (n - 1)."""
    m = len(ids) - n + 1
    if m <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64)
    start = np.flatnonzero(doc[:m] == doc[n - 1:n - 1 + m])
    with np.errstate(over="ignore"):
        key = np.zeros(len(start), dtype=np.uint64)
        chars = np.full(len(start), sep * (n - 1), dtype=np.int64)
        for k in range(n):
            key = _mix(key ^ (ids[start + k].astype(np.uint64) + np.uint64(k + 1)))
            chars += lens[start + k]
    return start, key, chars


def top_ngram_chars(doc, ids, lens, n: int, ndocs: int) -> np.ndarray:
    start, key, chars = ngram_keys(doc, ids, lens, n, sep=1)
    out = np.zeros(ndocs, dtype=np.float64)
    if len(start) == 0:
        return out
    d = doc[start]
    order = np.lexsort((start, key, d))
    d, key, start, chars = d[order], key[order], start[order], chars[order]
    new = np.ones(len(d), dtype=bool)
    new[1:] = (d[1:] != d[:-1]) | (key[1:] != key[:-1])
    first = np.flatnonzero(new)
    count = np.diff(np.append(first, len(d)))
    gd, gpos, gchars = d[first], start[first], chars[first]
    best = np.lexsort((gpos, -count, gd))                       # per doc: most frequent, then earliest
    lead = np.ones(len(best), dtype=bool)
    lead[1:] = gd[best][1:] != gd[best][:-1]
    pick = best[lead]
    out[gd[pick]] = gchars[pick] * count[pick]
    return out


def dup_ngram_chars(doc, ids, lens, n: int, ndocs: int, only: np.ndarray | None = None) -> np.ndarray:
    start, key, chars = ngram_keys(doc, ids, lens, n, sep=0)
    out = np.zeros(ndocs, dtype=np.float64)
    if len(start) == 0:
        return out
    d = doc[start]
    cand = repeats(d, key)
    if only is not None:
        cand &= only[d]
    if not cand.any():
        return out
    docs = np.unique(d[cand])
    lo = np.searchsorted(d, docs, side="left")            # d is sorted: each document's n-grams are a slice
    hi = np.searchsorted(d, docs, side="right")
    for di, a, b in zip(docs.tolist(), lo.tolist(), hi.tolist()):
        out[di] = _greedy(start[a:b].tolist(), key[a:b].tolist(), chars[a:b].tolist(), cand[a:b].tolist(), n)
    return out


def _greedy(pos: list, key: list, chars: list, cand: list, n: int) -> int:
    """datatrove's walk over one document's n-grams (positions consecutive), visiting only
    the candidates: a walked position is skipped iff it lies within n-1 after a hit."""
    seen: dict = {}           # key -> positions so far (ascending)
    hits: list[int] = []
    total, skip_until = 0, -1
    for p, k, c, is_cand in zip(pos, key, chars, cand):
        if is_cand and p >= skip_until:
            for q in seen[k]:
                j = bisect_left(hits, q) - 1
                if j < 0 or q >= hits[j] + n:       # q was walked: its n-gram is known
                    total += c
                    hits.append(p)
                    skip_until = p + n
                    break
        seen.setdefault(k, []).append(p)
    return total
