"""The compiled quality kernel (`shardforge._native`, Rust, native/): built once per process
from the pinned spaCy's own tokenizer data and the character classes of the engines the
reference uses, then run on a batch's Arrow buffers.

`kernel()` gives the process's `Quality` kernel: spaCy's special cases and its prefix, suffix,
infix and URL patterns (translated from Python's regex syntax to fancy-regex's by
`rust_pattern`), whitespace as pyarrow splits and trims it, RE2's \\pL and \\pP, datatrove's
punctuation and terminal punctuation, spaCy's sentence-final characters, pyarrow's lower case.
`run(texts, q)` is `shardforge.clean.quality.apply` on the kernel. A missing kernel is an
ImportError that says how to build it; there is no fallback.
"""
from __future__ import annotations

import os
import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MISSING = ("shardforge's compiled quality kernel (shardforge._native) is not installed: install shardforge "
           "from source with `pip install -e .` (needs cargo and rustc; README.md), or, on a cluster, the "
           "shardforge wheel that `make package` builds into dist/")


def _native():
    try:
        from shardforge import _native
    except ImportError as e:
        raise ImportError(MISSING) from e
    return _native


def _ranges(codes) -> list[tuple[int, int]]:
    """Sorted code points -> inclusive (lo, hi) runs."""
    out: list[list[int]] = []
    for c in codes:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(a, b) for a, b in out]


@lru_cache(maxsize=None)
def _shorthand(letter: str) -> str:
    """Python's \\w, \\d, \\s and their negations, as explicit code point ranges."""
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    return "".join(f"\\x{{{m.start():X}}}" if m.end() == m.start() + 1 else f"\\x{{{m.start():X}}}-\\x{{{m.end() - 1:X}}}"
                   for m in re.finditer("\\" + letter + "+", everything))


_SIMPLE = {"n": "\\n", "t": "\\t", "r": "\\r", "f": "\\f", "v": "\\v", "a": "\\x{7}"}


def rust_pattern(pattern: str) -> str:
    """A Python `re` pattern in fancy-regex syntax, same matches: \\uXXXX escapes, Python's
    \\w \\d \\s (and negations) as explicit classes, every literal inside a class and every
    escaped punctuation as a \\x{...} escape (fancy-regex gives [, &&, -- and ~~ in classes a
    meaning of their own). Raises ValueError on syntax it does not translate."""
    out: list[str] = []
    i, n, in_class, class_start = 0, len(pattern), False, False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1]
            if nxt in "uU":
                width = 4 if nxt == "u" else 8
                atom, i = f"\\x{{{int(pattern[i + 2:i + 2 + width], 16):X}}}", i + 2 + width
            elif nxt in "wdsWDS":
                body = _shorthand(nxt)
                atom, i = (body if in_class else f"[{body}]"), i + 2
            elif nxt in _SIMPLE:
                atom, i = _SIMPLE[nxt], i + 2
            elif not nxt.isalnum():
                atom, i = f"\\x{{{ord(nxt):X}}}", i + 2
            else:
                raise ValueError(f"rust_pattern: unsupported escape \\{nxt} at {i}")
            out.append(atom)
            class_start = False
            continue
        if in_class:
            if ch == "]" and not class_start:
                in_class = False
                out.append("]")
            elif ch == "-" and not class_start and i + 1 < n and pattern[i + 1] != "]":
                out.append("-")
            elif ch == "^" and class_start and out[-1] == "[":
                out.append("^")
                i += 1
                continue
            else:
                out.append(f"\\x{{{ord(ch):X}}}")
            class_start = False
            i += 1
            continue
        if ch == "[":
            in_class, class_start = True, True
            out.append("[")
        else:
            out.append(ch)
        i += 1
    if in_class:
        raise ValueError("rust_pattern: unterminated class")
    return "".join(out)


_LOOKAROUND = re.compile(r"\(\?(?:=|!|<=|<!)")


def _scan(p: str):
    """(index, char, depth, in_class) for the unescaped characters of a translated pattern."""
    depth, in_class, i = 0, False, 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        yield i, c, depth, in_class
        i += 1


def _branches(p: str) -> list[str]:
    cuts = [i for i, c, depth, in_class in _scan(p) if c == "|" and depth == 0 and not in_class]
    return [p[a + 1:b] for a, b in zip([-1] + cuts, cuts + [len(p)])]


