"""Small files beside Spark's outputs (markers, run state, locks), on any filesystem Spark writes.

`files_for(path, spark)` gives the operations for `path`: plain `os` calls for local paths
when no session is needed, or Hadoop's FileSystem through the session's JVM, which
resolves a path exactly as Spark does (a relative path lands on the default filesystem,
HDFS on a YARN cluster; `s3a://`, `hdfs://`, `file:` all work). Writes replace a file
whole: local and HDFS write a temporary name and rename it; object stores write with
one PUT, which is atomic for a reader.
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Iterator


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


def local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else (path[5:] if path.startswith("file:") else path)


@dataclass(frozen=True)
class FileStat:
    path: str        # relative to the listed folder
    size: int
    mtime: int       # milliseconds


class LocalFiles:
    """os-level operations; `create_new` is atomic (O_EXCL)."""

    def read_text(self, path: str) -> str | None:
        try:
            with open(local_path(path), encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        p = local_path(path)
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        tmp = f"{p}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)

    def create_new(self, path: str, text: str) -> bool:
        p = local_path(path)
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return True

    def rename(self, src: str, dst: str) -> bool:
        try:
            os.rename(local_path(src), local_path(dst))
            return True
        except FileNotFoundError:
            return False

    def delete(self, path: str) -> None:
        import shutil

        p = local_path(path)
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def list_files(self, path: str) -> Iterator[FileStat]:
        root = local_path(path)
        if os.path.isfile(root):
            st = os.stat(root)
            yield FileStat(os.path.basename(root), st.st_size, int(st.st_mtime * 1000))
            return
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith((".", "_")))
            for f in sorted(files):
                if f.startswith((".", "_")):
                    continue
                full = os.path.join(d, f)
                st = os.stat(full)
                yield FileStat(os.path.relpath(full, root), st.st_size, int(st.st_mtime * 1000))


class HadoopFiles:
    """The same operations through Hadoop's FileSystem in the session's JVM (a private,
    uncached instance, so switching off checksum files does not touch Spark's)."""

    def __init__(self, spark):
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._cache: dict[str, object] = {}

    def _fs(self, path: str):
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        uri = p.toUri()
        key = f"{uri.getScheme()}://{uri.getAuthority()}"
        if key not in self._cache:
            base = p.getFileSystem(self._conf)
            fs = self._jvm.org.apache.hadoop.fs.FileSystem.newInstance(base.getUri(), self._conf)
            fs.setWriteChecksum(False)
            self._cache[key] = fs
        return self._cache[key], p

    def read_text(self, path: str) -> str | None:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def _write(self, fs, p, text: str, overwrite: bool) -> None:
        out = fs.create(p, overwrite)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()

    def write_text(self, path: str, text: str) -> None:
        fs, p = self._fs(path)
        scheme = (fs.getUri().getScheme() or "").lower()
        if scheme.startswith("s3") or scheme in ("gs", "abfs", "abfss", "wasb", "wasbs", "oss"):
            self._write(fs, p, text, True)        # one PUT: atomic for readers, no rename on object stores
            return
        tmp = self._jvm.org.apache.hadoop.fs.Path(f"{path}.{uuid.uuid4().hex}.tmp")
        self._write(fs, tmp, text, True)
        if fs.exists(p):
            fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise OSError(f"could not rename {tmp.toString()} to {path}")

    def create_new(self, path: str, text: str) -> bool:
        fs, p = self._fs(path)
        try:
            self._write(fs, p, text, False)     # HDFS: atomic at the NameNode
            return True
        except Exception as exc:  # py4j wraps FileAlreadyExistsException
            if "FileAlreadyExists" in str(exc) or fs.exists(p):
                return False
            raise

    def rename(self, src: str, dst: str) -> bool:
        fs, s = self._fs(src)
        return bool(fs.rename(s, self._jvm.org.apache.hadoop.fs.Path(dst)))

    def delete(self, path: str) -> None:
        fs, p = self._fs(path)
        fs.delete(p, True)

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def children(self, path: str) -> list[str]:
        """Names of the files and folders directly in `path` (none when it is missing)."""
        fs, p = self._fs(path)
        if not fs.exists(p):
            return []
        return sorted(st.getPath().getName() for st in fs.listStatus(p))

    def list_files(self, path: str) -> Iterator[FileStat]:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return
        root = fs.getFileStatus(p)
        if root.isFile():
            yield FileStat(p.getName(), int(root.getLen()), int(root.getModificationTime()))
            return
        base = root.getPath().toUri().getPath().rstrip("/") + "/"
        it = fs.listFiles(p, True)
        found = []
        while it.hasNext():
            st = it.next()
            rel = st.getPath().toUri().getPath()[len(base):]
            if any(part.startswith((".", "_")) for part in rel.split("/")):
                continue
            found.append(FileStat(rel, int(st.getLen()), int(st.getModificationTime())))
        yield from sorted(found, key=lambda f: f.path)


def files_for(path: str, spark=None):
    """Operations for `path`: Hadoop's through `spark` when given, else local ones
    (a URL without a session is an error: it needs Hadoop's filesystems)."""
    if spark is not None:
        return HadoopFiles(spark)
    if not is_local(path):
        raise ValueError(f"{path}: a Spark session is needed to reach this filesystem")
    return LocalFiles()
