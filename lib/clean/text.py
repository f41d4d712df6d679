"""Pure text-cleaning kernels: Unicode/whitespace normalisation and the document
quality rules (Gopher/C4 style). No Spark here; `clean.py` runs these per Arrow batch.

Normalisation (`normalize`): lone surrogates removed, Unicode NFC (or NFKC),
control and format characters removed (tab and newline kept, CR/LF and Unicode
line separators become newline), Unicode spaces become a space, runs of spaces and
tabs inside a line collapse to one space (leading indentation is kept, so code keeps
its shape), trailing spaces go, at most one blank line in a row, and the text is
stripped. It is idempotent: normalize(normalize(t)) == normalize(t).

`normalize_many` is the same over a batch, with the substitutions in the compiled kernel
(native/src/normalize.rs; surrogates and NFC/NFKC stay in Python, which does them at C
speed); `normalize` is its reference (tests/test_clean_normalize.py). Imported from the
`--py-files` zip, which cannot carry a compiled module, `normalize_many` runs `normalize`.
"""
from __future__ import annotations

import re
import unicodedata
import zipimport
from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

import pyarrow as pa

_SURROGATES = re.compile("[\ud800-\udfff]")
_NEWLINES = re.compile("\r\n|[\r\u0085\u2028\u2029\x0b\x0c]")
# C0/C1 controls except \t \n, zero-width and bidi format characters, BOM, noncharacters
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u200b\u200c\u200e\u200f\u202a-\u202e"
                      "\u2060-\u2064\u2066-\u206f\ufeff\ufffe\uffff]")
_UNI_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_INNER_SPACES = re.compile(r"(?<=\S)[ \t]+")
_TRAILING = re.compile(r"[ \t]+(?=\n)|^[ \t]+$", re.M)
_BLANKS = re.compile("\n{3,}")
_WORD_STRIP = "\"'()[]{}<>.,;:!?*`“”‘’«»"
_ELLIPSIS_END = re.compile(r"(?:\.\.\.|…)\s*$")
_BULLET_START = re.compile(r"^\s*(?:[•\-\*‣◦⁃▪▫●○]|\d+[.)])\s")

DEFAULT_BOILERPLATE = (
    "lorem ipsum", "javascript is disabled", "enable javascript", "this site uses cookies",
    "we use cookies", "accept cookies", "cookie policy", "privacy policy", "terms of use",
    "terms and conditions", "all rights reserved", "sign up for our newsletter",
    "subscribe to our newsletter", "click here to", "log in to reply", "powered by wordpress",
)


def normalize(text: str, form: str = "NFC") -> str:
    """The normalised text (see module docstring). `form` is "NFC", "NFKC" or "" (none)."""
    if not text:
        return ""
    if _SURROGATES.search(text):
        text = _SURROGATES.sub("", text)
    if form:
        text = unicodedata.normalize(form, text)
    text = _NEWLINES.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = _UNI_SPACES.sub(" ", text)
    text = _INNER_SPACES.sub(" ", text)
    text = _TRAILING.sub("", text)
    text = _BLANKS.sub("\n\n", text)
    return text.strip()


COMPILED = not isinstance(__spec__.loader, zipimport.zipimporter)


def normalize_many(texts: Sequence[str | None], form: str = "NFC") -> list[str | None]:
    """`normalize` of each text, in order (None stays None)."""
    if not COMPILED:
        return [None if t is None else normalize(t, form) for t in texts]
    from shardforge.native import compiled

    normalize_texts = compiled("normalize_texts")
    import numpy as np

    prepared = []
    for t in texts:
        if not t:
            prepared.append(b"")
            continue
        try:
            prepared.append((unicodedata.normalize(form, t) if form else t).encode())
        except UnicodeEncodeError:      # lone surrogates: removed before the Unicode form, as `normalize`
            t = _SURROGATES.sub("", t)
            prepared.append((unicodedata.normalize(form, t) if form else t).encode())
    offsets = np.fromiter(accumulate(map(len, prepared), initial=0), dtype=np.int64, count=len(prepared) + 1)
    offs, data = normalize_texts(offsets, b"".join(prepared))
    out = pa.LargeStringArray.from_buffers(len(prepared), pa.py_buffer(offs), pa.py_buffer(data)).to_pylist()
    return [None if t is None else o for t, o in zip(texts, out)]


@dataclass(frozen=True)
class Rules:
    """Thresholds of the quality rules; 0 switches a max_/min_ rule off (min_chars 0 too)."""
    min_chars: int = 1
    max_chars: int = 0
    min_words: int = 0
    max_words: int = 0
    min_mean_word_length: float = 0.0
    max_mean_word_length: float = 0.0
    max_symbol_ratio: float = 0.0
    max_non_alnum_ratio: float = 0.0
    min_alpha_word_fraction: float = 0.0
    max_duplicate_line_fraction: float = 0.0
    max_duplicate_paragraph_fraction: float = 0.0
    max_ellipsis_line_fraction: float = 0.0
    max_bullet_line_fraction: float = 0.0
    max_boilerplate_line_fraction: float = 0.0
    boilerplate_phrases: tuple[str, ...] = DEFAULT_BOILERPLATE


def _dup_fraction(items: Sequence[str]) -> float:
    """Fraction of items that repeat an earlier item (Gopher's duplicate-line rule)."""
    if not items:
        return 0.0
    seen: set[str] = set()
    dups = 0
    for it in items:
        if it in seen:
            dups += 1
        else:
            seen.add(it)
    return dups / len(items)


