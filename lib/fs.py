"""Every filesystem shardforge touches, with one set of path rules, for both sides.

Path rules (`is_local`, `local_path`, `scheme_of`, `is_object_store`) are defined once here.

**JVM side**: small files beside Spark's outputs (markers, run state, locks), on any
filesystem Spark writes.
`files_for(path, spark)` gives the operations for `path`: plain `os` calls for local paths
when no session is needed, or Hadoop's FileSystem through the session's JVM, which
resolves a path exactly as Spark does (a relative path lands on the default filesystem,
HDFS on a YARN cluster; `s3a://`, `hdfs://`, `file:` all work). Writes replace a file
whole: local and HDFS write a temporary name and rename it; object stores write with
one PUT, which is atomic for a reader.

**Python side**: how the shard writer, publication and exports reach a Hadoop path.
Spark's JVM reaches every scheme Hadoop knows; the Python code that writes shard files
and manifests (executors' `mapInArrow` tasks and the driver) uses pyarrow instead, so it
needs the same answers the Hadoop configuration gives the JVM:

- local paths (and `file:`): pyarrow's local filesystem;
- `hdfs://`: the NameNode's WebHDFS (REST over HTTP, through fsspec), because pyarrow's
  own HDFS client needs `libhdfs`, which neither Spark nor pyspark ships;
- object stores `s3a://`, `s3://`: pyarrow's S3 client, with the endpoint, region,
  path-style access and (when the configuration holds them) keys of `fs.s3a.*`; without
  keys in the configuration it uses AWS's default chain (environment, profile, role).

`StorageOptions.from_spark(spark)` reads those settings on the driver; the options are a
small frozen dataclass that pickles into the tasks. `qualify(spark, path)` is the path as
Spark resolves it (a relative path lands on the default filesystem: HDFS on a YARN cluster).
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit


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


def delete_path(spark, path: str) -> None:
    """Delete a folder (recursively) or file that Spark wrote, through Hadoop's FileSystem:
    the same resolution Spark used to write it (a relative path lands on the default
    filesystem, HDFS on a YARN cluster), and any scheme it knows (file, hdfs, s3a, ...).
    A missing path is not an error."""
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(hpath, True)


def files_for(path: str, spark=None):
    """Operations for `path`: Hadoop's through `spark` when given, else local ones
    (a URL without a session is an error: it needs Hadoop's filesystems)."""
    if spark is not None:
        return HadoopFiles(spark)
    if not is_local(path):
        raise ValueError(f"{path}: a Spark session is needed to reach this filesystem")
    return LocalFiles()

OBJECT_STORES = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "oss"})


def scheme_of(path: str) -> str:
    return path.split("://", 1)[0].lower() if "://" in path else ("file" if path.startswith("file:") else "")


def is_object_store(path: str) -> bool:
    """Stores without an atomic rename, where publication must not rename (see shardio)."""
    return scheme_of(path) in OBJECT_STORES


@dataclass(frozen=True)
class StorageOptions:
    default_fs: str = ""                            # fs.defaultFS, for hdfs:/// paths without a host
    webhdfs: tuple[tuple[str, str], ...] = ()       # (NameNode authority, its HTTP host:port)
    hdfs_user: str = ""
    s3: tuple[tuple[str, str], ...] = ()            # fs.s3a.* settings pyarrow's S3 client takes

    @classmethod
    def from_spark(cls, spark) -> "StorageOptions":
        """What the session's Hadoop configuration says about HDFS and S3 (read on the driver)."""
        conf = spark.sparkContext._jsc.hadoopConfiguration()

        def get(key: str) -> str:
            value = conf.get(key)
            return str(value) if value is not None else ""

        default_fs = get("fs.defaultFS")
        webhdfs = []
        http = get("dfs.namenode.http-address")
        if default_fs.startswith("hdfs://") and http:
            host, _, port = http.rpartition(":")
            if host in ("", "0.0.0.0"):
                host = urlsplit(default_fs).hostname or "localhost"
            webhdfs.append((urlsplit(default_fs).netloc, f"{host}:{port}"))
        user = spark.sparkContext.sparkUser() or ""
        keys = {"endpoint": "fs.s3a.endpoint", "region": "fs.s3a.endpoint.region",
                "path_style": "fs.s3a.path.style.access", "access_key": "fs.s3a.access.key",
                "secret_key": "fs.s3a.secret.key", "session_token": "fs.s3a.session.token",
                "ssl": "fs.s3a.connection.ssl.enabled"}
        s3 = tuple((k, get(v)) for k, v in keys.items() if get(v))
        return cls(default_fs=default_fs, webhdfs=tuple(webhdfs), hdfs_user=user, s3=s3)


    @classmethod
    def from_env(cls) -> "StorageOptions":
        """Without a session (the loader, tools, tests): the S3 endpoint and region AWS's own
        variables name (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION); keys from AWS's chain."""
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
        s3 = (("endpoint", endpoint), ("path_style", "true")) if endpoint else ()
        return cls(s3=s3 + ((("region", region),) if region else ()))


def qualify(spark, path: str) -> str:
    """`path` as Spark resolves it: a relative or scheme-less path is qualified against the
    default filesystem. Paths that resolve to the local disk are returned unchanged."""
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    qualified = str(fs.makeQualified(hpath).toString())
    return path if qualified.startswith("file:") else qualified


