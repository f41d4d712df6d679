"""Reader processes without torch: a rank's pass decoded in child interpreters that
import only pyarrow, numpy and this package, and handed to the training process in order.

A process that imports torch holds a few hundred MB before it reads a byte (PyPI's
CUDA build: about 570 MB of RSS on import), and a DataLoader worker is a copy of the
training process, torch included. With `reader_processes=K` a dataset iterated in
the training process (num_workers=0) starts K fresh interpreters
(`python -m shardforge.loaders.procread`); reader k reads the pass's chunks k, k+K,
k+2K, ..., exactly what DataLoader worker k of K would read, and the training process
takes them round-robin from reader 0, as a DataLoader collects its workers' batches.
So the sequence is the one num_workers=0 gives, and the state is the training
process's own (`consumed` = the samples it handed out), saved and loaded as usual.

Transport: each reader writes frames to a pipe of 1 MB (the pipe is the read-ahead:
a reader blocks when its pipe is full, so a reader holds at most its two windows plus
one chunk in flight). A frame is a 16-byte header (magic, kind, payload length) and
a payload: an Arrow IPC stream of one table, a numpy array (dtype, shape, bytes), the
end of the reader's chunks (with its rows and peak RSS), or its error. A reader's
error is raised in the training process as the same exception, with the reader's
traceback as its cause; a reader that dies without one is a LoaderError naming its
exit code. A reader exits when its pipe's far end closes or its stdin reaches EOF
(the training process stopped reading or died).
"""
from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import threading
import traceback
from typing import Iterator

import numpy as np
import pyarrow as pa

from .source import LoaderError

_HEADER = struct.Struct("<4sB3xQ")
_MAGIC = b"SFRD"
_TABLE, _ARRAY, _END, _ERROR = 1, 2, 3, 4
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031


class RemoteTraceback(Exception):
    """The traceback of an error raised in a reader process (the cause of the re-raised error)."""

    def __str__(self) -> str:
        return self.args[0]


