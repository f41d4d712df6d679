"""Incremental builds on the curated Delta table: batch B overlapping batch A adds only new
ids (and new content), a rerun of B commits nothing, and a build pinned to A's version
is byte-identical to the build made right after A."""
import json
from dataclasses import replace

import pytest

from shardforge.config import load_config
from shardforge.shards.manifest import read_manifest

OVERRIDES = ['pipeline.stages=["ingest", "clean", "dedup", "curate", "build-shards"]', "dedup.near=false",
             "shards.num_shards=4", "shards.row_group_rows=50", "pipeline.write_raw=false"]


def _write(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return str(path)


def _doc(i, text=None):
    return {"id": f"d{i:05d}", "text": text or f"document {i} says something about topic {i % 17} at length"}


def _shas(out):
    return [s.sha256 for s in read_manifest(str(out / "shards")).shards]


@pytest.mark.slow
def test_batches_merge_by_id_and_pinned_builds_repeat_bytes(spark, tmp_path):
    from shardforge.curated.tables import table_version
    from shardforge.jobs.pipeline import run_pipeline

    out = tmp_path / "out"
    a_docs = [_doc(i) for i in range(1000)]
    # B: 300 of A's documents again, 680 new ones, and 20 new ids whose text copies A's
    b_docs = [_doc(i) for i in range(700, 1000)] + [_doc(i) for i in range(1000, 1680)] + \
             [_doc(i, text=_doc(i - 5000)["text"]) for i in range(5000, 5020)]
    a = _write(tmp_path / "a.jsonl", a_docs)
    b = _write(tmp_path / "b.jsonl", b_docs)
    base = load_config(None, OVERRIDES)

    def run(path, **kw):
        cfg = base.replace(pipeline=replace(base.pipeline, input=(path,), output=str(out)))
        return run_pipeline(spark, cfg, **kw)

    run(a)
    curated = str(out / "curated")
    version_a = table_version(spark, curated)
    shas_a = _shas(out)
    report_b = run(b)
    ids = {r.id for r in spark.read.format("delta").load(curated).select("id").collect()}
    assert ids == {d["id"] for d in a_docs} | {f"d{i:05d}" for i in range(1000, 1680)}
    dedup = next(s for s in report_b["stages"] if s["name"] == "dedup")
    curate = next(s for s in report_b["stages"] if s["name"] == "curate")
    assert dedup["rejected"] + curate["rejected"] == 320     # 300 already present + 20 copies of A's text
    version_b = table_version(spark, curated)
    assert version_b == version_a + 1

    rerun = run(b)
    assert table_version(spark, curated) == version_b        # nothing new: no commit at all
    assert rerun["curated"]["inserted"] == 0
    assert spark.read.format("delta").load(curated).count() == len(ids)

    run(b, as_of_version=version_a)
    assert _shas(out) == shas_a                               # pinned to A: A's bytes again
    assert read_manifest(str(out / "shards")).source["version"] == version_a


@pytest.mark.parametrize("metrics", ["true", "false"])
def test_first_write_reports_its_rows_with_and_without_commit_metrics(spark, tmp_path, metrics):
    """A table's first write counts its rows from the commit's metrics, or by reading the table
    when Delta records none; a second merge inserts only the new keys (numbers from the rows
    made here)."""
    from shardforge.curated.tables import merge_new, table_version

    key = "spark.databricks.delta.history.metricsEnabled"
    before = spark.conf.get(key, None)
    spark.conf.set(key, metrics)
    try:
        path = str(tmp_path / "t")
        first = merge_new(spark, spark.createDataFrame([(f"k{i}", i) for i in range(37)], "id string, n int"), path)
        assert (first.inserted, first.version) == (37, 0)
        again = merge_new(spark, spark.createDataFrame([(f"k{i}", i) for i in range(30, 45)], "id string, n int"), path)
        assert (again.inserted, again.version) == (8, 1) and table_version(spark, path) == 1
    finally:
        spark.conf.unset(key) if before is None else spark.conf.set(key, before)


def test_first_commit_metrics_are_those_delta_reports(spark, tmp_path):
    """A new table's commit metrics, read from its commit file without a Spark job, are the
    ones Delta's own history gives for version 0, and count the rows written here."""
    from delta.tables import DeltaTable

    from shardforge.curated.tables import first_commit_metrics

    path = str(tmp_path / "t")
    spark.createDataFrame([(f"k{i}", i) for i in range(23)], "id string, n int").write.format("delta").save(path)
    version, metrics = DeltaTable.forPath(spark, path).history(1).select("version", "operationMetrics").first()
    assert version == 0
    assert first_commit_metrics(spark, path) == dict(metrics)
    assert first_commit_metrics(spark, path)["numOutputRows"] == "23"


def test_a_log_folder_without_a_commit_is_no_table_and_the_next_write_creates_it(spark, tmp_path):
    """A first write killed before its commit leaves `_delta_log/` with no commit in it (and
    data files nothing references): that is no table, and merging into it creates one with
    the merged rows only (a resumed run's rejects write once met DELTA_TABLE_NOT_FOUND there)."""
    from shardforge.curated.tables import is_delta, merge_new, table_version

    path = tmp_path / "t"
    (path / "_delta_log" / "_staged_commits").mkdir(parents=True)
    spark.range(5).write.parquet(str(path / "stray"))           # files of the killed write
    assert not is_delta(str(path))
    out = merge_new(spark, spark.range(3).selectExpr("cast(id as string) as id"), str(path))
    assert (out.inserted, out.version) == (3, 0)
    assert is_delta(str(path)) and table_version(spark, str(path)) == 0
    assert sorted(r["id"] for r in spark.read.format("delta").load(str(path)).collect()) == ["0", "1", "2"]
    assert not is_delta(str(tmp_path / "absent"))
