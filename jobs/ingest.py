"""Ingest: read document files and download URL lists into the raw Delta table.

    shardforge ingest --input docs.jsonl --urls urls.csv --output out/
    spark-submit jobs/ingest.py --conf conf/demo.toml --input ... --output out/

Rejected rows go to `<output>/rejects` with their reason; the report to `<output>/report.json`.
"""
import sys

from shardforge.engine.jobargs import stage_job_main


def main(argv=None) -> int:
    return stage_job_main("ingest", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
