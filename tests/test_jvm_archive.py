"""The tests' own JVMs map the class archive of tests/jvm_archive.py: a JVM started as
spark-submit starts its drivers, with sharing required (-Xshare:on), exits 0 only when the
archive matches its java and class path. Without this check a changed Spark or class path
would quietly cost every test JVM its saving."""
from __future__ import annotations

import os
import subprocess

import pytest

from submit import clean_env


def test_a_spark_submit_jvm_maps_the_class_archive():
    opts = os.environ["SPARK_SUBMIT_OPTS"]
    if "-XX:SharedArchiveFile=" not in opts:
        pytest.skip("SHARDFORGE_TEST_JVM_ARCHIVE=0, or no archive could be built (said at the run's start)")
    from shardforge.deploy.cluster import spark_home

    strict = opts.replace("-Xlog:cds*=off", "-Xshare:on")
    proc = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--version"],
                          env=clean_env({"SPARK_SUBMIT_OPTS": strict}), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "version" in proc.stderr + proc.stdout


def test_building_an_archive_keeps_the_ones_other_checkouts_use(tmp_path):
    """Two checkouts (two Spark folders, two archives) testing on one machine at once: building
    one's archive must not remove the other's, which its next JVM needs; only archives unused
    for UNUSED_DAYS go."""
    import time

    from jvm_archive import UNUSED_DAYS, prune_others

    mine, in_use, stale = (tmp_path / f"spark-{n}.jsa" for n in ("mine", "in-use", "stale"))
    for f in (mine, in_use, stale):
        f.write_bytes(b"x")
        (tmp_path / f"{f.name}.lock").write_bytes(b"")
    old = time.time() - (UNUSED_DAYS + 1) * 86400
    os.utime(stale, (old, old))
    prune_others(mine)
    assert mine.exists() and in_use.exists() and not stale.exists()
    assert not (tmp_path / "spark-stale.jsa.lock").exists()
