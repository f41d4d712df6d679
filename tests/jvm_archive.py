"""A class-data archive (the JDK's AppCDS) of the classes the tests' Spark JVMs load.

Every test JVM with Spark's own class path (the session's driver, each spark-submit a test
runs, the standalone cluster's daemons and executors) loads, links and verifies some 15,000
classes before it does any work. Dumped once into an archive that those JVMs then map, that
work is done once per machine: a demo pipeline run takes 58 CPU-s instead of 64, a small
spark-submit 4.4 instead of 7.2 (measured on this project's 2-core machine).

The archive is built by one pipeline run on a slice of the bundled sample, with
`-XX:ArchiveClassesAtExit`, into the user's cache folder, named by a hash of what must match
for the JVM to use it (the java binary and its version, Spark's folder and jars, the JVM options). A JVM
whose class path does not match (a YARN container, a run with its own SPARK_CONF_DIR) ignores
the archive and starts as it would without one; `-Xlog:cds*=off` keeps that silent. Tests only:
no result depends on it. SHARDFORGE_TEST_JVM_ARCHIVE=0 turns it off.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLICE = 60            # sample documents the archiving run reads: enough to run every stage
UNUSED_DAYS = 14      # an archive no run has used for this long is removed when another is built


def _java() -> str | None:
    """The java that spark-class runs (JAVA_HOME's, or the one on PATH); None without one."""
    from minihadoop import MiniHadoopError, java_home

    try:
        return str(Path(java_home()) / "bin" / "java")
    except MiniHadoopError:
        return None


def archive_path(jvm_opts: str) -> Path | None:
    """Where the archive for this machine's java, Spark and `jvm_opts` lives (or would)."""
    from shardforge.deploy.cluster import spark_home

    java = _java()
    if not java:
        return None
    try:
        version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    key = hashlib.sha256()
    home = spark_home().resolve()        # the archive records the jars' paths: another venv's differ
    for part in (os.path.realpath(java), version, jvm_opts, str(home)):
        key.update(part.encode() + b"\0")
    for jar in sorted((home / "jars").glob("*.jar")):
        key.update(f"{jar.name}:{jar.stat().st_size}\0".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "shardforge" / "jvm-archive" / f"spark-{key.hexdigest()[:16]}.jsa"


def _build(path: Path, jvm_opts: str) -> None:
    from submit import clean_env        # submit imports this module when it first needs it

    sample = (ROOT / "data" / "sample" / "docs.jsonl").read_text().splitlines()[:SLICE]
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as tmp:
        docs = Path(tmp) / "docs.jsonl"
        docs.write_text("\n".join(sample) + "\n")
        part = path.with_name(path.name + f".{os.getpid()}.part")
        env = clean_env({"SPARK_SUBMIT_OPTS": f"{jvm_opts} -XX:ArchiveClassesAtExit={part}",
                         "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
        proc = subprocess.run(
            [sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--conf", str(ROOT / "conf" / "demo.toml"),
             "--input", str(docs), "--output", str(Path(tmp) / "out")],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0 or not part.exists():
            part.unlink(missing_ok=True)
            raise RuntimeError(f"the archiving run exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        os.replace(part, path)
    prune_others(path)


def prune_others(path: Path) -> None:
    """Remove the archives beside `path` that no test run has used for UNUSED_DAYS: for a java,
    Spark or options gone since. Not every other archive: another checkout or venv on this
    machine (another Spark folder, so another archive) may be running its tests now, and its
    next JVM would not find its own."""
    stale = time.time() - UNUSED_DAYS * 86400
    for old in path.parent.glob("spark-*.jsa"):
        try:
            if old != path and old.stat().st_mtime < stale:
                old.unlink()
                Path(f"{old}.lock").unlink(missing_ok=True)
        except FileNotFoundError:
            pass


def jvm_options(jvm_opts: str) -> str:
    """`jvm_opts`, plus the options that map the archive, which is built first if it is missing.
    Without a usable java, or when the build fails (said on stderr), `jvm_opts` alone."""
    if os.environ.get("SHARDFORGE_TEST_JVM_ARCHIVE", "1") == "0":
        return jvm_opts
    path = archive_path(jvm_opts)
    if path is None:
        return jvm_opts
    if not path.exists():
        from filelock import FileLock

        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            if not path.exists():
                print(f"tests: building the JVM class archive {path} (once per machine)", file=sys.stderr)
                try:
                    _build(path, jvm_opts)
                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                    print(f"tests: no JVM class archive, JVMs start without one: {e}", file=sys.stderr)
                    return jvm_opts
    try:
        os.utime(path)          # in use: kept when another checkout builds its own
    except OSError:
        pass
    return f"{jvm_opts} -XX:SharedArchiveFile={path} -Xlog:cds*=off"
