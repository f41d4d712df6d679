"""dedup's signature kernels alone (no Spark), this checkout against another checkout's
`lib/dedup/minhash.py`, on the same documents: seconds per step, and a check that both give the
same signatures.

    python bench/dedup_kernels.py --corpus /work/bench18/corpus-100k.jsonl --before /work/wt-before [--docs 4096]

Documents are normalised (`lower_alnum`) first and cut into the stage's 512-row sub-batches;
each side runs tokenise, shingle hashing and the signatures (128 permutations) on every
sub-batch, three rounds alternated, median per step; one process, one core.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

from shardforge.dedup import minhash as current
from shardforge.dedup.normalize import normalize


def load(path: Path):
    spec = importlib.util.spec_from_file_location("minhash_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["minhash_before"] = mod          # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def steps(mh, subs, params) -> dict[str, float]:
    t = {"tokenise": 0.0, "shingle hashing": 0.0, "permutations": 0.0}
    for sub in subs:
        t0 = time.perf_counter()
        toks = mh.tokenize(sub)
        t1 = time.perf_counter()
        mh.shingle_hashes(sub, params.shingle_size, toks)
        t2 = time.perf_counter()
        mh.signatures(sub, params, toks)          # shingles again, then the permutations
        t3 = time.perf_counter()
        t["tokenise"] += t1 - t0
        t["shingle hashing"] += t2 - t1
        t["permutations"] += (t3 - t2) - (t2 - t1)
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--before", type=Path, required=True, help="a checkout whose lib/dedup/minhash.py to compare")
    ap.add_argument("--docs", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    before = load(args.before / "lib" / "dedup" / "minhash.py")
    with open(args.corpus) as fh:
        docs = [normalize(json.loads(line)["text"], "lower_alnum") for _, line in zip(range(args.docs), fh)]
    subs = [pa.array(docs[i:i + 512]) for i in range(0, len(docs), 512)]
    params = current.MinHashParams(num_perm=128, shingle_size=5, bands=14, rows=9, seed=0)
    same = all((before.signatures(s, params)[0] == current.signatures(s, params)[0]).all() for s in subs)
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        runs["before"].append(steps(before, subs, params))
        runs["after"].append(steps(current, subs, params))
    print(f"{len(docs):,} documents, {sum(map(len, docs)) / 1e6:.1f} M normalised characters; "
          f"median of {args.rounds}; identical signatures: {same}")
    print("| step | before (s) | after (s) | speed-up |\n|---|---:|---:|---:|")
    totals = {}
    for name in runs["after"][0]:
        b = statistics.median(r[name] for r in runs["before"])
        a = statistics.median(r[name] for r in runs["after"])
        totals[name] = (b, a)
        print(f"| {name} | {b:.3f} | {a:.3f} | {b / a:.1f}x |")
    b, a = sum(x[0] for x in totals.values()), sum(x[1] for x in totals.values())
    print(f"| **signature kernel** | {b:.3f} | {a:.3f} | {b / a:.1f}x |")


if __name__ == "__main__":
    main()
