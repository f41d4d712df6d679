"""How much of a cold run's ingest + clean a fused read-and-clean pass would save: one Spark
job whose Python tasks read the JSONL byte ranges, decode the named fields and run the clean
stage's kernels in the same process, so only the kept documents' text and one short row per
rejected document come back to the JVM. A probe for a next step, not a stage: it assumes every
line decodes (it stops otherwise; true of the recipe inputs), checks no id, writes no REJECT
rows and keeps no checkpoint between the two stages. It prints its kept and rejected counts by
reason, to compare with a `shardforge pipeline` run's clean entry in report.json, and the
seconds from the session's start to the counts.

    SHARDFORGE_JARS=.jars python bench/fused_probe.py --input .bench/recipe-input-20000
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import pyarrow as pa


OUT = pa.schema([("id", pa.string()), ("text", pa.string()), ("reason", pa.string())])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", required=True)
    ap.add_argument("--conf", default="conf/recipes/fineweb.toml")
    ap.add_argument("--out", default="/tmp/sf-fused-probe")
    args = ap.parse_args()
    t_start = time.monotonic()

    from shardforge.clean.stage import REASON_COL, clean_batch, rules_from_config
    from shardforge.config import load_config
    from shardforge.engine.session import get_spark, input_size, warm_up
    from shardforge.ingest.readers.files import list_inputs
    from shardforge.ingest.readers.spark import _spark_schema, named_fields, split_lines, splits_frame

    cfg = load_config(args.conf, ['spark.master="local[2]"'])
    spark = get_spark(cfg.spark, input_bytes=input_size([args.input]))
    warm = warm_up(spark, 2)
    t_session = time.monotonic()
    ing, cl, q = cfg.ingest, cfg.clean, cfg.quality
    rules = rules_from_config(cl)
    form = cl.unicode_form if cl.normalize_unicode else ""
    named = (ing.id_column, ing.text_column, ing.source_column, "url")
    cap = ing.max_record_bytes

    def run(batches):
        for batch in split_lines(batches, cap):
            f = named_fields(batch, named)
            if not all(f.column("_parsed").to_pylist()):
                raise SystemExit("fused_probe: a line the reader did not decode; the probe handles none")
            docs = pa.RecordBatch.from_arrays([f.column("_f0"), f.column("_f1"), f.column("_f2"), f.column("_f3"),
                                               pa.nulls(len(f), pa.string())],
                                              names=["id", "text", "source", "url", "meta"])
            out = clean_batch(docs, rules, form, cl, q, None, False)
            yield pa.RecordBatch.from_arrays([out.column("id"), out.column("text"), out.column(REASON_COL)],
                                             schema=OUT)

    marked = splits_frame(spark, list_inputs(args.input)).mapInArrow(run, _spark_schema(OUT)).persist()
    marked.filter("reason is null").drop("reason").write.mode("overwrite").parquet(args.out + "/kept")
    marked.filter("reason is not null").select("id", "reason").write.mode("overwrite").parquet(args.out + "/rejected")
    counts = {r["reason"]: r["count"] for r in spark.read.parquet(args.out + "/rejected").groupBy("reason").count().collect()}
    kept = spark.read.parquet(args.out + "/kept").count()
    t_end = time.monotonic()
    if warm is not None:
        warm.join()
    print(json.dumps({"session_s": round(t_session - t_start, 1), "fused_ingest_clean_s": round(t_end - t_session, 1),
                      "kept": kept, "rejected": sum(counts.values()), "by_reason": dict(sorted(counts.items()))}))
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
