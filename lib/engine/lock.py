"""One run at a time per output: a lock file with an owner and a heartbeat.

`RunLock(path, files, timeout=...)` creates `path` exclusively, naming its owner (host,
pid, process start time, user, command, run id). A thread rewrites the heartbeat every
`timeout / 4` seconds while the run lives. Another run that finds the lock stops at once
with `LockHeld`, whose message names the owner, unless the lock is stale:
- on the same host, its process is gone (or the pid now belongs to a later process);
- on another host, its heartbeat is older than `timeout`.
A stale lock is taken over by renaming it aside first, so of two runs racing for it one wins.
A SIGKILLed run therefore never blocks the rerun on its host, and blocks one on another
host for at most `timeout` seconds.
"""
from __future__ import annotations

import getpass
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid

log = logging.getLogger("shardforge.engine.lock")


class LockHeld(RuntimeError):
    """Another live run holds the output's lock."""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _start_time(pid)
    return start is None or now is None or now == start


def describe(owner: dict) -> str:
    return (f"pid {owner.get('pid')} on {owner.get('host')} (user {owner.get('user')}, run {owner.get('run_id')}, "
            f"started {owner.get('started')}: {owner.get('command')})")


class RunLock:
    def __init__(self, path: str, files, *, timeout: float = 120.0, run_id: str | None = None):
        self.path, self.files, self.timeout = path, files, float(timeout)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        pid = os.getpid()
        self.owner = {"host": socket.gethostname(), "pid": pid, "pid_start": _start_time(pid),
                      "user": _user(), "run_id": self.run_id, "command": " ".join(sys.argv)[:500],
                      "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def _text(self) -> str:
        return json.dumps({"owner": self.owner, "heartbeat": time.time(), "timeout": self.timeout}, sort_keys=True)

    def stale(self, held: dict) -> bool:
        owner = held.get("owner") or {}
        if owner.get("host") == self.owner["host"] and isinstance(owner.get("pid"), int):
            return not _alive(owner["pid"], owner.get("pid_start"))
        return time.time() - float(held.get("heartbeat") or 0) > float(held.get("timeout") or self.timeout)

    def acquire(self) -> "RunLock":
        for _ in range(3):
            if self.files.create_new(self.path, self._text()):
                self._thread = threading.Thread(target=self._beat, name="shardforge-lock-heartbeat", daemon=True)
                self._thread.start()
                return self
            text = self.files.read_text(self.path)
            try:
                held = json.loads(text) if text else {}
            except ValueError:
                held = {}
            if text and not self.stale(held):
                raise LockHeld(f"{self.path} is held by {describe(held.get('owner') or {})}; "
                               f"wait for that run to finish (a dead run's lock expires: same host at once, "
                               f"another host after {self.timeout:.0f} s without a heartbeat)")
            aside = f"{self.path}.stale-{uuid.uuid4().hex[:8]}"
            if text is None or self.files.rename(self.path, aside):
                if text is not None:
                    log.warning("taking over a stale lock of %s", describe(held.get("owner") or {}))
                    self.files.delete(aside)
        raise LockHeld(f"{self.path}: could not take the lock (another run keeps taking it)")

    def _beat(self) -> None:
        while not self._stop.wait(self.timeout / 4):
            try:
                text = self.files.read_text(self.path)
                if text is None or (json.loads(text).get("owner") or {}).get("run_id") != self.run_id:
                    log.error("run lock %s was taken by another run; this run no longer owns its output", self.path)
                    return
                self.files.write_text(self.path, self._text())
            except Exception as exc:  # a heartbeat that fails once is retried at the next beat
                log.warning("run lock heartbeat failed: %s", exc)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            text = self.files.read_text(self.path)
            if text and (json.loads(text).get("owner") or {}).get("run_id") == self.run_id:
                self.files.delete(self.path)
        except Exception as exc:
            log.warning("could not remove run lock %s: %s", self.path, exc)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return str(os.getuid())
