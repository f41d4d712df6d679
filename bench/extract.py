"""HTML main-text extraction: resiliparse vs trafilatura on real pages (Debian's HTML docs).

    .venv/bin/python bench/extract.py [--root /usr/share/doc] [--sample 200] [--rounds 3]

Every `*.html` under --root (python3-doc's 1,500+ pages when installed) is read once; each
library extracts the main text of every page, in alternated rounds (resiliparse, trafilatura,
trafilatura, resiliparse, ...), and the median pages/s per library is reported with the load
average. Agreement is the token-level F1 between the two libraries' outputs per page
(tokens = whitespace-split words; a multiset overlap, as in the extraction benchmarks of
Barbaresi and of Bevendorff et al.), reported as mean and median over pages, with the share
of pages on which one library returns nothing. Also timed: shardforge's whole extraction
path (`shardforge.ingest.extract.extract_page`, charset detection included).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pages(root: Path, sample: int) -> list[tuple[str, str]]:
    """Every page under root, or `sample` of them taken at an even stride (deterministic)."""
    found = [p for p in sorted(root.rglob("*.html")) if p.is_file() and not p.is_symlink()]
    if sample and sample < len(found):
        found = [found[i * len(found) // sample] for i in range(sample)]
    return [(str(p), p.read_bytes().decode("utf-8", "replace")) for p in found]


def resiliparse_text(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, preserve_formatting=True, alt_texts=False)


def trafilatura_text(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html, include_comments=False, include_tables=True, deduplicate=False,
                               favor_recall=False) or ""


def f1(a: str, b: str) -> float:
    ta, tb = Counter(a.split()), Counter(b.split())
    if not ta and not tb:
        return 1.0
    common = sum((ta & tb).values())
    if not common:
        return 0.0
    p, r = common / sum(ta.values()), common / sum(tb.values())
    return 2 * p * r / (p + r)


def timed(fn, docs) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    out = [fn(h) for _, h in docs]
    return time.perf_counter() - t0, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/usr/share/doc")
    ap.add_argument("--sample", type=int, default=0, help="pages taken at an even stride (0 = all)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "extract.json"))
    args = ap.parse_args(argv)
    from importlib.metadata import version

    from shardforge.ingest.extract import extract_page

    docs = pages(Path(args.root), args.sample)
    mb = sum(len(h.encode()) for _, h in docs) / 1e6
    print(f"{len(docs)} pages, {mb:.1f} MB of HTML under {args.root}", flush=True)
    libs = {"resiliparse": resiliparse_text, "trafilatura": trafilatura_text,
            "shardforge.extract_page": lambda h: extract_page(h.encode(), "text/html").text}
    secs: dict[str, list[float]] = {k: [] for k in libs}
    outs: dict[str, list[str]] = {}
    order = list(libs)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            s, out = timed(libs[name], docs)
            secs[name].append(s)
            outs[name] = out
            print(f"round {r} {name}: {s:.2f} s ({len(docs) / s:.0f} pages/s)", flush=True)
    scores = [f1(a, b) for a, b in zip(outs["resiliparse"], outs["trafilatura"])]
    result = {
        "pages": len(docs), "html_mb": round(mb, 1), "root": args.root, "rounds": args.rounds,
        "load_average": os.getloadavg(), "cpus": os.cpu_count(),
        "versions": {"resiliparse": version("resiliparse"), "trafilatura": version("trafilatura")},
        "median_seconds": {k: round(statistics.median(v), 3) for k, v in secs.items()},
        "pages_per_second": {k: round(len(docs) / statistics.median(v), 1) for k, v in secs.items()},
        "f1_resiliparse_vs_trafilatura": {"mean": round(statistics.mean(scores), 4),
                                          "median": round(statistics.median(scores), 4),
                                          "share_below_0.5": round(sum(s < 0.5 for s in scores) / len(scores), 4)},
        "empty_output_share": {k: round(sum(not o.strip() for o in outs[k]) / len(docs), 4) for k in outs},
        "words_per_page_median": {k: statistics.median(len(o.split()) for o in outs[k]) for k in outs},
    }
    result["speed_ratio_resiliparse_over_trafilatura"] = round(
        result["pages_per_second"]["resiliparse"] / result["pages_per_second"]["trafilatura"], 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
