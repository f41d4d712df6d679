"""A per-task child process that extracts pages under a time bound per document.

`Sandbox(timeout)` forks one worker process; `extract(body, content_type)` sends it a page
and waits while the worker has used less than `timeout` seconds of CPU on it. A page that takes longer is answered
`invalid:extract_timeout` and the worker is killed and replaced; a page that kills the
worker (a crash in native code, a stack overflow, memory exhaustion) is answered
`invalid:extract_crashed`. Either way the task goes on with the next page, so no page can
hang or crash a Spark task. The bound is the worker's CPU time on the page (the page's bytes
are already read: size is bounded before, by ingest.max_page_bytes), so the same page gets the
same answer on an idle and on a loaded machine; a worker that makes no progress without using
CPU (stuck before it reads) is stopped after `_WALL_FACTOR` times the bound in wall-clock time.
Where the kernel does not show a process's CPU time (no /proc), the bound is wall-clock time.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from typing import Optional

from shardforge.ingest.extract.html import Page, extract_page


def _serve(conn) -> None:
    while True:
        try:
            body, content_type = conn.recv()
        except EOFError:
            return
        try:
            page = extract_page(body, content_type)
            conn.send(("ok", page.charset, page.title, page.text))
        except Exception as exc:      # extract_page does not raise; anything here is a bug, reported per page
            conn.send(("error", type(exc).__name__, str(exc)[:200], ""))


# A page larger than this is sent from a helper thread: a worker that hangs before reading it
# (a stuck page before, a fork that inherited a held lock) would otherwise block the send, which
# has no time bound, once the pipe's buffer is full. Smaller pages fit in the buffer.
_THREADED_SEND_BYTES = 64 * 1024


# Wall-clock time a page may take, in multiples of its CPU bound: a starved worker on a loaded
# machine gets its CPU late, a stuck one never uses it.
_WALL_FACTOR = 10.0
_TICK = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _cpu_seconds(pid: int) -> Optional[float]:
    """User plus system CPU seconds of a process so far, from /proc; None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * _TICK         # utime, stime (fields 14, 15)


class Sandbox:
    """One extraction worker process; use as a context manager (the worker ends on exit)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._proc = None
        self._conn = None

    def _start(self) -> None:
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def _stop(self, sender: Optional[threading.Thread] = None) -> None:
        if self._proc is not None:
            self._proc.kill()          # first: a sender blocked on the pipe fails and ends
            self._proc.join()
            if sender is not None:
                sender.join()
            self._conn.close()
            self._proc = self._conn = None

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    @staticmethod
    def _send_quietly(conn, message) -> None:
        try:
            conn.send(message)
        except OSError:
            pass               # the worker died or was stopped: extract() answers for the page

    def _unanswered(self) -> Optional[str]:
        """Wait for the worker's answer while it has used less than `timeout` CPU seconds on
        the page and less than _WALL_FACTOR times that in wall-clock time; None once it has
        answered, else why it is given up."""
        timed_out = f"no text after {self.timeout:g} s"
        start = _cpu_seconds(self._proc.pid)
        if start is None:
            return None if self._conn.poll(self.timeout) else timed_out
        wall = self.timeout * _WALL_FACTOR
        deadline = time.monotonic() + wall
        while True:
            now = _cpu_seconds(self._proc.pid)
            used = 0.0 if now is None else now - start        # None: the worker has just ended
            if used >= self.timeout:
                return None if self._conn.poll(0) else timed_out
            if time.monotonic() >= deadline:
                return None if self._conn.poll(0) else (
                    f"no answer after {wall:g} s of the clock ({used:.1f} s of extraction)")
            # one thread cannot use more CPU than the time that passes: wait for what is left
            left = min(self.timeout - used, deadline - time.monotonic())
            if self._conn.poll(max(left, _TICK)):
                return None

    def extract(self, body: bytes, content_type: Optional[str]) -> tuple[Optional[Page], Optional[str], Optional[str]]:
        """(page, None, None) or (None, reason, detail) for one page, within the bounds of `_unanswered`."""
        if self._proc is None:
            self._start()
        sender = None
        try:
            if len(body) > _THREADED_SEND_BYTES:
                sender = threading.Thread(target=self._send_quietly, args=(self._conn, (body, content_type)),
                                          daemon=True)
                sender.start()
            else:
                self._conn.send((body, content_type))
            why = self._unanswered()
            if why is not None:
                self._stop(sender)
                return None, "invalid:extract_timeout", why
            status, a, b, c = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self._stop(sender)
            return None, "invalid:extract_crashed", f"extractor process died (exit code {code})"
        if sender is not None:
            sender.join()
        if status != "ok":
            return None, "invalid:extract_error", f"{a}: {b}"
        return Page(a, b, c), None, None