def failed_rule(text: str, rules: Rules) -> str | None:
    """The first rule `text` (already normalised) fails, by name, or None if it passes.

    Rules run in a fixed order, so a document has exactly one reason:
    min_chars, max_chars, min_words, max_words, min/max_mean_word_length,
    max_symbol_ratio ('#' and ellipses per word), max_non_alnum_ratio (of non-space
    chars), min_alpha_word_fraction, max_duplicate_line_fraction,
    max_duplicate_paragraph_fraction, max_ellipsis_line_fraction,
    max_bullet_line_fraction, max_boilerplate_line_fraction.
    """
    n = len(text)
    if n < rules.min_chars:
        return "min_chars"
    if rules.max_chars and n > rules.max_chars:
        return "max_chars"
    need_words = (rules.min_words or rules.max_words or rules.min_mean_word_length
                  or rules.max_mean_word_length or rules.max_symbol_ratio or rules.min_alpha_word_fraction)
    if need_words:
        words = text.split()
        nw = len(words)
        if nw < rules.min_words:
            return "min_words"
        if rules.max_words and nw > rules.max_words:
            return "max_words"
        if rules.min_mean_word_length or rules.max_mean_word_length:
            stripped = [w.strip(_WORD_STRIP) for w in words]
            stripped = [w for w in stripped if w]
            mean = sum(map(len, stripped)) / len(stripped) if stripped else 0.0
            if mean < rules.min_mean_word_length:
                return "min_mean_word_length"
            if rules.max_mean_word_length and mean > rules.max_mean_word_length:
                return "max_mean_word_length"
        if rules.max_symbol_ratio:
            symbols = text.count("#") + text.count("...") + text.count("…")
            if symbols / max(nw, 1) > rules.max_symbol_ratio:
                return "max_symbol_ratio"
    if rules.max_non_alnum_ratio:
        visible = n - sum(text.count(c) for c in " \n\t")
        alnum = sum(1 for c in text if c.isalnum())
        if visible and (visible - alnum) / visible > rules.max_non_alnum_ratio:
            return "max_non_alnum_ratio"
    if rules.min_alpha_word_fraction:
        words = text.split()
        alpha = sum(1 for w in words if any(c.isalpha() for c in w))
        if words and alpha / len(words) < rules.min_alpha_word_fraction:
            return "min_alpha_word_fraction"
    if not (rules.max_duplicate_line_fraction or rules.max_duplicate_paragraph_fraction
            or rules.max_ellipsis_line_fraction or rules.max_bullet_line_fraction
            or rules.max_boilerplate_line_fraction):
        return None
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if rules.max_duplicate_line_fraction and _dup_fraction(lines) > rules.max_duplicate_line_fraction:
        return "max_duplicate_line_fraction"
    if rules.max_duplicate_paragraph_fraction:
        paras = [p for p in text.split("\n\n") if p.strip()]
        if _dup_fraction(paras) > rules.max_duplicate_paragraph_fraction:
            return "max_duplicate_paragraph_fraction"
    nl = max(len(lines), 1)
    if rules.max_ellipsis_line_fraction:
        if sum(1 for ln in lines if _ELLIPSIS_END.search(ln)) / nl > rules.max_ellipsis_line_fraction:
            return "max_ellipsis_line_fraction"
    if rules.max_bullet_line_fraction:
        if sum(1 for ln in lines if _BULLET_START.match(ln)) / nl > rules.max_bullet_line_fraction:
            return "max_bullet_line_fraction"
    if rules.max_boilerplate_line_fraction and rules.boilerplate_phrases:
        phrases = tuple(p.lower() for p in rules.boilerplate_phrases)
        bp = sum(1 for ln in lines if any(p in ln.lower() for p in phrases))
        if bp / nl > rules.max_boilerplate_line_fraction:
            return "max_boilerplate_line_fraction"
    return None


def clean_one(text: str | None, kind: str | None, rules: Rules, form: str = "NFC") -> tuple[str | None, str | None]:
    """(normalised text, reject reason or None) for one document.

    Null text: `invalid:null_text`, except for images (a caption is optional).
    Images (kind == "image") are normalised but never filtered: quality rules
    describe prose, not captions. Other rows get `filter:<rule>` from `failed_rule`.
    """
    return judge(None if text is None else normalize(text, form), kind, rules)


def judge(normalised: str | None, kind: str | None, rules: Rules) -> tuple[str | None, str | None]:
    """`clean_one` of a text already normalised."""
    is_image = kind == "image"
    if normalised is None:
        return None, (None if is_image else "invalid:null_text")
    if is_image:
        return normalised, None
    rule = failed_rule(normalised, rules)
    return normalised, (None if rule is None else f"filter:{rule}")


# --- Arrow string columns, robust to bad bytes (used by the Spark stages) -----------
def to_pylist_safe(arr: pa.Array) -> list[str | None]:
    """Python strings (None for nulls) of a string array, never raising on bad UTF-8."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    try:
        arr.validate(full=True)
        return arr.to_pylist()
    except (pa.ArrowInvalid, UnicodeDecodeError):
        binary = arr.view(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
        return [None if v is None else v.decode("utf-8", "replace") for v in binary.to_pylist()]


def from_pylist(values: list[str | None], type_: pa.DataType = pa.string()) -> pa.Array:
    """A string array; lone surrogates (which UTF-8 cannot hold) are replaced by U+FFFD."""
    try:
        return pa.array(values, type=type_)
    except (UnicodeEncodeError, pa.ArrowInvalid):
        fixed = [None if v is None else _SURROGATES.sub("\ufffd", v) for v in values]
        return pa.array(fixed, type=type_)
