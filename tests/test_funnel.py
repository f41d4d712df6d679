"""The no-funnel check, on a real Spark 4.2 event log of a probe job with known funnels.

tests/data/funnel/probe.py produced the log (its header has the command); the check on the
full pipeline run is in test_cluster.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from shardforge.report import funnel

LOG = Path(__file__).parent / "data" / "funnel" / "probe_events.zstd"


@pytest.fixture(scope="module")
def result():
    return funnel.check_event_log(LOG)


def test_reads_the_whole_log():
    events = list(funnel.read_events(LOG))
    assert events[0]["Event"] == "SparkListenerLogStart"
    assert events[-1]["Event"] == "SparkListenerApplicationEnd"


def test_finds_every_planted_funnel(result):
    found = {(v.kind, v.execution) for v in result.violations}
    assert ("driver-rows", 2) in found                  # df.collect() of 20000 rows
    assert ("coalesce-1", 3) in found                   # coalesce(1).write
    assert ("single-partition-exchange", 4) in found    # Window.orderBy without partitionBy
    assert ("single-partition-exchange", 5) in found    # repartition(1).write
    assert {("few-tasks", 4), ("few-tasks", 5)} <= {(v.kind, v.execution) for v in result.violations}
    assert not result.ok


def test_leaves_the_harmless_queries_alone(result):
    flagged = {v.execution for v in result.violations}
    assert 0 not in flagged        # groupBy(k).count() written with 4 tasks per stage
    assert 1 not in flagged        # count(): one partial row per partition
    assert 6 not in flagged        # take(3)
    assert any(n.kind == "global-aggregate" and n.execution == 1 for n in result.notes)
    rows = {e["id"]: e.get("rows_to_driver") for e in result.executions}
    assert rows[1] == 1 and rows[2] == 20000 and rows[6] == 3


def test_a_broadcast_is_bounded_by_the_threshold_and_a_hinted_one_is_not(result):
    """Query 7: Spark broadcast a 5 MB side by itself (within autoBroadcastJoinThreshold, 10 MB):
    its 4 tasks each send over 1 MB to the driver, a size that stops growing with the data.
    Query 8: a broadcast hint on a 15 MB side, past the threshold: a funnel."""
    assert 7 not in {v.execution for v in result.violations}
    (note,) = [n for n in result.notes if n.kind == "broadcast"]
    assert note.execution == 7 and "within spark.sql.autoBroadcastJoinThreshold (10485760 bytes)" in note.detail
    hinted = [v for v in result.violations if v.execution == 8]
    assert len(hinted) == 4 and {v.kind for v in hinted} == {"driver-bytes"}
    assert all("over the 10485760-byte threshold" in v.detail for v in hinted)
    # with broadcasts turned off (-1) nothing is exempt: both are driver traffic
    assert funnel._size("-1") == 0 and funnel._size("10MB") == funnel._size("10485760b") == 10 << 20


def test_settings_come_from_the_run(result):
    assert result.settings["shuffle_partitions"] == 4
    assert result.settings["aqe_coalesce_partitions"] is False
    assert result.settings["min_tasks"] == 4
    assert result.settings["broadcast_threshold"] == 10 << 20


def test_thresholds_are_parameters():
    res = funnel.check_event_log(LOG, max_driver_rows=50_000)
    assert "driver-rows" not in {v.kind for v in res.violations}
    res = funnel.check_event_log(LOG, max_result_bytes=10_000)
    assert any(v.kind == "driver-bytes" and v.execution == 2 for v in res.violations)


def test_cli_exit_status_and_json(capsys):
    assert funnel.main([str(LOG)]) == 1
    assert "VIOLATION coalesce-1" in capsys.readouterr().out
    assert funnel.main([str(LOG), "--json"]) == 1
    assert '"ok": false' in capsys.readouterr().out


def test_event_log_conf(tmp_path):
    conf = funnel.event_log_conf(tmp_path / "ev")
    assert conf["spark.eventLog.enabled"] == "true"
    assert conf["spark.eventLog.dir"] == (tmp_path / "ev").resolve().as_uri()


def test_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        funnel.check_event_log(tmp_path / "nothing")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(ValueError, match="2 applications"):
        funnel.check_event_log(tmp_path)
    lz4 = tmp_path / "a" / "events_1_app.lz4"
    lz4.write_bytes(b"x")
    with pytest.raises(ValueError, match="codec lz4"):
        funnel.check_event_log(tmp_path / "a")


def test_a_single_task_is_allowed_only_within_its_bound():
    """Query 3 writes spark.range(0, 20000) through coalesce(1): its one task writes 20,000 rows
    (tests/data/funnel/probe.py). A bound of 20,000 rows notes it; one row less, and it is a funnel."""
    within = funnel.check_event_log(LOG, max_single_task_rows=20000)
    assert 3 not in {v.execution for v in within.violations if v.kind == "coalesce-1"}
    (note,) = [n for n in within.notes if n.kind == "bounded-single-task"]
    assert note.execution == 3 and "moved 20000 rows" in note.detail
    over = funnel.check_event_log(LOG, max_single_task_rows=19999)
    (v,) = [v for v in over.violations if v.kind == "coalesce-1"]
    assert v.execution == 3 and "moved 20000 rows" in v.detail
    assert not [n for n in over.notes if n.kind == "bounded-single-task"]


def _with_description(tmp_path, execution: int, description: str) -> Path:
    """The probe's log, written plain, with query `execution`'s description replaced (as Spark
    records a job description set by the code that started the query)."""
    import json

    out = tmp_path / "events"
    out.mkdir(parents=True)
    lines = []
    for e in funnel.read_events(LOG):
        if e.get("Event", "").endswith("SQLExecutionStart") and e.get("executionId") == execution:
            e["description"] = description
        lines.append(json.dumps(e))
    (out / "app-1").write_text("\n".join(lines) + "\n")
    return out


def test_a_bound_declared_in_the_description_covers_only_that_query(tmp_path):
    """Query 3's one task writes 20,000 rows. Declared by its own description as at most 20,000
    rows a task, its coalesce(1) is noted; declared as at most 19,999, it is still a funnel; and
    the declaration of one query allows nothing to another (the default bound stays 0)."""
    within = funnel.check_event_log(_with_description(tmp_path / "a", 3, "rejects " + funnel.funnel_bound(20000)))
    assert 3 not in {v.execution for v in within.violations if v.kind == "coalesce-1"}
    (note,) = [n for n in within.notes if n.kind == "bounded-single-task"]
    assert note.execution == 3 and "moved 20000 rows" in note.detail and "declares" in note.detail
    over = funnel.check_event_log(_with_description(tmp_path / "b", 3, "rejects " + funnel.funnel_bound(19999)))
    assert 3 in {v.execution for v in over.violations if v.kind == "coalesce-1"}
    other = funnel.check_event_log(_with_description(tmp_path / "c", 2, "x " + funnel.funnel_bound(10 ** 9)))
    assert 3 in {v.execution for v in other.violations if v.kind == "coalesce-1"}
