"""Dedup: remove exact and near duplicates (also against earlier batches); kept rows to <output>/dedup.

    shardforge dedup --input out/redact --output out/
    spark-submit jobs/dedup.py --conf conf/demo.toml --input ... --output out/

Rejected rows go to `<output>/rejects` with their reason; the report to `<output>/report.json`.
"""
import sys

from shardforge.engine.jobargs import stage_job_main


def main(argv=None) -> int:
    return stage_job_main("dedup", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
