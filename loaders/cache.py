"""A local cache of remote shard files under a size budget, shared by the processes of one machine.

`ShardCache(root, limit_bytes)` keeps whole shard files fetched from any fsspec URL
(`s3://`, `http(s)://`, `hdfs://`, `webhdfs://`, ...) as `root/<sha256>.parquet`, named by
the manifest's checksum, so two builds that share a shard share its copy and a rebuilt
shard never collides with the old one. Promises:

* Nothing partial is ever read: a fetch writes `root/<sha256>.<bytes>.part` and renames it
  into place (atomic on one filesystem) only after its size and sha256 match the manifest.
* A cached copy is checked against the manifest's sha256 the first time each process opens
  it (a sequential local read at hashing speed); a copy that fails is removed and fetched
  again. A copy this process fetched was hashed once, before its rename, and is not hashed
  again by this process.
* The files in `root` (copies plus reservations of fetches in progress) never add up to more
  than `limit_bytes`: a fetch first reserves its size under a lock on `root/.lock`, evicting
  the least recently opened copies (by mtime, set on every open), or waits for fetches in
  progress to finish. A reservation left by a killed process is found (its shard lock is
  free) and removed. An evicted copy that a process still has open stays readable to it
  (POSIX unlink) and frees its disk space when that process closes it.
* Two processes (DataLoader workers, threads) that want one shard fetch it once: a fetch
  holds an exclusive `flock` on `root/<sha256>.lock`, the others wait on it and then find
  the copy. Lock files are empty and are not counted in the budget.

Linux/POSIX only (fcntl). Every process using a folder should use one `limit_bytes`.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import time
from contextlib import contextmanager

import pyarrow as pa

from shardforge.shards.manifest import ManifestError

_PART = re.compile(r"^([0-9a-f]{64})\.(\d+)\.part$")
_COPY = re.compile(r"^([0-9a-f]{64})\.parquet$")
_checked: dict[int, set[tuple[str, str]]] = {}    # pid -> (root, sha256) this process has checked


def _verified() -> set[tuple[str, str]]:
    """This process's checked copies (a forked DataLoader worker starts with none: it does not
    trust its parent's checks)."""
    return _checked.setdefault(os.getpid(), set())


