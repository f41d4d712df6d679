"""No funnel at a size where one would show: the whole pipeline (URL list and local web server
included) on 20,000 documents, 4,000 of them near-duplicates, as `spark-submit --master
local[2]`, checked from Spark's own event log.

At this size every intermediate result of the dedup stage (signatures, candidate pairs,
verified edges, component labels) has thousands of rows, so collecting any of them to the
driver, or squeezing them through one task, exceeds the check's limits (300 rows to the
driver, at least spark.sql.shuffle.partitions tasks per shuffle stage). The demo sample's 275
documents (tests/test_cluster.py) are too few for that: a collect of its dedup edges returns
a handful of rows.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from shardforge.deploy import cluster

from shardforge.report import funnel

from shardforge.deploy import packaging
from submit import ROOT, Background, clean_env, conf_args

pytestmark = pytest.mark.slow

DOCS, NEAR = 20_000, 4_000
MAX_DRIVER_ROWS = 300
WORDS = ("the of and to in is was for on that with as by it at from this be are an or which were "
         "river market station garden engine letter winter harbor meadow signal copper lantern valley "
         "orchard bridge canvas ledger quarry timber beacon saddle furnace compass glacier pepper "
         "thunder velvet anchor marble cobalt falcon granite hollow ivory jasper kettle linen mortar "
         "nectar oyster pillar quartz ribbon summit tundra umber walnut yarrow zephyr amber basil").split()


def _corpus(path: Path) -> dict[str, int]:
    """DOCS JSONL documents of 120 words: DOCS - NEAR originals, and NEAR copies of distinct
    originals with one word changed near the end (word 5-shingle Jaccard about 0.92, above the
    demo's 0.8 threshold). Returns the counts the test expects."""
    rng = random.Random(20261130)
    originals = []
    with path.open("w") as f:
        for i in range(DOCS - NEAR):
            words = [rng.choice(WORDS) for _ in range(120)]
            originals.append(words)
            f.write(json.dumps({"id": f"o-{i:05d}", "text": " ".join(words), "source": "funnel"}) + "\n")
        for j, i in enumerate(rng.sample(range(len(originals)), NEAR)):
            words = list(originals[i])
            words[115] = f"changed{j}"
            f.write(json.dumps({"id": f"n-{j:05d}", "text": " ".join(words), "source": "funnel"}) + "\n")
    return {"docs": DOCS, "near": NEAR}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from shardforge.jobs.demo import SAMPLE, serve, write_url_list
    from shardforge.engine.session import find_jars

    jars = find_jars(".jars")
    assert jars, "Delta jars not found: run `make jars`"
    work = tmp_path_factory.mktemp("funnel-scale")
    expected = _corpus(work / "docs.jsonl")
    server, base = serve(SAMPLE / "web")
    try:
        urls = write_url_list(base, work / "urls")
        events = work / "events"
        conf = {**funnel.event_log_conf(events), "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
                "spark.sql.adaptive.coalescePartitions.enabled": "false",   # the check sees real task counts
                "spark.databricks.delta.snapshotPartitions": "2", "spark.driver.memory": "2g",
                "spark.submit.pyFiles": str(packaging.build_zip(work / "dist", ROOT)),
                "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
                "spark.jars": ",".join(jars), "spark.driver.host": "127.0.0.1"}
        out = work / "out"
        job = Background([cluster.spark_submit(), "--master", "local[2]", *conf_args(conf),
                          str(ROOT / "jobs" / "pipeline.py"), "--conf", str(ROOT / "conf" / "demo.toml"),
                          "--input", str(work / "docs.jsonl"), "--urls", str(urls), "--output", str(out)],
                         work / "pipeline.log", cwd=ROOT, env=clean_env())
        job.wait(timeout=1800)
    finally:
        server.shutdown()
    (log,) = [p for p in events.iterdir() if not p.name.startswith(".")]
    return {"out": out, "log": log, "expected": expected, "urls": urls}


def test_the_run_is_big_enough_to_show_a_funnel(run):
    """The input really has the sizes the check relies on: every document read, the planted
    near-duplicates removed by dedup (so its edge table has thousands of rows)."""
    report = json.loads((run["out"] / "report.json").read_text())
    stages = {s["name"]: s for s in report["stages"]}
    n_urls = len(run["urls"].read_text().splitlines()) - 1          # minus the header
    assert stages["ingest"]["rows_in"] >= run["expected"]["docs"]
    assert sum(report["downloads"].values()) == n_urls
    removed = stages["dedup"]["rejected"]
    assert removed >= 0.95 * run["expected"]["near"], stages["dedup"]
    assert removed > 10 * MAX_DRIVER_ROWS


def test_no_funnel_at_20000_documents(run):
    res = funnel.check_event_log(run["log"], min_tasks=4, max_driver_rows=MAX_DRIVER_ROWS)
    print(res.summary())
    assert res.ok, res.summary()
    shuffle_stages = [s for s in res.stages if s["reads_shuffle"]]
    assert len(shuffle_stages) >= 10
    assert any(e["writes"] for e in res.executions)
