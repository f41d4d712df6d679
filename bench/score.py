"""The score stage against its limit: fastText's own `predict` on the same texts, outside
Spark, on one core.

    .venv/bin/python bench/score.py [--docs 20000] [--dim 100] [--bucket 1000000] [--rounds 3]

Corpus: `bench/corpus.py` (real text: source code, docs, licences; mean about 6 KB). Model: a
fastText bigram classifier (`shardforge.score.train`, one thread, seed 0) trained on the
corpus's first 4,000 documents, those without `def ` or `{` as `__label__hq` and the others as
`__label__cc` (a stand-in for a quality classifier: its size and the work per document are
what count here), made once. In one run, alternated `rounds` times:
- limit: `model.predict(texts, k=-1)` over lists of 1,024 texts (newlines replaced, as the
  stage does) in this process, one core, and the label's probability picked out;
- stage: Spark local[2] reads the texts from Parquet, runs the score stage's mapInArrow
  (`shardforge.score.stage.score`) and writes nothing (`noop`); per core = documents /
  (seconds x 2). The first round also ships the model and loads it in each Python worker;
- read: the same Spark read and write without the stage (what any stage pays), to show
  the stage's own share.
All are also given per CPU-second (the limit: this process's CPU time; the stage: the CPU
time of this process's tree, the JVM and its Python workers, from /proc), which a busy shared
machine disturbs less than wall time. Results: bench/results/score.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from corpus import ensure_corpus  # noqa: E402


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` and its descendants (live ones, plus the reaped children each
    has waited for), from /proc."""
    stats, kids = {}, {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(p)] = sum(int(x) for x in f[11:15])       # utime, stime, cutime, cstime
            kids.setdefault(int(f[1]), []).append(int(p))
    todo, total = [root], 0
    while todo:
        p = todo.pop()
        total += stats.get(p, 0)
        todo += kids.get(p, [])
    return total / os.sysconf("SC_CLK_TCK")


def model_for(texts: list[str], path: Path, dim: int, bucket: int) -> Path:
    from shardforge.score.train import train

    if not path.exists():
        lines = [("__label__cc " if ("def " in t or "{" in t) else "__label__hq ") + t.replace("\n", " ") + "\n"
                 for t in texts[:4000]]
        train(lines, str(path), dim=dim, bucket=bucket, word_ngrams=2, epoch=5, seed=0)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--bucket", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "score.md")
    args = ap.parse_args()

    from shardforge.config import ScoreModel, ScoreSection, SparkSection
    from shardforge.engine.session import get_spark
    from shardforge.score.model import check_models, load
    from shardforge.score.stage import score

    corpus = ensure_corpus(ROOT / ".bench" / f"corpus-{args.docs}.jsonl", args.docs)
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    path = model_for(texts, ROOT / ".bench" / f"score-d{args.dim}-b{args.bucket}.bin", args.dim, args.bucket)
    cfg = ScoreSection(models=(ScoreModel("quality", str(path), "__label__hq"),))
    infos = check_models(cfg)
    t0 = time.perf_counter()
    model = load(str(path), infos[0].sha256)
    load_seconds = time.perf_counter() - t0

    spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=8, properties={
        "spark.ui.enabled": "false", "spark.driver.memory": "3g"}))
    pq = ROOT / ".bench" / f"texts-{args.docs}.parquet"
    if not pq.exists():
        spark.read.json(str(corpus)).select("id", "text").write.parquet(str(pq))
    df = spark.read.parquet(str(pq)).repartition(8)
    df.write.format("noop").mode("overwrite").save()      # warm the JVM and the file cache
    limit, stage, words = [], [], sum(len(t.split()) for t in texts)
    limit_cpu, stage_cpu, read_cpu = [], [], []
    for r in range(args.rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        scores: list[float] = []
        for i in range(0, len(texts), 1024):
            labels, probs = model.predict([t.replace("\n", " ") for t in texts[i:i + 1024]], k=-1)
            scores += [float(p[names.index("__label__hq")]) for names, p in zip(labels, probs)]
        assert len(scores) == len(texts)
        limit.append(len(texts) / (time.perf_counter() - t0))
        limit_cpu.append(len(texts) / (time.process_time() - c0))
        t0, c0 = time.perf_counter(), tree_cpu(os.getpid())
        score(df, cfg, infos).write.format("noop").mode("overwrite").save()
        stage.append(len(texts) / (time.perf_counter() - t0) / 2)
        stage_cpu.append(len(texts) / (tree_cpu(os.getpid()) - c0))
        c0 = tree_cpu(os.getpid())
        df.write.format("noop").mode("overwrite").save()
        read_cpu.append(tree_cpu(os.getpid()) - c0)
        print(f"round {r}: limit {limit[-1]:,.0f} docs/s/core ({limit_cpu[-1]:,.0f}/CPU-s), stage "
              f"{stage[-1]:,.0f} docs/s/core ({stage_cpu[-1]:,.0f}/CPU-s) (load {os.getloadavg()[0]:.1f})", flush=True)
    lm, sm = statistics.median(limit), statistics.median(stage)
    lc, sc_ = statistics.median(limit_cpu), statistics.median(stage_cpu)
    own = statistics.median(len(texts) / (len(texts) / s - r) for s, r in zip(stage_cpu, read_cpu))
    steady = statistics.median(stage[1:]) if len(stage) > 1 else sm
    text = f"""## Score stage (`bench/score.py`)

Command: `.venv/bin/python bench/score.py --docs {args.docs} --dim {args.dim} --bucket {args.bucket} --rounds {args.rounds}`;
machine: {os.cpu_count()} cores (shared), {platform.machine()}, Python {platform.python_version()},
fasttext-community {_version("fasttext-community")}, numpy {_version("numpy")}, Spark local[2]. Corpus: {args.docs:,}
documents of real text (mean {sum(map(len, texts)) / len(texts) / 1000:.1f} K characters, {words / len(texts):,.0f}
words). Model: bigram fastText classifier, dim {args.dim}, {args.bucket:,} buckets, {path.stat().st_size / 1e6:,.0f} MB
(loading it: {load_seconds:.2f} s). Load average at the end: {os.getloadavg()[0]:.1f}.

| | docs/s per core (median of {args.rounds}) | rounds |
|---|---:|---|
| limit: `predict(list, k=-1)`, one process, one core | {lm:,.0f} | {", ".join(f"{x:,.0f}" for x in limit)} |
| score stage, Spark local[2], per core | {sm:,.0f} | {", ".join(f"{x:,.0f}" for x in stage)} |
| limit, per CPU-second of the process | {lc:,.0f} | {", ".join(f"{x:,.0f}" for x in limit_cpu)} |
| score stage, per CPU-second of the JVM, its Python workers and the driver | {sc_:,.0f} | {", ".join(f"{x:,.0f}" for x in stage_cpu)} |
| the same Spark read and write without the stage: CPU-seconds | {statistics.median(read_cpu):,.1f} | {", ".join(f"{x:,.1f}" for x in read_cpu)} |
| score stage, per CPU-second of its own (the read's CPU taken out) | {own:,.0f} | |

**Stage / limit, per core (wall time): {sm / lm:.2f}x** (rounds after the first, which ships and loads
the model: {steady / lm:.2f}x); **per CPU-second: {sc_ / lc:.2f}x**, {own / lc:.2f}x without the read. Words per
second per core in the stage: {sm * words / len(texts):,.0f}.
"""
    args.out.write_text(text)
    print(text)
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    sys.exit(main())
