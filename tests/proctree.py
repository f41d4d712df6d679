"""Killing a pipeline the way a crash does: the driver, its JVM and every Python worker at
once, whatever process group each is in (tests/test_download_resume.py, tests/test_resume.py,
bench/pipeline.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import time


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (children first found, then theirs)."""
    parents: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            fields = _stat(int(d))
            if fields:
                parents.setdefault(int(fields[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a driver started in a session of its own, its JVM and every Python worker.
    pyspark's daemon puts itself and its workers in a process group of their own, so killing
    the driver's group alone left workers downloading and spooling for a moment after the
    kill (a URL fetched and spooled then was in neither server log the test compares). The
    driver's group is stopped first, so the JVM forks no new worker while the tree is
    collected. A driver that has already ended is fine."""
    _signal_group(proc.pid, signal.SIGSTOP)
    tree = descendants(proc.pid)
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 60     # killed processes outside our children vanish on their own
    while any(os.path.exists(f"/proc/{pid}") and state(pid) != "Z" for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.05)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def state(pid: int) -> str:
    """The process state letter ("Z" also for a process gone)."""
    fields = _stat(pid)
    return fields[0] if fields else "Z"


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (state, ppid, ...); [] when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []
