"""Redact: replace PII spans and count them by kind; kept rows to <output>/redact.

    shardforge redact --input out/clean --output out/
    spark-submit jobs/redact.py --conf conf/demo.toml --input ... --output out/

Rejected rows go to `<output>/rejects` with their reason; the report to `<output>/report.json`.
"""
import sys

from shardforge.engine.jobargs import stage_job_main


def main(argv=None) -> int:
    return stage_job_main("redact", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
