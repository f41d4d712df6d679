"""One run's bookkeeping: the report, stage timing, and the row accounting.

The runner (`shardforge.engine.runner`) counts each stage's written kept and rejected rows
with `Run.count`, checks rows in = kept + rejected with `Run.check` (an
AccountingError otherwise: a bug, never tolerated silently), logs progress, and
records the numbers the run report shows; `Run.finish` writes report.json/html.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import time
from contextlib import contextmanager
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from shardforge import __version__

log = logging.getLogger("shardforge.engine.run")


class AccountingError(RuntimeError):
    """A stage's rows in differ from kept + rejected."""


def reason_group():
    """Rejects grouped for reports: `duplicate_of:<id>` counts as `duplicate_of`."""
    r = F.col("reason")
    return F.when(r.startswith("duplicate_of:"), F.lit("duplicate_of")).otherwise(r)


class Run:
    """The report of one run, and the accounting the runner does around each stage."""

    def __init__(self, name: str, report_dir: str, config: dict[str, Any], master: str = "", files=None):
        self.report_dir = report_dir
        self.files = files          # fsops operations for a report_dir that is not on the local disk
        self._persisted: list[DataFrame] = []
        self.report: dict[str, Any] = {
            "run": {"name": name, "started": _now(), "finished": None, "shardforge_version": __version__,
                    "master": master, "output": report_dir, "config": config},
            "stages": [],
            "resumed_from": None,
        }

    @contextmanager
    def timed(self, name: str):
        """Times a step that is not a row-counting stage (e.g. writing the rejects table)."""
        t0 = time.monotonic()
        log.info("step %s: started", name)
        yield
        log.info("step %s: done in %.1f s", name, time.monotonic() - t0)
        self.report.setdefault("timings", {})[name] = round(time.monotonic() - t0, 3)

    def persist(self, df: DataFrame) -> DataFrame:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(df)
        return df

    def count(self, name: str, kept: DataFrame, rejected: DataFrame) -> dict[str, Any]:
        """A stage entry for the report: kept and rejected counted (from written outputs),
        rejects grouped by reason. One Spark job reads both (each count is a job, and a job
        costs a fixed part whatever its size)."""
        rows = (kept.select(F.lit(True).alias("_kept"), F.lit(None).cast("string").alias("reason"))
                .unionByName(rejected.select(F.lit(False).alias("_kept"), reason_group().alias("reason")))
                .groupBy("_kept", "reason").count().collect())
        n_kept = sum(int(r["count"]) for r in rows if r["_kept"])
        reasons = {r["reason"]: int(r["count"]) for r in rows if not r["_kept"]}
        return {"name": name, "kept": n_kept, "rejected": sum(reasons.values()),
                "rejects_by_reason": dict(sorted(reasons.items()))}

    def count_observed(self, name: str, kept: int, rejected: int, rejects: DataFrame) -> dict[str, Any]:
        """`count` for outputs counted as they were written (`kept`, `rejected` rows): a job
        reads the rejects back, grouped by reason, only when there are some; the groups must
        add up to the rows written."""
        reasons: dict[str, int] = {}
        if rejected:
            rows = rejects.groupBy(reason_group().alias("reason")).count().collect()
            reasons = {r["reason"]: int(r["count"]) for r in rows}
            if sum(reasons.values()) != rejected:
                raise AccountingError(f"stage {name}: {rejected} rejects written, but {sum(reasons.values())} "
                                      f"read back")
        return {"name": name, "kept": int(kept), "rejected": int(rejected),
                "rejects_by_reason": dict(sorted(reasons.items()))}

    def check(self, name: str, rows_in: int | None, entry: dict[str, Any]) -> None:
        """rows in = kept + rejected, or an AccountingError (a bug, never tolerated silently).
        rows_in None: a reading stage, whose rows in are the rows it made."""
        n = entry["kept"] + entry["rejected"]
        entry["rows_in"] = n if rows_in is None else rows_in
        if entry["rows_in"] != n:
            raise AccountingError(f"stage {name}: {rows_in} rows in, but {entry['kept']} kept + "
                                  f"{entry['rejected']} rejected")
        reasons = entry["rejects_by_reason"]
        log.info("stage %s: %d in, %d kept, %d rejected%s", name, entry["rows_in"], entry["kept"], entry["rejected"],
                 "" if not reasons else " (" + ", ".join(f"{k}={v}" for k, v in reasons.items()) + ")")

    def add_stage(self, entry: dict[str, Any]) -> None:
        self.report["stages"].append(entry)

    def finish(self) -> dict[str, Any]:
        self.report["run"]["finished"] = _now()
        write_report(self.report, self.report_dir, self.files)
        for df in self._persisted:
            df.unpersist()
        return self.report


def write_report(report: dict[str, Any], out_dir: str, files=None) -> str:
    """report.json (and report.html when the renderer is available) in `out_dir`. A URL
    (`hdfs://`, `s3a://`, ...) is written through `files` (shardforge.fs): rendered
    into a local temporary folder, then each file copied whole."""
    if "://" in out_dir and not out_dir.startswith("file:"):
        import tempfile

        if files is None:
            raise ValueError(f"{out_dir}: writing the report there needs Hadoop's filesystems (a session)")
        with tempfile.TemporaryDirectory() as tmp:
            write_report(report, tmp)
            for name in sorted(os.listdir(tmp)):
                with open(os.path.join(tmp, name), encoding="utf-8") as fh:
                    files.write_text(f"{out_dir.rstrip('/')}/{name}", fh.read())
        return f"{out_dir.rstrip('/')}/report.json"
    os.makedirs(out_dir, exist_ok=True)
    try:
        from shardforge.report import write_report as render
    except ImportError:
        path = os.path.join(out_dir, "report.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, sort_keys=True, default=str)
        return path
    json_path, _ = render(report, out_dir)
    return str(json_path)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
