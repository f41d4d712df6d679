"""Gopher's quality and repetition rules (Rae et al. 2021, "Scaling Language Models", Table A1
and section A.1.1), as datatrove's GopherQualityFilter and GopherRepetitionFilter define them,
for a whole batch: each function returns, per document, the name of the first rule it fails
(or None), in datatrove's order. Thresholds come from `shardforge.config.QualitySection`; a
0 turns a rule off.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardforge.clean.quality.batch import Pieces, first_failed, mask_of, ratio, repeats, split
from shardforge.clean.quality.ngrams import dup_ngram_chars, top_ngram_chars
from shardforge.clean.quality.words import has_alpha, is_symbol


def quality(texts: pa.Array, words: Pieces, lines: Pieces, q) -> list[str | None]:
    """GopherQualityFilter: word counts, mean word length, '#' and ellipsis per word, bullet
    and ellipsis lines, words with a letter, stop words. `lines` is str.splitlines()."""
    n = len(texts)
    sym = is_symbol(words)
    n_words = words.count.astype(np.float64)
    non_sym = words.where(~sym)
    n_ns = non_sym.count
    mean_len = ratio(non_sym.total(non_sym.lengths()), n_ns)
    hashes = np.asarray(pc.count_substring(texts, "#").to_numpy(zero_copy_only=False), dtype=np.float64)
    ellipses = np.asarray(pc.add(pc.count_substring(texts, "..."), pc.count_substring(texts, "…"))
                          .to_numpy(zero_copy_only=False), dtype=np.float64)
    stripped_l = pc.utf8_ltrim_whitespace(lines.flat)
    stripped_r = pc.utf8_rtrim_whitespace(lines.flat)
    bullets = mask_of(pc.or_(pc.starts_with(stripped_l, "•"), pc.starts_with(stripped_l, "-")))
    end_ell = mask_of(pc.or_(pc.ends_with(stripped_r, "..."), pc.ends_with(stripped_r, "…")))
    n_lines = lines.count
    alpha = words.total(has_alpha(words))
    stop_ix = np.asarray(pc.fill_null(pc.index_in(words.flat, value_set=pa.array(list(q.gopher_stop_words))), -1)
                         .to_numpy(zero_copy_only=False), dtype=np.int64)
    keep = stop_ix >= 0
    pairs = np.unique(np.stack([words.doc[keep], stop_ix[keep]]), axis=1) if keep.any() else np.zeros((2, 0), int)
    stops = np.bincount(pairs[0], minlength=n)
    checks = [
        ("gopher_min_words", (n_ns < q.gopher_min_words) if q.gopher_min_words else None),
        ("gopher_max_words", (n_ns > q.gopher_max_words) if q.gopher_max_words else None),
        ("gopher_min_avg_word_length", (mean_len < q.gopher_min_avg_word_length) if q.gopher_min_avg_word_length else None),
        ("gopher_max_avg_word_length", (mean_len > q.gopher_max_avg_word_length) if q.gopher_max_avg_word_length else None),
        ("gopher_max_symbol_word_ratio", (ratio(hashes, n_words) > q.gopher_max_symbol_word_ratio)
         | (ratio(ellipses, n_words) > q.gopher_max_symbol_word_ratio) if q.gopher_max_symbol_word_ratio else None),
        ("gopher_max_bullet_lines_ratio", (ratio(lines.total(bullets), n_lines) > q.gopher_max_bullet_lines_ratio)
         if q.gopher_max_bullet_lines_ratio else None),
        ("gopher_max_ellipsis_lines_ratio", (ratio(lines.total(end_ell), n_lines) > q.gopher_max_ellipsis_lines_ratio)
         if q.gopher_max_ellipsis_lines_ratio else None),
        ("gopher_min_alpha_words_ratio", (ratio(alpha, n_words) < q.gopher_min_alpha_words_ratio)
         if q.gopher_min_alpha_words_ratio else None),
        ("gopher_min_stop_words", (stops < q.gopher_min_stop_words) if q.gopher_min_stop_words else None),
    ]
    return first_failed(n, [(k, v) for k, v in checks if v is not None])


def _dups(p: Pieces) -> tuple[np.ndarray, np.ndarray]:
    """Per document: how many pieces repeat an earlier one, and their characters."""
    rep = repeats(p.doc, p.ids())
    return p.total(rep), p.total(np.where(rep, p.lengths(), 0))


def repetition(texts: pa.Array, words: Pieces, q) -> list[str | None]:
    """GopherRepetitionFilter: duplicate paragraphs and lines (by count and by characters),
    the most frequent 2-4-gram's characters, duplicate 5-10-grams' characters; fractions of
    the document's characters. Empty documents fail as `gopher_empty`."""
    n = len(texts)
    chars = np.asarray(pc.utf8_length(texts).to_numpy(zero_copy_only=False), dtype=np.float64)
    paras = split(pc.utf8_trim_whitespace(texts), r"\n{2,}", regex=True)
    lines = split(texts, r"\n+", regex=True)
    p_dup, p_chars = _dups(paras)
    l_dup, l_chars = _dups(lines)
    checks = [("gopher_empty", chars == 0)]
    if q.gopher_max_dup_para_frac:
        checks.append(("gopher_max_dup_para_frac", ratio(p_dup, paras.count) > q.gopher_max_dup_para_frac))
    if q.gopher_max_dup_para_char_frac:
        checks.append(("gopher_max_dup_para_char_frac", ratio(p_chars, chars) > q.gopher_max_dup_para_char_frac))
    if q.gopher_max_dup_line_frac:
        checks.append(("gopher_max_dup_line_frac", ratio(l_dup, lines.count) > q.gopher_max_dup_line_frac))
    if q.gopher_max_dup_line_char_frac:
        checks.append(("gopher_max_dup_line_char_frac", ratio(l_chars, chars) > q.gopher_max_dup_line_char_frac))
    reasons = first_failed(n, checks)
    undecided = np.array([r is None for r in reasons])
    ids, lens = words.ids(), words.lengths()
    for n_, frac in zip((2, 3, 4), q.gopher_max_top_ngram_char_frac):
        if frac and undecided.any():
            top = top_ngram_chars(words.doc, ids, lens, n_, n)
            _mark(reasons, undecided, ratio(top, chars) > frac, f"gopher_top_{n_}gram")
    for n_, frac in zip(range(5, 11), q.gopher_max_dup_ngram_char_frac):
        if frac and undecided.any():
            dup = dup_ngram_chars(words.doc, ids, lens, n_, n, only=undecided)
            _mark(reasons, undecided, ratio(dup, chars) > frac, f"gopher_dup_{n_}gram")
    return reasons


def _mark(reasons: list, undecided: np.ndarray, failed: np.ndarray, name: str) -> None:
    for i in np.flatnonzero(undecided & failed):
        reasons[i] = name
    undecided &= ~failed

