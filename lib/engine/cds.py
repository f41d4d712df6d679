"""A class-data-sharing archive for the embedded session's JVM: the classes Spark and Delta load
on every start, parsed and verified once and mapped from a file afterwards (JDK 13+'s dynamic
AppCDS). On this project's machines it halves the session's start (8.6 -> 4.5-5.1 s) and its
first job (3.9 -> 2.1 s): seconds every run pays, and a nightly batch of a few thousand
documents pays little else (BENCHMARKS.md, "Fixed costs of a run").

    python -m shardforge.engine.session --class-archive    # build it (make setup and setup-demo do)

The archive is built by a child process whose JVM runs a small Delta, Parquet and Arrow
workload and writes the classes it loaded when it exits; it lands under
`<cache>/cds/<key>.<bytes>.jsa` only once a session has started with it (written aside,
checked, then renamed; a file whose size is not the one in its name is never used: a JVM
mapping a file cut short dies). The key covers the
Java runtime (its path and `release` file) and every jar on the driver's class path (path,
size, modification time): a new JDK, pyspark or Delta jar gives a new key, and a session
whose key has no archive starts as before. `get_spark` adds `-XX:SharedArchiveFile` to an
embedded local session only, and only when the user set no `spark.driver.extraJavaOptions`;
`SHARDFORGE_CDS=0` turns it off. Class loading only: no result depends on it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


QUIET = "-Xlog:cds*=off"     # the JVM's CDS warnings (signed jars it skips, etc.) stay out of the job's log


def java_home() -> Path | None:
    """The Java runtime spark-submit will start: $JAVA_HOME, else the `java` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


def java_major(home: Path) -> int | None:
    """The major version in the runtime's `release` file (None when it cannot be read)."""
    try:
        for line in (home / "release").read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                v = line.split("=", 1)[1].strip().strip('"')
                return int(v.split(".")[0]) if not v.startswith("1.") else int(v.split(".")[1])
    except (OSError, ValueError):
        return None
    return None


def spark_home() -> Path:
    """The Spark home the session's JVM runs from, found by pyspark's own rule ($SPARK_HOME,
    else its folder with symlinks resolved): a venv reached through a symlink (or two routes
    to one venv) then has one archive, keyed by the class path the JVM really uses."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _class_path(extra_jars: list[str]) -> list[Path]:
    jars = sorted((spark_home() / "jars").glob("*.jar"))
    return jars + [Path(j) for j in extra_jars]


def archive_path(extra_jars: list[str]) -> Path | None:
    """The archive's path for this runtime and class path, without its size: the file is
    `<this>.<bytes>.jsa` (None: no JDK 13+ found)."""
    from shardforge.fs import cache_dir

    home = java_home()
    if home is None or (java_major(home) or 0) < 13:
        return None
    h = hashlib.sha256()
    try:
        h.update(str(home.resolve()).encode() + b"\0" + (home / "release").read_bytes())
        for p in _class_path(extra_jars):
            st = p.stat()
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return cache_dir() / "cds" / h.hexdigest()[:24]


def find(stem: Path) -> Path | None:
    """The complete archive of `stem`: a file whose size is the one its name records (a file
    cut short would crash the JVM that maps it, so it is never used)."""
    for p in sorted(stem.parent.glob(f"{stem.name}.*.jsa")):
        size = p.name[len(stem.name) + 1:-len(".jsa")]
        try:
            if size.isdigit() and p.stat().st_size == int(size):
                return p
        except OSError:
            continue
    return None


def enabled() -> bool:
    return os.environ.get("SHARDFORGE_CDS", "1") != "0"


def java_options(conf: dict[str, str]) -> str | None:
    """`-XX:SharedArchiveFile=...` for a session with these settings, when its archive exists
    and neither `spark.driver.extraJavaOptions` nor SPARK_SUBMIT_OPTS already sets options of
    the driver's JVM (the tests' own archive, tests/jvm_archive.py, comes that way)."""
    if not enabled() or conf.get("spark.driver.extraJavaOptions") or "Archive" in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        return None
    stem = archive_path(_jars(conf))
    path = find(stem) if stem is not None else None
    if path is None:
        return None
    try:
        os.utime(path)          # in use: kept when an archive for another JDK or jar set is built
    except OSError:
        pass
    return f"-XX:SharedArchiveFile={path} {QUIET}"


UNUSED_DAYS = 14


def prune_others(path: Path) -> None:
    """Remove the archives beside `path` that no session has used for UNUSED_DAYS (for a JDK
    or jar set gone since), and leftovers of builds that died."""
    stale = time.time() - UNUSED_DAYS * 86400
    for old in [*path.parent.glob("*.jsa"), *path.parent.glob("*.tmp")]:
        try:
            if old != path and old.stat().st_mtime < stale:
                old.unlink()
        except OSError:
            pass


def _jars(conf: dict[str, str]) -> list[str]:
    return [j for j in conf.get("spark.jars", "").split(",") if j]


WORKLOAD = """
import sys, tempfile
from pyspark.sql import functions as F
from shardforge.config import SparkSection
from shardforge.engine.session import get_spark
spark = get_spark(SparkSection(master="local[2]", properties={"spark.ui.enabled": "false",
                               "spark.driver.extraJavaOptions": sys.argv[1]}))
