"""Resume after a killed driver: a real driver process downloads a URL list with a
spool; the test kills its process group part way, reruns it to the end, and checks
from the server's log that no URL recorded ok was fetched again, and that the
final results table equals an uninterrupted run's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardforge.config import DownloadSection
from shardforge.ingest.download import download, read_url_list
from shardforge.ingest.download.resume import fetch_record
from shardforge.ingest.download.worker import read_spool_file, spool_files
from proctree import kill_tree
from webserver import TestServer, comparable_results

ROOT = Path(__file__).resolve().parent.parent
DRIVER = '''
import json, sys
from shardforge.config import DownloadSection, SparkSection
from shardforge.engine.session import get_spark
from shardforge.ingest.download import clear_spool, download, load_previous, merge_results, read_url_list
args = json.loads(sys.argv[1])
spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=4, jars_dir=args["jars"], properties={
    "spark.ui.enabled": "false", "spark.default.parallelism": "4", "spark.driver.memory": "1g"}))
cfg = DownloadSection(**args["cfg"])
urls = read_url_list(spark, args["list"], cfg)
previous = load_previous(spark, args["table"], cfg.spool_dir)
print("PREVIOUS", 0 if previous is None else previous.count(), flush=True)
res = download(urls, cfg, previous=previous)
merge_results(spark, res.results, args["table"])
clear_spool(cfg.spool_dir)
print("DONE", flush=True)
'''
N_URLS = 120
THREADS = 4


def _driver(tmp_path, args) -> subprocess.Popen:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, str(script), json.dumps(args)], cwd=str(ROOT), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


@pytest.mark.slow
def test_kill_driver_then_resume(spark, tmp_path):
    with TestServer(hold_seconds=0.15) as srv:
        url_list = tmp_path / "urls.jsonl"
        paths = [f"/hold/{i}.jpg" for i in range(N_URLS)] + ["/page/utf8.html", "/status/404"]
        url_list.write_text("".join(json.dumps({"url": srv.url(p), "caption": p, "n": i}) + "\n"
                                    for i, p in enumerate(paths)))
        base = dict(connect_timeout=2.0, read_timeout=5.0, max_retries=1, backoff_base=0.2,
                    allowed_networks=["127.0.0.1/32"], threads_per_task=THREADS, partitions=4,
                    per_host_connections=0)
        args = {"jars": os.environ.get("SHARDFORGE_JARS") or str(ROOT / ".jars"), "list": str(url_list),
                "table": str(tmp_path / "results"),
                "cfg": {**base, "spool_dir": str(tmp_path / "spool")}}

        # 1. start, and kill the whole driver (JVM and Python workers too) part way
        def spooled():
            return [row for f in spool_files(args["cfg"]["spool_dir"]) for b in read_spool_file(f)
                    for row in b.to_pylist()]

        proc = _driver(tmp_path, args)
        # the kill waits for an event (20 ok results in the spool), not for a time; the
        # deadline only keeps a hung driver from hanging the suite
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if sum(1 for r in spooled() if r["status"] == "ok") >= 20:
                break
            time.sleep(0.05)
        kill_tree(proc)
        first = srv.hits()
        recorded = spooled()
        recorded_ok = {r["url"] for r in recorded if r["status"] == "ok"}
        assert len(recorded_ok) >= 20, "the driver ended or hung before spooling 20 results"
        assert len(first) < len(paths), "the kill must land part way through the downloads"
        assert not (tmp_path / "results").exists()        # the driver never got to merge

        # 2. rerun to the end
        srv.reset_log()
        proc = _driver(tmp_path, args)
        out, _ = proc.communicate(timeout=400)
        assert proc.returncode == 0 and "DONE" in out, out[-3000:]
        second = srv.hits()
        refetched = {srv.url(h.path) for h in second}
        assert not refetched & recorded_ok                  # no URL recorded ok is fetched again
        fetched_first = {srv.url(h.path) for h in first}
        in_flight = fetched_first - {r["url"] for r in recorded}
        assert refetched & fetched_first <= in_flight       # only URLs in flight at the kill come back
        assert len(in_flight) <= 2 * THREADS                # at most the pools' width (2 tasks run at once)
        assert refetched | fetched_first == {srv.url(p) for p in paths}
        assert not list((tmp_path / "spool").glob("*.arrows"))    # merged, then cleared

        # 3. the resumed table equals an uninterrupted run's (as the table records it)
        srv.reset_log()
        cfg = DownloadSection(**{k: tuple(v) if isinstance(v, list) else v for k, v in base.items()})
        fresh = fetch_record(download(read_url_list(spark, str(url_list), cfg), cfg).results)
        resumed = spark.read.format("delta").load(args["table"])
        assert resumed.count() == len(paths)
        assert comparable_results(resumed) == comparable_results(fresh)