def _relax(p: str) -> str:
    """`p` with its lookarounds made plain: positive ones consume what they look at, negative
    ones are dropped. Wherever `p` matches, the result matches too, starting at most one
    character earlier (a look-behind at the branch's start): the kernel's prefilter."""
    while (m := _LOOKAROUND.search(p)) is not None:
        open_depth = None
        for i, c, depth, _ in _scan(p):
            if i == m.start():
                open_depth = depth
            elif open_depth is not None and c == ")" and depth == open_depth - 1:
                keep = m.group() in ("(?=", "(?<=")
                p = p[:m.start()] + ("(?:" + p[m.end():i + 1] if keep else "") + p[i + 1:]
                break
        else:                                          # pragma: no cover - spaCy's patterns are balanced
            raise ValueError("rust_pattern: unbalanced lookaround")
    return p


def runs(pattern: str) -> list[tuple[str, str]]:
    """A translated pattern as the kernel's runs of top-level alternatives, in order: (run,
    "") for a run of alternatives without lookaround, (alternative, its prefilter) for each
    alternative with one."""
    if pattern.startswith("(?u)"):
        pattern = pattern[4:]
    out: list[tuple[list[str], bool]] = []
    for b in _branches(pattern):
        fancy = _LOOKAROUND.search(b) is not None
        if out and not fancy and not out[-1][1]:
            out[-1][0].append(b)
        else:
            out.append(([b], fancy))
    return [("|".join(bs), "|".join(_relax(b) for b in bs) if fancy else "") for bs, fancy in out]


def _all_chars() -> pa.Array:
    return pa.array([chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF], pa.string())


def _where(chars: pa.Array, mask) -> list[tuple[int, int]]:
    m = np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
    return _ranges(ord(c) for c in np.asarray(chars.to_numpy(zero_copy_only=False))[m])


@lru_cache(maxsize=1)
def kernel():
    """The process's kernel. Its arguments are derived from spaCy and pyarrow on first use in
    a machine (about 5 s, most of it importing spaCy) and kept in the cache folder
    (`kernel_args`), so later processes (each Spark Python worker) start in milliseconds."""
    native = _native()
    return native.Quality(*kernel_args())


def _args_key() -> str:
    """What the kernel's arguments depend on: the code that derives them, the versions of
    spaCy and pyarrow, Python's and its Unicode database's."""
    import hashlib
    import unicodedata
    from importlib import metadata

    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ("native.py", "batch.py", "words.py"):
        h.update((here / name).read_bytes())
    h.update(f"{metadata.version('spacy')}|{pa.__version__}|{sys.version}|{unicodedata.unidata_version}".encode())
    return h.hexdigest()[:20]


