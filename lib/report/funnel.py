"""The no-funnel check: reads Spark's own event log of a real run and finds data squeezed through one task or the driver.

Spark records, for every SQL execution, its physical plans (the final adaptive plan
included) and, for every stage and task, its task count and metrics. `check_event_log`
reads that record after the run (enable it with `event_log_conf(dir)`) and reports:

- `single-partition-exchange`: an `Exchange SinglePartition` (a global sort, a window
  without PARTITION BY, `repartition(1)`, ...) unless it only gathers one row per
  partition from a partial aggregate with no keys (`count()`, `agg(sum(...))`) or at most
  n <= `max_driver_rows` rows per partition under a `LocalLimit n` (`limit(n)`,
  `isEmpty()`): sizes that do not grow with the data;
- `coalesce-1`: a `Coalesce 1` node (`coalesce(1)`), unless every one-task stage of its query
  moved at most `max_single_task_rows` rows (the larger of the rows its task read and wrote):
  work bounded by a setting (the dedup stage solves a first batch's graph of at most
  `dedup.local_graph_max_nodes` documents in one task), noted as `bounded-single-task`. The
  default, 0, allows none. A query may also declare its own bound in its description
  (`funnel_bound(n)`, set as Spark's job description by the code that writes it, as the run's
  rejects write does: one task per n rows): its coalesce(1) is then noted when every one-task
  stage of it moved at most n rows, and is a violation when one moved more;
- `few-tasks`: a stage that reads a shuffle with fewer tasks than `min_tasks` (default
  `spark.sql.shuffle.partitions`), unless it is the one-task end of such a global
  aggregate or limit, or adaptive execution coalesced it (`spark.sql.adaptive.coalescePartitions`
  merges small partitions by size; noted, not a violation);
- `driver-rows`: a query whose result goes to the driver (no write at its root, and not
  nested in a write command such as Delta's `save`) and returns more than
  `max_driver_rows` rows (`collect()`/`toPandas()` of data);
- `driver-bytes`: a task whose result sent to the driver exceeds `max_result_bytes`
  (catches RDD `collect()`s that no SQL plan shows). The build side of a broadcast join
  also travels through the driver; when Spark chose the broadcast itself and all of it
  stays within `spark.sql.autoBroadcastJoinThreshold` (10 MB by default), its size does not
  grow with the data (past the threshold Spark joins by shuffle), so it is noted
  (`broadcast`), not a violation. A broadcast beyond the threshold (a hint) is one.

Delta Lake's own metadata queries (log replay, checkpoints, statistics) touch the
transaction log, not the data, and are reported as `exempt`. Pure Python: reading a
zstd-compressed log (Spark 4's default) uses pyarrow.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

_SINGLE = re.compile(r"^Exchange SinglePartition")
_COALESCE1 = re.compile(r"^Coalesce 1$")
_BOUND_WORDS = "[one task moves at most {} rows]"     # funnel_bound writes it, the check reads it
_DECLARED_BOUND = re.compile(re.escape(_BOUND_WORDS).replace(r"\{\}", r"(\d+)"))
_GLOBAL_PARTIAL_AGG = re.compile(r"^(Hash|ObjectHash|Sort)Aggregate\(keys=\[\], functions=\[partial_")
_LOCAL_LIMIT = re.compile(r"^LocalLimit (\d+)")
_PASS_THROUGH = ("WholeStageCodegen", "InputAdapter", "ShuffleQueryStage", "AQEShuffleRead", "ColumnarToRow",
                 "RowToColumnar", "Project", "Filter")
_WRITE_ROOT = re.compile(r"^(Execute |WriteFiles|AppendData|OverwriteByExpression|CommandResult|"
                         r"SetCatalogAndNamespace|DataWritingCommand|WriteToDataSourceV2)")
_DELTA_DESC = re.compile(r"^(Delta:|delta\.|Compute snapshot|Filtering files|Writing checkpoint|"
                         r"Stats collection|Stats calculation)", re.I)


def funnel_bound(rows: int) -> str:
    """The words a query's description carries (Spark's job description) to declare that one
    of its tasks moves at most `rows` rows: the number of its tasks grows with its rows, so a
    coalesce(1) in it is bounded work, not a funnel (`check_event_log` checks the rows moved)."""
    return _BOUND_WORDS.format(int(rows))


def event_log_conf(directory: str | Path) -> dict[str, str]:
    """spark-submit settings that make a run record the event log `check_event_log` reads."""
    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": d.as_uri()}


@dataclass
class Finding:
    kind: str          # single-partition-exchange | coalesce-1 | few-tasks | driver-rows | driver-bytes | ...
    execution: int | None
    stage: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "execution": self.execution, "stage": self.stage, "detail": self.detail}


@dataclass
class FunnelResult:
    """Violations (the run funnelled data), notes (allowed, with the reason) and a per-stage summary."""
    violations: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "settings": self.settings, "violations": [v.to_dict() for v in self.violations],
                "notes": [n.to_dict() for n in self.notes], "stages": self.stages, "executions": self.executions}

    def summary(self) -> str:
        lines = [f"no-funnel check: {'ok' if self.ok else 'FAILED'} ({len(self.executions)} queries, "
                 f"{len(self.stages)} stages, {len(self.violations)} violations, {len(self.notes)} notes)"]
        lines += [f"  VIOLATION {v.kind} (query {v.execution}, stage {v.stage}): {v.detail}" for v in self.violations]
        lines += [f"  note {n.kind} (query {n.execution}, stage {n.stage}): {n.detail}" for n in self.notes]
        return "\n".join(lines)


# --- reading -----------------------------------------------------------------------------------
def _log_files(path: Path) -> list[Path]:
    """The event files of one application, in order (a file, a rolling `eventlog_v2_*` dir, or the
    event log dir holding exactly one application)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no event log at {path}")
    rolling = sorted(path.glob("events_*"), key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)
    if rolling:
        return rolling
    apps = [p for p in path.iterdir() if not p.name.startswith(".") and not p.name.endswith((".inprogress", ".crc"))]
    if len(apps) != 1:
        raise ValueError(f"{path} holds {len(apps)} applications' event logs; pass one of them")
    return _log_files(apps[0])


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Events of one application's log, decoded (plain, or zstd by file suffix)."""
    for f in _log_files(Path(path)):
        if f.suffix == ".zstd":
            import pyarrow as pa

            with pa.input_stream(str(f), compression="zstd") as s:
                text = s.read().decode("utf-8")
        elif f.suffix in (".lz4", ".lzf", ".snappy"):
            raise ValueError(f"{f}: codec {f.suffix[1:]} is not readable here; run with "
                             "spark.eventLog.compression.codec=zstd or spark.eventLog.compress=false")
        else:
            text = f.read_text(encoding="utf-8")
        for line in text.splitlines():
            if line.strip():
                yield json.loads(line)


