"""Words as the Gopher, FineWeb and C4 rules count them, for a whole batch at once: exactly
the tokens of datatrove's English word tokenizer, spaCy's rule-based one (`spacy.blank("en")`,
version pinned in setup.py), with whitespace tokens dropped.

spaCy splits the text at whitespace (Python's `str.isspace`) and tokenizes every chunk between
on its own: special cases (contractions, abbreviations, emoticons), then prefixes, suffixes and
infixes. No rule reaches across whitespace (its only special cases that contain whitespace are
single whitespace characters), so a chunk's tokens depend on the chunk alone. `words` uses that:
it splits the batch at whitespace (pyarrow, same characters), tokenizes each distinct chunk once,
and maps the tokens back. Chunks of letters only that are not a special case ("the", "naïve",
but not "Dont") are one token; they are most of any text and never reach spaCy. The other
distinct chunks go to spaCy in one call per batch, and their tokens are remembered across
batches (a bounded memo: results never depend on it, only time does).

Symbol words (`is_symbol`) are datatrove's: tokens made only of its PUNCTUATION_SET characters.

This module serves `apply_reference`, the definition the compiled kernel is tested against; the
kernel (native.py) ports spaCy's tokenizer to Rust and takes its data and `_PUNCTUATION` from here.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardforge.clean.quality.batch import TERMINAL, Pieces, mask_of, split_whitespace

# datatrove.utils.text.PUNCTUATION (0.10.1) as written there, fullwidth digit one included;
# its PUNCTUATION_SET adds TERMINAL_PUNCTUATION (batch.TERMINAL, below in `is_symbol`)
_PUNCTUATION = ("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
                + "".join(chr(c) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for c in range(a, b)))
_LETTERS = r"^\pL+$"
_MEMO_MAX = 200_000
_memo: dict[str, tuple[str, ...]] = {}
_spacy: dict = {}


def _nlp():
    """spacy.blank("en"), built once per process. Lexeme attributes (is_alpha, like_num, ...)
    are not computed: tokenization does not read them, and new lexemes cost less."""
    if "nlp" not in _spacy:
        try:
            import spacy
        except ImportError as e:  # pragma: no cover - the spark extras install it
            raise ImportError("the quality filters need spaCy's English tokenizer: pip install "
                              "'shardforge[spark]' (spacy==3.8.18)") from e
        nlp = spacy.blank("en")
        nlp.vocab.lex_attr_getters = {}
        _spacy["nlp"] = nlp
        _spacy["rules"] = pa.array(sorted(nlp.tokenizer.rules), pa.string())
    return _spacy["nlp"]


def tokenize_chunks(chunks: list[str]) -> list[tuple[str, ...]]:
    """spaCy's tokens of each whitespace-free chunk (memoised; one spaCy call for the misses)."""
    missing = [c for c in dict.fromkeys(chunks) if c not in _memo]
    if not missing:
        return [_memo[c] for c in chunks]
    nlp = _nlp()
    got: list[tuple[str, ...]] = []
    cur: list[str] = []
    with nlp.memory_zone():
        for t in nlp.tokenizer("\n".join(missing)):
            if t.text == "\n":                    # the separator's own token
                got.append(tuple(cur))
                cur = []
            else:
                cur.append(t.text)
    got.append(tuple(cur))
    if len(got) != len(missing):                  # pragma: no cover - would break the premise above
        raise AssertionError("spaCy's tokens crossed a line break")
    new = dict(zip(missing, got))
    out = [new[c] if c in new else _memo[c] for c in chunks]
    if len(_memo) + len(new) > _MEMO_MAX:
        _memo.clear()
    _memo.update(new)
    return out


def words(texts: pa.Array) -> Pieces:
    """Every document's tokens, punctuation tokens included (datatrove's `split_into_words`)."""
    ws = split_whitespace(texts)
    if len(ws.flat) == 0:
        return ws
    enc = pc.dictionary_encode(ws.flat)
    uniq = enc.dictionary
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    _nlp()
    single = mask_of(pc.match_substring_regex(uniq, _LETTERS)) & ~mask_of(pc.is_in(uniq, value_set=_spacy["rules"]))
    hard = np.flatnonzero(~single)
    counts = np.ones(len(uniq), dtype=np.int64)
    if len(hard) == 0:
        return Pieces(ws.flat, ws.doc, ws.n)
    toks = tokenize_chunks(uniq.take(pa.array(hard)).to_pylist())
    per = np.fromiter((len(t) for t in toks), dtype=np.int64, count=len(toks))
    counts[hard] = per
    # source of each unique's tokens in `pool` = uniq ++ hard tokens: itself, or its run of tokens
    pool = pa.concat_arrays([uniq, pa.array([w for t in toks for w in t], pa.string())])
    ustart = np.concatenate([[0], np.cumsum(counts)[:-1]])
    src = np.arange(len(uniq), dtype=np.int64)[np.repeat(np.arange(len(uniq)), counts)]
    hard_first = len(uniq) + np.concatenate([[0], np.cumsum(per)[:-1]])
    within = np.arange(int(per.sum())) - np.repeat(np.concatenate([[0], np.cumsum(per)[:-1]]), per)
    src[np.repeat(ustart[hard], per) + within] = np.repeat(hard_first, per) + within
    # expand to every chunk occurrence
    c_counts = counts[idx]
    c_first = np.concatenate([[0], np.cumsum(c_counts)[:-1]])
    pos = np.repeat(ustart[idx] - c_first, c_counts) + np.arange(int(c_counts.sum()))
    return Pieces(pool.take(pa.array(src[pos])), np.repeat(ws.doc, c_counts), ws.n)


def is_symbol(tokens: Pieces) -> np.ndarray:
    """True for tokens made only of datatrove's punctuation characters (PUNCTUATION_SET)."""
    return mask_of(pc.match_substring_regex(tokens.flat, _symbol_pattern()))


@lru_cache(maxsize=1)
def _symbol_pattern() -> str:
    return "^[" + "".join("\\x{%x}" % ord(c) for c in sorted(set(_PUNCTUATION) | set(TERMINAL))) + "]+$"


def has_alpha(tokens: Pieces) -> np.ndarray:
    """True for tokens with a letter (str.isalpha on any character)."""
    return mask_of(pc.match_substring_regex(tokens.flat, r"\pL"))
