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


# Every Spark driver (the session's, each spark-submit a test runs) and standalone daemon the
# tests start runs with submit.TEST_JVM_OPTS (the tests' session plus one demo pipeline: 60.7
# CPU-s instead of 109.9 on this 2-core machine) and maps the class archive of
# tests/jvm_archive.py (built here, once per machine, before the first JVM starts); a user's own
# settings are kept.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from submit import TEST_JVM_OPTS, spark_jvm_opts  # noqa: E402

os.environ.setdefault("SPARK_SUBMIT_OPTS", spark_jvm_opts())
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", spark_jvm_opts())

# The modules that take minutes (spark-submit runs, clusters), longest first. `make test` runs
# the suite on 2 xdist workers, a module at a time (--dist loadfile), handing modules out in
# collection order (--no-loadscope-reorder: xdist would otherwise start the modules with the most
# tests first, and these have few): starting the long ones first keeps one of them from running
# alone at the end.
LONG_FIRST = ("test_cluster.py", "test_yarn.py", "test_resume.py", "test_funnel_scale.py", "test_s3.py",
              "test_conf_files.py", "test_privacy.py", "test_dedup_stage.py", "test_incremental.py",
              "test_shards.py", "test_download_resume.py", "test_runner.py", "test_annotate.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: order within a module kept


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds (CI runs them all)")
    config.addinivalue_line("markers", "cluster: starts a Spark standalone cluster on 127.0.0.1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    from shardforge.config import SparkSection
    from shardforge.engine.session import get_spark

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
    one NodeManager offering 8 GB and 8 vcores: room for the YARN tests' two applications at
    once (each an application master and two executors of under 1 GB; YARN accounts the
    memory, the JVMs use less)."""
    from minihadoop import MiniHadoop

    h = MiniHadoop(str(tmp_path_factory.mktemp("minihadoop")), memory_mb=8192, vcores=8,
                   java_options=tuple(TEST_JVM_OPTS.split())).start()
    yield h
    h.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One moto S3 server (an emulator of the S3 API, not AWS) on 127.0.0.1 for the whole test
    session, with the bucket s3server.BUCKET."""
    from s3server import S3Server

    server = S3Server(str(tmp_path_factory.mktemp("s3") / "moto.log")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def reference_run(spark, tmp_path_factory, request):
    """The demo pipeline on the bundled sample with the tests' local[2] session, into a local
    folder: what the YARN and S3 runs of the same input must reproduce byte for byte. Under
    xdist it runs once per test run: the first worker that needs it builds it under a file
    lock in the run's shared temp folder, and the others read that folder."""
    from filelock import FileLock

    from shardforge.engine.cli import main

    worker = getattr(request.config, "workerinput", {}).get("workerid")
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker else base) / "reference"     # pytest-N/ is this run's, shared by its workers
    root.mkdir(exist_ok=True)
    out, done = root / "out", root / "built"
    with FileLock(str(root / "lock")):
        if not done.exists():
            if out.exists():                                   # a worker that failed halfway
                import shutil

                shutil.rmtree(out)
            code = main(["pipeline", "--conf", str(ROOT / "conf" / "demo.toml"),
                         "--input", str(ROOT / "data" / "sample" / "docs.jsonl"), "--output", str(out)])
            assert code == 0
            done.write_text(worker or "main")
    return out


@pytest.fixture
def stage_runs(monkeypatch):
    """The stages that really run in this process, in order: every stage function the runner
    calls (`shardforge.engine.steps.<spec.function>`, looked up at each call) is wrapped to
    record its stage's name before it runs. A stage the runner reuses is not called, so a
    runner that recomputes a stage while reporting it reused shows up here."""
    import shardforge.engine.steps as steps
    from shardforge.stages import REGISTRY

    calls: list[str] = []

    def counted(name, real):
        def run(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)
        return run

    for spec in REGISTRY.values():
        monkeypatch.setattr(steps, spec.function, counted(spec.name, getattr(steps, spec.function)))
    real_fused = steps.ingest_clean

    def fused(*args, **kwargs):     # ingest and clean in one pass (shardforge.ingest.fused)
        calls.extend(["ingest", "clean"])
        return real_fused(*args, **kwargs)

    monkeypatch.setattr(steps, "ingest_clean", fused)
    return calls
