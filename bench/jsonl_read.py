"""Reading JSONL documents, part by part: the lines from the bounded Python reader, then the
parse into documents and rejects, then a stage's writes (kept rows and rejects as Parquet, the
shared frame persisted while both are written, as the runner does).

    .venv/bin/python bench/jsonl_read.py [--docs 20000] [--rounds 3]

One embedded local[2] session; variants alternate within a round. Variants (seconds of wall
time, medians over the rounds):
- `lines`: the reader's lines (with the key scan) into the JVM, nothing else (the floor);
- `spark.read.json`: Spark's own JSON reader on the same file, two string columns (a reference
  a user might reach for; it has no per-line reasons, no record cap, no other keys kept);
- `kept: before` / `kept: now`: the documents of `_parse_jsonl`, Spark parsing every line (its
  other keys found by the reader's compiled scan, as on 2026-12-04 evening) and the reader
  decoding the named fields itself where JSON leaves no doubt (`named_fields`), Spark parsing
  only the lines it declines;
- `stage: before` / `stage: now`: the read stage's writes the same two ways: kept rows and
  rejects as Parquet with the shared frame persisted.
(Earlier figures in BENCHMARKS.md compared other variants: the parse before 2026-12-03 evening,
and Spark's json_object_keys against the scan on 2026-12-04, in this script at those commits.)
Prints a table and writes bench/results/jsonl_read.json.
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    from session_bench import session_bench

    with session_bench(__doc__.splitlines()[0], "sf-jsonl-") as (args, corpus, spark, work):
        run(args, corpus, spark, work)


def run(args, corpus, spark, work) -> None:
    from pyspark import StorageLevel
    from session_bench import machine, save

    from shardforge.config import IngestSection
    from shardforge.ingest.readers import spark as pyread
    from shardforge.ingest.readers.files import InputFile
    from shardforge.ingest.stage import _parse_jsonl, known_keys, named_keys

    cfg = IngestSection()
    files = [InputFile(str(corpus), corpus.name, "jsonl")]
    out = work / "out"

    def lines(named=named_keys(cfg)):
        return pyread.jsonl(spark, files, cfg.max_record_bytes, known_keys(cfg), named)

    def noop(df):
        df.write.format("noop").mode("overwrite").save()

    def stage(kept, rejected, shared):
        shared.persist(StorageLevel.MEMORY_AND_DISK)
        kept.write.parquet(str(out / "kept"))
        rejected.write.parquet(str(out / "rejected"))
        shared.unpersist()

    def stage_of(named):
        res = _parse_jsonl(lines(named), cfg)
        stage(res.kept, res.rejected, res.shared[0])

    variants = {
        "lines": lambda: noop(lines(())),
        "spark.read.json": lambda: noop(spark.read.schema("id string, text string").json(str(corpus))),
        "kept: before": lambda: noop(_parse_jsonl(lines(()), cfg).kept),
        "kept: now": lambda: noop(_parse_jsonl(lines(), cfg).kept),
        "stage: before": lambda: stage_of(()),
        "stage: now": lambda: stage_of(named_keys(cfg)),
    }
    # the outputs must not differ: same documents either way
    a, b = _parse_jsonl(lines(()), cfg).kept, _parse_jsonl(lines(), cfg).kept
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0, "before and now differ"
    times: dict[str, list[float]] = {k: [] for k in variants}
    variants["lines"]()                               # warm-up: the JVM's first jobs, the Python workers
    for _ in range(args.rounds):
        for name, fn in variants.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
            shutil.rmtree(out, ignore_errors=True)
    mb = os.path.getsize(corpus) / 1e6
    med = {k: statistics.median(v) for k, v in times.items()}

    def ratio(x, y):
        return round(statistics.median(p / s for p, s in zip(times[x], times[y])), 2)

    result = {"docs": args.docs, "corpus_mb": round(mb, 1), "rounds": args.rounds, "machine": machine(),
              "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
              "median_s": {k: round(v, 2) for k, v in med.items()},
              "kept_before_over_now": ratio("kept: before", "kept: now"),
              "stage_before_over_now": ratio("stage: before", "stage: now"),
              "spark_read_json_over_kept_now": ratio("spark.read.json", "kept: now")}
    print(f"{args.docs} documents, {mb:.1f} MB of JSONL, local[2], medians of {args.rounds} (s):")
    for k, v in med.items():
        print(f"  {k:16s} {v:6.2f}  (over lines: {v - med['lines']:+.2f})")
    print(f"  same-round ratios: kept before/now {result['kept_before_over_now']}x, "
          f"stage before/now {result['stage_before_over_now']}x, "
          f"spark.read.json / kept now {result['spark_read_json_over_kept_now']}x")
    save("jsonl_read", result)


if __name__ == "__main__":
    main()
