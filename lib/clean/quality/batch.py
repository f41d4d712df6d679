"""Vectorised building blocks over a batch of texts (pyarrow compute + numpy, no per-document
Python loop): splitting into flat pieces with their document index, per-document sums, and
"repeats an earlier piece of the same document" flags.

A `Pieces` is what a split gives: the flat pieces (a StringArray), `doc` (the document index of
each piece) and `n` (documents in the batch). Everything is exact; nothing depends on batch size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Pieces:
    flat: pa.Array
    doc: np.ndarray
    n: int

    @property
    def count(self) -> np.ndarray:
        return np.bincount(self.doc, minlength=self.n)

    def lengths(self) -> np.ndarray:
        return np.asarray(pc.utf8_length(self.flat).to_numpy(zero_copy_only=False), dtype=np.int64)

    def total(self, values: np.ndarray) -> np.ndarray:
        """Per-document sum of one value per piece (float64)."""
        return np.bincount(self.doc, weights=values.astype(np.float64), minlength=self.n)

    def where(self, mask: np.ndarray) -> "Pieces":
        idx = np.flatnonzero(mask)
        return Pieces(self.flat.take(pa.array(idx)), self.doc[idx], self.n)

    def subset(self, docs: np.ndarray) -> "Pieces":
        """The pieces of documents `docs` (ascending indices), renumbered 0..len(docs)-1."""
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[docs] = np.arange(len(docs))
        keep = np.flatnonzero(remap[self.doc] >= 0)
        return Pieces(self.flat.take(pa.array(keep)), remap[self.doc[keep]], len(docs))

    def ids(self) -> np.ndarray:
        """An integer per piece, equal for equal strings anywhere in the batch."""
        enc = pc.dictionary_encode(self.flat)
        return np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _lists(lists: pa.Array, n: int) -> Pieces:
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    offsets = np.asarray(lists.offsets.to_numpy(), dtype=np.int64)
    counts = np.diff(offsets)
    flat = lists.flatten()
    return Pieces(flat, np.repeat(np.arange(n, dtype=np.int64), counts), n)


def split(texts: pa.Array, pattern: str, *, regex: bool = False) -> Pieces:
    """Every document's pieces between matches of `pattern` (Python's str.split / re.split)."""
    fn = pc.split_pattern_regex if regex else pc.split_pattern
    return _lists(fn(texts, pattern=pattern), len(texts))


_LINE_BREAKS = r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\x{2028}\x{2029}]"


def splitlines(texts: pa.Array) -> Pieces:
    """Every document's lines as Python's str.splitlines() gives them: split at any of its line
    boundaries ("\\r\\n" as one), no empty line after a final boundary, none for ""."""
    p = split(texts, _LINE_BREAKS, regex=True)
    last = np.append(p.doc[1:] != p.doc[:-1], True)
    return p.where(~(last & (p.lengths() == 0)))


def split_whitespace(texts: pa.Array) -> Pieces:
    """Every document's whitespace-separated words (Python's str.split(): no empty words)."""
    return nonempty(_lists(pc.utf8_split_whitespace(texts), len(texts)))


def nonempty(p: Pieces) -> Pieces:
    lens = p.lengths()
    return p if lens.all() else p.where(lens > 0)


def repeats(doc: np.ndarray, key: np.ndarray) -> np.ndarray:
    """True where (doc, key) already occurred earlier in flat order: the second and later
    copies of a piece within its document."""
    if len(key) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((np.arange(len(key)), key, doc))
    same = np.zeros(len(key), dtype=bool)
    same[1:] = (doc[order][1:] == doc[order][:-1]) & (key[order][1:] == key[order][:-1])
    out = np.zeros(len(key), dtype=bool)
    out[order] = same
    return out


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, with 0 where den is 0."""
    num = num.astype(np.float64)
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den != 0)
    return out


def mask_of(values: pa.Array) -> np.ndarray:
    """A boolean array (nulls as False) to numpy."""
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def first_failed(n: int, checks: list[tuple[str, np.ndarray]]) -> list[str | None]:
    """Per document, the name of the first check (in list order) that is True, else None."""
    out: list[str | None] = [None] * n
    undecided = np.ones(n, dtype=bool)
    for name, failed in checks:
        hit = np.flatnonzero(undecided & failed)
        for i in hit:
            out[i] = name
        undecided[hit] = False
    return out


# datatrove's TERMINAL_PUNCTUATION: Unicode 15.0 PropList.txt's Sentence_Terminal (code point
# ranges, hex) and five Khmer signs
STERM_RANGES = ("21 2E 3F 589 61D-61F 6D4 700-702 7F9 837 839 83D-83E 964-965 104A-104B 1362 1367-1368 166E "
          "1735-1736 1803 1809 1944-1945 1AA8-1AAB 1B5A-1B5B 1B5E-1B5F 1B7D-1B7E 1C3B-1C3C 1C7E-1C7F "
          "203C-203D 2047-2049 2E2E 2E3C 2E53-2E54 3002 A4FF A60E-A60F A6F3 A6F7 A876-A877 A8CE-A8CF A92F "
          "A9C8-A9C9 AA5D-AA5F AAF0-AAF1 ABEB FE52 FE56-FE57 FF01 FF0E FF1F FF61 10A56-10A57 10F55-10F59 "
          "10F86-10F89 11047-11048 110BE-110C1 11141-11143 111C5-111C6 111CD 111DE-111DF 11238-11239 "
          "1123B-1123C 112A9 1144B-1144C 115C2-115C3 115C9-115D7 11641-11642 1173C-1173E 11944 11946 "
          "11A42-11A43 11A9B-11A9C 11C41-11C42 11EF7-11EF8 11F43-11F44 16A6E-16A6F 16AF5 16B37-16B38 "
          "16B44 16E98 1BC9F 1DA88 "
          "17D4-17D6 17D9-17DA")      # not Sentence_Terminal: datatrove's TERMINAL_PUNCTUATION adds them
TERMINAL = "".join(chr(c) for r in STERM_RANGES.split()
                   for c in range(int(r.split("-")[0], 16), int(r.split("-")[-1], 16) + 1))
