"""The stage engine in process: plans mean exactly what `pipeline.stages` lists, reruns reuse
completed stages by fingerprint, the runner's accounting and schema checks stop a bad stage,
errors map to exit codes, and the run lock keeps a second run out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from shardforge.config import ConfigError, load_config
from shardforge.engine.layout import Layout
from shardforge.engine.lock import LockHeld, RunLock
from shardforge.fs import LocalFiles
from shardforge.stages import ORDER, REGISTRY

ROOT = Path(__file__).resolve().parent.parent
DOCS = [{"id": f"d{i:03d}", "text": f"document {i} is about topic {i % 7} and says enough words to pass"}
        for i in range(40)]


def _jsonl(path: Path, rows, extra_lines=()) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(extra_lines))
    return str(path)


def _cfg(inp: str, out: Path, stages, *overrides):
    cfg = load_config(None, ["dedup.near=false", "shards.num_shards=2", *overrides])
    return cfg.replace(pipeline=replace(cfg.pipeline, input=(inp,), output=str(out), stages=tuple(stages)))


def _run(spark, cfg, **options):
    from shardforge.engine.runner import RunOptions, run_job

    return run_job(cfg, cfg.pipeline.stages, layout=Layout.for_output(cfg.pipeline.output),
                   options=RunOptions(**options), spark=spark)


def test_registry_is_the_one_order_and_names_real_outputs():
    import dataclasses

    import shardforge.engine.steps as steps

    assert ORDER == ("ingest", "clean", "score", "decontaminate", "redact", "dedup", "tokenize", "curate",
                     "build-shards")
    fields = {f.name for f in dataclasses.fields(Layout)}
    for spec in REGISTRY.values():
        assert callable(getattr(steps, spec.function))
        assert spec.output == "" or spec.output in fields, spec.name
    with pytest.raises(AttributeError):
        Layout.for_output("/x").curatd  # a typo is an error, not a path


@pytest.mark.parametrize("stages, message", [
    (["clean", "bake"], "unknown stage 'bake' (known, in order: ingest, clean, score, decontaminate, redact, dedup, "
                        "tokenize, curate, build-shards)"),
    (["redact", "clean"], "stage 'clean' must come before 'redact'"),
    (["clean", "clean"], "stage 'clean' is listed twice"),
    (["read", "clean"], "unknown stage 'read'"),
    ([], "no stage listed"),
])
def test_bad_stage_lists_are_config_errors(stages, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"pipeline.stages={json.dumps(stages)}"])
    assert message in str(err.value) and str(err.value).startswith("pipeline.stages: ")


@pytest.mark.slow
def test_a_plan_of_clean_alone_reads_and_cleans_nothing_else(spark, tmp_path):
    inp = _jsonl(tmp_path / "docs.jsonl", DOCS + [{"id": "short", "text": "tiny"}], ["{broken json\n"])
    out = tmp_path / "out"
    report = _run(spark, _cfg(inp, out, ["clean"], "clean.min_chars=10"))
    assert report["plan"] == ["read", "clean"]
    assert [s["name"] for s in report["stages"]] == ["read", "clean"]
    read, clean = report["stages"]
    assert (read["rows_in"], read["kept"], read["rejected"]) == (42, 41, 1)   # the broken line: read's reject
    assert (clean["rows_in"], clean["kept"], clean["rejected"]) == (41, 40, 1)
    assert sorted(p.name for p in out.iterdir()) == ["clean", "rejects", "report.html", "report.json"]
    assert spark.read.format("delta").load(str(out / "clean")).count() == 40
    reasons = sorted(r.reason for r in spark.read.format("delta").load(str(out / "rejects")).collect())
    assert reasons == ["filter:min_chars", "invalid:malformed_json"]

    # a table of documents is read as it is: no read stage
    again = _run(spark, _cfg(str(out / "clean"), tmp_path / "out2", ["redact"]))
    assert again["plan"] == ["redact"] and again["stages"][0]["rows_in"] == 40


def test_a_shared_dedup_checkpoint_dir_loses_only_this_outputs_folders(spark, tmp_path):
    """dedup's scratch folders in a shared `dedup.checkpoint_dir` are named
    `dedup-<first 8 hex of sha256(output)>-<fingerprint>` (lib/config.py): a run deletes its
    own folder when dedup is done and its own stale ones (other fingerprints), never another
    output's."""
    import hashlib

    inp = _jsonl(tmp_path / "docs.jsonl", DOCS)
    shared = tmp_path / "ck"
    out = tmp_path / "out"
    mine = "dedup-" + hashlib.sha256(str(out).encode("utf-8")).hexdigest()[:8] + "-"
    other = "dedup-" + hashlib.sha256(str(tmp_path / "elsewhere").encode("utf-8")).hexdigest()[:8] + "-"
    for name in (mine + "0" * 16, other + "0" * 16, other + "1" * 16):
        (shared / name / "signatures").mkdir(parents=True)
    report = _run(spark, _cfg(inp, out, ["dedup"], "dedup.near=true", f"dedup.checkpoint_dir={shared}"))
    assert report["stages"][-1]["name"] == "dedup" and report["stages"][-1]["kept"] == 40
    assert sorted(p.name for p in shared.iterdir()) == [other + "0" * 16, other + "1" * 16]


