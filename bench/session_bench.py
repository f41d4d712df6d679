"""What the benchmarks that time variants inside one Spark session share: `--docs` and
`--rounds`, the corpus (bench/corpus.py), one embedded local[2] session with the UI off, a
scratch folder, the machine line, and the results file under bench/results/."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def session_bench(description: str, prefix: str, *, docs: int = 20_000, rounds: int = 3):
    """(args, corpus, spark, work): the parsed arguments, the corpus of `args.docs` documents
    (made once under .bench/), the session and a fresh scratch folder, removed with the session
    stopped on the way out."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--docs", type=int, default=docs)
    ap.add_argument("--rounds", type=int, default=rounds)
    args = ap.parse_args()

    from corpus import ensure_corpus

    from shardforge.config import SparkSection
    from shardforge.engine.session import get_spark

    corpus = ensure_corpus(ROOT / f".bench/corpus-{args.docs}.jsonl", args.docs)
    spark = get_spark(SparkSection(master="local[2]", properties={"spark.ui.enabled": "false"}))
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield args, corpus, spark, work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


def machine() -> str:
    return f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"


def save(name: str, result: dict) -> None:
    """bench/results/<name>.json."""
    (ROOT / "bench/results").mkdir(exist_ok=True)
    (ROOT / "bench/results" / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
