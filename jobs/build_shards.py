"""Build shards from documents or a Delta table, and publish them atomically at --output.

    shardforge build-shards --input docs.jsonl --output out/ --set shards.num_shards=8
    shardforge build-shards --input out/curated --as-of-version 3 --output out/shards
    spark-submit jobs/build_shards.py --conf conf/demo.toml --input out/curated --output out/shards
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from shardforge.config import Config
from shardforge.jobargs import guarded, parse, require


def _extra(p) -> None:
    p.add_argument("--as-of-version", type=int, metavar="N", help="read version N of a Delta input")


def _main(cfg: Config, args) -> int:
    from shardforge.curated import is_delta
    from shardforge.ingest import check_exists
    from shardforge.run import Run
    from shardforge.session import get_spark
    from shardforge.steps import build_config, shards_step, write_rejects

    inputs = list(cfg.pipeline.input)
    if not inputs:
        sys.stderr.write("shardforge build-shards: no --input given\n")
        return 2
    for p in inputs:
        check_exists(p)
    spark = get_spark(cfg.spark)
    out = cfg.pipeline.output
    run = Run("build-shards", out, build_config(cfg), master=spark.sparkContext.master)
    if len(inputs) == 1 and is_delta(inputs[0]):
        manifest = shards_step(spark, cfg, run, inputs[0], args.as_of_version, out)
    else:
        from shardforge.ingest import read_documents
        from shardforge.shards import build_shards
        import time

        t = time.monotonic()
        docs, _ = run.account("read", None, read_documents(spark, inputs, cfg.ingest, cfg.pipeline.input_format), t)
        write_rejects(spark, cfg, run, os.path.join(out, "rejects"))
        with run.timed("build-shards"):
            manifest = build_shards(docs, out, cfg.shards, config=build_config(cfg),
                                    source={"paths": [os.path.abspath(p) for p in inputs]})
    run.report["shards"] = {"num_shards": manifest["num_shards"], "build_id": manifest["build_id"], "path": out,
                            "rows": [s["rows"] for s in manifest["shards"]],
                            "bytes": [s["bytes"] for s in manifest["shards"]]}
    run.finish(os.path.join(out, "_report"))
    print(f"build-shards: {manifest['total_rows']} rows in {manifest['num_shards']} shards, "
          f"build {manifest['build_id']} at {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = parse("shardforge build-shards", __doc__.splitlines()[0], argv, extra=_extra)
    require(cfg, "output", "shardforge build-shards")
    return guarded("shardforge build-shards", _main, cfg, args)


if __name__ == "__main__":
    sys.exit(main())
