"""Cuts the text windows of the independent PII set out of Debian's Python
documentation, a text the detectors were not developed on.

    apt-get install python3-doc        # python3.11-doc 3.11.2-6+deb12u9 was used
    python tests/data/pii_independent/extract_windows.py   # writes windows.jsonl here

Sources: the reStructuredText sources of the Python 3.11 manual
(/usr/share/doc/python3.11/html/_sources/**/*.rst.txt) and its changelog (NEWS.gz).
A window is a run of whole paragraphs of 300-900 characters; WINDOWS of them are
drawn with a fixed seed, and RICH more from the manual's windows that mention an
address (an `@` with a domain, a dotted quad or a `::`), so that natural addresses,
documentation ranges and versions are well represented. Same package, same bytes. The windows are
committed (windows.jsonl), so make_independent.py needs nothing outside the repo.
"""
from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = Path("/usr/share/doc/python3.11")
WINDOWS = 900
RICH = 150
_ADDRESSY = re.compile(r"@[A-Za-z0-9-]+\.[A-Za-z]|[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]|[0-9A-Fa-f]::|::[0-9A-Fa-f]")
NEWS_SHARE = 0.15
MIN_CHARS, MAX_CHARS = 300, 900


def paragraphs(text: str) -> list[str]:
    out, cur = [], []
    for line in text.splitlines():
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append("\n".join(cur))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out


def windows_of(text: str) -> list[str]:
    """Consecutive paragraphs joined by blank lines, 300-900 characters each; a
    paragraph longer than 900 characters is cut at a line break."""
    out, cur = [], ""
    for p in paragraphs(text):
        if len(p) > MAX_CHARS:
            lines, p = p.splitlines(), ""
            for line in lines:
                if len(p) + len(line) + 1 > MAX_CHARS:
                    break
                p = f"{p}\n{line}" if p else line
        joined = f"{cur}\n\n{p}" if cur else p
        if len(joined) > MAX_CHARS:
            if len(cur) >= MIN_CHARS:
                out.append(cur)
            cur = p if len(p) <= MAX_CHARS else ""
        else:
            cur = joined
        if len(cur) >= MIN_CHARS:
            out.append(cur)
            cur = ""
    return out


def main() -> None:
    rng = random.Random(17_2026)
    docs = []
    for path in sorted((DOC / "html" / "_sources").rglob("*.rst.txt")):
        rel = str(path.relative_to(DOC))
        docs += [(rel, w) for w in windows_of(path.read_text(encoding="utf-8"))]
    news = [("NEWS.gz", w) for w in windows_of(gzip.open(DOC / "NEWS.gz", "rt", encoding="utf-8").read())]
    n_news = int(WINDOWS * NEWS_SHARE)
    picked = sorted(rng.sample(range(len(docs)), WINDOWS - n_news))
    rows = [docs[i] for i in picked] + [news[i] for i in sorted(rng.sample(range(len(news)), n_news))]
    taken = set(picked)
    rich = [i for i, (_, text) in enumerate(docs) if i not in taken and _ADDRESSY.search(text)]
    rows += [docs[i] for i in sorted(rng.sample(rich, RICH))]
    with open(HERE / "windows.jsonl", "w", encoding="utf-8") as f:
        for i, (src, text) in enumerate(rows):
            f.write(json.dumps({"wid": f"w{i:04d}", "source": src, "text": text}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} windows ({sum(len(t) for _, t in rows)} chars) from {len(docs)} + {len(news)} candidates")


if __name__ == "__main__":
    main()
