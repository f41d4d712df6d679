"""The pipeline on a real Spark standalone cluster (master + 2 workers on 127.0.0.1), shipped as the packaged zip.

Executors and the driver run the worker venv's Python, which has no shardforge: the code
arrives only through `--py-files`. One cluster run, with a worker (and its executor) killed
in its middle, must give shards byte-identical to a `local[2]` run's. The local run is also
checked for funnels from its Spark event log.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from shardforge.deploy import cluster

from shardforge.report import funnel

from shardforge.deploy import packaging
from submit import Background, clean_env, conf_args, spark_jvm_opts

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample" / "docs.jsonl"
# Small, deterministic-output settings for every run (local and cluster alike).
COMMON_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.adaptive.coalescePartitions.enabled": "false",  # the no-funnel check sees real task counts
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.executor.extraJavaOptions": spark_jvm_opts(),
}
# The fault run kills a worker once this many jobs have succeeded (the pipeline runs about 130
# on the sample; this is in its first third, during download, clean and redact),
# and again every 5 jobs after, until a kill catches a task running.
KILL_AFTER_JOBS = 40
PIPELINE_ARGS = ["--conf", str(ROOT / "conf" / "demo.toml"), "--set", "shards.num_shards=4",
                 "--set", "download.partitions=4"]


def _sample(tmp: Path) -> Path:
    """The bundled sample, or a small generated JSONL before it exists."""
    if SAMPLE.exists():
        return SAMPLE
    path = tmp / "docs.jsonl"
    with path.open("w") as f:
        for i in range(300):
            words = " ".join(f"w{(i * 7 + j) % 97}" for j in range(40))
            f.write(json.dumps({"id": f"doc-{i:04d}", "text": f"Document {i}: {words}", "source": "gen"}) + "\n")
    return path


def _shards(out: Path) -> dict[str, str]:
    """{file: sha256} of every shard, recomputed from the bytes, checked against the manifest."""
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    got = {}
    for s in manifest["shards"]:
        data = (out / "shards" / s["file"]).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        assert digest == s["sha256"], f"{s['file']}: manifest says {s['sha256']}, file has {digest}"
        got[Path(s["file"]).name] = digest
    assert len(got) == manifest["num_shards"] > 0
    return got


def _events(d: Path) -> Path:
    (app,) = [p for p in d.iterdir() if not p.name.startswith(".")]
    return app


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def sample(work) -> Path:
    return _sample(work)


@pytest.fixture(scope="module")
def urls(work) -> Path:
    """The demo's URL list (pages and images) served from 127.0.0.1 for the whole module, so
    the download stage runs on the executors of every run here."""
    from shardforge.jobs.demo import SAMPLE as DEMO, serve, write_url_list

    server, base = serve(DEMO / "web")
    yield write_url_list(base, work / "urls")
    server.shutdown()


@pytest.fixture(scope="module")
def local_run(work, sample, dist, urls) -> Background:
    """The reference: spark-submit --master local[2] of jobs/pipeline.py, with the project's venv
    (and this checkout's code first on the path, whatever the venv's editable install points at).
    Started in the background, so it runs while the cluster comes up and runs the same job."""
    out, events = work / "local", work / "events-local"
    events.mkdir()
    conf = {**COMMON_CONF, **funnel.event_log_conf(events), "spark.ui.enabled": "false",
            "spark.submit.pyFiles": str(dist["zip"]),
            "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
            "spark.jars": ",".join(_jars()), "spark.driver.host": "127.0.0.1"}
    run = Background([cluster.spark_submit(), "--master", "local[2]", *conf_args(conf),
                      str(ROOT / "jobs" / "pipeline.py"), *PIPELINE_ARGS, "--input", str(sample), "--urls", str(urls),
                      "--output", str(out)], work / "local.log", cwd=ROOT, env=clean_env())
    run.out = out
    yield run
    run.stop()


def _jars() -> list[str]:
    from shardforge.engine.session import find_jars

    jars = find_jars(".jars")
    if not jars:
        pytest.skip("Delta jars not found (make jars)")
    return jars


@pytest.fixture(scope="module")
def dist(work) -> dict[str, Path]:
    _jars()
    return packaging.build(work / "dist", jars=True, root=ROOT)


@pytest.fixture(scope="module")
def worker_python() -> str:
    return cluster.worker_python()


@pytest.fixture(scope="module")
def standalone(work):
    with cluster.StandaloneCluster(str(work / "standalone"), workers=2, cores_per_worker=1,
                                   memory_per_worker="1g") as c:
        yield c


def _cluster_submit(c: cluster.StandaloneCluster, dist, worker_python: str, sample: Path, urls: Path,
                    out: Path, events: Path, ui_port: int) -> list[str]:
    """spark-submit of the packaged artifact, with conf/spark-standalone.conf and test-sized resources."""
    events.mkdir()
    conf = {**COMMON_CONF, **funnel.event_log_conf(events),
            "spark.submit.pyFiles": ",".join(packaging.py_files(dist["zip"].parent)),
            "spark.pyspark.python": worker_python, "spark.pyspark.driver.python": worker_python,
            "spark.jars": ",".join(str(p) for p in sorted(dist["jars"].glob("*.jar"))),
            "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
            "spark.driver.host": "127.0.0.1", "spark.ui.enabled": "true", "spark.ui.port": str(ui_port),
            "spark.port.maxRetries": "64"}
    # The UI (for its REST API) also through the job's [spark] properties: the session applies
    # those over spark-submit's --conf values.
    ui = f'spark.properties={{"spark.ui.enabled" = "true", "spark.ui.port" = "{ui_port}"}}'
    return [cluster.spark_submit(), "--properties-file", str(ROOT / "conf" / "spark-standalone.conf"),
            "--master", c.master_url, *conf_args(conf), str(dist["main"]), "pipeline",
            *PIPELINE_ARGS, "--set", ui, "--input", str(sample), "--urls", str(urls), "--output", str(out)]


def test_worker_python_has_no_shardforge(worker_python):
    proc = subprocess.run([worker_python, "-c", "import shardforge"], capture_output=True, text=True,
                          cwd="/", env={"PATH": os.environ["PATH"]})
    assert proc.returncode != 0 and "No module named 'shardforge'" in proc.stderr
    ok = subprocess.run([worker_python, "-c", "import pyarrow, numpy, requests, PIL, xxhash, tokenizers, ftfy, py3langid, resiliparse, fastwarc, zstandard, spacy"], cwd="/")
    assert ok.returncode == 0


@pytest.fixture(scope="module")
def fault_run(local_run, standalone, dist, worker_python, sample, urls, work) -> dict:
    """One cluster run of the whole pipeline (URL list included), during which a worker is killed
    (its executor with it) the moment it runs a task, and a replacement worker joins. It runs
    while the local[2] reference runs: the tests below compare the two. One run serves both the
    byte-identity and the fault checks: a run that loses an executor mid-stage and still gives
    the local bytes is the stronger form of the plain byte-identity check."""
    out, ui_port = work / "cluster-fault", cluster.free_port()
    done, record = threading.Event(), {}
    log = work / "cluster-fault.log"
    killer = threading.Thread(target=_kill_mid_run, args=(standalone, ui_port, KILL_AFTER_JOBS, log, done, record),
                              daemon=True)
    killer.start()
    run = Background(_cluster_submit(standalone, dist, worker_python, sample, urls, out, work / "events-fault",
                                     ui_port), log, cwd=ROOT, env=clean_env())
    try:
        seconds = run.wait()
    finally:
        done.set()
        killer.join(timeout=10)
        run.stop()
    print(f"cluster run with a killed worker: {seconds:.1f} s; {record}")
    return {"out": out, "record": record, "events": list(funnel.read_events(_events(work / "events-fault")))}


def test_cluster_run_is_byte_identical_to_local(fault_run, local_run, worker_python, urls):
    out = fault_run["out"]
    print(f"local[2] run: {local_run.wait():.1f} s")
    assert _shards(out) == _shards(local_run.out)
    # the downloaded pages and images are in the build (the URL list went through the executors)
    import pyarrow.parquet as pq

    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    kinds = [k for s in manifest["shards"]
             for k in pq.read_table(out / "shards" / s["file"], columns=["kind"]).column("kind").to_pylist()]
    assert kinds.count("image") >= 1 and kinds.count("page") >= 1, sorted(set(kinds))
    report = json.loads((out / "report.json").read_text())
    assert sum(report["downloads"].values()) == len(urls.read_text().splitlines()) - 1   # minus the header
    assert report["stages"] and report["shards"]["num_shards"] == 4
    # the work really ran on both workers' executors (the two there from the start), with the
    # worker venv's Python
    events = fault_run["events"]
    added = [e["Executor ID"] for e in events if e["Event"] == "SparkListenerExecutorAdded"]
    busy = {e["Task Info"]["Executor ID"] for e in events if e["Event"] == "SparkListenerTaskEnd"}
    assert len(added) >= 2 and set(added[:2]) <= busy, (added, busy)
    env = next(e for e in events if e["Event"] == "SparkListenerEnvironmentUpdate")
    assert env["Spark Properties"]["spark.pyspark.python"] == worker_python


def _app_json(ui_port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/applications{path}", timeout=3) as r:
        return json.loads(r.read().decode())


def _worker_executors(w: cluster.Daemon) -> set[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{w.webui_port}/json/", timeout=3) as r:
            return {str(e["id"]) for e in json.loads(r.read().decode()).get("executors", [])}
    except OSError:
        return set()


def _kill_mid_run(c: cluster.StandaloneCluster, ui_port: int, min_jobs: int, log: Path, done: threading.Event,
                  record: dict, max_kills: int = 3) -> None:
    """Once `min_jobs` jobs have succeeded, kill a worker (its whole process group) the moment the
    app's REST API shows its executor running a task, and start a replacement worker. A task can
    end between the look and the kill, so this repeats (every 5 more jobs, up to `max_kills`);
    the test then reads from the event log whether a running task was really lost.
    Without the REST API, fall back to the driver's log: kill once the redact stage is done."""
    deadline = time.monotonic() + 900
    owner: dict[str, int] = {}   # executor id -> worker index
    next_at = min_jobs
    record["kills"] = []
    while time.monotonic() < deadline and not done.is_set() and len(record["kills"]) < max_kills:
        target, why = None, ""
        try:
            (app,) = _app_json(ui_port, "")
            execs = _app_json(ui_port, f"/{app['id']}/executors")
            running = {str(e["id"]) for e in execs if e.get("id") != "driver" and e.get("activeTasks", 0) > 0}
            if running and not running <= set(owner):
                for i, w in enumerate(c.worker_daemons):
                    if w.alive():
                        owner.update({x: i for x in _worker_executors(w)})
            if running:
                jobs = _app_json(ui_port, f"/{app['id']}/jobs")
                succeeded = sum(1 for j in jobs if j.get("status") == "SUCCEEDED")
                if succeeded >= next_at:
                    for x in sorted(running):
                        if x in owner and c.worker_daemons[owner[x]].alive():
                            target, why = owner[x], f"after {succeeded} jobs, executor {x} running a task"
                            next_at = succeeded + 5
                            break
        except (OSError, ValueError, KeyError):
            text = log.read_text(errors="replace") if log.exists() else ""
            if "stage redact:" in text and not record["kills"]:
                for i, w in enumerate(c.worker_daemons):
                    if w.alive() and _worker_executors(w):
                        target, why = i, "after the redact stage (driver log)"
                        break
        if target is not None:
            c.kill_worker(target)
            record["kills"].append({"worker": target, "why": why})
            c.add_worker(wait=False)
            continue
        time.sleep(0.05)


