"""Small stages on Spark's interpreted expressions (`session.interpreted`, `[spark]
codegen_min_rows` and `codegen_min_input_bytes`): a whole run gives the same counts, rejects,
curated rows, dedup side table and shard bytes as the same run with code always generated;
the small stages did run interpreted (and the others not); and the session's settings are
put back after each stage."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from shardforge.config import load_config
from shardforge.engine.layout import Layout
from sample_docs import sample_rows

pytestmark = pytest.mark.slow

STAGES = ("ingest", "clean", "redact", "dedup", "curate", "build-shards")
SETTINGS = ["pipeline.write_raw=false", 'rejects.record="none"', 'quality.filters=["c4"]',
            "shards.num_shards=3", "dedup.near=true", "dedup.exact=true"]
ALWAYS_GENERATED = ["spark.codegen_min_rows=0", "spark.codegen_min_input_bytes=0"]
KEYS = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The sample documents with only the named keys, three exact copies and one near copy
    (a few words changed), so dedup removes rows both ways."""
    rows = [{"id": r["id"], "text": r["text"]} for r in sample_rows() if len(r["text"]) > 400]
    assert len(rows) >= 100
    rows = rows[:150]
    for k in range(3):
        rows.append({"id": f"copy-{k}", "text": rows[10 + k]["text"]})
    words = rows[20]["text"].split(" ")
    rows.append({"id": "near-0", "text": " ".join(["changed"] + words[1:])})
    d = tmp_path_factory.mktemp("codegen") / "input"
    d.mkdir()
    (d / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def _run(spark, inp: Path, out: Path, *overrides: str):
    from shardforge.engine.runner import RunOptions, run_job

    cfg = load_config(None, [*SETTINGS, *overrides])
    cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=(str(inp),), output=str(out), stages=STAGES))
    return run_job(cfg, STAGES, layout=Layout.for_output(str(out)), options=RunOptions(), spark=spark)


def _table(spark, path: Path) -> list[str]:
    df = spark.read.format("delta").load(str(path))
    return sorted(df.toJSON().collect())


def _shard_bytes(out: Path) -> dict[str, str]:
    m = json.loads((out / "shards" / "manifest.json").read_text())
    return {s["file"]: hashlib.sha256((out / "shards" / s["file"]).read_bytes()).hexdigest() for s in m["shards"]}


def _entries(report: dict) -> list[dict]:
    return [{k: s[k] for k in ("name", "rows_in", "kept", "rejected", "rejects_by_reason")} for s in report["stages"]]


def _interpreted_stages(records) -> list[str]:
    """The stages the runner logged as run on interpreted expressions."""
    out = []
    for r in records:
        msg = r.getMessage()
        if "interpreted expressions" in msg:
            out.append(msg.split(":")[0].replace("stages ", "").replace("stage ", ""))
    return out


@pytest.fixture(scope="module")
def both(spark, corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("codegen-runs")
    handler = _Collect()
    logger = logging.getLogger("shardforge.engine.runner")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        small = _run(spark, corpus, d / "small")
        small_logged = _interpreted_stages(handler.records)
        handler.records.clear()
        generated = _run(spark, corpus, d / "generated", *ALWAYS_GENERATED)
        generated_logged = _interpreted_stages(handler.records)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return d, small, generated, small_logged, generated_logged


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_the_small_run_was_interpreted_and_the_other_not(both):
    _, small, _, small_logged, generated_logged = both
    # 154 lines: every stage is under 5,000 rows and the input under 128 MB
    assert small_logged == ["ingest and clean", "redact", "dedup", "curate", "build-shards"]
    assert generated_logged == []
    dedup = next(s for s in small["stages"] if s["name"] == "dedup")
    assert dedup["rejects_by_reason"].get("duplicate_of", 0) >= 4     # the three copies and the near copy


def test_same_outputs_interpreted_and_generated(both, spark):
    d, small, generated, _, _ = both
    assert _entries(small) == _entries(generated)
    for table in ("curated", "rejects", "dedup_state", "dedup_audit"):
        assert _table(spark, d / "small" / table) == _table(spark, d / "generated" / table), table
    assert small["shards"]["build_id"] == generated["shards"]["build_id"]
    assert _shard_bytes(d / "small") == _shard_bytes(d / "generated")


def test_the_settings_are_put_back(spark):
    from shardforge.engine.session import interpreted

    before = [spark.conf.get(k, None) for k in KEYS]
    with interpreted(spark, True) as on:
        assert on
        assert [spark.conf.get(k) for k in KEYS] == ["false", "NO_CODEGEN"]
        assert spark.range(10).selectExpr("sum(id * 2) as s").first()["s"] == 90
    assert [spark.conf.get(k, None) for k in KEYS] == before
    with interpreted(spark, False) as on:
        assert not on
        assert [spark.conf.get(k, None) for k in KEYS] == before
