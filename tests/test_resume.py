"""Crash and resume: the demo pipeline (download included) runs as `shardforge pipeline` in
a subprocess, is frozen at a point and killed with SIGKILL (driver, JVM and workers), then
the same command runs again. The rerun must exit 0, report where it resumed, reuse the
stages that completed (the report says so, and the stage functions that ran in this process,
counted by `stage_runs`, are the others only), and end with the curated rows, shard bytes and
build id of an uninterrupted run. Also: the run lock against a second run, a changed
[dedup] key invalidating dedup and what follows only, and builds into two outputs at once.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proctree import kill_tree

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
ORDER = ["ingest", "clean", "redact", "dedup", "curate", "build-shards"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT",)}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    env.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    return env


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The sample's web server (one port for every run: URLs and ids repeat), its URL list,
    and a config for small local runs."""
    from shardforge.jobs.demo import SAMPLE, serve, write_url_list

    d = tmp_path_factory.mktemp("resume")
    server, base = serve(SAMPLE / "web")
    urls = write_url_list(base, d / "input")
    conf = d / "run.toml"
    conf.write_text((ROOT / "conf" / "demo.toml").read_text().replace(
        '"spark.driver.memory" = "2g"', '"spark.driver.memory" = "1g", "spark.databricks.delta.snapshotPartitions" = "2"'))
    args = ["--conf", str(conf), "--input", str(SAMPLE / "docs.jsonl"), "--urls", str(urls),
            "--set", "pipeline.write_raw=false"]
    yield d, args
    server.shutdown()


def _cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shardforge.engine.cli", *args], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=900)


def _same_command(args: list[str], capsys) -> tuple[int, str]:
    """The command again, in this process (its session is the tests' one: a warm JVM), so a
    rerun costs what its stages cost. Returns (exit code, stderr)."""
    from shardforge.engine.cli import main

    capsys.readouterr()
    code = main(args)
    return code, capsys.readouterr().err