def test_killed_worker_mid_run_still_gives_identical_shards(fault_run, local_run):
    record, events = fault_run["record"], fault_run["events"]
    assert record.get("kills"), "the run finished before a worker could be killed mid-stage"
    removed = [e for e in events if e["Event"] == "SparkListenerExecutorRemoved"]
    assert removed, "Spark never noticed the lost executor"
    lost = [e for e in events if e["Event"] == "SparkListenerTaskEnd"
            and e.get("Task End Reason", {}).get("Reason") == "ExecutorLostFailure"]
    assert lost, "no task was running on the killed worker"
    local_run.wait()
    assert _shards(fault_run["out"]) == _shards(local_run.out)


def test_no_funnel_on_the_full_pipeline_run(local_run, work):
    """From Spark's own record of the local[2] run: no stage squeezes the data through one task
    or the driver; every shuffle stage runs at least spark.sql.shuffle.partitions tasks
    except the one-row-per-partition end of a global count."""
    local_run.wait()
    res = funnel.check_event_log(_events(work / "events-local"), min_tasks=4, max_driver_rows=100)
    print(res.summary())
    assert res.ok, res.summary()
    shuffle_stages = [s for s in res.stages if s["reads_shuffle"]]
    assert shuffle_stages and all(s["tasks"] >= 4 or any(n.stage == s["stage"] for n in res.notes)
                                  or s["execution"] in {n.execution for n in res.notes if n.kind == "exempt"}
                                  for s in shuffle_stages)
    assert any(e["writes"] for e in res.executions)


