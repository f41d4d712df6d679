"""Real text from the Debian packages on this machine, for the quality and language-ID
benchmarks: manual pages (roff markup stripped) and HTML documentation (main text by
shardforge's extractor). Deterministic: sorted file lists, even strides, no randomness.

    .venv/bin/python bench/realtext.py --out .bench/quality/corpus.jsonl   # writes the quality corpus

Set-up (Debian): apt-get install python3-doc manpages-de manpages-fr manpages-es manpages-it
manpages-nl manpages-pl manpages-pt-br manpages-ru manpages-ja manpages-zh manpages-cs manpages-sv
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MAN = Path("/usr/share/man")
DOC = Path("/usr/share/doc")
ROFF_CHARS = {":a": "ä", ":o": "ö", ":u": "ü", ":A": "Ä", ":O": "Ö", ":U": "Ü", "oa": "å", "oA": "Å", "ss": "ß",
              "'e": "é", "`e": "è", "^e": "ê", "'a": "á", "`a": "à", "^a": "â", "'o": "ó", "^o": "ô", ",c": "ç",
              "~n": "ñ", "'i": "í", "'u": "ú", "`u": "ù", "~a": "ã", "~o": "õ", "<<": "«", ">>": "»"}
_ACCENTS = re.compile(r"\\\[?\(?(" + "|".join(re.escape(k) for k in ROFF_CHARS) + r")\]?")
_ESC = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\\(..|\\\[[^\]]*\]|\\[-&/,|^ e0~]|\\\*\(?..?|\\s[-+]?\d")


def man_paragraphs(path: Path) -> list[str]:
    """The paragraphs of one manual page: text lines joined, roff requests and escapes removed."""
    try:
        src = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    except (OSError, EOFError):
        return []
    out, para = [], []
    for line in src.splitlines() + [".PP"]:
        if line.startswith((".", "'")):
            if para:
                out.append(" ".join(para))
                para = []
            continue
        text = _ESC.sub("", _ACCENTS.sub(lambda m: ROFF_CHARS[m.group(1)], line)).replace("\\", "").strip()
        if text:
            para.append(text)
    return out


def man_pages(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.gz") if p.is_file() and not p.is_symlink())


def stride(items: list, n: int) -> list:
    """`n` items at an even stride (all of them when there are fewer)."""
    return items if n <= 0 or n >= len(items) else [items[i * len(items) // n] for i in range(n)]


def documents(man1: int = 4000, translated: int = 200) -> list[dict]:
    """The quality corpus: every HTML page under /usr/share/doc (main text), manual pages of
    sections 2-8 and `man1` of section 1, `translated` pages of each translated language,
    every copyright file and README. One document per file, paragraphs separated by blank lines."""
    from shardforge.ingest.extract import extract_page

    docs = []
    for p in sorted(DOC.rglob("*.html")):
        if p.is_file() and not p.is_symlink():
            docs.append({"source": str(p), "text": extract_page(p.read_bytes(), "text/html").text})
    pages = stride(man_pages(MAN / "man1"), man1)
    for sec in ("man2", "man3", "man4", "man5", "man6", "man7", "man8"):
        pages += man_pages(MAN / sec)
    for lang in sorted(d.name for d in MAN.iterdir() if d.is_dir() and not d.name.startswith("man")):
        pages += stride(man_pages(MAN / lang / "man1"), translated)
    for p in pages:
        docs.append({"source": str(p), "text": "\n\n".join(man_paragraphs(p))})
    for p in sorted(DOC.glob("*/copyright")) + sorted(DOC.glob("*/README*")):
        if p.is_file() and not p.name.endswith(".gz"):
            docs.append({"source": str(p), "text": p.read_bytes().decode("utf-8", "replace")})
    return [d for d in docs if d["text"].strip()]


def main(argv=None) -> int:
    from shardforge.clean.text import normalize

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--man1", type=int, default=4000)
    args = ap.parse_args(argv)
    docs = documents(args.man1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for i, d in enumerate(docs):
            text = normalize(d["text"])
            if text:
                fh.write(json.dumps({"id": f"doc-{i:05d}", "source": d["source"], "text": text},
                                    ensure_ascii=False) + "\n")
    print(f"{len(docs)} documents -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