def _unfinish(out: Path, *drop_markers: str) -> None:
    """Make `out/_run` look like a run killed after its last remaining marker."""
    state = json.loads((out / "_run" / "state.json").read_text())
    state.pop("finished", None)
    (out / "_run" / "state.json").write_text(json.dumps(state))
    for stage in drop_markers:
        (out / "_run" / stage / "_COMPLETE.json").unlink()


@pytest.mark.slow
def test_rerun_reuses_by_fingerprint_and_a_crash_after_the_curated_commit_adds_nothing(spark, tmp_path, stage_runs):
    """A completed stage is reused while its fingerprint holds; a changed section reruns it
    and everything after it (nothing before). A run killed after the curated MERGE but before
    curate's marker reruns curate against the version pinned at its start: the same rows are
    kept and reported, none is merged twice. Reuse is checked by the stage functions that
    really ran (`stage_runs`), not only by the report."""
    from shardforge.curated.tables import table_version
    from shardforge.engine.runner import Runner, RunOptions

    inp = _jsonl(tmp_path / "docs.jsonl", DOCS)
    out = tmp_path / "out"
    stages = ["ingest", "clean", "redact", "dedup", "curate"]
    cfg = _cfg(inp, out, stages)
    first = _run(spark, cfg, keep_intermediate=True)
    assert first["resumed_from"] is None and not any(s["reused"] for s in first["stages"])
    assert stage_runs == stages
    markers = {p.parent.name for p in (out / "_run").glob("*/_COMPLETE.json")}
    assert markers == set(stages)
    version = table_version(spark, str(out / "curated"))

    _unfinish(out, "curate")      # killed after the MERGE committed, before the marker
    stage_runs.clear()
    again = _run(spark, cfg, keep_intermediate=True)
    assert stage_runs == ["curate"]                     # the others were read back, not recomputed
    assert again["resumed_from"] == "curate"
    assert [s["reused"] for s in again["stages"]] == [True, True, True, True, False]
    assert again["stages"][-1]["kept"] == first["stages"][-1]["kept"] == 40
    assert again["curated"] == first["curated"]
    assert table_version(spark, str(out / "curated")) == version
    rejects = spark.read.format("delta").load(str(out / "rejects"))
    assert rejects.filter("stage = 'curate'").count() == 0

    # a finished run's intermediates are not resumed: the next run starts afresh
    stage_runs.clear()
    fresh = _run(spark, cfg, keep_intermediate=True)
    assert stage_runs == stages
    assert fresh["resumed_from"] is None and fresh["curated"]["inserted"] == 0

    _unfinish(out)
    changed = cfg.replace(redact=replace(cfg.redact, kinds=("EMAIL",)))
    stage_runs.clear()
    third = Runner(spark, changed, Layout.for_output(str(out)), tuple(stages), RunOptions()).execute()
    assert stage_runs == ["redact", "dedup", "curate"]
    assert {s["name"]: s["reused"] for s in third["stages"]} == {
        "ingest": True, "clean": True, "redact": False, "dedup": False, "curate": False}
    assert third["resumed_from"] == "redact"
    assert not (out / "_run").exists()


