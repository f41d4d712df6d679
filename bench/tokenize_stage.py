"""The tokenize stage against its limit: the `tokenizers` library's own batch encoding of the
same texts, outside Spark, on one core.

    .venv/bin/python bench/tokenize_stage.py [--docs 20000] [--vocab 32000] [--rounds 3]

Corpus: `bench/corpus.py` (real text, mean about 6 KB). Tokenizer: byte-level BPE trained on
the corpus's first 2,000 documents (`shardforge.tokenize.stage.train_bpe`), made once. In one run,
alternated `rounds` times:
- limit: `Tokenizer.encode_batch_fast` over batches of 1,024 texts in this process, one core
  (TOKENIZERS_PARALLELISM=false), ids into Arrow lists as the stage builds them;
- stage: Spark local[2] reads the texts from Parquet, runs the tokenize stage's mapInArrow and
  writes nothing (`noop`); per core = documents / (seconds x 2).
Results: bench/results/tokenize.md.
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

os.environ["TOKENIZERS_PARALLELISM"] = "false"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from corpus import ensure_corpus  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "tokenize.md")
    args = ap.parse_args()

    from shardforge.config import SparkSection, TokenizeSection
    from shardforge.engine.session import get_spark
    from shardforge.tokenize.stage import _from_str, encode_batch, load_tokenizer, tokenize, train_bpe

    corpus = ensure_corpus(ROOT / ".bench" / f"corpus-{args.docs}.jsonl", args.docs)
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    tok_path = ROOT / ".bench" / f"tokenizer-{args.vocab}.json"
    if not tok_path.exists():
        train_bpe(texts[:2000], str(tok_path), vocab_size=args.vocab)
    info = load_tokenizer(str(tok_path))
    tok = _from_str(info.json)

    spark = get_spark(SparkSection(master="local[2]", shuffle_partitions=8, properties={
        "spark.ui.enabled": "false", "spark.driver.memory": "3g"}))
    pq = ROOT / ".bench" / f"texts-{args.docs}.parquet"
    if not pq.exists():
        spark.read.json(str(corpus)).select("id", "text").write.parquet(str(pq))
    df = spark.read.parquet(str(pq)).repartition(8)
    df.write.format("noop").mode("overwrite").save()      # warm the JVM and the file cache
    limit, stage = [], []
    tokens = 0
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        n = 0
        for i in range(0, len(texts), 1024):
            ids, counts = encode_batch(tok, texts[i:i + 1024], -1, 1)
            n += int(counts.to_numpy().sum())
        limit.append(len(texts) / (time.perf_counter() - t0))
        tokens = n
        t0 = time.perf_counter()
        tokenize(df, TokenizeSection(eos_id=1), info).write.format("noop").mode("overwrite").save()
        stage.append(len(texts) / (time.perf_counter() - t0) / 2)
        print(f"limit {limit[-1]:,.0f} docs/s/core, stage {stage[-1]:,.0f} docs/s/core "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    lm, sm = statistics.median(limit), statistics.median(stage)
    text = f"""## Tokenize stage (`bench/tokenize_stage.py`)

Command: `.venv/bin/python bench/tokenize_stage.py --docs {args.docs} --vocab {args.vocab} --rounds {args.rounds}`;
machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, tokenizers
{__import__('tokenizers').__version__}, Spark local[2]. Corpus: {args.docs:,} documents of real text (mean
{sum(map(len, texts)) / len(texts) / 1000:.1f} K characters), {tokens:,} tokens with a {info.vocab_size:,}-id byte-level
BPE ({tokens / len(texts):,.0f} per document). Load average at the end: {os.getloadavg()[0]:.1f}.

| | docs/s per core (median of {args.rounds}) | rounds |
|---|---:|---|
| limit: `encode_batch_fast`, one process, one core | {lm:,.0f} | {", ".join(f"{x:,.0f}" for x in limit)} |
| tokenize stage, Spark local[2], per core | {sm:,.0f} | {", ".join(f"{x:,.0f}" for x in stage)} |

**Stage / limit, per core: {sm / lm:.2f}x** (target: at least 0.7x). Tokens per second per core in the
stage: {sm * tokens / len(texts):,.0f}.
"""
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