def test_cluster_cli_start_status_stop(tmp_path):
    """`python -m shardforge.deploy.cluster start|status|stop` from a shell, leaving no process behind."""
    d = tmp_path / "c"
    py = [sys.executable, "-m", "shardforge.deploy.cluster"]
    start = subprocess.run([*py, "start", "--dir", str(d), "--workers", "1", "--memory", "512m"],
                           capture_output=True, text=True, timeout=180, env=clean_env())
    assert start.returncode == 0, start.stderr
    info = json.loads(start.stdout)
    assert info["master_url"].startswith("spark://127.0.0.1:")
    state = json.loads((d / "cluster.json").read_text())
    pids = [state["master"]["pid"]] + [w["pid"] for w in state["workers"]]
    try:
        again = subprocess.run([*py, "start", "--dir", str(d)], capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and "already running" in again.stderr
        status = subprocess.run([*py, "status", "--dir", str(d)], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        st = json.loads(status.stdout)
        assert st["status"] == "ALIVE" and [w["state"] for w in st["workers"]] == ["ALIVE"]
        assert st["workers"][0]["memory"] == 512 and st["workers"][0]["cores"] == 1
    finally:
        stop = subprocess.run([*py, "stop", "--dir", str(d)], capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert not (d / "cluster.json").exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]
    missing = subprocess.run([*py, "status", "--dir", str(d)], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no cluster recorded" in missing.stderr
