"""FineWeb's own rules (Penedo et al. 2024), as datatrove's FineWebQualityFilter defines them,
for a whole batch: the share of lines ending in sentence-final punctuation (datatrove's
TERMINAL_PUNCTUATION: Unicode's Sentence_Terminal characters and five Khmer signs), the share of short lines, the characters of duplicate lines,
and newlines per word (list-like pages). Blank lines do not count as lines.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch import first_failed, mask_of, ratio, repeats, split
from .words import words

# datatrove's TERMINAL_PUNCTUATION: Unicode 15.0 PropList.txt's Sentence_Terminal (code point
# ranges, hex) and five Khmer signs
_STERM = ("21 2E 3F 589 61D-61F 6D4 700-702 7F9 837 839 83D-83E 964-965 104A-104B 1362 1367-1368 166E "
          "1735-1736 1803 1809 1944-1945 1AA8-1AAB 1B5A-1B5B 1B5E-1B5F 1B7D-1B7E 1C3B-1C3C 1C7E-1C7F "
          "203C-203D 2047-2049 2E2E 2E3C 2E53-2E54 3002 A4FF A60E-A60F A6F3 A6F7 A876-A877 A8CE-A8CF A92F "
          "A9C8-A9C9 AA5D-AA5F AAF0-AAF1 ABEB FE52 FE56-FE57 FF01 FF0E FF1F FF61 10A56-10A57 10F55-10F59 "
          "10F86-10F89 11047-11048 110BE-110C1 11141-11143 111C5-111C6 111CD 111DE-111DF 11238-11239 "
          "1123B-1123C 112A9 1144B-1144C 115C2-115C3 115C9-115D7 11641-11642 1173C-1173E 11944 11946 "
          "11A42-11A43 11A9B-11A9C 11C41-11C42 11EF7-11EF8 11F43-11F44 16A6E-16A6F 16AF5 16B37-16B38 "
          "16B44 16E98 1BC9F 1DA88 "
          "17D4-17D6 17D9-17DA")      # not Sentence_Terminal: datatrove's TERMINAL_PUNCTUATION adds them
TERMINAL = "".join(chr(c) for r in _STERM.split()
                   for c in range(int(r.split("-")[0], 16), int(r.split("-")[-1], 16) + 1))
_ENDS_SENTENCE = "[" + "".join(
    "\\x{%s}" % r if "-" not in r else "\\x{%s}-\\x{%s}" % tuple(r.split("-")) for r in _STERM.split()) + "]$"


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