# -- the reader process ------------------------------------------------------------
def _peak_rss() -> int:
    """This process's peak resident set, bytes (VmHWM)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _send(out, *parts) -> None:
    """Write every byte of `parts` (a raw pipe write may take only part of a buffer)."""
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            view = view[out.write(view):]


def _write_frame(out, kind: int, payload) -> None:
    view = memoryview(payload).cast("B")
    _send(out, _HEADER.pack(_MAGIC, kind, view.nbytes), view)


def _write_chunk(out, chunk) -> None:
    if isinstance(chunk, np.ndarray):
        arr = np.ascontiguousarray(chunk)
        meta = json.dumps({"dtype": arr.dtype.str, "shape": list(arr.shape)}).encode()
        head = struct.pack("<I", len(meta)) + meta
        _send(out, _HEADER.pack(_MAGIC, _ARRAY, len(head) + arr.nbytes), head, arr)
        return
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, chunk.schema) as writer:
        writer.write_table(chunk)
    _write_frame(out, _TABLE, sink.getvalue())


def _watch_stdin(stdin) -> None:
    """Exit as soon as the training process closes our stdin or dies."""
    try:
        stdin.read()
    finally:
        os._exit(0)


def main() -> int:
    out = io.FileIO(os.dup(1), "wb", closefd=True)     # frames only on the pipe
    os.dup2(2, 1)                                      # a stray print goes to stderr
    stdin = sys.stdin.buffer
    (size,) = struct.unpack("<Q", stdin.read(8))
    reader, chunk, index, count = pickle.loads(stdin.read(size))
    threading.Thread(target=_watch_stdin, args=(stdin,), daemon=True).start()
    rows = 0
    try:
        try:
            for table in reader.iter_tables(chunk, index, count):
                _write_chunk(out, table)
                rows += len(table)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except BaseException as exc:    # handed to the training process, which raises it
            tb = traceback.format_exc()
            try:
                payload = pickle.dumps((exc, tb))
                pickle.loads(payload)
            except Exception:
                payload = pickle.dumps((LoaderError(f"{type(exc).__name__}: {exc}"), tb))
            _write_frame(out, _ERROR, payload)
            out.flush()
            return 1
        _write_frame(out, _END, json.dumps({"rows": rows, "peak_rss": _peak_rss()}).encode())
        out.flush()
    except (BrokenPipeError, ConnectionResetError):
        return 0          # the training process stopped reading
    return 0


# -- the training process ----------------------------------------------------------
def _read_exact(fh, n: int) -> memoryview | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = fh.readinto(view[got:])
        if not k:
            return None
        got += k
    return view


class _Reader:
    """One reader process and the read end of its pipe."""

    def __init__(self, job: bytes, index: int):
        self.index = index
        self.proc = subprocess.Popen([sys.executable, "-m", "shardforge.loaders.procread"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            import fcntl

            fcntl.fcntl(self.proc.stdout.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
        except OSError:       # the system's pipe-max-size is lower: the default pipe works too
            pass
        self.stats: dict | None = None
        try:
            self.proc.stdin.write(struct.pack("<Q", len(job)) + job)
            self.proc.stdin.flush()
        except BrokenPipeError:     # it exited before reading its job (an interpreter that cannot start)
            raise self._exited("before it took its job") from None

    def _exited(self, when: str) -> LoaderError:
        """The error for a reader process that ended `when` (it is waited for here)."""
        code = self.proc.wait()
        return LoaderError(f"reader process {self.index} (pid {self.proc.pid}) exited with code {code} "
                           f"{when}; its stderr is above")

    def next(self):
        """The reader's next chunk, or None at its end (its stats are kept)."""
        head = _read_exact(self.proc.stdout, _HEADER.size)
        if head is None:
            raise self._exited("before finishing its chunks")
        magic, kind, size = _HEADER.unpack(head)
        if magic != _MAGIC:
            raise LoaderError(f"reader process {self.index} wrote something that is not a frame "
                              f"({bytes(head[:4])!r})")
        payload = _read_exact(self.proc.stdout, size) if size else memoryview(b"")
        if payload is None:
            raise self._exited("in the middle of a chunk")
        if kind == _TABLE:
            return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
        if kind == _ARRAY:
            (n,) = struct.unpack("<I", payload[:4])
            meta = json.loads(bytes(payload[4:4 + n]))
            return np.frombuffer(payload[4 + n:], dtype=np.dtype(meta["dtype"])).reshape(meta["shape"])
        if kind == _END:
            self.stats = json.loads(bytes(payload))
            return None
        if kind == _ERROR:
            exc, tb = pickle.loads(payload)
            exc.__cause__ = RemoteTraceback(f"in reader process {self.index}:\n{tb}")
            raise exc
        raise LoaderError(f"reader process {self.index} wrote a frame of unknown kind {kind}")

    def stop(self) -> None:
        for fh in (self.proc.stdin, self.proc.stdout):
            try:
                fh.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def read_in_processes(reader, chunk: int, count: int, stats: list | None = None) -> Iterator:
    """The chunks of `reader`'s pass from its current position, read by `count` reader
    processes and yielded in the pass's order. `reader` is a torch-free reader
    (ShardReader, SequenceReader, MixtureReader) whose pass is already settled on
    `chunk`; it is pickled to each process. `stats`, when given, receives each reader's
    {"rows", "peak_rss"} once all have ended."""
    readers: list[_Reader] = []
    try:
        for k in range(count):
            readers.append(_Reader(pickle.dumps((reader, chunk, k, count)), k))
        live = list(readers)
        while live:
            for r in list(live):
                chunk_out = r.next()
                if chunk_out is None:
                    live.remove(r)
                    continue
                yield chunk_out
        if stats is not None:
            stats[:] = [r.stats for r in readers]
    finally:
        for r in readers:
            r.stop()


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)      # not a normal shutdown: the stdin watcher is still blocked in its read