# --- plan analysis ----------------------------------------------------------------------------
def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for c in node.get("children", []):
        yield from _nodes(c)


def _bounded_gather(exchange: dict[str, Any], max_rows: int) -> str | None:
    """Why the rows a single-partition exchange gathers do not grow with the data, or None.

    Allowed: a keyless partial aggregate (one row per partition: `count()`, `agg(sum)`), or a
    `LocalLimit n` with n <= max_rows (at most n rows per partition: `limit(n)`, `isEmpty()`).
    """
    frontier = list(exchange.get("children", []))
    while frontier:
        n = frontier.pop()
        s = n.get("simpleString", "")
        if _GLOBAL_PARTIAL_AGG.match(s):
            return "global-aggregate"
        m = _LOCAL_LIMIT.match(s)
        if m and int(m.group(1)) <= max_rows:
            return "global-limit"
        if n.get("nodeName", "").startswith(_PASS_THROUGH) and len(n.get("children", [])) == 1:
            frontier.extend(n["children"])
    return None


def _top_rows_metric(plan: dict[str, Any]) -> int | None:
    """Accumulator id of the top-most 'number of output rows' metric (what reaches the root)."""
    for n in _nodes(plan):
        for m in n.get("metrics", []):
            if m.get("name") == "number of output rows":
                return m.get("accumulatorId")
    return None


def _is_delta_internal(desc: str, plan: dict[str, Any]) -> bool:
    if _DELTA_DESC.search(desc or ""):
        return True
    scans = [n.get("simpleString", "") for n in _nodes(plan) if "Scan" in n.get("nodeName", "")]
    return bool(scans) and all("_delta_log" in s for s in scans)


def _root_writes(plan: dict[str, Any]) -> bool:
    for n in _nodes(plan):
        name = n.get("nodeName", "")
        if name in ("AdaptiveSparkPlan", "ResultQueryStage") or name.startswith("WholeStageCodegen"):
            continue
        return bool(_WRITE_ROOT.match(name) or _WRITE_ROOT.match(n.get("simpleString", "")))
    return False


