"""Annotate once, select many times: what a re-selection costs against the pipeline that made
the curated table.

    .venv/bin/python bench/reselect.py --docs 20000

1. `shardforge pipeline` in annotate mode (ingest, clean with the four quality groups and
   language ID, redact, dedup, curate, build-shards) on a corpus of real files
   (bench/corpus.py, ~6 KB documents), timed as a user runs it (a process of its own).
2. `shardforge build-shards --input OUT/curated` with a stricter `select.where`, timed the same
   way, twice (two expressions).
3. The Delta logs of every table before and after the selections: no new version.
Prints one JSON object (seconds, selected rows, the ratio select / pipeline) and writes it to
bench/results/reselect.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

STAGES = '["ingest", "clean", "redact", "dedup", "curate", "build-shards"]'
GROUPS = '["gopher_repetition", "gopher_quality", "c4", "fineweb"]'
SELECTIONS = ("quality_fail is null",
              "quality_fail is null and language = 'en' and signals.gopher_stop_words >= 4 "
              "and signals.fineweb_line_punct_ratio >= 0.5")


def _timed(argv: list[str], log: Path) -> float:
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                             env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    if rc:
        sys.exit(f"{' '.join(argv[:4])} ... exited {rc}; see {log}")
    return time.monotonic() - t0


def _versions(out: Path) -> dict[str, list[str]]:
    return {t.name: sorted(p.name for p in (t / "_delta_log").glob("*.json"))
            for t in sorted(out.iterdir()) if (t / "_delta_log").is_dir()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--work", default=str(ROOT / ".bench" / "select"))
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = ROOT / ".bench" / f"corpus-{args.docs}.jsonl"
    if not corpus.exists():
        subprocess.check_call([PY, str(ROOT / "bench" / "corpus.py"), "--docs", str(args.docs), "--out", str(corpus)])
    out = work / "out"
    subprocess.call(["rm", "-rf", str(out)] + [str(work / f"sel{i}") for i in range(len(SELECTIONS))])
    cli = [PY, "-m", "shardforge.engine.cli"]
    pipeline = _timed(cli + ["pipeline", "--input", str(corpus), "--output", str(out),
                             "--set", f"pipeline.stages={STAGES}", "--set", f"quality.filters={GROUPS}",
                             "--set", "quality.mode=annotate", "--set", "clean.detect_language=true"],
                      work / "pipeline.log")
    before = _versions(out)
    selections = []
    for i, where in enumerate(SELECTIONS):
        dest = work / f"sel{i}"
        seconds = _timed(cli + ["build-shards", "--input", str(out / "curated"), "--output", str(dest),
                                "--set", f'select.where="{where}"'], work / f"sel{i}.log")
        sel = json.loads((dest / "manifest.json").read_text())["source"]["select"]
        selections.append({**sel, "seconds": round(seconds, 1), "ratio_to_pipeline": round(seconds / pipeline, 3)})
    result = {"docs": args.docs, "corpus_bytes": corpus.stat().st_size, "pipeline_seconds": round(pipeline, 1),
              "selections": selections, "delta_versions_unchanged": _versions(out) == before,
              "cpus": os.cpu_count()}
    print(json.dumps(result, indent=1))
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "reselect.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
