"""A realistic benchmark corpus from text files on this machine (source code, docs, licences).

    python bench/corpus.py --docs 20000 --out .bench/corpus-20k.jsonl

Documents are 1-20 KB (log-normal, mean about 6 KB) spans of real files, cut at line
boundaries, in a deterministic walk over the files (sorted paths, fixed seed): the same
arguments give the same bytes. When the files run out, later passes build each document
from line blocks of two different files, so documents stay distinct.
Planted on top, with their labels in `<out>.planted.json` (written before any stage runs):
- near duplicates (`near_fraction`, default 10%): a copy of an earlier document with a
  graded share of its words replaced, deleted or inserted (1%, 3%, 5%, 10%, 20%, 30%);
- exact duplicates (`exact_fraction`, default 2%): an earlier document again;
- PII (`pii_fraction`, default 5%): an e-mail address and a phone number in a line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

ROOTS = ("/usr/share/common-licenses", "/usr/share/doc", "/usr/lib/python3", "/usr/share/perl",
         "/root/.pyenv/versions/3.11.7/lib/python3.11", "/usr/local/lib/python3.11")
EXTS = (".py", ".txt", ".rst", ".md", ".html", ".pm", ".pod", ".c", ".h", ".java", ".js")
EDIT_RATES = (0.01, 0.03, 0.05, 0.10, 0.20, 0.30)
VOCAB = ("data", "shard", "model", "value", "result", "window", "buffer", "stream", "record", "index")


def source_files(roots=ROOTS) -> list[str]:
    files = []
    for root in roots:
        for d, dirs, names in os.walk(root):
            dirs.sort()
            for n in sorted(names):
                p = os.path.join(d, n)
                if (n.endswith(EXTS) or n == "copyright") and os.path.isfile(p) and os.path.getsize(p) > 2000:
                    files.append(p)
    return files


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines(keepends=True)
    except (UnicodeDecodeError, OSError):
        return []


def _target(rng: random.Random) -> int:
    return int(min(20_000, max(1_000, rng.lognormvariate(8.5, 0.6))))   # median ~4.9 KB, mean ~6 KB


def _spans(files: list[str], rng: random.Random):
    """Endless distinct texts: pass 0 cuts files into spans; later passes interleave blocks
    of two files."""
    p = 0
    while True:
        order = files[:] if p == 0 else rng.sample(files, len(files))
        if p == 0:
            for f in order:
                lines, i = _lines(f), 0
                while i < len(lines):
                    want, text = _target(rng), []
                    size = 0
                    while i < len(lines) and size < want:
                        text.append(lines[i])
                        size += len(lines[i])
                        i += 1
                    if size >= 1000:
                        yield "".join(text)
        else:
            for a, b in zip(order[::2], order[1::2]):
                la, lb = _lines(a), _lines(b)
                if not la or not lb:
                    continue
                want, text, size, k = _target(rng), [], 0, 0
                while size < want and k < 400:
                    src = la if k % 2 == 0 else lb
                    start = rng.randrange(len(src))
                    block = "".join(src[start:start + 8])
                    text.append(block)
                    size += len(block)
                    k += 1
                if size >= 1000:
                    yield "".join(text)
        p += 1


def edit(text: str, rate: float, rng: random.Random) -> str:
    """Replace, delete or insert a `rate` share of the words (whitespace kept where untouched)."""
    words = text.split(" ")
    out = []
    for w in words:
        r = rng.random()
        if r < rate / 3:
            continue                                   # delete
        if r < 2 * rate / 3:
            out.append(rng.choice(VOCAB))              # replace
            continue
        out.append(w)
        if r < rate:
            out.append(rng.choice(VOCAB))              # insert
    return " ".join(out)


def make_corpus(out: Path, docs: int, *, seed: int = 0, near_fraction: float = 0.10, exact_fraction: float = 0.02,
                pii_fraction: float = 0.05) -> Path:
    rng = random.Random(seed)
    spans = _spans(source_files(), random.Random(seed + 1))
    planted = {"near": [], "exact": []}
    texts: list[str] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    with open(str(out) + ".tmp", "w", encoding="utf-8") as fh:
        for i in range(docs):
            r = rng.random()
            if texts and r < near_fraction:
                j = rng.randrange(len(texts))
                rate = EDIT_RATES[i % len(EDIT_RATES)]
                text = edit(texts[j], rate, rng)
                planted["near"].append({"id": f"doc-{i:07d}", "of": f"doc-{j:07d}", "edit_rate": rate})
            elif texts and r < near_fraction + exact_fraction:
                j = rng.randrange(len(texts))
                text = texts[j]
                planted["exact"].append({"id": f"doc-{i:07d}", "of": f"doc-{j:07d}"})
            else:
                text = next(spans)
                if rng.random() < pii_fraction:
                    text += f"\nContact: user{i}@example-mail.org or +1 415 555 {i % 10000:04d}\n"
            texts.append(text)
            total += len(text)
            fh.write(json.dumps({"id": f"doc-{i:07d}", "text": text, "source": "bench"}, ensure_ascii=False) + "\n")
    os.replace(str(out) + ".tmp", out)
    Path(str(out) + ".planted.json").write_text(json.dumps(planted))
    print(f"corpus: {docs} documents, {total / 1e6:.1f} M characters (mean {total / docs / 1000:.1f} K), "
          f"{len(planted['near'])} near and {len(planted['exact'])} exact duplicates planted -> {out}")
    return out


def ensure_corpus(out: Path, docs: int, **kw) -> Path:
    """The corpus at `out`, made once (same arguments, same bytes)."""
    if not out.exists():
        make_corpus(out, docs, **kw)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--out", type=Path, default=Path(".bench/corpus-20k.jsonl"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    make_corpus(args.out, args.docs, seed=args.seed)


if __name__ == "__main__":
    main()
