"""Progress for long runs: per-stage wall-clock timing and a periodic log of Spark's task progress.

`StageClock` times pipeline stages (the report's `seconds`) and logs when each starts and
ends. `SparkProgress` is a daemon thread that, every `interval` seconds, logs the active
Spark stages' finished/total task counts from `SparkContext.statusTracker()` (Spark's own
public status API, no listener). Neither touches the data, so neither changes the output.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager

log = logging.getLogger("shardforge.progress")


class StageClock:
    """Times named pipeline stages: `with clock.stage("dedup"): ...`; `clock.seconds` -> {name: s}."""

    def __init__(self, logger: logging.Logger = log):
        self.seconds: dict[str, float] = {}
        self._log = logger

    @contextmanager
    def stage(self, name: str):
        self._log.info("stage %s: started", name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            self.seconds[name] = self.seconds.get(name, 0.0) + dt
            self._log.info("stage %s: finished in %.1f s", name, dt)


class SparkProgress:
    """Logs `stage <id> (<name>): done/total tasks` for active Spark stages every `interval` s.

    Use as a context manager around a long job: `with SparkProgress(spark.sparkContext, 30): ...`.
    """

    def __init__(self, sc, interval: float = 30.0, logger: logging.Logger = log):
        self._sc, self._interval, self._log = sc, interval, logger
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shardforge-progress", daemon=True)

    def snapshot(self) -> list[dict]:
        """Active stages as [{id, name, done, failed, active, total}] (empty when idle)."""
        tracker = self._sc.statusTracker()
        out = []
        for sid in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(sid)
            if info is None:
                continue
            out.append({"id": sid, "name": info.name, "done": info.numCompletedTasks, "failed": info.numFailedTasks,
                        "active": info.numActiveTasks, "total": info.numTasks})
        return out

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                for s in self.snapshot():
                    self._log.info("spark stage %d (%s): %d/%d tasks done, %d running, %d failed",
                                   s["id"], s["name"], s["done"], s["total"], s["active"], s["failed"])
            except Exception as exc:  # the JVM going away at shutdown must not raise here
                self._log.debug("progress: %s", exc)
                return

    def __enter__(self) -> "SparkProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
