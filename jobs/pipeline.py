"""The whole pipeline: the stages `pipeline.stages` lists, by default ingest (read + download),
clean, redact, dedup, curate and build-shards.

    shardforge pipeline --conf conf/demo.toml [--input docs.jsonl] [--urls urls.csv] --output out/
    spark-submit jobs/pipeline.py --conf conf/demo.toml --output out/

A rerun of the same command after a crash reuses every stage that completed (`--restart`
ignores them); shards are built from the curated version this run produced (or from
`--as-of-version N`), and the run report lands in `<output>/report.json|html`.
"""
from __future__ import annotations

import sys
from typing import Sequence

from shardforge.config import Config
from shardforge.engine.jobargs import guarded, options_from, parse, require, run_flags, urls_flag


def run_pipeline(spark, cfg: Config, *, as_of_version: int | None = None, restart: bool = False,
                 keep_intermediate: bool = False) -> dict:
    """Run `cfg.pipeline.stages` on `cfg.pipeline.input`/`urls` into `cfg.pipeline.output`
    with an existing session; returns the run report."""
    from shardforge.engine.layout import Layout
    from shardforge.engine.runner import RunOptions, run_job

    options = RunOptions(restart=restart, keep_intermediate=keep_intermediate, as_of_version=as_of_version)
    return run_job(cfg, cfg.pipeline.stages, layout=Layout.for_output(cfg.pipeline.output), options=options,
                   spark=spark)


def _extra(p) -> None:
    urls_flag(p)
    run_flags(p)
    p.add_argument("--as-of-version", type=int, metavar="N",
                   help="build the shards from version N of the curated table")


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = parse("shardforge pipeline", __doc__.splitlines()[0], argv, extra=_extra)
    require(cfg, "output", "shardforge pipeline")
    return guarded("shardforge pipeline", _main, cfg, args)


def _main(cfg: Config, args) -> int:
    from shardforge.engine.layout import Layout
    from shardforge.engine.runner import run_job

    report = run_job(cfg, cfg.pipeline.stages, layout=Layout.for_output(cfg.pipeline.output),
                     options=options_from(args))
    stages = report["stages"]
    shards = report.get("shards", {})
    reused = [s["name"] for s in stages if s.get("reused")]
    print(f"pipeline: {stages[0]['rows_in'] if stages else 0} rows in; "
          + (f"reused {', '.join(reused)}; " if reused else "")
          + (f"build {shards['build_id']} with {sum(shards['rows'])} rows in {shards['num_shards']} shards at "
             f"{shards['path']}" if shards else f"output {report.get('output_table', {}).get('path', '-')}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
