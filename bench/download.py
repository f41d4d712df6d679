"""Benchmark: images/s of shardforge's downloader on local[2] against img2dataset,
same local server (50-200 ms latency per response), same 5,000-URL list, resize to
256 px with border mode, JPEG re-encode, 2 workers x 32 threads each.

    SHARDFORGE_JARS=/root/.cache/shardforge/jars SPARK_LOCAL_IP=127.0.0.1 \
        .venv/bin/python bench/download.py [--urls 5000] [--out bench/results/download.md]

img2dataset runs in its own venv (/root/.cache/shardforge/bench-venvs/img2dataset,
created on first use) in a subprocess; it is never installed into the project venv.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
VENV = Path("/root/.cache/shardforge/bench-venvs/img2dataset")
WORKERS, THREADS, SIZE, QUALITY = 2, 32, 256, 90

I2D_SCRIPT = """
import json, sys, time
from img2dataset import download
a = json.loads(sys.argv[1])
t = time.perf_counter()
download(url_list=a["list"], input_format="parquet", url_col="url", caption_col="caption",
         output_format="parquet", output_folder=a["out"], processes_count=a["workers"],
         thread_count=a["threads"], image_size=a["size"], resize_mode="border", encode_format="jpg",
         encode_quality=a["quality"], number_sample_per_shard=1000, timeout=10, retries=0,
         distributor="multiprocessing", enable_wandb=False, compute_hash="sha256")
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def ensure_venv() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "img2dataset"], check=True)
    return py


def run_img2dataset(list_path: str, out: str) -> dict:
    py = ensure_venv()
    env = {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1", "WANDB_MODE": "disabled"}
    args = {"list": list_path, "out": out, "workers": WORKERS, "threads": THREADS, "size": SIZE,
            "quality": QUALITY}
    t = time.perf_counter()
    proc = subprocess.run([str(py), "-c", I2D_SCRIPT, json.dumps(args)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"img2dataset failed:\n{proc.stderr[-3000:]}")
    inner = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
    ok = sum(json.loads(p.read_text())["successes"] for p in Path(out).glob("*_stats.json"))
    version = subprocess.run([str(VENV / "bin" / "pip"), "show", "img2dataset"], capture_output=True,
                             text=True).stdout.split("Version:")[1].split()[0]
    return {"seconds": inner, "wall": wall, "ok": ok, "version": version}


def warm_up(spark, srv, work: Path) -> float:
    """One small download first, so the timed run measures a warm session (as on a
    long-running cluster), not the JVM's and Python workers' first start."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(work / "warm.parquet")
    pq.write_table(pa.table({"url": [srv.url(f"/bench/{i}.jpg?warm") for i in range(64)]}), path)
    t = time.perf_counter()
    run_shardforge(spark, path, str(work / "warm"))
    return time.perf_counter() - t


def run_shardforge(spark, list_path: str, out: str) -> dict:
    from shardforge.config import DownloadSection
    from shardforge.ingest.download import download, read_url_list, summary_dict

    cfg = DownloadSection(threads_per_task=THREADS, partitions=WORKERS, per_host_connections=0, image_size=SIZE,
                          image_resize_mode="border", image_format="jpeg", image_quality=QUALITY, max_retries=0,
                          connect_timeout=10.0, read_timeout=10.0, allowed_networks=("127.0.0.1/32",),
                          expect="image")
    t = time.perf_counter()
    res = download(read_url_list(spark, list_path, cfg), cfg)
    res.kept.write.mode("overwrite").parquet(out)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "ok": summary_dict(res.results).get("ok", 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=int, default=5000)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "download.md"))
    args = ap.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq

    from shardforge.config import SparkSection
    from shardforge.engine.session import get_spark
    from webserver import TestServer

    work = Path(tempfile.mkdtemp(prefix="shardforge-bench-download-"))
    t = time.perf_counter()
    spark = get_spark(SparkSection(master=f"local[{WORKERS}]", shuffle_partitions=WORKERS,
                                   jars_dir=os.environ.get("SHARDFORGE_JARS", ".jars"),
                                   properties={"spark.ui.enabled": "false"}))
    startup = time.perf_counter() - t
    with TestServer(latency=(0.05, 0.2)) as srv:
        list_path = str(work / "urls.parquet")
        pq.write_table(pa.table({"url": [srv.url(f"/bench/{i}.jpg") for i in range(args.urls)],
                                 "caption": [f"image {i}" for i in range(args.urls)]}), list_path)
        warm = warm_up(spark, srv, work)
        srv.reset_log()
        i2d = run_img2dataset(list_path, str(work / "i2d"))
        i2d_hits = len(srv.hits())
        srv.reset_log()
        ours = run_shardforge(spark, list_path, str(work / "ours"))
        ours_hits = len(srv.hits())
    rate_ours, rate_i2d = ours["ok"] / ours["seconds"], i2d["ok"] / i2d["seconds"]
    load = os.getloadavg()
    md = f"""## Downloader: images/s against img2dataset

Command: `SHARDFORGE_JARS=/root/.cache/shardforge/jars SPARK_LOCAL_IP=127.0.0.1 .venv/bin/python bench/download.py --urls {args.urls}`
Machine: 2 cores, 24 GiB (shared; load average at the end {load[0]:.1f}).
Setup: {args.urls} JPEG URLs (640x480, ~24 KB) from a local HTTP server on 127.0.0.1 answering each
after 50-200 ms (a fixed delay per path, the same for both tools); resize to {SIZE} px `border`,
JPEG quality {QUALITY}, no retries; {WORKERS} workers x {THREADS} threads for both
(shardforge: `local[{WORKERS}]`, {WORKERS} partitions x threads_per_task={THREADS}, no per-host cap;
img2dataset {i2d['version']}: processes_count={WORKERS}, thread_count={THREADS}, parquet output).
Timed: shardforge from `download()` to the kept rows written as Parquet, in a warm session
(its start took {startup:.1f} s, and a first 64-URL download to warm the JVM and Python workers
{warm:.1f} s; neither is in the figure); img2dataset its `download()` call in its own venv
(process pool start included, interpreter start not).

| tool | images ok | requests seen by the server | seconds | images/s |
| --- | ---: | ---: | ---: | ---: |
| shardforge | {ours['ok']} | {ours_hits} | {ours['seconds']:.1f} | {rate_ours:.1f} |
| img2dataset | {i2d['ok']} | {i2d_hits} | {i2d['seconds']:.1f} | {rate_i2d:.1f} |

Ratio shardforge / img2dataset: **{rate_ours / rate_i2d:.2f}x** (same run, same server and list).
"""
    Path(args.out).write_text(md)
    print(md)
    spark.stop()


if __name__ == "__main__":
    main()
