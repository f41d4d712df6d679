"""Language identification: py3langid's model (langid.py's naive Bayes, 97 languages, shipped
inside the PyPI package: nothing is downloaded at run time), run by the compiled kernel
(`shardforge._native.LangId`, native/src/langid.rs). Chosen by measurement: bench/langid.py and
BENCHMARKS.md (as accurate as lingua on held-apart text, ten times faster; the kernel is
another 5-8x over py3langid's own Python walk).

`identify_many(texts)` gives, per text, (ISO 639-1 code, probability in [0, 1] rounded to 4
places) of its first `MAX_CHARS` characters; (None, None) for a null or blank text.
`identify(text)` is the same for one text.

The kernel computes what py3langid's `classify` computes (the same text encoding, DFA walk,
feature counts, log1p weights, 1/sqrt(bytes) temperature, softmax and alias folding), with
its sums in float64 in a fixed order (py3langid's are float32 in BLAS's order): the language
is py3langid's and the probability agrees to float32's precision (tests/test_langid.py holds
both to py3langid on real text in ten languages). Where it runs is decided by how shardforge
was loaded, never by a failed import: installed, the kernel runs, and a missing kernel is an
ImportError that says how to build it; imported from the `--py-files` zip (which cannot carry
a compiled module), `_classify_reference` runs the kernel's arithmetic in Python, operation
for operation, so both give the same bytes (much slower). Deterministic for a given
py3langid version, which setup.py pins and run reports and manifests record (`langid_info()`).
"""
from __future__ import annotations

import math
import unicodedata
import zipimport
from functools import lru_cache
from itertools import accumulate
from typing import Iterable, NamedTuple

import numpy as np

MAX_CHARS = 20_000     # longer documents are identified by their beginning (cost is linear in length)
COMPILED = not isinstance(__spec__.loader, zipimport.zipimporter)


class Model(NamedTuple):
    classes: list[str]
    nextmove: np.ndarray   # uint32, distinct 256-entry DFA rows concatenated
    row: np.ndarray        # uint32, state -> row
    out: np.ndarray        # int32, state -> feature or -1
    ptc: np.ndarray        # float32 (features, classes)
    pc: np.ndarray         # float32 (classes,)
    aliases: list[tuple[int, int]]


@lru_cache(maxsize=1)
def model() -> Model:
    """py3langid's model arrays, read once per process: memory-mapped from this machine's cache
    folder when an earlier process converted the same model file with the same code (`_model_key`), else
    converted from py3langid's LZMA-compressed model (about 1 s, paid by every Spark Python
    worker before the cache) and written there (an unwritable cache folder only costs the
    conversion each time)."""
    import json
    import os
    import shutil

    from shardforge.fs import cache_dir

    arrays = ("nextmove", "row", "out", "ptc", "pc")
    try:
        folder = cache_dir() / f"langid-model-{_model_key()}"
    except OSError:                         # this module read from a zip: no file to key the cache by
        return convert_model()
    try:
        meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        got = {n: np.load(folder / f"{n}.npy", mmap_mode="r", allow_pickle=False) for n in arrays}
        return Model(meta["classes"], *(got[n] for n in arrays), [tuple(a) for a in meta["aliases"]])
    except (OSError, ValueError, KeyError):
        pass
    m = convert_model()
    tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        for n in arrays:
            np.save(tmp / f"{n}.npy", getattr(m, n), allow_pickle=False)
        (tmp / "model.json").write_text(json.dumps({"classes": m.classes, "aliases": m.aliases}), encoding="utf-8")
        os.replace(tmp, folder)             # whole or not at all; another process may have won
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return m