def _s3_filesystem(options: StorageOptions):
    from pyarrow import fs

    s3 = dict(options.s3)
    kwargs: dict = {}
    endpoint = s3.get("endpoint", "")
    if endpoint:
        if "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
            kwargs["scheme"] = scheme
        elif s3.get("ssl", "true").lower() == "false":
            kwargs["scheme"] = "http"
        kwargs["endpoint_override"] = endpoint.rstrip("/")
    if s3.get("region"):
        kwargs["region"] = s3["region"]
    if s3.get("path_style", "").lower() == "true":
        kwargs["force_virtual_addressing"] = False
    if s3.get("access_key") and s3.get("secret_key"):
        kwargs.update(access_key=s3["access_key"], secret_key=s3["secret_key"],
                      session_token=s3.get("session_token") or None)
    return fs.S3FileSystem(**kwargs)


def _webhdfs(authority: str, options: StorageOptions):
    from fsspec.implementations.webhdfs import WebHDFS
    from pyarrow import fs

    http = dict(options.webhdfs).get(authority)
    if http is None:
        known = ", ".join(a for a, _ in options.webhdfs) or "none"
        raise OSError(f"hdfs://{authority}: no WebHDFS address known for this NameNode (known: {known}); "
                      f"set dfs.namenode.http-address in the Hadoop configuration")
    host, _, port = http.rpartition(":")
    client = WebHDFS(host, port=int(port), user=options.hdfs_user or None)
    return fs.PyFileSystem(fs.FSSpecHandler(client))


def filesystem(path: str, options: StorageOptions | None = None):
    """(pyarrow filesystem, the path inside it) for a local path or a URL."""
    from pyarrow import fs

    options = options or StorageOptions.from_env()
    scheme = scheme_of(path)
    if scheme in ("", "file"):
        return fs.LocalFileSystem(), os.path.abspath(local_path(path))
    parts = urlsplit(path)
    if scheme == "hdfs":
        authority = parts.netloc or urlsplit(options.default_fs).netloc
        return _webhdfs(authority, options), parts.path or "/"
    if scheme in ("s3", "s3a", "s3n"):
        return _s3_filesystem(options), f"{parts.netloc}{parts.path}".rstrip("/")
    return fs.FileSystem.from_uri(path)


# --- errors a remote filesystem gives, said plainly -------------------------------------------
_NO_CREDENTIALS = ("NoAuthWithAWSException", "No AWS Credentials", "Unable to load credentials",
                   "NoCredentialsError", "Unable to locate credentials", "InvalidAccessKeyId",
                   "SignatureDoesNotMatch", "AccessDenied", "403 Forbidden")
_UNREACHABLE = ("java.net.ConnectException", "UnknownHostException", "ConnectTimeoutException",
                "NoRouteToHostException", "Unable to execute HTTP request", "Connection refused",
                "EndpointConnectionError", "Could not connect to the endpoint", "Failed to connect")
_ENDPOINT = (re.compile(r"\bto ([\w.\-\[\]:]+:\d+) failed"), re.compile(r"Connect to ([\w.\-]+:\d+)"),
             re.compile(r"endpoint URL: \"?([^\s\"]+)"), re.compile(r"https?://([\w.\-]+:\d+)"))
_REMOTE = re.compile(r"\b((?:hdfs|s3a|s3|s3n|webhdfs|gs|abfss?)://[^\s'\"`,;)]+)")


class RemoteStorageError(OSError):
    """A remote filesystem that cannot be reached or will not take our credentials; `code` is
    the exit code the CLI gives it (see `explain`)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _first(patterns, text: str) -> str | None:
    for p in patterns:
        m = p.search(text)
        if m:
            return m.group(1)
    return None


def explain(exc: BaseException) -> RemoteStorageError | None:
    """A plain error for a failure to reach HDFS or an object store, or None for anything else.

    Missing or rejected credentials are bad configuration: exit 2, like any config error (a
    retry cannot help until someone sets them). An endpoint that does not answer is exit 1,
    "anything else": the endpoint may be named right and merely down, and a scheduler's
    retry can then succeed; the message names the endpoint either way."""
    text = f"{type(exc).__name__}: {exc}"
    path = _first((_REMOTE,), text)
    where = f" ({path})" if path else ""
    if any(s in text for s in _NO_CREDENTIALS):
        return RemoteStorageError(
            f"no usable credentials for the object store{where}: set AWS_ACCESS_KEY_ID and "
            f"AWS_SECRET_ACCESS_KEY (or spark.hadoop.fs.s3a.access.key / secret.key, or an AWS profile "
            f"or role) and check they are valid for the bucket", 2)
    if any(s in text for s in _UNREACHABLE):
        endpoint = _first(_ENDPOINT, text) or path or "the filesystem's endpoint"
        reason = next((ln.strip(" :\t") for ln in text.splitlines() if any(s in ln for s in _UNREACHABLE)), "")
        return RemoteStorageError(f"cannot reach {endpoint}{where}: {reason[:300]}", 1)
    return None


_SHA: dict[tuple, str] = {}


def file_sha256(path: str) -> str:
    """sha256 of a local file's bytes, read 8 MiB at a time; remembered per (path, size,
    mtime), so a run hashes a large file once (a model's check, then the stage fingerprint)."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(8 << 20):
                h.update(chunk)
        _SHA[key] = h.hexdigest()
    return _SHA[key]


def cache_dir() -> Path:
    """This machine's cache of derived files (kernel arguments, the JVM's class-data archive):
    `$SHARDFORGE_CACHE`, else `$XDG_CACHE_HOME/shardforge`, else ~/.cache/shardforge."""
    if os.environ.get("SHARDFORGE_CACHE"):
        return Path(os.environ["SHARDFORGE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shardforge"
