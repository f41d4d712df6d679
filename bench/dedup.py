"""Benchmark of the dedup stage on local[2]: synthetic ~2 KB documents with a known share
of near duplicates; docs/s per phase (signatures, candidates, components), growth with
size, peak memory, and datatrove's MinHash pipeline on the same corpus for comparison.

    .venv/bin/python bench/dedup.py --sizes 100000 1000000 --datatrove   # ~15 min on 2 cores

runs shardforge on 100k, datatrove on the same 100k, then shardforge on 1M, in one process
(the same run, so the ratios compare like with like); the results go to <work>/dedup.json.

datatrove runs in its own venv (/root/.cache/shardforge/bench-venvs/datatrove, created
on first use), in a subprocess, with its defaults (MinhashConfig(): 5-grams, 14 x 8).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from procmem import PeakRss  # noqa: E402

DT_VENV = Path("/root/.cache/shardforge/bench-venvs/datatrove")


def make_corpus(n: int, out: Path, *, dup_share: float = 0.1, seed: int = 0, jsonl: bool = False) -> dict:
    """n documents of ~320 words (~2 KB); a `dup_share` of them are copies of an earlier
    document with 0-2% of words substituted (true Jaccard >= ~0.85). Deterministic."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = np.array(["".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(30000)], dtype=object)
    out.mkdir(parents=True, exist_ok=True)
    chunk = 50000
    bases: list[np.ndarray] = []
    planted = 0
    jf = open(out.parent / f"{out.name}.jsonl", "w") if jsonl else None
    for c0 in range(0, n, chunk):
        ids, texts = [], []
        for i in range(c0, min(n, c0 + chunk)):
            if bases and rng.random() < dup_share:
                words = bases[rng.integers(len(bases))].copy()
                rate = rng.uniform(0.0, 0.02)
                hit = rng.random(len(words)) < rate
                words[hit] = rng.integers(0, len(vocab), size=int(hit.sum()))
                planted += 1
            else:
                words = rng.zipf(1.2, size=rng.integers(280, 360)) % len(vocab)
                if len(bases) < 20000:
                    bases.append(words)
                else:
                    bases[rng.integers(len(bases))] = words
            ids.append(f"doc-{i:08d}")
            texts.append(" ".join(vocab[words]))
        pq.write_table(pa.table({"id": ids, "text": texts}), out / f"part-{c0 // chunk:05d}.parquet")
        if jf:
            for i, t in zip(ids, texts):
                jf.write(json.dumps({"id": i, "text": t}) + "\n")
    if jf:
        jf.close()
    return {"docs": n, "planted_near_dups": planted}


def run_spark(corpus: Path, work: Path, memory: str) -> dict:
    from pyspark.sql import functions as F

    from shardforge.config import DedupSection, SparkSection
    from shardforge.dedup import dedup, summary
    from shardforge.engine.session import get_spark

    spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=8, jars_dir=str(ROOT / ".jars"), properties={
        "spark.driver.memory": memory, "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2000"}))
    pid = spark.sparkContext._gateway.proc.pid
    mon = PeakRss(pid)
    df = (spark.read.parquet(str(corpus)).withColumn("source", F.lit("bench"))
          .withColumn("url", F.lit(None).cast("string")).withColumn("kind", F.lit("document")))
    t0 = time.perf_counter()
    res = dedup(df, DedupSection(), checkpoint_dir=str(work / "ckpt"))
    t_eager = time.perf_counter() - t0
    t1 = time.perf_counter()
    res.kept.write.mode("overwrite").parquet(str(work / "kept"))
    res.audit.write.mode("overwrite").parquet(str(work / "audit"))
    res.rejected.write.mode("overwrite").parquet(str(work / "rejected"))
    t_write = time.perf_counter() - t1
    total = time.perf_counter() - t0
    summ = summary(res.audit)
    mon.stop()
    shutil.rmtree(work / "ckpt", ignore_errors=True)   # the results above are written; drop the intermediates
    out = {"timings": {k: round(v, 1) for k, v in res.timings.items()}, "dedup_call_s": round(t_eager, 1),
           "write_s": round(t_write, 1), "total_s": round(total, 1), "summary": summ,
           "peak_jvm_rss_gb": round(mon.peak_root / 2**30, 2), "peak_tree_rss_gb": round(mon.peak_total / 2**30, 2),
           "peak_tree_pss_gb": round(mon.peak_pss / 2**30, 2),
           "driver_memory": memory}
    spark.stop()
    return out


