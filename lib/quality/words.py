"""Words as the Gopher, FineWeb and C4 rules count them, for a whole batch at once.

The reference implementation (datatrove 0.10) splits English text into words with spaCy's
rule-based English tokenizer: punctuation becomes tokens of its own ("end." -> "end", "."),
clitics are split ("don't" -> "do", "n't"), hyphens and slashes between letters are split
("e-mail" -> "e", "-", "mail"), while URLs, e-mail addresses and abbreviations ("e.g.",
"U.S.", "Mr.") stay whole. `words(texts)` reproduces those rules vectorised: a whitespace split,
then five RE2 substitutions (pyarrow) on every token that is not a URL, an address or a listed
abbreviation, then a second split. Differences by design: spaCy's long exception list is cut
to the common abbreviations below, and a period ends a token whenever the token has no other
period. BENCHMARKS.md gives the per-rule agreement this reaches.

Symbol words: tokens with no letter, digit or mark (Unicode P*, S*, C* only).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch import Pieces, mask_of, nonempty, split_whitespace

_SUBS = (
    # brackets, quotes, ellipses, ?!;#$%*, dashes, double hyphens: tokens of their own
    (r"(\.{2,}|--|[\[\](){}<>?!;#$%*«»“”‘’„\"`\x{2012}-\x{2015}])", r" \1 "),
    (r"([:,])(\D|$)", r" \1 \2"),                                   # , and : unless a digit follows
    (r"([\pL0-9])([-/:=<>+~])(\pL)", r"\1 \2 \3"),                 # infixes between letters
    (r"([^'\s])('[sSmMdD]|'ll|'LL|'re|'RE|'ve|'VE|n't|N'T)(\s|$)", r"\1 \2\3"),   # clitics
    (r"(^|\s)([^.\s]+)\.(\s|$)", r"\1\2 .\3"),                     # the final period of a period-free token
    (r"(^|\s)'(\S)", r"\1' \2"),                                    # an opening single quote
    (r"([^\s'])'(\s|$)", r"\1 '\2"),                               # a closing single quote
)
_WHOLE = r"^(?:[a-z][a-z0-9+.-]*://\S+|www\.\S+|[^@\s]+@[^@\s]+\.\w+)$"
ABBREVIATIONS = ("Mr.", "Mrs.", "Ms.", "Dr.", "Prof.", "St.", "Jr.", "Sr.", "Inc.", "Ltd.", "Co.", "Corp.",
                 "vs.", "etc.", "e.g.", "i.e.", "cf.", "No.", "Jan.", "Feb.", "Mar.", "Apr.", "Jun.", "Jul.",
                 "Aug.", "Sep.", "Sept.", "Oct.", "Nov.", "Dec.", "Mt.", "a.m.", "p.m.")
_NON_SYMBOL = r"[^\pP\pS\pC\s]"
_ALPHA = r"\pL"


def _split_token(tokens: pa.Array) -> pa.Array:
    out = tokens
    for pattern, repl in _SUBS:
        out = pc.replace_substring_regex(out, pattern=pattern, replacement=repl)
    return out


def words(texts: pa.Array) -> Pieces:
    """All tokens of every document, punctuation tokens included (datatrove's `words`)."""
    ws = split_whitespace(texts)
    if len(ws.flat) == 0:
        return ws
    whole = mask_of(pc.match_substring_regex(ws.flat, _WHOLE)) | mask_of(
        pc.is_in(ws.flat, value_set=pa.array(ABBREVIATIONS)))
    parts = pc.utf8_split_whitespace(pc.if_else(pa.array(whole), ws.flat, _split_token(ws.flat)))
    counts = np.diff(np.asarray(parts.offsets.to_numpy(), dtype=np.int64))
    return nonempty(Pieces(parts.flatten(), np.repeat(ws.doc, counts), ws.n))


def is_symbol(tokens: Pieces) -> np.ndarray:
    """True for tokens with no letter, digit or mark."""
    return ~mask_of(pc.match_substring_regex(tokens.flat, _NON_SYMBOL))


def has_alpha(tokens: Pieces) -> np.ndarray:
    return mask_of(pc.match_substring_regex(tokens.flat, _ALPHA))