@pytest.mark.slow
def test_rejects_kept_without_records_are_built_without_them_and_never_reused_by_a_run_keeping_them(
        spark, tmp_path, stage_runs):
    """rejects.record = "none" (the FineWeb recipe's setting): every reject row still names
    its document, stage and reason, and the stages' own rejects in `_run/` hold no record
    either (the JSON copy of each rejected row is never built). A resumed run that keeps
    records does not reuse those stages (it would publish rejects without them): it reruns
    them, and their rejects have records again. Resumed with "none", they are reused."""
    inp = _jsonl(tmp_path / "docs.jsonl", DOCS + [{"id": "short", "text": "tiny"}], ["{broken json\n"])
    out = tmp_path / "out"
    stages = ["ingest", "clean"]
    bare = _cfg(inp, out, stages, "clean.min_chars=10", 'rejects.record="none"')
    _run(spark, bare, keep_intermediate=True)
    table = spark.read.format("delta").load(str(out / "rejects")).collect()
    assert sorted((r.stage, r.reason) for r in table) == [("clean", "filter:min_chars"),
                                                          ("ingest", "invalid:malformed_json")]
    assert [r.id for r in table if r.stage == "clean"] == ["short"]
    assert [r.record for r in table] == [None, None]

    def stage_rejects(stage):
        return spark.read.parquet(str(out / "_run" / stage / "rejected")).collect()

    assert [(r.id, r.record, r.detail) for r in stage_rejects("clean")] == [("short", None, None)]
    assert [r.record for r in stage_rejects("ingest")] == [None]

    _unfinish(out, "clean")
    stage_runs.clear()
    _run(spark, bare, keep_intermediate=True)
    assert stage_runs == ["clean"]                  # the same setting: ingest is reused

    _unfinish(out, "clean")
    stage_runs.clear()
    _run(spark, _cfg(inp, out, stages, "clean.min_chars=10"), keep_intermediate=True)
    assert stage_runs == ["ingest", "clean"]        # records kept: nothing built without them is reused
    [short] = stage_rejects("clean")
    assert json.loads(short.record)["text"] == "tiny"
    assert "{broken json" in stage_rejects("ingest")[0].record


@pytest.mark.slow
def test_a_stage_that_loses_rows_or_breaks_the_schema_stops_the_run(spark, tmp_path, monkeypatch):
    import shardforge.engine.steps as steps
    from shardforge.engine.run import AccountingError
    from shardforge.engine.runner import StageOutput
    from shardforge.schemas import SchemaMismatch

    inp = _jsonl(tmp_path / "docs.jsonl", DOCS)
    original = steps.clean

    def lossy(ctx, df):
        out = original(ctx, df)
        return StageOutput(out.kept.limit(10), out.rejected)   # 30 rows vanish, no reason given

    monkeypatch.setattr(steps, "clean", lossy)
    with pytest.raises(AccountingError, match="stage clean: 40 rows in, but 10 kept . 0 rejected"):
        _run(spark, _cfg(inp, tmp_path / "a", ["ingest", "clean"]))

    def retyped(ctx, df):
        out = original(ctx, df)
        return StageOutput(out.kept.withColumn("text", out.kept["text"].cast("binary")), out.rejected)

    monkeypatch.setattr(steps, "clean", retyped)
    with pytest.raises(SchemaMismatch, match=r"output of stage clean: .*text: binary \(expected string\)"):
        _run(spark, _cfg(inp, tmp_path / "b", ["ingest", "clean"]))
    assert not (tmp_path / "b" / "_lock.json").exists()       # released on failure too


def test_exit_codes_follow_the_contract(capsys):
    from shardforge.ingest.stage import InputError
    from shardforge.engine.jobargs import guarded
    from shardforge.engine.run import AccountingError
    from shardforge.schemas import SchemaMismatch

    def raising(exc):
        def body():
            raise exc
        return body

    assert guarded("p", lambda: 0) == 0
    assert guarded("p", raising(ConfigError("download.threads_per_task: must be >= 1, got 0"))) == 2
    assert guarded("p", raising(InputError("input not found: /x"))) == 2
    assert guarded("p", raising(AccountingError("stage x: 3 rows in, but 2 kept + 0 rejected"))) == 3
    assert guarded("p", raising(SchemaMismatch("output of stage x: schema does not match"))) == 3
    assert guarded("p", raising(LockHeld("out/_lock.json is held by pid 7"))) == 1
    err = capsys.readouterr().err
    assert "p: error: download.threads_per_task" in err and "p: data contract violated: stage x" in err
    with pytest.raises(ZeroDivisionError):     # anything else: a traceback and exit 1 (Python's own)
        guarded("p", raising(ZeroDivisionError("bug")))