def jvm_vs_numpy(corpus: Path, limit: int, memory: str) -> dict:
    """Signatures for the first `limit` documents two ways, in the same session: numpy per
    Arrow batch (what the stage uses) and purely in the JVM with Spark SQL higher-order
    functions (split, n-gram xxhash64, 128 x array_min(transform(a*x+b))). docs/s each."""
    from pyspark.sql import functions as F

    from shardforge.config import DedupSection, SparkSection
    from shardforge.dedup.near import signatures_df
    from shardforge.dedup.normalize import normalize_expr
    from shardforge.dedup.stage import resolve_params
    from shardforge.engine.session import get_spark

    spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=8, jars_dir=str(ROOT / ".jars"),
                                   properties={"spark.driver.memory": memory, "spark.ui.enabled": "false",
                                               "spark.sql.ansi.enabled": "false"}))   # wrapping a*x+b
    params = resolve_params(DedupSection())
    docs = (spark.read.parquet(str(corpus)).limit(limit)
            .select("id", normalize_expr(F.col("text"), "lower_alnum").alias("norm"), F.lit(0.0).alias("_rk")))
    docs = docs.localCheckpoint(eager=True)
    k = params.shingle_size
    a = params.perm_a().view(np.int64)
    b = params.perm_b().view(np.int64)
    out = {}
    for rep in range(2):     # the second round is the measured one (JIT and Python workers warm)
        t0 = time.perf_counter()
        signatures_df(docs, params).write.format("noop").mode("overwrite").save()
        out["numpy_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        sh = docs.select("id", F.expr(f"transform(sequence(0, size(split(norm, ' ')) - {k}), "
                                      f"i -> xxhash64(concat_ws(' ', slice(split(norm, ' '), i + 1, {k}))))").alias("sh"))
        sig = sh.select("id", F.array(*[F.expr(f"array_min(transform(sh, x -> x * {int(a[p])}L + {int(b[p])}L))")
                                        for p in range(params.num_perm)]).alias("sig"))
        sig.write.format("noop").mode("overwrite").save()
        out["jvm_s"] = time.perf_counter() - t0
    spark.stop()
    return {"docs": limit, "numpy_docs_per_s": round(limit / out["numpy_s"]), "jvm_docs_per_s": round(limit / out["jvm_s"]),
            "numpy_over_jvm": round(out["jvm_s"] / out["numpy_s"], 2)}


DT_SCRIPT = r'''
import sys, time, json
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupSignature, MinhashDedupBuckets,
                                              MinhashDedupCluster, MinhashDedupFilter)
src, work = sys.argv[1], sys.argv[2]
cfg = MinhashConfig()
t = {}
def reader():
    return JsonlReader(src.rsplit("/", 1)[0], glob_pattern=src.rsplit("/", 1)[1], id_key="id")
t0 = time.perf_counter()
LocalPipelineExecutor([reader(), MinhashDedupSignature(output_folder=f"{work}/sigs", config=cfg)],
                      tasks=2, workers=2, logging_dir=f"{work}/logs/1").run()
t["signatures"] = time.perf_counter() - t0; t0 = time.perf_counter()
LocalPipelineExecutor([MinhashDedupBuckets(input_folder=f"{work}/sigs", output_folder=f"{work}/buckets", config=cfg)],
                      tasks=cfg.num_buckets, workers=2, logging_dir=f"{work}/logs/2").run()
t["buckets"] = time.perf_counter() - t0; t0 = time.perf_counter()
LocalPipelineExecutor([MinhashDedupCluster(input_folder=f"{work}/buckets", output_folder=f"{work}/remove", config=cfg)],
                      tasks=1, logging_dir=f"{work}/logs/3").run()
t["cluster"] = time.perf_counter() - t0; t0 = time.perf_counter()
LocalPipelineExecutor([reader(), MinhashDedupFilter(input_folder=f"{work}/remove",
                       exclusion_writer=JsonlWriter(f"{work}/removed")), JsonlWriter(f"{work}/out")],
                      tasks=2, workers=2, logging_dir=f"{work}/logs/4").run()
t["filter"] = time.perf_counter() - t0
import glob, gzip
removed = sum(1 for f in glob.glob(f"{work}/removed/*") for _ in gzip.open(f, "rt"))
print(json.dumps({"timings": {k: round(v, 1) for k, v in t.items()}, "total_s": round(sum(t.values()), 1), "removed": removed}))
'''


def run_datatrove(jsonl: Path, work: Path) -> dict:
    py = DT_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run(["python3", "-m", "venv", str(DT_VENV)], check=True)
        # what its MinHash pipeline imports beyond the base package; xxhash >= 3.6 refuses str
        subprocess.run([str(DT_VENV / "bin" / "pip"), "install", "-q", "datatrove==0.10.1", "regex", "tokenizers",
                        "orjson", "spacy", "xxhash<3.6"], check=True)
    version = subprocess.run([str(py), "-c", "import datatrove, importlib.metadata as m; print(m.version('datatrove'))"],
                             capture_output=True, text=True).stdout.strip()
    # datatrove skips tasks its logging folder marks complete: start from an empty folder
    shutil.rmtree(work, ignore_errors=True)
    p = subprocess.run([str(py), "-c", DT_SCRIPT, str(jsonl), str(work)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:], "version": version}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["version"] = version
    return out