def _crash(point: str, out: Path, args: list[str], while_frozen=None) -> None:
    """Run the pipeline until `point`, call `while_frozen(pid)`, then SIGKILL the driver, its
    JVM and its workers (proctree.kill_tree)."""
    flag = out.parent / f"{out.name}.{point}.frozen"
    log = open(out.parent / f"{out.name}.{point}.log", "w")
    proc = subprocess.Popen([sys.executable, str(HERE / "crash_run.py"), point, str(flag), "--", "pipeline",
                             *args, "--output", str(out)], cwd=ROOT, env=_env(), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while not flag.exists():
            assert proc.poll() is None, f"the run ended before {point}: " + (out.parent / log.name).read_text()[-3000:]
            # a hang guard (15 min), not a speed check: a loaded machine is far inside it
            assert time.monotonic() < deadline, f"the run never reached {point}"
            time.sleep(0.2)
        if while_frozen is not None:
            while_frozen(proc.pid)
    finally:
        kill_tree(proc)
        log.close()


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def _shards(out: Path, folder: str = "shards") -> tuple[str, dict[str, str]]:
    build = out / folder if folder else out
    m = json.loads((build / "manifest.json").read_text())
    shas = {}
    for s in m["shards"]:
        data = (build / s["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == s["sha256"]
        shas[Path(s["file"]).name] = s["sha256"]
    return m["build_id"], shas


def _rows(spark, table: Path) -> list[str]:
    df = spark.read.format("delta").load(str(table))
    return sorted(df.select([c for c in df.columns]).toJSON().collect())


@pytest.fixture(scope="module")
def reference(setup, spark):
    """An uninterrupted run of the same command (in a process of its own, like the crashed ones)."""
    d, args = setup
    out = d / "reference"
    proc = _cli(["pipeline", *args, "--output", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = _report(out)
    assert report["resumed_from"] is None and not any(s["reused"] for s in report["stages"])
    assert not (out / "_run").exists() and not (out / "_lock.json").exists()
    return out, _shards(out), _rows(spark, out / "curated")


def _rejects(spark, out: Path) -> list[tuple]:
    """Reject rows without their record (a download's record holds its fetch time)."""
    rows = spark.read.format("delta").load(str(out / "rejects")).select("id", "stage", "reason", "detail", "source")
    return sorted((tuple(r) for r in rows.collect()), key=repr)


def _rerun_matches(spark, capsys, out: Path, args: list[str], reference, resumed_from: str, stage_runs) -> dict:
    stage_runs.clear()
    code, err = _same_command(["pipeline", *args, "--output", str(out)], capsys)
    assert code == 0, err[-3000:]
    report = _report(out)
    assert report["resumed_from"] == resumed_from
    first = ORDER.index(resumed_from)
    assert stage_runs == ORDER[first:]       # the stage functions that ran: none of the reused ones
    assert [s["name"] for s in report["stages"]] == ORDER
    assert [s["reused"] for s in report["stages"]] == [i < first for i in range(len(ORDER))]
    for s in report["stages"][:first]:   # reused: nothing recomputed, so no time spent on them
        assert s["seconds"] == 0.0
    ref_out, ref_shards, ref_rows = reference
    assert _shards(out) == ref_shards
    assert _rows(spark, out / "curated") == ref_rows
    ref_report = _report(ref_out)
    for mine, theirs in zip(report["stages"], ref_report["stages"]):
        assert {k: mine[k] for k in ("rows_in", "kept", "rejected", "rejects_by_reason")} == \
               {k: theirs[k] for k in ("rows_in", "kept", "rejected", "rejects_by_reason")}, mine["name"]
    assert _rejects(spark, out) == _rejects(spark, ref_out)
    assert not (out / "_run").exists()
    return report


def test_killed_after_clean_resumes_at_redact(setup, reference, spark, capsys, stage_runs):
    d, args = setup
    out = d / "after-clean"
    _crash("after-clean", out, args)
    assert (out / "_run" / "clean" / "_COMPLETE.json").exists()
    assert not (out / "_run" / "redact" / "_COMPLETE.json").exists()
    _rerun_matches(spark, capsys, out, args, reference, "redact", stage_runs)


def test_killed_in_dedup_resumes_at_dedup_and_holds_the_lock_meanwhile(setup, reference, spark, capsys, stage_runs):
    d, args = setup
    out = d / "in-dedup"
    second = {}

    def try_second_run(pid: int) -> None:
        code, err = _same_command(["pipeline", *args, "--output", str(out)], capsys)
        second.update(rc=code, err=err, pid=pid)
        shutil.copytree(out, d / "in-dedup-copy")          # the crashed state, for the next test

    _crash("in-dedup", out, args, while_frozen=try_second_run)
    assert second["rc"] == 1, second["err"][-2000:]
    assert f"held by pid {second['pid']} on" in second["err"]
    assert "Traceback" not in second["err"] and "stage " not in second["err"]   # stopped before any stage
    assert not (out / "report.json").exists()
    report = _rerun_matches(spark, capsys, out, args, reference, "dedup", stage_runs)
    # frozen after the prepared rows, the signatures, the candidate edges, their ends and the
    # verified edges were written, before the connected components: the rerun reads those
    # back instead of recomputing them
    assert report["dedup_reused"] == ["prepared", "signatures", "candidates", "ends", "edges"]
    assert not (out / "_checkpoints").exists()


def test_changed_dedup_key_reruns_dedup_and_what_follows_only(setup, reference, spark, capsys, stage_runs):
    d, args = setup
    out = d / "in-dedup-copy"
    if not out.exists():
        pytest.skip("needs the crashed state the previous test copies")  # pragma: no cover
    stage_runs.clear()
    code, err = _same_command(["pipeline", *args, "--output", str(out), "--set", "dedup.threshold=0.7"], capsys)
    assert code == 0, err[-3000:]
    report = _report(out)
    assert report["resumed_from"] == "dedup"
    assert {s["name"]: s["reused"] for s in report["stages"]} == {
        "ingest": True, "clean": True, "redact": True, "dedup": False, "curate": False, "build-shards": False}
    assert stage_runs == ["dedup", "curate", "build-shards"]
    assert report["dedup_reused"] == []          # other settings: the killed attempt's signatures are stale


def test_killed_before_manifest_keeps_the_previous_build_readable(setup, reference, spark, capsys, stage_runs):
    from shardforge.loaders import ShardedDataset
    from shardforge.shards.manifest import read_manifest
    from loader_helpers import make_build

    d, args = setup
    out = d / "before-manifest"
    previous = make_build(out / "shards", [40, 0, 25])       # a build published earlier
    reader = ShardedDataset(str(out / "shards"), rank=0, world_size=1, shuffle=False)   # opened before the crash
    _crash("before-manifest", out, args)
    staged = [p.name for p in (out / "shards").iterdir() if p.name.startswith("b-")]
    assert previous.build_id in staged and len(staged) == 2      # the new build's files, no manifest for them
    assert read_manifest(str(out / "shards")).build_id == previous.build_id
    assert sorted(int(r["id"]) for r in reader) == sorted(
        s * 100_000 + i for s, n in enumerate([40, 0, 25]) for i in range(n))
    _rerun_matches(spark, capsys, out, args, reference, "build-shards", stage_runs)
    assert (out / "shards" / previous.build_id).is_dir()         # kept for readers that opened it
    assert sum(1 for _ in reader) == 65


def test_builds_into_two_outputs_at_once_both_succeed(tmp_path):
    from shardforge.jobs.demo import SAMPLE

    procs = [subprocess.Popen([sys.executable, "-m", "shardforge.engine.cli", "build-shards", "--input",
                               str(SAMPLE / "docs.jsonl"), "--output", str(tmp_path / name), "--conf",
                               str(ROOT / "conf" / "demo.toml")], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    results = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    a, b = (_shards(tmp_path / n, folder="") for n in ("a", "b"))
    assert a == b and len(a[1]) == 4
