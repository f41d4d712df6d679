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
