"""The pipeline on a real YARN with HDFS (Hadoop's MiniYARNCluster + MiniDFSCluster, the
session's `minihadoop`), submitted with spark-submit as docs/cluster.md says, in client and
in cluster deploy mode.

The code is shipped as `python -m shardforge.deploy.packaging` builds it (`--py-files` zip plus
Delta's jars); the containers' Python is the worker venv, which has no shardforge. The
input is on `hdfs://`, the output a relative path, which must land in HDFS (the user's
home), not on the local disk. Checked: the shards' sha256 equal a local[2] run's, the
curated Delta table on HDFS holds the same rows, the run report is on HDFS, the
application ran in YARN containers (the ResourceManager's REST API: its id, state and
every container's log), and the torch loader reads the build from HDFS through WebHDFS.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shardforge.deploy import cluster

from shardforge.deploy import packaging
from submit import ROOT, TEST_JVM_OPTS, Background, clean_env, conf_args, local_shards, shard_sums

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

SAMPLE = ROOT / "data" / "sample" / "docs.jsonl"
# sized for the one-NodeManager mini cluster (8 GB accounted, both deploy modes at once) on a 2-core machine
RESOURCES = {
    "spark.executor.instances": "2", "spark.executor.cores": "1", "spark.executor.memory": "512m",
    "spark.executor.memoryOverhead": "384m", "spark.driver.memory": "768m", "spark.yarn.am.memory": "384m",
    "spark.dynamicAllocation.enabled": "false", "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4", "spark.databricks.delta.snapshotPartitions": "2",
    "spark.driver.host": "127.0.0.1",
    # YARN drops spark.driver.host in cluster mode: the driver in the AM's container binds to
    # the address SPARK_LOCAL_IP names (else the machine's hostname, on every interface)
    "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": "127.0.0.1",
    # in cluster mode the driver is the application master: at our default WARN it would drop
    # YarnAllocator's "Launching container" lines (container_logs reads them) once it is running
    "spark.yarn.appMasterEnv.SHARDFORGE_SPARK_LOG_LEVEL": "INFO",
    # the containers' JVMs (the driver's in cluster mode) as the tests' other JVMs
    "spark.executor.extraJavaOptions": TEST_JVM_OPTS, "spark.yarn.am.extraJavaOptions": TEST_JVM_OPTS,
    "spark.driver.extraJavaOptions": TEST_JVM_OPTS,
}
LOOPBACK = ("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def yarn(minihadoop, tmp_path_factory):
    """A work folder with dist/ (the packaged code and Delta's jars), the input and the event
    log folder on HDFS, and the command line of both deploy modes."""
    work = tmp_path_factory.mktemp("yarn")
    dist = packaging.build(work / "dist", jars=True, root=ROOT)
    # the worker venv's packages plus fsspec (shard writers reach hdfs:// through WebHDFS), in
    # a venv of its own: the standalone tests' venv is shared with other checkouts
    py = cluster.worker_python(cluster.WORKER_VENV.with_name("worker-venv-hdfs"), (*cluster.WORKER_PACKAGES, "fsspec"))
    hdfs = webhdfs(minihadoop)
    hdfs.makedirs("/data", exist_ok=True)
    hdfs.put_file(str(SAMPLE), "/data/docs.jsonl")
    hdfs.makedirs("/spark-history", exist_ok=True)       # spark-yarn.conf's spark.eventLog.dir
    py_files = ",".join(str(Path(p).relative_to(work)) for p in packaging.py_files(dist["zip"].parent))
    env = clean_env(minihadoop.env())

    def submit(mode: str, output: str) -> Background:
        conf = {**RESOURCES, "spark.pyspark.python": py, "spark.pyspark.driver.python": py,
                "spark.yarn.jars": f"local:{cluster.spark_home()}/jars/*",   # Spark is installed on the "nodes"
                "spark.app.name": f"shardforge-{mode}"}
        files = ["--files", str(ROOT / "conf" / "demo.toml")] if mode == "cluster" else []
        job_conf = "demo.toml" if mode == "cluster" else str(ROOT / "conf" / "demo.toml")
        cmd = [cluster.spark_submit(), "--properties-file", str(ROOT / "conf" / "spark-yarn.conf"),
               "--master", "yarn", "--deploy-mode", mode, *files, "--jars", "dist/jars/*.jar",
               "--py-files", py_files, *conf_args(conf),
               "dist/shardforge_submit.py", "pipeline", "--conf", job_conf,
               "--input", "hdfs:///data/docs.jsonl", "--output", output]
        return Background(cmd, work / f"{mode}.log", cwd=work, env=env)

    return work, submit


def webhdfs(h):
    """An fsspec client of the mini cluster's WebHDFS (what the loader uses for `webhdfs://`)."""
    from fsspec.implementations.webhdfs import WebHDFS

    host, port = h.webhdfs.rsplit(":", 1)
    return WebHDFS(host, port=int(port), user="root")


def _home(output: str) -> str:
    return f"/user/root/{output}"


@pytest.fixture(scope="module")
def runs(yarn) -> dict[str, str]:
    """Both deploy modes submitted at once, as two users would: the NodeManager offers room for
    both applications, and the two runs' waits on YARN overlap. {mode: output}."""
    started = {mode: (yarn[1](mode, f"{mode}-out"), f"{mode}-out") for mode in ("client", "cluster")}
    try:
        for job, _ in started.values():
            job.wait()
    finally:
        for job, _ in started.values():
            job.stop()
    return {mode: out for mode, (_, out) in started.items()}


@pytest.fixture(scope="module")
def client_run(runs) -> str:
    return runs["client"]


@pytest.fixture(scope="module")
def cluster_run(runs) -> str:
    return runs["cluster"]


def _check_run(minihadoop, spark, reference_run, work: Path, output: str, log: str, mode: str) -> dict:
    """The checks both deploy modes share; returns the application's YARN record."""
    hdfs = webhdfs(minihadoop)
    assert not (work / output).exists(), "the relative --output landed on the local disk"
    build = f"{_home(output)}/shards"
    manifest = json.loads(hdfs.cat_file(f"{build}/manifest.json"))
    _, expected = local_shards(reference_run / "shards")
    assert shard_sums(manifest, lambda f: hdfs.cat_file(f"{build}/{f}")) == expected
    assert manifest["source"]["table"] == f"{minihadoop.fs_default}{_home(output)}/curated"
    # the curated Delta table on HDFS holds what the local run's holds
    curated = spark.read.format("delta").load(f"{minihadoop.fs_default}{_home(output)}/curated")
    local = spark.read.format("delta").load(str(reference_run / "curated"))
    assert sorted(curated.toJSON().collect()) == sorted(local.toJSON().collect())
    report = json.loads(hdfs.cat_file(f"{_home(output)}/report.json"))
    assert [s["name"] for s in report["stages"]][-1] == "build-shards"
    assert report["run"]["master"] == "yarn" and report["shards"]["build_id"] == manifest["build_id"]
    assert not hdfs.exists(f"{_home(output)}/_lock.json") and not hdfs.exists(f"{_home(output)}/_run")
    # the application, as the ResourceManager's REST API records it, and its containers' logs
    (app_id,) = set(re.findall(r"application_\d+_\d+", log))
    app = minihadoop.app(app_id)
    assert (app["name"], app["applicationType"], app["state"], app["finalStatus"]) == \
           (f"shardforge-{mode}", "SPARK", "FINISHED", "SUCCEEDED")
    logs = minihadoop.container_logs(app_id)
    print(f"{mode}: {app_id} ran in {len(logs)} containers: {sorted(logs)}")
    executors = [c for c, text in logs.items() if "Starting executor ID" in text]
    assert len(logs) == 3 and len(executors) == 2, {c: t[-500:] for c, t in logs.items()}
    assert all("Running task" in logs[c] for c in executors)
    assert_loopback(logs, executors)
    return app


def assert_loopback(logs: dict[str, str], executors: list[str]) -> None:
    """Every Spark endpoint the containers' logs name (the driver, each block manager) is on
    the loopback interface: nothing the test starts listens on the machine's network."""
    hosts = {c: set(re.findall(r"CoarseGrainedScheduler@([^:/\s]+):", t)) |
             set(re.findall(r"BlockManagerId\([^,]+, ([^,]+),", t)) for c, t in logs.items()}
    assert all(hosts[c] for c in executors), hosts
    assert set().union(*hosts.values()) <= set(LOOPBACK), hosts


def test_client_mode_on_yarn_with_hdfs_gives_the_local_bytes(client_run, yarn, minihadoop, spark, reference_run):
    work, _ = yarn
    log = (work / "client.log").read_text(errors="replace")
    _check_run(minihadoop, spark, reference_run, work, client_run, log, "client")
    assert "pipeline:" in log and "build b-" in log          # the driver ran here


def test_cluster_mode_on_yarn_with_hdfs_gives_the_local_bytes(cluster_run, yarn, minihadoop, spark, reference_run):
    work, _ = yarn
    log = (work / "cluster.log").read_text(errors="replace")
    app = _check_run(minihadoop, spark, reference_run, work, cluster_run, log, "cluster")
    # the driver ran in the application master's container: its output is that container's stdout
    stdout = minihadoop.container_logs(app["id"], "stdout")
    am = [c for c in stdout if c.endswith("_000001")]
    assert am and "pipeline:" in stdout[am[0]] and "build b-" in stdout[am[0]]
    assert "pipeline:" not in log


def test_loader_reads_the_build_from_hdfs_through_webhdfs(client_run, minihadoop, reference_run):
    from shardforge.loaders import ShardedDataset

    url = f"webhdfs://{minihadoop.webhdfs}/user/root/{client_run}/shards"
    remote = ShardedDataset(url, rank=0, world_size=1, seed=7, shuffle=True, verify=True)
    local = ShardedDataset(str(reference_run / "shards"), rank=0, world_size=1, seed=7, shuffle=True)
    got = [r["id"] for r in remote]
    assert got == [r["id"] for r in local] and len(got) == remote.total > 0


def test_the_loader_cache_keeps_a_webhdfs_build_once_read(minihadoop, reference_run, tmp_path):
    """`cache_dir` over webhdfs://: the first pass copies each shard into the cache (named by
    its sha256), and a second pass reads only the cache: it still works after the shard
    files are deleted from HDFS (the manifest stays)."""
    from shardforge.loaders import ShardedDataset

    hdfs = webhdfs(minihadoop)
    local = reference_run / "shards"
    manifest = json.loads((local / "manifest.json").read_text())
    dest = "/user/root/cache-check/shards"
    for rel in ["manifest.json", *[s["file"] for s in manifest["shards"]]]:
        hdfs.makedirs(f"{dest}/{rel}".rsplit("/", 1)[0], exist_ok=True)
        hdfs.put_file(str(local / rel), f"{dest}/{rel}")
    url = f"webhdfs://{minihadoop.webhdfs}{dest}"
    cache = tmp_path / "cache"
    kw = dict(rank=0, world_size=1, seed=7, shuffle=True, cache_dir=str(cache), cache_limit_bytes=1 << 30)
    expected = [r["id"] for r in ShardedDataset(str(local), rank=0, world_size=1, seed=7, shuffle=True)]
    assert [r["id"] for r in ShardedDataset(url, **kw)] == expected
    cached = {p.read_bytes() for p in cache.rglob("*") if p.is_file() and p.suffix == ".parquet"}
    assert cached == {(local / s["file"]).read_bytes() for s in manifest["shards"]}
    for s in manifest["shards"]:
        hdfs.rm(f"{dest}/{s['file']}")
    assert [r["id"] for r in ShardedDataset(url, **kw)] == expected
