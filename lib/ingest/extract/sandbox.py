"""A per-task child process that extracts pages under a time bound per document.

`Sandbox(timeout)` forks one worker process; `extract(body, content_type)` sends it a page
and waits at most `timeout` seconds for the answer. A page that takes longer is answered
`invalid:extract_timeout` and the worker is killed and replaced; a page that kills the
worker (a crash in native code, a stack overflow, memory exhaustion) is answered
`invalid:extract_crashed`. Either way the task goes on with the next page, so no page can
hang or crash a Spark task. The bound is wall-clock time of the extraction itself (the
page's bytes are already read: size is bounded before, by ingest.max_page_bytes).
"""
from __future__ import annotations

import multiprocessing as mp
import threading
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

    def extract(self, body: bytes, content_type: Optional[str]) -> tuple[Optional[Page], Optional[str], Optional[str]]:
        """(page, None, None) or (None, reason, detail) for one page, within `timeout` seconds."""
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
            if not self._conn.poll(self.timeout):
                self._stop(sender)
                return None, "invalid:extract_timeout", f"no text after {self.timeout:g} s"
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