tmp = tempfile.mkdtemp(prefix="shardforge-cds-")
df = spark.range(0, 5000, 1, 4).select(F.col("id"), F.sha2(F.col("id").cast("string"), 256).alias("text"))
df.write.format("delta").save(tmp + "/t")
spark.read.format("delta").load(tmp + "/t").groupBy(F.col("id") % 7).count().collect()
def same(batches):
    yield from batches
df.mapInArrow(same, df.schema).write.parquet(tmp + "/p")
spark.read.parquet(tmp + "/p").join(df, "id").where("id > 10").count()
spark.stop()
"""


CHECK = """
import sys, tempfile
from shardforge.config import SparkSection
from shardforge.engine.session import get_spark
s = get_spark(SparkSection(master="local[1]", properties={"spark.ui.enabled": "false",
                           "spark.driver.extraJavaOptions": sys.argv[1]}))
s.range(10).write.format("delta").save(tempfile.mkdtemp(prefix="shardforge-cds-") + "/t")
print("rows", s.range(10).count())
"""


def build(conf: dict[str, str], force: bool = False) -> Path | None:
    """Build the archive for a session with these settings (`session.spark_conf`; skipped when
    it exists): the workload writes it aside, a second session must start with it under
    -Xshare:on (the JVM refuses an archive it cannot map), and only then is it renamed into
    place."""
    stem = archive_path(_jars(conf))
    if stem is None:
        print("cds: no JDK 13 or later found: the session starts without a class-data archive")
        return None
    found = find(stem)
    if found is not None and not force:
        print(f"cds: {found} exists")
        return found
    stem.parent.mkdir(parents=True, exist_ok=True)
    tmp = stem.with_name(f"{stem.name}.{os.getpid()}.tmp")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    env["SHARDFORGE_CDS"] = "0"
    proc = subprocess.run([sys.executable, "-c", WORKLOAD, f"-XX:ArchiveClassesAtExit={tmp} {QUIET}"],
                          env=env, capture_output=True, text=True)
    if proc.returncode == 0 and tmp.is_file():
        proc = subprocess.run([sys.executable, "-c", CHECK, f"-XX:SharedArchiveFile={tmp} -Xshare:on {QUIET}"],
                              env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        print(f"cds: no archive (exit {proc.returncode}); sessions start without one\n{proc.stderr[-2000:]}")
        return None
    path = stem.with_name(f"{stem.name}.{tmp.stat().st_size}.jsa")
    os.replace(tmp, path)
    prune_others(path)
    print(f"cds: wrote {path} ({path.stat().st_size >> 20} MiB)")
    return path
