"""Running `spark-submit` (pyspark's) from a test: one process in the background whose log the
test reads when it fails, and the reference build both cluster tests compare against."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# JVM options for the JVMs the tests start on small data (drivers, executors, application
# masters, cluster daemons): the C1 compiler only and the serial collector spend less CPU on
# compiling and collecting than on the work. C1 alone shrinks the code cache to 48 MB, which the
# tests' long-lived session JVMs (thousands of generated query classes) fill: then the code
# sweeper ran nearly without pause, 40% of those JVMs' CPU (55 and 81 of 149 and 194 CPU-s in
# one run); 256 MB keeps it idle. Tests only; no result changes.
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"


def spark_jvm_opts() -> str:
    """TEST_JVM_OPTS and the class archive's options, for JVMs with Spark's own class path:
    drivers started by spark-submit, the standalone daemons and their executors (not YARN's
    containers, whose class path differs). Built on the first call; the result is kept in the
    environment for this process and the xdist workers it starts."""
    opts = os.environ.get("SHARDFORGE_TEST_SPARK_JVM_OPTS")
    if opts is None:
        from jvm_archive import jvm_options

        opts = os.environ["SHARDFORGE_TEST_SPARK_JVM_OPTS"] = jvm_options(TEST_JVM_OPTS)
    return opts


def conf_args(conf: dict[str, str]) -> list[str]:
    return [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the PySpark variables of the test session's own driver."""
    from shardforge.deploy.cluster import spark_home

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "PYSPARK_GATEWAY_PORT")}
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(spark_home()), **(extra or {})})
    return env


def run(cmd: list[str], log: Path, *, cwd: Path, env: dict[str, str], timeout: float = 1200) -> str:
    """Run `cmd` to the end; fails the test with the log's tail unless it exits 0. Returns the log."""
    t0 = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout)
    text = log.read_text(errors="replace")
    print(f"{log.name}: exit {proc.returncode} after {time.monotonic() - t0:.0f} s")
    if proc.returncode != 0:
        pytest.fail(f"{log.name}: exit {proc.returncode}:\n" + "\n".join(text.splitlines()[-60:]))
    return text


class Background:
    """One spark-submit running in the background; `wait()` fails the test with its log's tail
    unless it exits 0, and returns the seconds it ran."""

    def __init__(self, cmd: list[str], log: Path, *, cwd: Path, env: dict[str, str]):
        self.cmd, self.log, self.t0 = cmd, log, time.monotonic()
        self._out = log.open("w")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.seconds: float | None = None

    def wait(self, timeout: float = 1200) -> float:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        finally:
            self._out.close()
        if self.seconds is None:
            self.seconds = time.monotonic() - self.t0
            print(f"{self.log.name}: exit {rc} after {self.seconds:.0f} s")
        if rc != 0:
            pytest.fail(f"{self.log.name}: spark-submit failed ({rc}):\n" +
                        "\n".join(self.log.read_text(errors="replace").splitlines()[-60:]))
        return self.seconds

    def stop(self) -> None:
        """Kill it if a failed test left it running."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()


def shard_sums(manifest: dict, read) -> dict[str, str]:
    """{shard file name: sha256 of its bytes, as `read(relative file)` returns them}, each checked
    against the manifest's own record."""
    got = {}
    for s in manifest["shards"]:
        digest = hashlib.sha256(read(s["file"])).hexdigest()
        assert digest == s["sha256"], f"{s['file']}: manifest says {s['sha256']}, the bytes hash to {digest}"
        got[Path(s["file"]).name] = digest
    assert len(got) == manifest["num_shards"] > 0
    return got


def local_shards(build: Path) -> tuple[dict, dict[str, str]]:
    manifest = json.loads((build / "manifest.json").read_text())
    return manifest, shard_sums(manifest, lambda f: (build / f).read_bytes())