def test_bad_stage_settings_exit_2_naming_the_key_before_spark_starts(tmp_path):
    inp = _jsonl(tmp_path / "docs.jsonl", DOCS)
    urls = tmp_path / "urls.csv"
    urls.write_text("url\nhttp://127.0.0.1:9/x\n")
    env = {**os.environ, "SHARDFORGE_JARS": str(tmp_path / "no-jars")}   # Spark could not even start
    for key, value in (("download.threads_per_task", "0"), ("download.image_quality", "101"),
                       ("download.allowed_networks", '["not-a-net"]')):
        proc = subprocess.run([sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--input", inp, "--urls",
                               str(urls), "--output", str(tmp_path / "o"), "--set", f"{key}={value}",
                               "--set", 'spark.jars_dir="/nonexistent"'],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert key in proc.stderr and "Traceback" not in proc.stderr


def test_run_lock_names_its_owner_and_expires_with_its_process(tmp_path):
    path = str(tmp_path / "_lock.json")
    held = RunLock(path, LocalFiles(), timeout=60).acquire()
    try:
        with pytest.raises(LockHeld) as err:
            RunLock(path, LocalFiles(), timeout=60).acquire()
        assert f"held by pid {os.getpid()} on " in str(err.value) and held.run_id in str(err.value)
    finally:
        held.release()
    assert not os.path.exists(path)

    # a lock left by a process that died (SIGKILL leaves it behind) is taken over at once
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = RunLock(path, LocalFiles())
    dead.owner["pid"] = int(proc.stdout)
    LocalFiles().write_text(path, dead._text())
    with RunLock(path, LocalFiles()) as taker:
        assert json.loads(Path(path).read_text())["owner"]["run_id"] == taker.run_id

    # another host's lock: held while its heartbeat is fresh, stale after the timeout
    other = {"owner": {"host": "elsewhere", "pid": 1, "run_id": "r1"}, "heartbeat": time.time(), "timeout": 30}
    Path(path).write_text(json.dumps(other))
    with pytest.raises(LockHeld, match="pid 1 on elsewhere"):
        RunLock(path, LocalFiles()).acquire()
    Path(path).write_text(json.dumps({**other, "heartbeat": time.time() - 31}))
    RunLock(path, LocalFiles()).acquire().release()


def test_the_heartbeat_keeps_the_lock_fresh(tmp_path):
    path = str(tmp_path / "_lock.json")
    lock = RunLock(path, LocalFiles(), timeout=0.4).acquire()
    try:
        first = json.loads(Path(path).read_text())["heartbeat"]
        deadline = time.monotonic() + 30
        while json.loads(Path(path).read_text())["heartbeat"] == first:
            # a hang guard: the heartbeat is due every 0.4 s; 30 s only fails if none comes
            assert time.monotonic() < deadline, "no heartbeat was written"
            time.sleep(0.05)
    finally:
        lock.release()


def test_rejects_counted_as_written_must_match_those_read_back(spark, tmp_path):
    """A stage's outputs counted as they are written: the rejects grouped by reason come from
    the written rows (duplicate_of:<id> as one group) and must add up to the count; none written,
    no groups; a count that disagrees with the rows read back stops the run."""
    from shardforge.engine.run import AccountingError, Run

    run = Run("t", str(tmp_path / "report"), {})
    rejects = spark.createDataFrame([("a", "filter:x"), ("b", "duplicate_of:a"), ("c", "duplicate_of:z"),
                                     ("d", "filter:x")], "id string, reason string")
    assert run.count_observed("s", 7, 4, rejects) == {
        "name": "s", "kept": 7, "rejected": 4, "rejects_by_reason": {"duplicate_of": 2, "filter:x": 2}}
    assert run.count_observed("s", 7, 0, rejects.limit(0))["rejects_by_reason"] == {}
    with pytest.raises(AccountingError, match="5 rejects written, but 4 read back"):
        run.count_observed("s", 7, 5, rejects)


@pytest.mark.slow
def test_the_rejects_table_gets_as_few_files_as_its_rows_need(spark, tmp_path):
    """The run's rejects, one part per stage (here ingest's broken lines and clean's short
    documents), go into the rejects table as one file when their rows fit one (fewer files for a
    table that grows every run, and fewer tasks beside build-shards), every reject kept."""
    (tmp_path / "in").mkdir()
    _jsonl(tmp_path / "in" / "a.jsonl", DOCS[:20] + [{"id": "s1", "text": "tiny"}], ["{broken\n"])
    _jsonl(tmp_path / "in" / "b.jsonl", DOCS[20:] + [{"id": "s2", "text": "wee"}], ["{\"id\": \"x\", \"text\n"])
    out = tmp_path / "out"
    report = _run(spark, _cfg(str(tmp_path / "in"), out, ["clean"], "clean.min_chars=10", 'rejects.record="none"'))
    assert [(s["name"], s["rejected"]) for s in report["stages"]] == [("read", 2), ("clean", 2)]
    table = out / "rejects"
    assert len(list(table.glob("*.parquet"))) == 1, sorted(p.name for p in table.iterdir())
    got = spark.read.format("delta").load(str(table)).collect()
    assert sorted(r.id for r in got if r.stage == "clean") == ["s1", "s2"]
    assert sorted(r.reason for r in got) == ["filter:min_chars", "filter:min_chars",
                                             "invalid:malformed_json", "invalid:malformed_json"]
