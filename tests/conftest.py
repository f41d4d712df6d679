"""Shared fixtures: one SparkSession for the whole test run (local[2], few shuffle
partitions, UI off, Delta on), and temp folders."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds (CI runs them all)")
    config.addinivalue_line("markers", "cluster: starts a Spark standalone cluster on 127.0.0.1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    from shardforge.config import SparkSection
    from shardforge.session import get_spark

    jars = os.environ.get("SHARDFORGE_JARS") or str(ROOT / ".jars")
    warehouse = tmp_path_factory.mktemp("warehouse")
    cfg = SparkSection(
        master="local[2]", app_name="shardforge-tests", shuffle_partitions=4, jars_dir=jars,
        properties={
            "spark.ui.enabled": "false",
            "spark.default.parallelism": "4",
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.driver.memory": "2g",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.sql.adaptive.coalescePartitions.enabled": "false",
        },
    )
    session = get_spark(cfg)
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def minihadoop(tmp_path_factory):
    """One real HDFS + YARN for the whole test session: Hadoop's MiniDFSCluster and
    MiniYARNCluster (from Maven Central, `make jars`) in a JVM of their own, on 127.0.0.1,
    one NodeManager offering 4 GB and 4 vcores."""
    from shardforge.minihadoop import MiniHadoop

    h = MiniHadoop(str(tmp_path_factory.mktemp("minihadoop")), memory_mb=4096, vcores=4).start()
    yield h
    h.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One moto S3 server on 127.0.0.1 for the whole test session, with the bucket s3server.BUCKET."""
    from s3server import S3Server

    server = S3Server(str(tmp_path_factory.mktemp("s3") / "moto.log")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def reference_run(spark, tmp_path_factory):
    """The demo pipeline on the bundled sample with the tests' local[2] session, into a local
    folder: what the YARN and S3 runs of the same input must reproduce byte for byte."""
    from shardforge.cli import main

    out = tmp_path_factory.mktemp("reference") / "out"
    code = main(["pipeline", "--conf", str(ROOT / "conf" / "demo.toml"),
                 "--input", str(ROOT / "data" / "sample" / "docs.jsonl"), "--output", str(out)])
    assert code == 0
    return out
