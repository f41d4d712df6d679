"""Language identification: accuracy per language on held-apart real text, and speed, for
the candidates whose model ships inside their PyPI package (nothing downloaded at run time).

    .venv/bin/python bench/langid.py [--per-language 300] [--rounds 3]

Held-apart text: paragraphs of Debian's translated manual pages (manpages-de, -fr, -es, -it,
-nl, -pl, -pt-br, -ru, -ja, -zh, -cs, -sv; English from /usr/share/man/man1), roff markup
stripped, paragraphs of 120-1,000 characters, at most --per-language per language, the same
sample for every candidate. None of the candidates was trained or tuned on it. Label noise:
translated pages keep some English (option names, untranslated paragraphs), which lowers every
candidate alike. Candidates: py3langid (langid.py's model, 97 languages), lingua (all its
languages, high-accuracy mode), resiliparse's `detect_fast`. Speed is docs/s in alternated
rounds (median), with the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from realtext import MAN, man_pages, man_paragraphs  # noqa: E402

LANGS = {"en": "", "de": "de", "fr": "fr", "es": "es", "it": "it", "nl": "nl", "pl": "pl", "pt": "pt_BR",
         "ru": "ru", "ja": "ja", "zh": "zh_CN", "cs": "cs", "sv": "sv"}


def paragraphs(lang_dir: str) -> list[str]:
    """Paragraphs of 120-1,000 characters of every man1 page of one language."""
    folder = MAN / lang_dir / "man1" if lang_dir else MAN / "man1"
    return [p for page in man_pages(folder) for p in man_paragraphs(page) if 120 <= len(p) <= 1000]


def sample(per_language: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    rows = []
    for lang, folder in LANGS.items():
        paras = paragraphs(folder)
        rng.shuffle(paras)
        rows += [(lang, p) for p in paras[:per_language]]
    return rows


def candidates() -> dict:
    from importlib.metadata import version

    import py3langid
    from lingua import LanguageDetectorBuilder
    from resiliparse.parse.lang import detect_fast

    lingua = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models().build()

    def lingua_one(text: str) -> str:
        lang = lingua.detect_language_of(text)
        return lang.iso_code_639_1.name.lower() if lang is not None else "unknown"

    ident = py3langid.langid.LanguageIdentifier.from_modelpath(py3langid.langid.MODEL_DIR / py3langid.langid.MODEL_FILE,
                                                              norm_probs=True)
    return {
        f"py3langid {version('py3langid')}": lambda t: ident.classify(t)[0],
        f"lingua {version('lingua-language-detector')}": lingua_one,
        f"resiliparse.detect_fast {version('resiliparse')}": lambda t: detect_fast(t)[0],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-language", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "langid.json"))
    args = ap.parse_args(argv)
    rows = sample(args.per_language)
    counts = {lang: sum(1 for l, _ in rows if l == lang) for lang in LANGS}
    print(f"{len(rows)} paragraphs: {counts}", flush=True)
    cands = candidates()
    secs = {k: [] for k in cands}
    preds: dict[str, list[str]] = {}
    names = list(cands)
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            preds[name] = [cands[name](t) for _, t in rows]
            secs[name].append(time.perf_counter() - t0)
            print(f"round {r} {name}: {len(rows) / secs[name][-1]:.0f} docs/s", flush=True)
    result = {"paragraphs": counts, "load_average": os.getloadavg(), "rounds": args.rounds, "candidates": {}}
    for name in names:
        per = {}
        for lang in LANGS:
            idx = [i for i, (l, _) in enumerate(rows) if l == lang]
            per[lang] = round(sum(preds[name][i] == lang for i in idx) / max(len(idx), 1), 4)
        overall = sum(p == l for p, (l, _) in zip(preds[name], rows)) / len(rows)
        result["candidates"][name] = {"accuracy": round(overall, 4), "per_language": per,
                                      "docs_per_second": round(len(rows) / statistics.median(secs[name]), 1)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
