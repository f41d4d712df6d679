"""Regenerates multilang.jsonl.gz: real text in ten languages for the annotate/select tests
(deterministic: sorted files, fixed strides). The source is the translated manual pages of
Debian's base packages (/usr/share/man/<lang>/), roff markup stripped by bench/realtext.py;
the committed file is what the tests read, so they need no manual pages.

    .venv/bin/python tests/data/quality/make_multilang.py
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent.parent / "bench"))
from realtext import MAN, man_pages, man_paragraphs  # noqa: E402

LANGS = ("en", "de", "fr", "es", "it", "nl", "pl", "pt", "ru", "sv")
PER_LANG = 30


def main() -> None:
    rows = []
    for lang in LANGS:
        folder = MAN if lang == "en" else MAN / lang
        pages = [p for sec in ("man1", "man5", "man8") for p in man_pages(folder / sec)]
        step = max(1, len(pages) // PER_LANG)
        for i, page in enumerate(pages[::step][:PER_LANG]):
            paras = [p for p in man_paragraphs(page) if p.strip()][:12]
            if paras:
                rows.append({"id": f"{lang}-{i:03d}", "lang_hint": lang, "source": page.name,
                             "text": "\n\n".join(paras)})
    with gzip.GzipFile(HERE / "multilang.jsonl.gz", "wb", mtime=0) as f:
        for r in rows:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode())
    print(f"{len(rows)} documents")


if __name__ == "__main__":
    main()