def kernel_args() -> tuple:
    """The kernel's constructor arguments: read from the cache folder when an earlier process
    derived them under the same `_args_key`, else derived (`derive_args`) and written there
    (an unwritable cache folder only costs the derivation each time)."""
    import json

    from shardforge.fs import cache_dir

    path = cache_dir() / f"quality-kernel-{_args_key()}.json"
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        pairs = lambda xs: [tuple(x) for x in xs]      # noqa: E731
        return (pairs(d["prefix"]), pairs(d["suffix"]), pairs(d["infix"]),
                None if d["url"] is None else pairs(d["url"]), [(k, list(v)) for k, v in d["specials"]],
                [pairs(c) for c in d["classes"]], pairs(d["lower"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    args = derive_args()
    names = ("prefix", "suffix", "infix", "url", "specials", "classes", "lower")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(zip(names, args)), ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
    return args


def derive_args() -> tuple:
    """The kernel's arguments from the pinned spaCy's tokenizer and pyarrow's character classes."""
    from shardforge.clean.quality.batch import TERMINAL
    from shardforge.clean.quality.words import _PUNCTUATION, _nlp
    from spacy.pipeline.sentencizer import Sentencizer

    tok = _nlp().tokenizer
    chars = _all_chars()
    split_ws = pc.equal(pc.list_value_length(pc.utf8_split_whitespace(chars)), 2)
    trim_ws = pc.equal(pc.utf8_trim_whitespace(chars), "")
    ws = _where(chars, split_ws)
    if ws != _where(chars, trim_ws):                 # pragma: no cover - pyarrow's two definitions agree
        raise RuntimeError("pyarrow's split and trim whitespace differ: the kernel assumes one class")
    lowered = pc.utf8_lower(chars)
    changed = np.flatnonzero(np.asarray(pc.not_equal(lowered, chars).to_numpy(zero_copy_only=False), dtype=bool))
    lower = [(c, lo) for c, lo in zip(chars.take(pa.array(changed)).to_pylist(),
                                      lowered.take(pa.array(changed)).to_pylist()) if ord(c) >= 128]
    classes = [ws, _where(chars, pc.match_substring_regex(chars, r"^\pL$")),
               _where(chars, pc.match_substring_regex(chars, r"^\pP$")),
               _ranges(sorted({ord(c) for c in _PUNCTUATION + TERMINAL})), _ranges(sorted(map(ord, TERMINAL))),
               _ranges(sorted(ord(c) for c in Sentencizer.default_punct_chars))]
    specials = [(k, [t[65] if 65 in t else t["ORTH"] for t in v]) for k, v in sorted(tok.rules.items())]
    url = tok.url_match.__self__.pattern if tok.url_match is not None else None
    if tok.token_match is not None:                  # pragma: no cover - spacy.blank("en") has none
        raise RuntimeError("spaCy's token_match is set: the kernel does not port it")
    return (runs(rust_pattern(tok.prefix_search.__self__.pattern)), runs(rust_pattern(tok.suffix_search.__self__.pattern)),
            runs(rust_pattern(tok.infix_finditer.__self__.pattern)), runs(rust_pattern(url)) if url else None,
            specials, classes, lower)


@lru_cache(maxsize=1)
def reasons() -> list[str]:
    return list(_native().reasons())


def _params(q) -> dict:
    f = float
    return dict(
        groups=[g in q.filters for g in ("gopher_repetition", "gopher_quality", "c4", "fineweb")],
        rep=[f(q.gopher_max_dup_para_frac), f(q.gopher_max_dup_para_char_frac), f(q.gopher_max_dup_line_frac),
             f(q.gopher_max_dup_line_char_frac)],
        top=[f(x) for x in q.gopher_max_top_ngram_char_frac][:3],
        dup=[f(x) for x in q.gopher_max_dup_ngram_char_frac][:6],
        gq=[f(q.gopher_min_words), f(q.gopher_max_words), f(q.gopher_min_avg_word_length),
            f(q.gopher_max_avg_word_length), f(q.gopher_max_symbol_word_ratio), f(q.gopher_max_bullet_lines_ratio),
            f(q.gopher_max_ellipsis_lines_ratio), f(q.gopher_min_alpha_words_ratio)],
        min_stop=f(q.gopher_min_stop_words), stop_words=list(q.gopher_stop_words),
        c4_max_word_length=f(q.c4_max_word_length),
        c4_flags=[bool(q.c4_remove_citations), bool(q.c4_terminal_punct), bool(q.c4_lorem_ipsum),
                  bool(q.c4_javascript), bool(q.c4_curly_bracket), bool(q.c4_policy)],
        c4_min_words_per_line=f(q.c4_min_words_per_line), c4_min_sentences=f(q.c4_min_sentences),
        fw=[f(q.fineweb_min_line_punct_ratio), f(q.fineweb_max_short_line_ratio), f(q.fineweb_short_line_length),
            f(q.fineweb_max_dup_line_char_ratio), f(q.fineweb_max_newline_word_ratio)])


@lru_cache(maxsize=1)
def signal_names() -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """Every quantity the kernel computes in annotate mode, in its column order, and each
    group's (start, end) slice of them (groups in QUALITY_GROUPS order)."""
    names, groups = _native().signals()
    return tuple(names), tuple(map(tuple, groups))


def signals_of(groups) -> list[tuple[int, str]]:
    """(column in the kernel's matrix, name) of the quantities of the configured groups."""
    from shardforge.config import QUALITY_GROUPS

    names, slices = signal_names()
    return [(i, names[i]) for g, (a, b) in zip(QUALITY_GROUPS, slices) if g in groups for i in range(a, b)]


def run(texts: pa.Array, q, signals: bool = False):
    """`apply` on the kernel: per document the first failed rule (None = kept), and the texts
    after C4's line removal (the input's type); with `signals`, also a float64 matrix of every
    quantity of the configured groups (a row per document, columns `signals_of(q.filters)`;
    every group runs on every document, the decision is the same). Null texts are an error."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if texts.null_count:
        raise ValueError(f"quality.apply: {texts.null_count} null text(s); the rules need a text per document")
    n = len(texts)
    large = texts.cast(pa.large_string())
    bufs = large.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[large.offset:large.offset + n + 1] if n else np.zeros(1, np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(0, np.uint8)
    codes, offs, out, sig = kernel().apply(np.ascontiguousarray(offsets), data, **_params(q), signals=signals)
    names = reasons()
    got = [None if c == 0 else names[c - 1] for c in codes]
    new = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offs), pa.py_buffer(out)])
    if not signals:
        return got, new.cast(texts.type)
    matrix = np.frombuffer(sig, dtype="<f8").reshape(n, len(signal_names()[0]))
    return got, new.cast(texts.type), matrix[:, [i for i, _ in signals_of(q.filters)]]
