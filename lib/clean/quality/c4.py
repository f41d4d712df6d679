"""C4's rules (Raffel et al. 2020, section 2.2), as datatrove's C4QualityFilter defines them,
for a whole batch. Lines are removed (too long a word, no terminal punctuation, fewer than
`c4_min_words_per_line` words, "javascript", a policy phrase), citation marks are cut, and a
document is dropped for "lorem ipsum" or a curly bracket on a line that survived the first
line rules, or for fewer than `c4_min_sentences` sentences in its kept lines. Kept documents
get their kept lines back, stripped, joined by newlines.
Sentences are counted as spaCy's sentencizer (datatrove's English splitter) does: a sentence
ends after a token that is one of its sentence-final characters ('.', '!', '?', '。', '！' and
123 more: `Sentencizer.default_punct_chars`) once a word follows.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardforge.clean.quality.batch import Pieces, mask_of, split, split_whitespace
from shardforge.clean.quality.words import words

CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
END_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


def _any(arr, patterns) -> np.ndarray:
    out = np.zeros(len(arr), dtype=bool)
    for p in patterns:
        out |= mask_of(pc.match_substring(arr, p))
    return out


@lru_cache(maxsize=1)
def _sentence_ends() -> pa.Array:
    from spacy.pipeline.sentencizer import Sentencizer

    return pa.array(sorted(Sentencizer.default_punct_chars), pa.string())


def _sentences(lines: pa.Array) -> np.ndarray:
    """Sentences per line as spaCy's sentencizer counts them (at least 1 per line)."""
    toks = words(lines)
    n = len(lines)
    if len(toks.flat) == 0:
        return np.ones(n, dtype=np.int64)
    term = mask_of(pc.is_in(toks.flat, value_set=_sentence_ends()))
    punct = term | mask_of(pc.match_substring_regex(toks.flat, r"^\pP+$"))
    terms_before = np.concatenate([[0], np.cumsum(term)])          # terms among tokens < i
    word_ix = np.flatnonzero(~punct)
    line = toks.doc[word_ix]
    first_of_line = np.searchsorted(toks.doc, np.arange(n))       # first token of each line
    prev = np.empty(len(word_ix), dtype=np.int64)                  # previous word in the line, or line start
    prev[:] = first_of_line[line]
    same = np.zeros(len(word_ix), dtype=bool)
    same[1:] = line[1:] == line[:-1]
    prev[1:][same[1:]] = word_ix[:-1][same[1:]] + 1
    breaks = (terms_before[word_ix] - terms_before[prev]) > 0
    return 1 + np.bincount(line[breaks], minlength=n)


def c4(texts: pa.Array, q) -> tuple[list[str | None], pa.Array]:
    """(first failed rule per document or None, the documents' texts after line removal)."""
    n = len(texts)
    lines = split(texts, "\n")
    stripped = pc.utf8_trim_whitespace(lines.flat)
    lw = split_whitespace(stripped)                       # words of each line (doc = line index)
    nw = lw.count
    maxlen = np.zeros(len(stripped), dtype=np.int64)
    if len(lw.flat):
        np.maximum.at(maxlen, lw.doc, lw.lengths())
    text = pc.replace_substring_regex(stripped, CITATION, "") if q.c4_remove_citations else stripped
    drop = (maxlen > q.c4_max_word_length) if q.c4_max_word_length else np.zeros(len(maxlen), bool)
    if q.c4_terminal_punct:
        ends = np.zeros(len(maxlen), dtype=bool)
        for p in END_PUNCTUATION:
            ends |= mask_of(pc.ends_with(text, p))
        drop |= ~ends | mask_of(pc.ends_with(text, "..."))
    drop |= nw < q.c4_min_words_per_line
    lower = pc.utf8_lower(text)
    lorem = ~drop & _any(lower, ["lorem ipsum"]) if q.c4_lorem_ipsum else np.zeros(len(drop), bool)
    drop |= lorem
    js = ~drop & _any(lower, ["javascript"]) if q.c4_javascript else np.zeros(len(drop), bool)
    drop |= js
    curly = ~drop & _any(text, ["{"]) if q.c4_curly_bracket else np.zeros(len(drop), bool)
    drop |= curly
    if q.c4_policy:
        drop |= _any(lower, POLICY)
    reasons: list[str | None] = [None] * n
    flagged = np.flatnonzero(lorem | curly)                # the first such line decides
    for i in flagged[::-1]:
        reasons[lines.doc[i]] = "c4_lorem_ipsum" if lorem[i] else "c4_curly_bracket"
    keep = ~drop
    kept = Pieces(text, lines.doc, n).where(keep)
    if q.c4_min_sentences:
        sent = np.bincount(kept.doc, weights=_sentences(kept.flat), minlength=n)
        for i in np.flatnonzero(sent < q.c4_min_sentences):
            reasons[i] = reasons[i] or "c4_min_sentences"
    offsets = np.concatenate([[0], np.cumsum(kept.count)]).astype(np.int32)
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), kept.flat), "\n")
    return reasons, pc.utf8_trim_whitespace(joined)