def check_event_log(path: str | Path, *, min_tasks: int | None = None, max_driver_rows: int = 10_000,
                    max_result_bytes: int = 1 << 20, max_single_task_rows: int = 0) -> FunnelResult:
    """Check a finished run's event log for funnels; see the module docstring for the rules."""
    plans: dict[int, dict[str, Any]] = {}
    desc: dict[int, str] = {}
    root_of: dict[int, int] = {}
    stage_exec: dict[int, int | None] = {}
    stage_info: dict[int, dict[str, Any]] = {}
    accum: dict[int, int] = {}
    driver_accum: dict[int, int] = {}
    props: dict[str, str] = {}
    big_results: list[tuple[int, int, int]] = []
    broadcast_bytes: dict[int, int] = {}   # stage of a broadcast exchange's collect -> bytes to the driver
    completed: set[int] = set()
    task_rows: dict[int, int] = {}        # stage -> the most rows one of its tasks read or wrote
    for e in read_events(path):
        ev = e.get("Event", "")
        if ev == "SparkListenerEnvironmentUpdate":
            props = dict(e.get("Spark Properties", {}))
        elif ev.endswith("SQLExecutionStart"):
            plans[e["executionId"]] = e.get("sparkPlanInfo", {})
            desc[e["executionId"]] = e.get("description", "")
            root_of[e["executionId"]] = e.get("rootExecutionId", e["executionId"])
        elif ev.endswith("SQLAdaptiveExecutionUpdate"):
            plans[e["executionId"]] = e.get("sparkPlanInfo", {})
        elif ev.endswith("SparkListenerDriverAccumUpdates"):
            for acc_id, value in e.get("accumUpdates", []):
                driver_accum[acc_id] = value
        elif ev == "SparkListenerJobStart":
            eid = (e.get("Properties") or {}).get("spark.sql.execution.id")
            broadcast = "broadcast exchange (runId" in (e.get("Properties") or {}).get("spark.job.tags", "")
            for sid in e.get("Stage IDs", []):
                stage_exec[sid] = int(eid) if eid not in (None, "") else None
                if broadcast:
                    broadcast_bytes.setdefault(sid, 0)
            for info in e.get("Stage Infos", []):
                stage_info.setdefault(info["Stage ID"], info)
        elif ev == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            stage_info[info["Stage ID"]] = info
            completed.add(info["Stage ID"])
            for a in info.get("Accumulables", []):
                try:
                    accum[a["ID"]] = int(a["Value"])
                except (TypeError, ValueError, KeyError):
                    pass
        if ev == "SparkListenerTaskEnd":
            m = e.get("Task Metrics") or {}
            moved = max((m.get("Input Metrics") or {}).get("Records Read", 0),
                        (m.get("Shuffle Read Metrics") or {}).get("Total Records Read", 0),
                        (m.get("Output Metrics") or {}).get("Records Written", 0),
                        (m.get("Shuffle Write Metrics") or {}).get("Shuffle Records Written", 0))
            task_rows[e["Stage ID"]] = max(task_rows.get(e["Stage ID"], 0), moved)
            if e.get("Task Type") == "ResultTask":
                size = m.get("Result Size", 0)
                if e["Stage ID"] in broadcast_bytes:
                    broadcast_bytes[e["Stage ID"]] += size
                if size > max_result_bytes:
                    big_results.append((e["Stage ID"], e["Task Info"]["Task ID"], size))

    shuffle_partitions = int(props.get("spark.sql.shuffle.partitions", "200"))
    aqe_coalesce = (props.get("spark.sql.adaptive.enabled", "true") == "true"
                    and props.get("spark.sql.adaptive.coalescePartitions.enabled", "true") == "true")
    min_tasks = shuffle_partitions if min_tasks is None else min_tasks
    res = FunnelResult(settings={"min_tasks": min_tasks, "shuffle_partitions": shuffle_partitions,
                                 "aqe_coalesce_partitions": aqe_coalesce, "max_driver_rows": max_driver_rows,
                                 "max_result_bytes": max_result_bytes, "max_single_task_rows": max_single_task_rows})
    exempt: set[int] = set()
    coalesced: list[tuple[int, str]] = []
    bounded: dict[int, str] = {}
    for eid in sorted(plans):
        plan, d = plans[eid], desc.get(eid, "")
        internal = _is_delta_internal(d, plan)
        root = root_of.get(eid, eid)
        # a query nested in a write command (e.g. Delta's save) feeds the writer, not the driver
        writes = _root_writes(plan) or (root != eid and root in plans and _root_writes(plans[root]))
        entry = {"id": eid, "description": d[:120], "delta_internal": internal, "writes": writes}
        if internal:
            exempt.add(eid)
            res.notes.append(Finding("exempt", eid, None, f"Delta metadata query: {d[:80]!r}"))
        for n in _nodes(plan):
            s = n.get("simpleString", "")
            if _SINGLE.match(s):
                why = _bounded_gather(n, max_driver_rows)
                if why:
                    bounded[eid] = why
                elif eid not in exempt:
                    res.violations.append(Finding("single-partition-exchange", eid, None, f"{s} in {d[:80]!r}"))
            elif _COALESCE1.match(s) and eid not in exempt:
                coalesced.append((eid, d))
        if not writes:
            acc = _top_rows_metric(plan)
            rows = accum.get(acc, driver_accum.get(acc)) if acc is not None else None
            entry["rows_to_driver"] = rows
            if rows is not None and rows > max_driver_rows and eid not in exempt:
                res.violations.append(Finding("driver-rows", eid, None,
                                              f"{rows} rows returned to the driver by {d[:80]!r}"))
        res.executions.append(entry)

    for eid, d in coalesced:
        single = [sid for sid in sorted(completed)
                  if stage_exec.get(sid) == eid and stage_info[sid].get("Number of Tasks", 0) == 1]
        rows = max((task_rows.get(sid, 0) for sid in single), default=None)
        declared = _DECLARED_BOUND.search(d)
        bound, by = max_single_task_rows, "max_single_task_rows"
        if declared and int(declared.group(1)) > bound:
            bound, by = int(declared.group(1)), "the bound its description declares"
        if bound > 0 and rows is not None and rows <= bound:
            res.notes.append(Finding("bounded-single-task", eid, single[-1],
                                     f"coalesce(1) in {d[:80]!r}: its one task moved {rows} rows, within "
                                     f"{by} ({bound})"))
        else:
            moved = f" (its one task moved {rows} rows)" if rows is not None else ""
            res.violations.append(Finding("coalesce-1", eid, None, f"coalesce(1) in {d[:80]!r}{moved}"))
    for sid in sorted(completed):  # stages that ran (skipped ones reuse earlier shuffle output)
        info = stage_info[sid]
        eid = stage_exec.get(sid)
        n_tasks = info.get("Number of Tasks", 0)
        parents = info.get("Parent IDs", [])
        rdd_scopes = " ".join(r.get("Scope", "") or "" for r in info.get("RDD Info", []))
        row = {"stage": sid, "execution": eid, "tasks": n_tasks, "reads_shuffle": bool(parents),
               "name": info.get("Stage Name", "")[:80]}
        res.stages.append(row)
        if not parents or n_tasks >= min_tasks:
            continue
        if eid in exempt:
            continue
        if n_tasks == 1 and eid in bounded:
            res.notes.append(Finding(bounded[eid], eid, sid,
                                     "one task gathers one partial-aggregate row per partition"
                                     if bounded[eid] == "global-aggregate"
                                     else "one task gathers at most a limit's rows per partition"))
        elif aqe_coalesce and "AQEShuffleRead" in rdd_scopes:
            res.notes.append(Finding("aqe-coalesced", eid, sid,
                                     f"{n_tasks} tasks after adaptive coalescing of small partitions"))
        else:
            res.violations.append(Finding("few-tasks", eid, sid,
                                          f"{n_tasks} tasks < {min_tasks} reading a shuffle ({row['name']})"))
    threshold = _size(props.get("spark.sql.autoBroadcastJoinThreshold", "10MB"))
    res.settings["broadcast_threshold"] = threshold
    noted: set[int] = set()
    for sid, tid, size in big_results:
        if stage_exec.get(sid) in exempt:
            continue
        total = broadcast_bytes.get(sid)
        if total is not None and 0 < total <= threshold:
            if sid not in noted:
                noted.add(sid)
                res.notes.append(Finding("broadcast", stage_exec.get(sid), sid,
                                         f"a broadcast join's build side, {total} bytes through the driver, within "
                                         f"spark.sql.autoBroadcastJoinThreshold ({threshold} bytes)"))
            continue
        over = f" (a broadcast of {total} bytes, over the {threshold}-byte threshold)" if total is not None else ""
        res.violations.append(Finding("driver-bytes", stage_exec.get(sid), sid,
                                      f"task {tid} sent {size} bytes to the driver{over}"))
    return res


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40}


def _size(text: str) -> int:
    """A Spark byte size ("10MB", "10485760b", "-1"); -1 (broadcasts off) and unreadable give 0."""
    m = re.fullmatch(r"\s*(-?\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        return 0
    return max(0, int(m.group(1)) * _UNITS[m.group(2).lower()])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shardforge.report.funnel", description=__doc__.splitlines()[0])
    ap.add_argument("event_log", help="an application's event log file or eventlog_v2_* folder")
    ap.add_argument("--min-tasks", type=int, default=None)
    ap.add_argument("--max-driver-rows", type=int, default=10_000)
    ap.add_argument("--max-single-task-rows", type=int, default=0,
                    help="a coalesce(1) whose one task moves at most this many rows is noted, not a violation "
                         "(a run with the dedup stage's one-task graphs: dedup.local_graph_max_nodes)")
    ap.add_argument("--json", action="store_true", help="print the whole result as JSON")
    args = ap.parse_args(argv)
    res = check_event_log(args.event_log, min_tasks=args.min_tasks, max_driver_rows=args.max_driver_rows,
                          max_single_task_rows=args.max_single_task_rows)
    print(json.dumps(res.to_dict(), indent=2) if args.json else res.summary())
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
