"""Capacity of the whole FineWeb recipe from whole runs: every stage's per-core rate, how its
time grows with the input, and the peak memory of the process tree.

    .venv/bin/python bench/capacity.py --docs 100000 200000 1000000 [--no-filters-docs 100000]

(Needs `make setup`: the venv and Delta's jars at .jars, or SHARDFORGE_JARS naming a folder.)

Each size is one fresh `shardforge pipeline --conf conf/recipes/fineweb.toml` process (bench/
recipe.py's `run_ours`: the same corpus from bench/corpus.py dealt into 8 JSONL files, a 32k
byte-level BPE trained on the corpus's first 2,000 documents, local[2], no memory setting: the
embedded session's default heap). Peak memory is the process tree's (the CLI's Python, the JVM,
its Python workers), polled from /proc every 0.5 s: summed PSS, which counts pages shared by
forked workers once.

Per stage and size: the documents that entered it (its report's `rows_in`), its seconds, and its
rate in documents per second per core (2 cores). Between two sizes a stage's growth exponent
is log(t2/t1) / log(n2/n1) on the documents that entered it (1: linear; below 1: a fixed part
still shows; above 1: worse than linear), and its marginal rate is (n2 - n1) / (t2 - t1): the
cost of one more document once the fixed part is paid, which is what a 10^9-document build sees.

`--no-filters-docs` adds runs with language ID and the four rule groups off, so that redact,
dedup, tokenize, curate and build-shards see every document (on this corpus, mostly real source
files, the rules keep about 0.3%, and the later stages would be measured on a few thousand rows).

Results: --out's .json (every run) and .md (the tables BENCHMARKS.md quotes).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from corpus import ensure_corpus  # noqa: E402
from recipe import run_ours, split_corpus  # noqa: E402

CORES = len(os.sched_getaffinity(0))
STAGES = ("ingest", "clean", "redact", "dedup", "tokenize", "curate", "build-shards")


def tokenizer_for(corpus: Path, docs: int, vocab: int) -> Path:
    tok = ROOT / ".bench" / f"tokenizer-{vocab}-corpus-{docs}.json"
    if not tok.exists():
        from shardforge.tokenize.stage import train_bpe
        texts = []
        with open(corpus, encoding="utf-8") as fh:
            for line in fh:
                texts.append(json.loads(line)["text"])
                if len(texts) == 2000:
                    break
        train_bpe(texts, str(tok), vocab_size=vocab)
    return tok


def one_run(docs: int, filters: bool, work: Path, vocab: int) -> dict:
    corpus = ensure_corpus(ROOT / ".bench" / f"corpus-{docs}.jsonl", docs)
    tok = tokenizer_for(corpus, docs, vocab)
    inp = split_corpus(corpus, ROOT / ".bench" / f"recipe-input-{docs}")
    tag = f"{docs}-{'filters' if filters else 'nofilters'}"
    (work / "logs").mkdir(parents=True, exist_ok=True)
    res = run_ours(inp, work / "ours", tok, "", work / "logs" / tag, filters)
    res.update(docs=docs, filters=filters, megabytes=round(corpus.stat().st_size / 1e6, 1))
    print(f"{tag}: {res['wall_s']} s, exit {res['exit']}, peak PSS {res.get('peak_pss_gb')} GB", flush=True)
    return res


def growth(a: dict, b: dict) -> dict:
    """Per stage between two runs of the same kind: exponent and marginal rate."""
    out = {}
    for st in STAGES:
        if st not in a.get("stages", {}) or st not in b.get("stages", {}):
            continue
        (n1, t1), (n2, t2) = ((x["stages"][st]["rows_in"], x["stages"][st]["seconds"]) for x in (a, b))
        if not (n1 and n2 and t1 and t2) or n2 == n1:
            continue
        out[st] = {"rows": [n1, n2], "seconds": [t1, t2],
                   "exponent": round(math.log(t2 / t1) / math.log(n2 / n1), 2),
                   "marginal_docs_per_s_per_core": round((n2 - n1) / (t2 - t1) / CORES, 1) if t2 > t1 else None}
    return out


def rate(run: dict, st: str) -> float | None:
    s = run["stages"].get(st)
    return round(s["rows_in"] / s["seconds"] / CORES, 1) if s and s["seconds"] and s["rows_in"] else None


def markdown(r: dict) -> str:
    ok = [x for x in r["runs"] if x["exit"] == 0]
    lines = [f"# Capacity of the recipe from whole runs ({r['commit']})", "",
             f"Command: `{r['command']}`", f"Machine: {r['machine']}", ""]
    lines += ["| run | documents | MB | wall s | peak PSS GB | " + " | ".join(STAGES) + " |",
              "|---|---:|---:|---:|---:|" + "---:|" * len(STAGES)]
    for x in ok:
        cells = []
        for st in STAGES:
            s = x["stages"].get(st)
            cells.append(f"{s['seconds']:.1f} s / {s['rows_in']:,}" if s else "-")
        lines.append(f"| {'recipe' if x['filters'] else 'no filters'} | {x['docs']:,} | {x['megabytes']:,} | "
                     f"{x['wall_s']} | {x['peak_pss_gb']} | " + " | ".join(cells) + " |")
    lines += ["", "Cells: stage seconds / documents that entered the stage.", "",
              "Documents per second per core (rows in / seconds / cores):", "",
              "| run | documents | " + " | ".join(STAGES) + " |", "|---|---:|" + "---:|" * len(STAGES)]
    for x in ok:
        lines.append(f"| {'recipe' if x['filters'] else 'no filters'} | {x['docs']:,} | "
                     + " | ".join(str(rate(x, st) or "-") for st in STAGES) + " |")
    for kind, g in r.get("growth", {}).items():
        lines += ["", f"Growth, {kind} (exponent on the documents entering the stage; marginal rate per core):", "",
                  "| stage | documents | seconds | exponent | marginal docs/s/core |", "|---|---|---|---:|---:|"]
        for st, v in g.items():
            lines.append(f"| {st} | {v['rows'][0]:,} -> {v['rows'][1]:,} | {v['seconds'][0]} -> {v['seconds'][1]} | "
                         f"{v['exponent']} | {v['marginal_docs_per_s_per_core'] or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--no-filters-docs", type=int, nargs="*", default=[])
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sf-capacity"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "capacity")
    ap.add_argument("--render", action="store_true", help="no runs: rewrite the .md from --out's .json")
    args = ap.parse_args(argv)
    if args.render:
        r = json.loads(args.out.with_suffix(".json").read_text())
        args.out.with_suffix(".md").write_text(markdown(r))
        print(markdown(r))
        return 0
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    r = {"command": "python bench/capacity.py " + " ".join(argv if argv is not None else sys.argv[1:]),
         "commit": commit,
         "machine": f"{CORES} cores (shared), {platform.machine()}, Python {platform.python_version()}, "
                    f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB, "
                    "Spark local[2] with the default heap",
         "runs": [], "growth": {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plan = [(d, True) for d in sorted(args.docs)] + [(d, False) for d in sorted(args.no_filters_docs)]
    for docs, filters in plan:
        r["runs"].append(one_run(docs, filters, args.work.resolve(), args.vocab))
        args.out.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")    # partial results survive
    for filters, kind in ((True, "recipe"), (False, "no filters")):
        runs = [x for x in r["runs"] if x["filters"] == filters and x["exit"] == 0]
        pairs = list(zip(runs, runs[1:])) + ([(runs[0], runs[-1])] if len(runs) > 2 else [])
        for a, b in pairs:
            r["growth"][f"{kind} {a['docs']:,} -> {b['docs']:,}"] = growth(a, b)
    args.out.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(r))
    print(markdown(r))
    return 0 if all(x["exit"] == 0 for x in r["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
