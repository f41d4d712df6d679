"""The clean stage's normalisation kernel (`normalize_texts`, native/src/normalize.rs) per core,
against another build of the compiled module in the same rounds (after checking both give the
same bytes): the texts NFC-normalised first, as `normalize_many` hands them over.

    .venv/bin/python bench/normalize_kernel.py --against <other _native .so> [--docs 20000] [--rounds 5]

MB/s per core = UTF-8 megabytes / CPU seconds (time.process_time). Prints one JSON object and
writes bench/results/normalize_kernel.json.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import time
import unicodedata
from itertools import accumulate
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def load(path: str):
    spec = importlib.util.spec_from_file_location("_native", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / ".bench" / "corpus-200000.jsonl"))
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", required=True, help="another build of shardforge's _native module (.so)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "normalize_kernel.json"))
    args = ap.parse_args()
    from shardforge import _native as new

    old = load(args.against)
    with open(args.corpus, encoding="utf-8") as f:
        enc = [unicodedata.normalize("NFC", json.loads(line)["text"]).encode() for _, line in zip(range(args.docs), f)]
    offs = np.fromiter(accumulate(map(len, enc), initial=0), dtype=np.int64, count=len(enc) + 1)
    data = b"".join(enc)
    mb = len(data) / 1e6
    if old.normalize_texts(offs, data) != new.normalize_texts(offs, data):
        raise SystemExit("the two builds give different bytes")
    rounds = []
    for _ in range(args.rounds):
        t = time.process_time()
        old.normalize_texts(offs, data)
        a = time.process_time() - t
        t = time.process_time()
        new.normalize_texts(offs, data)
        b = time.process_time() - t
        rounds.append({"against_mb_s": round(mb / a, 1), "this_mb_s": round(mb / b, 1), "ratio": round(a / b, 2)})
    out = {"command": f"bench/normalize_kernel.py --docs {args.docs} --rounds {args.rounds} --against {args.against}",
           "docs": len(enc), "megabytes": round(mb, 1),
           "machine": f"{os.cpu_count()} cores, {platform.machine()}, load {os.getloadavg()[0]:.1f} at the end",
           "rounds": rounds, "median_ratio": statistics.median(r["ratio"] for r in rounds)}
    print(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
