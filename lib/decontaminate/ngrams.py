"""Word n-grams of normalised text as 64-bit hashes, and the index of a benchmark set's n-grams.

Normalisation, the same for benchmark items and documents: the text is lowercased (Arrow's
`utf8_lower`) and split into words, the maximal runs of letters, combining marks and digits
(Unicode categories L*, M* and N*, as Python's `unicodedata` has them). Everything else
(punctuation, symbols, `_`, whitespace) separates words and is dropped, so "Don't STOP!" and
"don t  stop" are the same three words. Text without spaces between words (Chinese,
Japanese) is one word per run.

A word's hash is xxh3-64 of its UTF-8 bytes; a k-gram's hash is a polynomial over its word
hashes (mod 2^64), salted by k and passed through the splitmix64 finaliser. Everything runs
on whole Arrow arrays with numpy: Python touches only the distinct words of a chunk (to
hash them). Hashes depend on the text alone (no seed, no process state), so the driver and
every executor agree. Two different n-grams share a hash with probability about 2^-64 per
pair: with 10^7 indexed n-grams and 10^10 checked, under one false match expected in 10^2 runs.
"""
from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

UNICODE_VERSION = unicodedata.unidata_version
CHUNK_BYTES = 8 << 20          # text handled at once: bounds the memory of a batch's arrays
_Q = np.uint64(0x9E3779B97F4A7C15)                # the n-gram polynomial's base (odd)
_SALT = 0xD6E8FEB86659FD93                       # times k: the k-gram salt
_WORD = np.full(0x110000, -1, np.int8)            # code point -> 1 word character, 0 not, -1 not looked up yet
_WORD[:128] = [unicodedata.category(chr(c))[0] in "LMN" for c in range(128)]


def is_word(cp: np.ndarray) -> np.ndarray:
    """Letter, mark or digit (Unicode categories L*, M*, N*) for each code point; `unicodedata`
    is asked once per process for each code point first seen."""
    got = _WORD[cp]
    new = np.unique(cp[got < 0])
    if len(new):
        _WORD[new] = [unicodedata.category(chr(c))[0] in "LMN" for c in new.tolist()]
        got = _WORD[cp]
    return got.astype(bool)


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (uint64 arithmetic wraps)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _lowered(texts: pa.Array) -> pa.LargeStringArray:
    """Lowercased texts as one large_string array, nulls as ''; invalid UTF-8 becomes U+FFFD."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.large_string())
    texts = pc.fill_null(texts.cast(pa.large_string()), "")
    try:
        return pc.utf8_lower(texts)
    except pa.ArrowInvalid:
        raw = texts.view(pa.large_binary()).to_pylist()
        return pc.utf8_lower(pa.array([v.decode("utf-8", "replace") for v in raw], pa.large_string()))


class Words(NamedTuple):
    """The words of a list of texts, in order: hash, the text each belongs to, and the words themselves."""
    hashes: np.ndarray            # uint64
    doc: np.ndarray               # int64, non-decreasing
    text: pa.LargeStringArray


def words(texts: pa.Array) -> Words:
    """Normalise `texts` and split them into words (see the module docstring)."""
    low = _lowered(texts)
    off = np.frombuffer(low.buffers()[1], np.int64)[low.offset:low.offset + len(low) + 1]
    data = low.buffers()[2]
    b = (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8))[off[0]:off[-1]]
    off = off - off[0]
    # ASCII word characters after lowercasing: 0-9, a-z (uint8 arithmetic wraps); bytes >= 0x80 set below
    m = ((b - np.uint8(48)) < 10) | ((b - np.uint8(97)) < 26)
    lead = np.flatnonzero(b >= 0xC0)
    if len(lead):                                 # decode the non-ASCII characters, classify them
        x = b[lead].astype(np.uint32)
        n = np.where(x >= 0xF0, 4, np.where(x >= 0xE0, 3, 2))
        cp = np.where(n == 2, x & 0x1F, np.where(n == 3, x & 0x0F, x & 0x07))
        for j in (1, 2, 3):
            nxt = b[np.minimum(lead + j, len(b) - 1)].astype(np.uint32)
            cp = np.where(n > j, (cp << 6) | (nxt & 0x3F), cp)
        word = is_word(np.minimum(cp, 0x10FFFF))
        for j in range(4):
            sel = (n > j) & (lead + j < len(b))
            m[lead[sel] + j] = word[sel]
    prev = np.zeros_like(m)
    prev[1:] = m[:-1]
    prev[off[:-1][off[:-1] < len(b)]] = False     # a word never runs from one text into the next
    starts = np.flatnonzero(m & ~prev)
    # each word with the separators after it, then the separators trimmed
    spans = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(np.append(starts, len(b)).astype(np.int64)),
                                             pa.py_buffer(np.where(m, b, np.uint8(32))))
    text = pc.utf8_rtrim(spans, " ")
    doc = np.repeat(np.arange(len(off) - 1), np.diff(np.searchsorted(starts, off)))
    return Words(_word_hashes(text), doc, text)


def _word_hashes(text: pa.LargeStringArray) -> np.ndarray:
    import xxhash

    if not len(text):
        return np.zeros(0, np.uint64)
    enc = pc.dictionary_encode(text)
    distinct = enc.dictionary.view(pa.large_binary()).to_pylist()
    h = np.fromiter((xxhash.xxh3_64_intdigest(w) for w in distinct), np.uint64, len(distinct))
    return h[np.asarray(enc.indices)]


def grams(w: Words, ks: tuple[int, ...]) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(k, hashes, first word) of every k-gram inside one text, for each k in `ks` (ascending)."""
    h = w.hashes
    acc = h.copy()
    for k in range(1, max(ks, default=0) + 1):
        if k > len(h):
            acc = acc[:0]
        elif k > 1:
            acc = acc[:len(h) - k + 1] * _Q + h[k - 1:]
        if k in ks:
            start = np.flatnonzero(w.doc[:len(acc)] == w.doc[k - 1:k - 1 + len(acc)])
            salt = np.uint64((_SALT * k) & 0xFFFFFFFFFFFFFFFF)
            yield k, mix(acc[start] ^ salt), start


