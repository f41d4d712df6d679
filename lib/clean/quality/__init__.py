"""Web-text quality rules with their published definitions and defaults, run per Arrow batch
(pyarrow compute + numpy): Gopher repetition and quality, C4 and FineWeb (see README.md).

`apply(texts, q)` takes a batch of normalised texts and a `QualitySection`, runs the groups
`q.filters` names in FineWeb's order (gopher_repetition, gopher_quality, c4, fineweb; each
on the documents the earlier ones kept), and returns, per document, the first failed rule's
name (None = kept), and the texts after C4's line removal. Deterministic; a document's result
does not depend on the other documents of its batch.

`apply` runs the compiled kernel (`shardforge._native`, native/; `native.py`), one pass per
document over the batch's Arrow buffers. `annotate(texts, q)` also gives every
quantity the rules compare with their thresholds (annotate mode's `signals`).
`apply_reference` is the same rules in pyarrow and
numpy (the modules here, spaCy for the tokens): the definition the kernel is tested against
(tests/test_quality_native.py), not a fallback.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from shardforge.clean.quality.batch import splitlines
from shardforge.config import QUALITY_GROUPS
from shardforge.clean.quality.c4 import c4
from shardforge.clean.quality.fineweb import fineweb
from shardforge.clean.quality.gopher import quality, repetition
from shardforge.clean.quality.words import words

GROUPS = QUALITY_GROUPS


def apply(texts: pa.Array, q) -> tuple[list[str | None], pa.Array]:
    """The groups on a batch with the compiled kernel (an ImportError if it is not built)."""
    from shardforge.clean.quality.native import run

    return run(texts, q)


def annotate(texts: pa.Array, q) -> tuple[list[str | None], pa.Array, np.ndarray]:
    """`apply` with every configured group run on every document: the first failed rule (the
    same decision as `apply`), the texts after C4, and the groups' quantities (a float64 row
    per document, columns named by `signal_fields(q.filters)`)."""
    from shardforge.clean.quality.native import run

    return run(texts, q, signals=True)


def signal_fields(groups) -> list[str]:
    """The names of the quantities `annotate` gives for these groups, in column order."""
    from shardforge.clean.quality.native import signals_of

    return [name for _, name in signals_of(groups)]


def apply_reference(texts: pa.Array, q) -> tuple[list[str | None], pa.Array]:
    """`apply` in pyarrow, numpy and spaCy: the reference the kernel is tested against."""
    n = len(texts)
    reasons: list[str | None] = [None] * n
    alive = np.arange(n)
    toks = None
    for group in GROUPS:
        if group not in q.filters or len(alive) == 0:
            continue
        sub = texts.take(pa.array(alive))
        if group in ("gopher_repetition", "gopher_quality"):
            toks = words(texts) if toks is None else toks
            w = toks.subset(alive)
            got = repetition(sub, w, q) if group == "gopher_repetition" else quality(sub, w, splitlines(sub), q)
        elif group == "c4":
            got, new = c4(sub, q)
            texts = _replace(texts, alive, new)
            toks = None
        else:
            got = fineweb(sub, q)
        for i, r in zip(alive.tolist(), got):
            reasons[i] = r
        alive = alive[np.array([r is None for r in got], dtype=bool)]
    return reasons, texts


def _replace(texts: pa.Array, at: np.ndarray, new: pa.Array) -> pa.Array:
    """`texts` with the documents at indices `at` replaced by `new` (in order)."""
    mapping = np.arange(len(texts))
    mapping[at] = len(texts) + np.arange(len(at))
    return pa.concat_arrays([texts, new.cast(texts.type)]).take(pa.array(mapping))
