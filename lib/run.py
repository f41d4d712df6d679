"""One pipeline run's bookkeeping: stage timing, row accounting, progress logs, the report.

`Run.account(name, rows_in, result)` persists a stage's kept and rejected rows,
counts them, checks rows in = kept + rejected (an AccountingError otherwise: a
bug, never tolerated silently), logs progress, and records the numbers the run
report shows. Rejects of every stage are collected for the rejects table.
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

from . import __version__
from .stage import StageResult

log = logging.getLogger("shardforge.run")


class AccountingError(RuntimeError):
    """A stage's rows in differ from kept + rejected."""


def reason_group():
    """Rejects grouped for reports: `duplicate_of:<id>` counts as `duplicate_of`."""
    r = F.col("reason")
    return F.when(r.startswith("duplicate_of:"), F.lit("duplicate_of")).otherwise(r)


class Run:
    def __init__(self, name: str, output: str, config: dict[str, Any], master: str = ""):
        self.output = output
        self.rejected: list[DataFrame] = []
        self._persisted: list[DataFrame] = []
        self._cleanup: list[tuple[Any, str]] = []
        self.report: dict[str, Any] = {
            "run": {"name": name, "started": _now(), "finished": None, "shardforge_version": __version__,
                    "master": master, "output": output, "config": config},
            "stages": [],
        }

    @contextmanager
    def timed(self, name: str):
        """Times a step that is not a row-counting stage (e.g. publishing shards)."""
        t0 = time.monotonic()
        log.info("stage %s: started", name)
        yield
        log.info("stage %s: done in %.1f s", name, time.monotonic() - t0)
        self.report.setdefault("timings", {})[name] = round(time.monotonic() - t0, 3)

    def persist(self, df: DataFrame) -> DataFrame:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(df)
        return df

    def account(self, name: str, rows_in: int | None, result: StageResult, started: float) -> StageResult:
        """Materialise and count a stage's output; rows_in None means 'as many as came out'
        (a reading stage, whose input is files)."""
        if result.shared is not None:   # kept and rejected are cheap filters over it
            self.persist(result.shared)
            kept, rejected = result.kept, result.rejected
        else:
            kept, rejected = self.persist(result.kept), self.persist(result.rejected)
        n_kept = kept.count()
        n_rej = rejected.count()
        if rows_in is None:
            rows_in = n_kept + n_rej
        if rows_in != n_kept + n_rej:
            raise AccountingError(f"stage {name}: {rows_in} rows in, but {n_kept} kept + {n_rej} rejected")
        reasons = {r["reason"]: int(r["count"]) for r in
                   rejected.groupBy(reason_group().alias("reason")).count().collect()} if n_rej else {}
        seconds = round(time.monotonic() - started, 3)
        self.report["stages"].append({"name": name, "rows_in": rows_in, "kept": n_kept, "rejected": n_rej,
                                      "seconds": seconds, "rejects_by_reason": dict(sorted(reasons.items()))})
        log.info("stage %s: %d in, %d kept, %d rejected (%.1f s)%s", name, rows_in, n_kept, n_rej, seconds,
                 "" if not reasons else " " + ", ".join(f"{k}={v}" for k, v in sorted(reasons.items())))
        self.rejected.append(rejected)
        return StageResult(kept, rejected)

    def all_rejects(self) -> DataFrame | None:
        if not self.rejected:
            return None
        out = self.rejected[0]
        for df in self.rejected[1:]:
            out = out.unionByName(df)
        return out

    def cleanup(self, spark, path: str) -> None:
        """Remove `path` (a scratch folder Spark wrote, e.g. checkpoints; any filesystem
        Spark can write to) when the run finishes."""
        self._cleanup.append((spark, path))

    def finish(self, out_dir: str | None = None) -> dict[str, Any]:
        self.report["run"]["finished"] = _now()
        out_dir = out_dir or self.output
        write_report(self.report, out_dir)
        for df in self._persisted:
            df.unpersist()
        from .session import delete_path

        for spark, path in self._cleanup:
            delete_path(spark, path)
        return self.report


def write_report(report: dict[str, Any], out_dir: str) -> str:
    """report.json (and report.html when the renderer is available) in `out_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    try:
        from .report import write_report as render
    except ImportError:
        path = os.path.join(out_dir, "report.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, sort_keys=True, default=str)
        return path
    json_path, _ = render(report, out_dir)
    return str(json_path)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
