"""The rejects table's write, part by part: documents rejected by a stage become REJECT rows
whose `record` is the whole row as JSON, redacted and cleared of URL credentials, then a Delta
table (`rejects_for_output` and `append_rejects`, as the runner writes them). On a web recipe
most documents are rejected by clean, so this write handles about the whole corpus.

    .venv/bin/python bench/rejects_write.py [--docs 20000] [--rounds 3]

One embedded local[2] session; each variant writes the same rejects to a fresh folder; variants
alternate within a round. Variants (seconds of wall time, medians over the rounds):
- `parquet`: the REJECT rows as Parquet, nothing else (the floor);
- `urls: patterns` / `urls: shardforge`: the URL-credential pass on `record`, `detail` and
  `source` with Spark's regexp_replace of USERINFO_RE and PARAM_RE on every row (how it ran
  before 2026-12-03) against `sanitize_urls` (the userinfo pattern anchored on its `://`, each
  pattern only where its literal is);
- `redact`: the [redact] section's redactor over `record` and `detail` (Arrow batches in Python);
- `rejects table: two passes`: the whole step as it ran before 2026-12-04 evening (the records
  redacted in Python, then `sanitize_urls` in the JVM), into a fresh Delta table;
- `rejects table`: `append_rejects(rejects_for_output(...))`, the whole step now (the URL
  credentials cleared in the Python pass that redacts, by the compiled kernel), into a fresh Delta table.
Prints a table and writes bench/results/rejects_write.json.
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

    with session_bench(__doc__.splitlines()[0], "sf-rejects-") as (args, corpus, spark, work):
        run(args, corpus, spark, work)


def run(args, corpus, spark, work) -> None:
    from pyspark.sql import functions as F
    from session_bench import machine, save

    from shardforge.config import Config, IngestSection
    from shardforge.curated.tables import append_rejects
    from shardforge.ingest.stage import read_documents
    from shardforge.redact.privacy import PARAM_RE, REDACTED, USERINFO_RE, sanitize_urls, without_url_credentials
    from shardforge.redact.stage import redact_columns, rejects_for_output
    from shardforge.stage import rejects

    read_documents(spark, [str(corpus)], IngestSection()).kept.write.parquet(str(work / "docs"))
    docs = spark.read.parquet(str(work / "docs"))
    cfg = Config()
    rej = rejects(docs, "clean", "filter:bench")
    cols = ("record", "detail", "source")

    def patterns(df):
        old = lambda c: F.regexp_replace(F.regexp_replace(c, USERINFO_RE, f"$1{REDACTED}@"), PARAM_RE, f"$1{REDACTED}")
        return df.select(*[old(F.col(c)).alias(c) if c in cols else F.col(c) for c in df.columns])

    def ours(df):
        return df.select(*[sanitize_urls(F.col(c)).alias(c) if c in cols else F.col(c) for c in df.columns])

    out = work / "out"
    variants = {
        "parquet": lambda: rej.write.parquet(str(out)),
        "urls: patterns": lambda: patterns(rej).write.parquet(str(out)),
        "urls: shardforge": lambda: ours(rej).write.parquet(str(out)),
        "redact": lambda: redact_columns(rej, ("record", "detail"), cfg.redact).write.parquet(str(out)),
        "rejects table: two passes": lambda: append_rejects(spark, without_url_credentials(
            redact_columns(rej, ("record", "detail"), cfg.redact), cols), str(out)),
        "rejects table": lambda: append_rejects(spark, rejects_for_output(rej, cfg), str(out)),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    variants["parquet"]()                              # warm-up: the JVM's first jobs, the Python workers
    shutil.rmtree(out)
    for _ in range(args.rounds):
        for name, run in variants.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
            shutil.rmtree(out)
    mb = os.path.getsize(corpus) / 1e6
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = statistics.median(p / s for p, s in zip(times["urls: patterns"], times["urls: shardforge"]))
    step = statistics.median(p / s for p, s in zip(times["rejects table: two passes"], times["rejects table"]))
    result = {"docs": args.docs, "corpus_mb": round(mb, 1), "rounds": args.rounds,
              "machine": machine(),
              "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
              "median_s": {k: round(v, 2) for k, v in med.items()},
              "urls_patterns_over_shardforge": round(ratio, 2),
              "rejects_table_two_passes_over_now": round(step, 2),
              "urls_extra_s": {"patterns": round(med["urls: patterns"] - med["parquet"], 2),
                               "shardforge": round(med["urls: shardforge"] - med["parquet"], 2)}}
    print(f"{args.docs} rejected documents, {mb:.1f} MB, local[2], medians of {args.rounds} (s):")
    for k, v in med.items():
        print(f"  {k:26s} {v:6.2f}  (over parquet: {v - med['parquet']:+.2f})")
    print(f"  URL pass, same-round ratio patterns / shardforge: {ratio:.2f}x")
    print(f"  the whole step, same-round ratio two passes / now: {step:.2f}x")
    save("rejects_write", result)


if __name__ == "__main__":
    main()
