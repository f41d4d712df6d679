"""The whole pipeline: ingest (read + download), clean, redact, dedup, curate, build shards.

    shardforge pipeline --conf conf/demo.toml [--input docs.jsonl] [--urls urls.csv] --output out/
    spark-submit jobs/pipeline.py --conf conf/demo.toml --output out/

Stages listed in `pipeline.stages` run in this order; the curated Delta table is
merged by id, shards are built from the version this run produced (or from
`--as-of-version N`), and the run report lands in `<output>/report.json|html`.
"""
from __future__ import annotations

import sys
from typing import Sequence

from shardforge.config import Config
from shardforge.jobargs import urls_flag, guarded, parse, require
from shardforge.run import Run


def run_pipeline(spark, cfg: Config, *, as_of_version: int | None = None,
                 fail_after_shard: int | None = None) -> dict:
    """Run every configured stage on `cfg.pipeline.input`/`urls`; returns the run report."""
    from shardforge.schemas import CURATED, conform
    from shardforge.steps import (Layout, build_config, clean_step, dedup_step, read_inputs, redact_step,
                                  shards_step, write_curated, write_rejects)
    from shardforge.curated import merge_new

    out = cfg.pipeline.output
    layout = Layout(out)
    stages = cfg.pipeline.stages
    run = Run(cfg.pipeline.name, out, build_config(cfg), master=spark.sparkContext.master)
    docs, _ = read_inputs(spark, cfg, run)
    n = run.report["stages"][-1]["kept"]
    if cfg.pipeline.write_raw:
        with run.timed("raw"):
            merge_new(spark, conform(docs, CURATED), layout.raw, key="id")
    if "clean" in stages:
        docs, _ = clean_step(cfg, run, docs, n)
        n = run.report["stages"][-1]["kept"]
    if "redact" in stages:
        docs, _ = redact_step(cfg, run, docs, n)
        n = run.report["stages"][-1]["kept"]
    after = None
    if "dedup" in stages:
        (docs, _), after = dedup_step(spark, cfg, run, docs, n)
        n = run.report["stages"][-1]["kept"]
    version = write_curated(spark, cfg, run, conform(docs, CURATED), n, after=after)
    write_rejects(spark, cfg, run)
    if "build-shards" in stages:
        shards_step(spark, cfg, run, layout.curated, version if as_of_version is None else as_of_version,
                    layout.shards, _fail_after_shard=fail_after_shard)
    return run.finish()


def _extra(p) -> None:
    urls_flag(p)
    p.add_argument("--as-of-version", type=int, metavar="N",
                   help="build the shards from version N of the curated table")


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = parse("shardforge pipeline", __doc__.splitlines()[0], argv, extra=_extra)
    require(cfg, "output", "shardforge pipeline")
    return guarded("shardforge pipeline", _main, cfg, args)


def _main(cfg: Config, args) -> int:
    from shardforge.session import get_spark

    spark = get_spark(cfg.spark)
    report = run_pipeline(spark, cfg, as_of_version=args.as_of_version)
    shards = report.get("shards", {})
    print(f"pipeline: {report['stages'][0]['rows_in'] if report['stages'] else 0} rows in; "
          f"build {shards.get('build_id', '-')} with {sum(shards.get('rows', []))} rows in "
          f"{shards.get('num_shards', 0)} shards at {shards.get('path', '-')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
