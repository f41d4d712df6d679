"""What annotate mode costs in the quality kernel: `quality.apply` (filter mode: a document
stops at its first failed rule) against `quality.annotate` (every configured group on every
document, all quantities written out), the four groups, on the same Arrow batches of real
documents, alternated rounds, one process.

    .venv/bin/python bench/annotate_kernel.py --corpus .bench/corpus-20000.jsonl --rounds 3

MB/s per core = UTF-8 megabytes / CPU seconds (time.process_time); each round starts with the
kernel's chunk memo cleared. Prints one JSON object and writes bench/results/annotate_kernel.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1000


def main() -> None:
    from shardforge.clean.quality import annotate, apply
    from shardforge.clean.quality.native import kernel
    from shardforge.config import QUALITY_GROUPS, QualitySection

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / ".bench" / "corpus-20000.jsonl"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--docs", type=int, default=10000)
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(args.docs), f)]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    batches = [pa.array(texts[i:i + BATCH], pa.string()) for i in range(0, len(texts), BATCH)]
    q = QualitySection(filters=QUALITY_GROUPS, c4_terminal_punct=False)
    runs: dict[str, list[float]] = {"filter": [], "annotate": []}
    for _ in range(args.rounds):
        for mode, fn in (("filter", apply), ("annotate", annotate)):
            kernel().clear_memo()
            c0 = time.process_time()
            for b in batches:
                fn(b, q)
            runs[mode].append(time.process_time() - c0)
    med = {m: statistics.median(v) for m, v in runs.items()}
    result = {"docs": len(texts), "mb": round(mb, 1), "rounds": args.rounds,
              "cpu_seconds": {m: [round(x, 2) for x in v] for m, v in runs.items()},
              "mb_per_cpu_second": {m: round(mb / s, 1) for m, s in med.items()},
              "annotate_over_filter_time": round(med["annotate"] / med["filter"], 3),
              "load_average": os.getloadavg()[0]}
    print(json.dumps(result, indent=1))
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "annotate_kernel.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
