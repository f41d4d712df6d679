"""FineWeb's own rules (Penedo et al. 2024), as datatrove's FineWebQualityFilter defines them,
for a whole batch: the share of lines ending in sentence-final punctuation (datatrove's
TERMINAL_PUNCTUATION: Unicode's Sentence_Terminal characters and five Khmer signs), the share of short lines, the characters of duplicate lines,
and newlines per word (list-like pages). Blank lines do not count as lines.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardforge.clean.quality.batch import STERM_RANGES, first_failed, mask_of, ratio, repeats, split
from shardforge.clean.quality.words import words

_ENDS_SENTENCE = "[" + "".join(
    "\\x{%s}" % r if "-" not in r else "\\x{%s}-\\x{%s}" % tuple(r.split("-")) for r in STERM_RANGES.split()) + "]$"


def fineweb(texts: pa.Array, q) -> list[str | None]:
    n = len(texts)
    lines = split(texts, "\n")
    lines = lines.where(mask_of(pc.not_equal(pc.utf8_trim_whitespace(lines.flat), "")))
    nl = lines.count
    checks = [("fineweb_empty", nl == 0)]
    if q.fineweb_min_line_punct_ratio:
        ends = lines.total(mask_of(pc.match_substring_regex(lines.flat, _ENDS_SENTENCE)))
        checks.append(("fineweb_min_line_punct_ratio", ratio(ends, nl) < q.fineweb_min_line_punct_ratio))
    if q.fineweb_max_short_line_ratio:
        short = lines.total(lines.lengths() <= q.fineweb_short_line_length)
        checks.append(("fineweb_max_short_line_ratio", ratio(short, nl) > q.fineweb_max_short_line_ratio))
    if q.fineweb_max_dup_line_char_ratio:
        rep = repeats(lines.doc, lines.ids())
        dup_chars = lines.total(np.where(rep, lines.lengths(), 0))
        chars = np.asarray(pc.subtract(pc.utf8_length(texts), pc.count_substring(texts, "\n"))
                           .to_numpy(zero_copy_only=False), dtype=np.float64)
        checks.append(("fineweb_max_dup_line_char_ratio", ratio(dup_chars, chars) > q.fineweb_max_dup_line_char_ratio))
    if q.fineweb_max_newline_word_ratio:
        newlines = np.asarray(pc.count_substring(texts, "\n").to_numpy(zero_copy_only=False), dtype=np.float64)
        checks.append(("fineweb_max_newline_word_ratio",
                       ratio(newlines, words(texts).count) > q.fineweb_max_newline_word_ratio))
    return first_failed(n, checks)
