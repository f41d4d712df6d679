"""Build shards from documents or a Delta table, and publish them atomically at --output.

    shardforge build-shards --input docs.jsonl --output out/ --set shards.num_shards=8
    shardforge build-shards --input out/curated --as-of-version 3 --output out/shards
    spark-submit jobs/build_shards.py --conf conf/demo.toml --input out/curated --output out/shards

Document files go through the `read` stage first (its rejects land in `<output>/rejects`);
the run report is written to `<output>/_report/`.
"""
from __future__ import annotations

import sys
from typing import Sequence

from shardforge.config import Config
from shardforge.engine.jobargs import guarded, options_from, parse, require, run_flags


def _extra(p) -> None:
    run_flags(p)
    p.add_argument("--as-of-version", type=int, metavar="N", help="read version N of a Delta input")


def _main(cfg: Config, args) -> int:
    from shardforge.engine.layout import Layout
    from shardforge.engine.runner import run_job

    report = run_job(cfg, ("build-shards",), layout=Layout.for_build(cfg.pipeline.output),
                     options=options_from(args), name="build-shards")
    s = report["shards"]
    print(f"build-shards: {sum(s['rows'])} rows in {s['num_shards']} shards, build {s['build_id']} at {s['path']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = parse("shardforge build-shards", __doc__.splitlines()[0], argv, extra=_extra)
    require(cfg, "output", "shardforge build-shards")
    return guarded("shardforge build-shards", _main, cfg, args)


if __name__ == "__main__":
    sys.exit(main())