def chunks(texts: pa.Array, budget: int = CHUNK_BYTES) -> Iterator[tuple[int, pa.Array]]:
    """(first row, slice) of `texts` in consecutive slices of about `budget` bytes of text."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.large_string())
    n = len(texts)
    if n == 0:
        return
    sizes = np.asarray(pc.fill_null(pc.binary_length(texts), 0), dtype=np.int64)
    ends = np.cumsum(sizes)
    row = 0
    while row < n:
        limit = (ends[row - 1] if row else 0) + budget
        stop = max(row + 1, int(np.searchsorted(ends, limit, "right")))
        yield row, texts.slice(row, stop - row)
        row = stop


@dataclass
class Index:
    """The distinct n-gram hashes of a benchmark set, sorted, each with the set of benchmarks
    (bit b = `names[b]`) holding it. `lengths` are the n-gram lengths looked for: the
    configured n, and the word counts of shorter items that are looked for whole."""
    names: tuple[str, ...]
    lengths: tuple[int, ...]
    hashes: np.ndarray            # uint64, sorted, distinct
    masks: np.ndarray             # uint64, same length
    unicode_version: str = UNICODE_VERSION
    stats: dict = field(default_factory=dict)     # per benchmark: items, items_too_short, ngrams
    seconds: float = 0.0                          # how long the build took
    _bits: np.ndarray | None = field(default=None, repr=False)

    def __getstate__(self):                       # the filter is rebuilt where it is used
        return {**self.__dict__, "_bits": None}

    @property
    def digest(self) -> str:
        h = hashlib.sha256(repr((self.names, self.lengths, self.unicode_version)).encode())
        h.update(self.hashes.tobytes())
        h.update(self.masks.tobytes())
        return h.hexdigest()

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.masks.nbytes)

    def _filter(self) -> tuple[np.ndarray, int]:
        """A bitmap of the hashes' top bits, 16 bits per n-gram: one random read rejects
        about 15 of 16 absent n-grams before the binary search."""
        if self._bits is None:
            shift = 64 - int(min(32, max(16, np.ceil(np.log2(max(1, len(self.hashes)) * 16)))))
            bits = np.zeros(1 << (64 - shift - 3), np.uint8)
            top = self.hashes >> np.uint64(shift)                  # sorted, as the hashes are
            byte = (top >> np.uint64(3)).astype(np.int64)
            first = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]]) if len(byte) else byte
            bits[byte[first]] = np.bitwise_or.reduceat(
                np.left_shift(np.uint8(1), (top & np.uint64(7)).astype(np.uint8)), first) if len(byte) else 0
            self._bits = bits
            self._shift = shift
        return self._bits, self._shift

    def lookup(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in `g` found in the index, their benchmark masks)."""
        if not len(self.hashes) or not len(g):
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        bits, shift = self._filter()
        top = g >> np.uint64(shift)
        maybe = np.flatnonzero((bits[(top >> np.uint64(3)).astype(np.int64)]
                                >> (top & np.uint64(7)).astype(np.uint8)) & np.uint8(1))
        at = np.searchsorted(self.hashes, g[maybe])
        at[at == len(self.hashes)] = 0
        found = self.hashes[at] == g[maybe]
        return maybe[found], self.masks[at[found]]


