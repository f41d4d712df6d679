"""Language identification per core: the compiled kernel (`shardforge.clean.langid.identify_many`,
native/src/langid.rs) against py3langid's own `classify` (the same model, the Python DFA walk
and numpy scoring), on the same real documents, alternated rounds, one process.

    .venv/bin/python bench/langid_kernel.py --corpus .bench/corpus-20000.jsonl --docs 5000 --rounds 3

`--against PATH` also times another build of the compiled module (a `_native*.so`, e.g. one built
from an earlier commit) on the same texts in the same rounds, checks that it gives the same bytes,
and reports new / old per round.

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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    from shardforge.clean import langid

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / ".bench" / "corpus-20000.jsonl"))
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", help="another build of shardforge's _native*.so to time alongside")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "langid_kernel.json"))
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"][:langid.MAX_CHARS] for _, line in zip(range(args.docs), f)]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    ref = LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)
    langid.kernel()
    other = _other_kernel(args.against) if args.against else None
    if other is not None:
        encoded = [langid.encode(t) for t in texts]
        offsets = np.cumsum([0] + [len(b) for b in encoded], dtype=np.int64)
        data = b"".join(encoded)
        if other.classify(offsets, data) != langid.kernel().classify(offsets, data):
            raise SystemExit(f"{args.against} gives other results than this build")
    rounds = []
    for _ in range(args.rounds):
        t = time.process_time()
        ours, _ = langid.identify_many(texts)
        k = time.process_time() - t
        if other is not None:
            t = time.process_time()
            other.classify(offsets, data)
            o = time.process_time() - t
            t = time.process_time()
            langid.kernel().classify(offsets, data)
            n = time.process_time() - t
        t = time.process_time()
        theirs = [ref.classify(x)[0] for x in texts]
        p = time.process_time() - t
        rounds.append({"kernel_mb_s": round(mb / k, 2), "py3langid_mb_s": round(mb / p, 2), "ratio": round(p / k, 2),
                       "language_differs": sum(a != b for a, b in zip(ours, theirs))})
        if other is not None:
            rounds[-1].update({"kernel_only_mb_s": round(mb / n, 2), "against_mb_s": round(mb / o, 2),
                               "over_against": round(o / n, 2)})
    out = {"command": f"bench/langid_kernel.py --docs {args.docs} --rounds {args.rounds}"
                      + (f" --against {args.against}" if args.against else ""), "docs": len(texts),
           "megabytes": round(mb, 1), "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
           f"load {os.getloadavg()[0]:.1f}", "rounds": rounds,
           "median_ratio": statistics.median(r["ratio"] for r in rounds)}
    if other is not None:
        out["median_over_against"] = statistics.median(r["over_against"] for r in rounds)
    print(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def _other_kernel(path: str):
    """The LangId of another build of the compiled module, loaded beside this one."""
    import importlib.util

    from shardforge.clean import langid

    spec = importlib.util.spec_from_file_location("_native", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = langid.model()
    return mod.LangId(m.nextmove, m.row, m.out, m.ptc.ravel(), m.pc, m.aliases)


if __name__ == "__main__":
    main()
