"""Language identification per core: the compiled kernel (`shardforge.clean.langid.identify_many`,
native/src/langid.rs) against py3langid's own `classify` (the same model, the Python DFA walk
and numpy scoring), on the same real documents, alternated rounds, one process.

    .venv/bin/python bench/langid_kernel.py --corpus .bench/corpus-20000.jsonl --docs 5000 --rounds 3

MB/s per core = UTF-8 megabytes of the identified text (the first MAX_CHARS characters of each
document) / CPU seconds (time.process_time). Models are loaded before timing. Also counts the
documents on which the two disagree on the language (expected 0). Prints one JSON object and
writes bench/results/langid_kernel.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    from shardforge.clean import langid

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / ".bench" / "corpus-20000.jsonl"))
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "langid_kernel.json"))
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"][:langid.MAX_CHARS] for _, line in zip(range(args.docs), f)]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    ref = LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)
    langid.kernel()
    rounds = []
    for _ in range(args.rounds):
        t = time.process_time()
        ours, _ = langid.identify_many(texts)
        k = time.process_time() - t
        t = time.process_time()
        theirs = [ref.classify(x)[0] for x in texts]
        p = time.process_time() - t
        rounds.append({"kernel_mb_s": round(mb / k, 2), "py3langid_mb_s": round(mb / p, 2), "ratio": round(p / k, 2),
                       "language_differs": sum(a != b for a, b in zip(ours, theirs))})
    out = {"command": f"bench/langid_kernel.py --docs {args.docs} --rounds {args.rounds}", "docs": len(texts),
           "megabytes": round(mb, 1), "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
           f"load {os.getloadavg()[0]:.1f}", "rounds": rounds,
           "median_ratio": statistics.median(r["ratio"] for r in rounds)}
    print(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