def report(results: dict) -> str:
    """The figures BENCHMARKS.md quotes, from a results dict: docs/s per phase, the growth
    of each phase between the smallest and largest size against n log n, and the per-core
    ratio to datatrove on the same corpus."""
    import math

    sizes = sorted(int(k) for k, v in results.items() if k.isdigit() and "shardforge" in v)
    lines = []
    for n in sizes:
        r = results[str(n)]["shardforge"]
        phases = ", ".join(f"{k} {v} s ({n / v:,.0f} docs/s)" for k, v in r["timings"].items() if v)
        lines.append(f"{n:,} docs: {phases}; whole stage {r['total_s']} s = {n / r['total_s']:,.0f} docs/s "
                     f"({n / r['total_s'] / 2:,.0f} per core); peak JVM RSS {r['peak_jvm_rss_gb']} GB, "
                     f"JVM + workers PSS {r.get('peak_tree_pss_gb', '?')} GB")
        dt = results[str(n)].get("datatrove")
        if dt and "total_s" in dt and dt.get("docs") == n:
            lines.append(f"  datatrove on the same {n:,} docs: {dt['total_s']} s = {n / dt['total_s'] / 2:,.0f} docs/s "
                         f"per core; shardforge / datatrove = {dt['total_s'] / r['total_s']:.2f}x")
    if len(sizes) >= 2:
        a, b = sizes[0], sizes[-1]
        ra, rb = results[str(a)]["shardforge"], results[str(b)]["shardforge"]
        nlogn = (b * math.log(b)) / (a * math.log(a))
        growth = {k: round(rb["timings"][k] / v, 1) for k, v in ra["timings"].items() if v and k in rb["timings"]}
        growth["whole stage"] = round(rb["total_s"] / ra["total_s"], 1)
        lines.append(f"growth {a:,} -> {b:,} (linear x{b / a:.1f}, n log n x{nlogn:.1f}): "
                     + ", ".join(f"{k} x{v}" for k, v in growth.items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100000])
    ap.add_argument("--datatrove", action="store_true", help="also run datatrove on the smallest size")
    ap.add_argument("--work", default="/tmp/shardforge-bench-dedup")
    ap.add_argument("--memory", default="2g", help="spark.driver.memory (local mode: driver = executor)")
    ap.add_argument("--json", default="", help="results file (default: <work>/dedup.json)")
    ap.add_argument("--datatrove-docs", type=int, default=0,
                    help="run datatrove on the first N documents of the corpus only (0 = all)")
    ap.add_argument("--no-spark", action="store_true", help="skip the shardforge run (datatrove only)")
    ap.add_argument("--jvm-vs-numpy", type=int, default=0, metavar="N",
                    help="only compare signature computation in numpy vs the JVM on the first N documents")
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    args.json = args.json or str(work / "dedup.json")
    results = json.loads(Path(args.json).read_text()) if Path(args.json).exists() else {}
    if args.jvm_vs_numpy:
        n = args.sizes[0]
        if not (work / f"corpus-{n}").exists():
            make_corpus(n, work / f"corpus-{n}")
        results["jvm_vs_numpy"] = jvm_vs_numpy(work / f"corpus-{n}", args.jvm_vs_numpy, args.memory)
        print(json.dumps(results["jvm_vs_numpy"]), flush=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
        return 0
    for i, n in enumerate(args.sizes):
        corpus = work / f"corpus-{n}"
        want_dt = args.datatrove and i == 0
        t0 = time.perf_counter()
        if not (corpus.exists() and (not want_dt or (work / f"corpus-{n}.jsonl").exists())):
            meta = make_corpus(n, corpus, jsonl=want_dt)
            print(f"[{n}] corpus in {time.perf_counter() - t0:.0f}s: {meta}", flush=True)
            results.setdefault(str(n), {})["corpus"] = meta
        r = results.get(str(n), {})
        if not args.no_spark:
            r["shardforge"] = run_spark(corpus, work / f"run-{n}", args.memory)
            print(f"[{n}] shardforge: {json.dumps(r['shardforge'])}", flush=True)
            results[str(n)] = r
            Path(args.json).write_text(json.dumps(results, indent=2))
        if want_dt:
            src = work / f"corpus-{n}.jsonl"
            if args.datatrove_docs:
                sub = work / f"corpus-{n}-first{args.datatrove_docs}.jsonl"
                with open(src) as fi, open(sub, "w") as fo:
                    for _, line in zip(range(args.datatrove_docs), fi):
                        fo.write(line)
                src = sub
            r["datatrove"] = run_datatrove(src, work / f"dt-{n}-{args.datatrove_docs or n}")
            r["datatrove"]["docs"] = args.datatrove_docs or n
            print(f"[{n}] datatrove: {json.dumps(r['datatrove'])}", flush=True)
        results[str(n)] = r
        Path(args.json).write_text(json.dumps(results, indent=2))
    print(report(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
