"""The clean stage's per-batch work per core (`shardforge.clean.stage.clean_batch`: normalisation,
language ID, the four quality groups, FineWeb's recipe settings), with its normalisation's
substitutions in the compiled kernel (`normalize_many`) and in Python (`normalize`, the
reference; what ran before), on the same Arrow batches of real documents, alternated rounds,
one process.

    .venv/bin/python bench/clean_batch.py --docs 4000 --rounds 3

MB/s per core = UTF-8 megabytes / CPU seconds (time.process_time). Kernels are built before
timing. Prints one JSON object and writes bench/results/clean_batch.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1000


def main() -> None:
    from shardforge.clean import text
    from shardforge.clean.stage import clean_batch, rules_from_config
    from shardforge.config import load_config

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / ".bench" / "corpus-20000.jsonl"))
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "clean_batch.json"))
    args = ap.parse_args()
    cfg = load_config(ROOT / "conf" / "recipes" / "fineweb.toml")
    with open(args.corpus, encoding="utf-8") as f:
        rows = [json.loads(line)["text"] for _, line in zip(range(args.docs), f)]
    mb = sum(len(t.encode()) for t in rows) / 1e6
    batches = [pa.RecordBatch.from_pydict({"id": [str(i) for i in range(len(rows[a:a + BATCH]))],
                                           "text": rows[a:a + BATCH], "kind": ["document"] * len(rows[a:a + BATCH])})
               for a in range(0, len(rows), BATCH)]
    rules = rules_from_config(cfg.clean)
    form = cfg.clean.unicode_form if cfg.clean.normalize_unicode else ""

    def once() -> float:
        t = time.process_time()
        for b in batches:
            clean_batch(b, rules, form, cfg.clean, cfg.quality)
        return time.process_time() - t

    clean_batch(batches[0].slice(0, 20), rules, form, cfg.clean, cfg.quality)   # kernels built
    rounds = []
    for _ in range(args.rounds):
        kernel = once()
        text.COMPILED = False
        try:
            python = once()
        finally:
            text.COMPILED = True
        rounds.append({"kernel_mb_s": round(mb / kernel, 2), "python_normalize_mb_s": round(mb / python, 2),
                       "ratio": round(python / kernel, 2)})
    out = {"command": f"bench/clean_batch.py --docs {args.docs} --rounds {args.rounds}", "docs": len(rows),
           "megabytes": round(mb, 1), "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
           f"load {os.getloadavg()[0]:.1f} at the end", "rounds": rounds,
           "median_ratio": statistics.median(r["ratio"] for r in rounds)}
    print(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
