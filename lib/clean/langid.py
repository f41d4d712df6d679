"""Language identification with py3langid (langid.py's model, 97 languages, shipped inside the
PyPI package: nothing is downloaded at run time). Chosen by measurement: bench/langid.py and
BENCHMARKS.md (as accurate as lingua on held-apart text, ten times faster).

`identify(text)` gives (ISO 639-1 code, probability in [0, 1]) of the first `MAX_CHARS`
characters; (None, None) for empty text. Deterministic for a given py3langid version, which
setup.py pins and run reports and manifests record (`langid_info()`).
"""
from __future__ import annotations

from functools import lru_cache

MAX_CHARS = 20_000     # longer documents are identified by their beginning (cost is linear in length)


@lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)


def identify(text: str | None) -> tuple[str | None, float | None]:
    if not text or not text.strip():
        return None, None
    lang, prob = _identifier().classify(text[:MAX_CHARS])
    return lang, round(float(prob), 4)


def langid_info() -> dict:
    from importlib.metadata import version

    return {"name": "py3langid", "version": version("py3langid")}
