"""Clean: normalise text and apply the quality filters; kept rows to <output>/clean.

    shardforge clean --input out/raw --output out/
    spark-submit jobs/clean.py --conf conf/demo.toml --input ... --output out/

Rejected rows go to `<output>/rejects` with their reason; the report to `<output>/report.json`.
"""
import sys

from shardforge.engine.jobargs import stage_job_main


def main(argv=None) -> int:
    return stage_job_main("clean", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
