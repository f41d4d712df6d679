"""The Python side's filesystems: how the shard writer and publication reach a Hadoop path.

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

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .fsops import local_path

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