def _item_grams(w: Words, counts: np.ndarray, n: int, min_n: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(hashes, first words) of the n-grams of items with at least n words, and of each item
    of min_n <= k < n words whole (one k-gram)."""
    short = tuple(sorted({int(c) for c in np.unique(counts) if min_n <= c < n}))
    for k, g, start in grams(w, short + (n,)):
        if k < n:
            keep = counts[w.doc[start]] == k
            g, start = g[keep], start[keep]
        yield g, start


def _items(texts: pa.Array, n: int, min_n: int) -> Iterator[tuple[Words, np.ndarray, list]]:
    """Per chunk of benchmark items: their words, words per item, and the n-grams (`_item_grams`)."""
    for _row, part in chunks(texts):
        w = words(part)
        counts = np.bincount(w.doc, minlength=len(part))
        yield w, counts, list(_item_grams(w, counts, n, min_n))


def build_index(benchmarks: list[tuple[str, pa.Array]], n: int, min_n: int) -> Index:
    """The index of `benchmarks` ((name, item texts) in priority order), with per-benchmark
    stats: items, items too short to look for (under min_n words), distinct n-grams."""
    if len(benchmarks) > 64:
        raise ValueError("at most 64 benchmarks")
    all_h, all_m, lengths, stats = [], [], {n}, {}
    for b, (name, texts) in enumerate(benchmarks):
        parts, too_short = [], 0
        for _w, counts, found in _items(texts, n, min_n):
            too_short += int((counts < min_n).sum())
            lengths.update(int(c) for c in np.unique(counts) if min_n <= c < n)
            parts += [g for g, _start in found]
        h = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
        stats[name] = {"items": len(texts), "items_too_short": too_short, "ngrams": int(len(h))}
        all_h.append(h)
        all_m.append(np.full(len(h), np.uint64(1) << np.uint64(b), np.uint64))
    h = np.concatenate(all_h) if all_h else np.zeros(0, np.uint64)
    m = np.concatenate(all_m) if all_m else np.zeros(0, np.uint64)
    order = np.argsort(h, kind="stable")
    h, m = h[order], m[order]
    first = np.flatnonzero(np.r_[True, h[1:] != h[:-1]]) if len(h) else np.zeros(0, np.int64)
    masks = np.bitwise_or.reduceat(m, first) if len(h) else m
    return Index(tuple(name for name, _ in benchmarks), tuple(sorted(lengths)), h[first], masks, stats=stats)


class Scan(NamedTuple):
    """Per text: distinct benchmark n-grams found, the benchmarks they belong to (bit set),
    and the found hashes (in unsigned order)."""
    counts: np.ndarray            # int64
    masks: np.ndarray             # uint64
    hits: pa.ListArray            # list<int64>: the hashes as signed 64-bit ints (Spark's long)


def scan(texts: pa.Array, index: Index) -> Scan:
    """Look for the index's n-grams in `texts`. Each text's result depends on its text alone."""
    if index.unicode_version != UNICODE_VERSION:
        raise RuntimeError(f"the benchmark index was built with Unicode {index.unicode_version}, this "
                           f"Python has {UNICODE_VERSION}: use the same Python on the driver and executors")
    docs, hashes, masks = [], [], []
    for row, part in chunks(texts):
        w = words(part)
        for _k, g, start in grams(w, index.lengths):
            at, m = index.lookup(g)
            docs.append(w.doc[start[at]] + row)
            hashes.append(g[at])
            masks.append(m)
    total = len(texts)
    d = np.concatenate(docs) if docs else np.zeros(0, np.int64)
    h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    m = np.concatenate(masks) if masks else np.zeros(0, np.uint64)
    order = np.lexsort((h, d))
    d, h, m = d[order], h[order], m[order]
    keep = np.r_[True, (d[1:] != d[:-1]) | (h[1:] != h[:-1])] if len(d) else np.zeros(0, bool)
    d, h, m = d[keep], h[keep], m[keep]
    counts = np.bincount(d, minlength=total).astype(np.int64)
    per_doc = np.zeros(total, np.uint64)
    if len(d):
        first = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
        per_doc[d[first]] = np.bitwise_or.reduceat(m, first)
    offsets = np.zeros(total + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return Scan(counts, per_doc, pa.ListArray.from_arrays(pa.array(offsets), pa.array(h.view(np.int64))))


def first_benchmark(masks: np.ndarray) -> np.ndarray:
    """The lowest set bit of each mask (the first benchmark in priority order), -1 for 0."""
    low = masks & (~masks + np.uint64(1))
    out = np.full(len(masks), -1, np.int64)
    nz = low != 0
    out[nz] = np.round(np.log2(low[nz].astype(np.float64))).astype(np.int64)
    return out


def ngram_texts(benchmarks: list[tuple[str, pa.Array]], n: int, min_n: int, wanted: set[int]) -> dict[int, str]:
    """The normalised text ("w1 w2 ... wk") of each hash in `wanted` (unsigned 64-bit ints)
    that an item of `benchmarks` has; read again from the items, so the index keeps no text."""
    out: dict[int, str] = {}
    want = np.array(sorted(wanted), np.uint64)
    for _name, texts in benchmarks if len(want) else ():
        for w, counts, found in _items(texts, n, min_n):
            for g, start in found:
                for i in np.flatnonzero(np.isin(g, want)):
                    first = int(start[i])
                    k = min(n, int(counts[w.doc[first]]))
                    out.setdefault(int(g[i]), " ".join(w.text.slice(first, k).to_pylist()))
            if len(out) == len(want):
                return out
    return out