@contextmanager
def _flock(path: str, *, blocking: bool = True):
    """An exclusive flock on `path` (created if missing); yields False when `blocking` is
    off and another open file holds it (in this process or another)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)            # closing the descriptor releases the lock


def _sha256_of(f: pa.MemoryMappedFile) -> str:
    f.seek(0)
    h = hashlib.sha256()
    while True:
        buf = f.read_buffer(8 << 20)
        if not buf.size:
            break
        h.update(memoryview(buf))
    f.seek(0)
    return h.hexdigest()


class ShardCache:
    """Whole-file copies of remote shards in `root`, at most `limit_bytes` in all (see the
    module docstring). Cheap to pickle: it holds two values, no open files."""

    def __init__(self, root: str, limit_bytes: int):
        if int(limit_bytes) < 1:
            raise ValueError(f"cache_limit_bytes must be >= 1, got {limit_bytes}")
        self.root = os.path.abspath(os.fspath(root))
        self.limit = int(limit_bytes)

    def path_of(self, sha256: str) -> str:
        return os.path.join(self.root, f"{sha256}.parquet")

    def usage(self) -> int:
        """Bytes of copies and reservations in the folder now (what the budget bounds)."""
        return sum(size for _name, size, _kind in self._entries())

    def open(self, url: str, sha256: str, size: int, *, index: int) -> pa.MemoryMappedFile:
        """A memory-mapped local copy of the shard at `url` whose bytes have this sha256 and
        size, fetched (once per machine) if the cache has no good copy. Raises ManifestError
        when the remote file is missing or its bytes differ from the manifest."""
        os.makedirs(self.root, exist_ok=True)
        f = self._hit(sha256, size, remove_bad=False)
        if f is not None:
            return f
        with _flock(os.path.join(self.root, f"{sha256}.lock")):
            # fetched by another process meanwhile? (a bad copy is removed only here, under the
            # lock that every rename into place holds, so a fresh good copy is never removed)
            f = self._hit(sha256, size, remove_bad=True)
            if f is not None:
                return f
            self._reserve(sha256, size, index=index)
            return self._fetch(url, sha256, size, index=index)

    def cached(self, sha256: str, size: int) -> pa.MemoryMappedFile | None:
        """The good local copy with this sha256 and size, if the cache holds one; never fetches."""
        if not os.path.isdir(self.root):
            return None
        return self._hit(sha256, size, remove_bad=False)

    # -- internals ------------------------------------------------------------
    def _hit(self, sha256: str, size: int, *, remove_bad: bool) -> pa.MemoryMappedFile | None:
        """The copy, checked if this process has not checked it yet; None if there is none or
        it is bad (then removed if `remove_bad`)."""
        path = self.path_of(sha256)
        try:
            f = pa.memory_map(path, "r")
        except FileNotFoundError:
            return None
        _touch(path)
        if (self.root, sha256) in _verified():
            return f
        if f.size() == size and _sha256_of(f) == sha256:
            _verified().add((self.root, sha256))
            return f
        f.close()
        if remove_bad:                           # corrupt: drop it, the caller fetches again
            _unlink(path)
        return None

    def _entries(self):
        """(name, bytes, kind) of every copy ("copy") and reservation ("part") in the folder."""
        out = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return out
        for name in names:
            m = _PART.match(name)
            if m:
                out.append((name, int(m.group(2)), "part"))
                continue
            if _COPY.match(name):
                try:
                    out.append((name, os.stat(os.path.join(self.root, name)).st_size, "copy"))
                except FileNotFoundError:
                    pass
        return out

    def _reserve(self, sha256: str, size: int, *, index: int) -> None:
        """Create this fetch's reservation once the budget has room for `size` bytes: evict
        the least recently opened copies; if fetches in progress hold the rest, wait for
        one of them to end and look again."""
        if size > self.limit:
            raise ManifestError(f"shard {index} has {size} bytes, more than cache_limit_bytes={self.limit}")
        while True:
            wait_for = None
            with _flock(os.path.join(self.root, ".lock")):
                entries = self._entries()
                used = sum(b for _n, b, _k in entries)
                for name, nbytes, kind in entries:          # reservations of killed processes
                    if kind == "part" and used + size > self.limit:
                        sha = name.split(".", 1)[0]
                        if sha == sha256:                    # ours: this process holds its lock
                            _unlink(os.path.join(self.root, name))
                            used -= nbytes
                            continue
                        with _flock(os.path.join(self.root, f"{sha}.lock"), blocking=False) as free:
                            if free:
                                _unlink(os.path.join(self.root, name))
                                used -= nbytes
                            else:
                                wait_for = sha
                copies = sorted(((self._mtime(n), n, b) for n, b, k in entries if k == "copy"))
                for _t, name, nbytes in copies:
                    if used + size <= self.limit:
                        break
                    _unlink(os.path.join(self.root, name))
                    used -= nbytes
                if used + size <= self.limit:
                    open(os.path.join(self.root, f"{sha256}.{size}.part"), "wb").close()
                    return
            # the budget is held by fetches in progress: wait for one to finish (its lock)
            if wait_for is None:     # cannot happen while size <= limit: every byte is a copy or a fetch
                raise RuntimeError(f"shard cache {self.root}: no room for {size} bytes and nothing to wait for")
            with _flock(os.path.join(self.root, f"{wait_for}.lock")):
                pass

    def _mtime(self, name: str) -> int:
        try:
            return os.stat(os.path.join(self.root, name)).st_mtime_ns
        except FileNotFoundError:
            return 0

    def _fetch(self, url: str, sha256: str, size: int, *, index: int) -> pa.MemoryMappedFile:
        """Download into the reservation, check it, rename it into place, open it."""
        import fsspec

        part = os.path.join(self.root, f"{sha256}.{size}.part")
        try:
            fs, rpath = fsspec.core.url_to_fs(url)
            try:
                remote = fs.size(rpath)          # a file of another size is refused before it lands here
                if remote is not None and int(remote) != size:
                    raise ManifestError(f"checksum mismatch for shard {index} ({url}): {remote} bytes "
                                        f"!= manifest {size} bytes")
                fs.get_file(rpath, part)
            except FileNotFoundError:
                raise ManifestError(f"shard {index} is missing: {url}") from None
            f = pa.memory_map(part, "r")     # kept open: it reads the copy even if evicted at once
            digest, got = _sha256_of(f), f.size()
            if got != size or digest != sha256:
                f.close()
                raise ManifestError(f"checksum mismatch for shard {index} ({url}): sha256 {digest} "
                                    f"({got} bytes) != manifest {sha256} ({size} bytes)")
            os.rename(part, self.path_of(sha256))
        finally:
            _unlink(part)
        _verified().add((self.root, sha256))
        _touch(self.path_of(sha256))
        return f


def _touch(path: str) -> None:
    """The LRU clock: a copy's mtime is when it was last opened (set from time.time_ns, as
    a file's own timestamps can be a clock tick coarse)."""
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except FileNotFoundError:
        pass                 # evicted just now; a copy this process has open still reads


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