def _model_key() -> str:
    """What the converted arrays depend on: py3langid's model file, this module's code, numpy's
    version."""
    import hashlib
    from pathlib import Path

    from py3langid.langid import MODEL_DIR, MODEL_FILE

    h = hashlib.sha256()
    h.update(Path(MODEL_DIR / MODEL_FILE).read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(np.__version__.encode())
    return h.hexdigest()[:20]


def convert_model() -> Model:
    """py3langid's model arrays from its own model file."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)
    classes = list(ident.nb_classes)
    first: dict[str, int] = {}
    aliases = []
    for i, c in enumerate(classes):
        if c in first:
            aliases.append((first[c], i))
        else:
            first[c] = i
    nextmove = np.frombuffer(ident.tk_nextmove, dtype=np.dtype(ident.tk_nextmove.typecode)).astype(np.uint32)
    return Model(classes, nextmove, np.asarray(ident.tk_row, dtype=np.uint32),
                 np.asarray(ident.tk_output, dtype=np.int32), np.ascontiguousarray(ident.nb_ptc, dtype=np.float32),
                 np.ascontiguousarray(ident.nb_pc, dtype=np.float32), aliases)


@lru_cache(maxsize=1)
def kernel():
    """The process's compiled identifier."""
    from shardforge.native import compiled

    LangId = compiled("LangId")
    m = model()
    return LangId(m.nextmove, m.row, m.out, m.ptc.ravel(), m.pc, m.aliases)


def encode(text: str) -> bytes:
    """The bytes py3langid classifies: the first MAX_CHARS characters, lower-cased when all
    upper case, NFC, UTF-8."""
    text = text[:MAX_CHARS]
    if text.isupper():
        text = text.lower()
    return unicodedata.normalize("NFC", text).encode("utf8", errors="surrogatepass")


def identify_many(texts: Iterable[str | None]) -> tuple[list[str | None], list[float | None]]:
    """(languages, probabilities) of `texts`, in order; None for a null or blank text."""
    texts = list(texts)
    todo = [i for i, t in enumerate(texts) if t and not t.isspace()]
    langs: list[str | None] = [None] * len(texts)
    probs: list[float | None] = [None] * len(texts)
    if not todo:
        return langs, probs
    encoded = [encode(texts[i]) for i in todo]
    m = model()
    if COMPILED:
        offsets = np.fromiter(accumulate((len(b) for b in encoded), initial=0), dtype=np.int64,
                              count=len(encoded) + 1)
        idx, prob = kernel().classify(offsets, b"".join(encoded))
        pairs = zip(np.frombuffer(idx, dtype="<u4").tolist(), np.frombuffer(prob, dtype="<f8").tolist())
    else:
        pairs = (_classify_reference(m, b) for b in encoded)
    for i, (c, p) in zip(todo, pairs):
        langs[i], probs[i] = m.classes[c], round(p, 4)
    return langs, probs


def identify(text: str | None) -> tuple[str | None, float | None]:
    langs, probs = identify_many([text])
    return langs[0], probs[0]


def _classify_reference(m: Model, data: bytes) -> tuple[int, float]:
    """The kernel's arithmetic in Python, operation for operation (IEEE float64 adds and
    multiplies in the same order, libm's log1p and exp), so it gives the kernel's bytes:
    the `--py-files` path, and the tests' check of the kernel."""
    counts: dict[int, int] = {}
    state, nextmove, row, out = 0, m.nextmove, m.row, m.out
    for b in data:
        state = int(nextmove[(int(row[state]) << 8) | b])
        f = int(out[state])
        if f >= 0:
            counts[f] = counts.get(f, 0) + 1
    if counts:
        s = m.pc.astype(np.float64)
        for f, n in counts.items():        # first-visit order, as the kernel
            s += math.log1p(n) * m.ptc[f].astype(np.float64)
        scores = s.tolist()
    else:
        scores = [0.0] * len(m.classes)
    t = 1.0 / math.sqrt(max(len(data), 1))
    top = max(x * t for x in scores)
    scores = [math.exp(x * t - top) for x in scores]
    total = 0.0
    for x in scores:
        total += x
    scores = [x / total for x in scores]
    for a, b in m.aliases:
        scores[a] += scores[b]
        scores[b] = 0.0
    best = 0
    for i, x in enumerate(scores):
        if x > scores[best]:
            best = i
    return best, scores[best]


def langid_info() -> dict:
    from importlib.metadata import version

    return {"name": "py3langid", "version": version("py3langid")}
