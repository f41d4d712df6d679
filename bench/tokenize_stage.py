"""The tokenize stage against its limit: the `tokenizers` library's own batch encoding of the
same texts, outside Spark, on one core; and shardforge's compiled byte-level BPE (the same ids).

    .venv/bin/python bench/tokenize_stage.py [--docs 20000] [--vocab 32000] [--rounds 3]

Corpus: `bench/corpus.py` (real text, mean about 6 KB). Tokenizer: byte-level BPE trained on
the corpus's first 2,000 documents (`shardforge.tokenize.stage.train_bpe`), made once. In one run,
alternated `rounds` times:
- limit: `Tokenizer.encode_batch_fast` over batches of 1,024 texts in this process, one core
  (TOKENIZERS_PARALLELISM=false), ids into Arrow lists as the stage builds them;
- compiled: `shardforge.tokenize.native.encode_column` over the same batches (Arrow in, Arrow
  out), one core; its ids are checked equal to the limit's;
- stage: Spark local[2] reads the texts from Parquet, runs the tokenize stage's mapInArrow and
  writes nothing (`noop`), once with each encoder; per core = documents / (seconds x 2).
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
    from dataclasses import replace

    import pyarrow as pa

    from shardforge.tokenize.native import encode_column
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
    if info.encoder != "shardforge":
        raise SystemExit(f"the compiled encoder does not take {tok_path}: {info.encoder_note}")
    hf_info = replace(info, encoder="tokenizers", encoder_note="benchmark")
    batches = [pa.array(texts[i:i + 1024]) for i in range(0, len(texts), 1024)]
    limit, compiled, stage, stage_hf = [], [], [], []
    tokens = 0
    for r in range(args.rounds):
        t0 = time.perf_counter()
        n, want = 0, []
        for i in range(0, len(texts), 1024):
            ids, counts = encode_batch(tok, texts[i:i + 1024], -1, 1)
            n += int(counts.to_numpy().sum())
            if r == 0:
                want.append(ids)
        limit.append(len(texts) / (time.perf_counter() - t0))
        tokens = n
        t0 = time.perf_counter()
        got = [encode_column(info.json, b, -1, 1)[0] for b in batches]
        compiled.append(len(texts) / (time.perf_counter() - t0))
        if r == 0 and not all(a.equals(b) for a, b in zip(got, want)):
            raise SystemExit("the compiled encoder's ids differ from tokenizers'")
        for inf, out in ((info, stage), (hf_info, stage_hf)):
            t0 = time.perf_counter()
            tokenize(df, TokenizeSection(eos_id=1), inf).write.format("noop").mode("overwrite").save()
            out.append(len(texts) / (time.perf_counter() - t0) / 2)
        print(f"limit {limit[-1]:,.0f} docs/s/core, compiled {compiled[-1]:,.0f}, stage {stage[-1]:,.0f} "
              f"(with tokenizers {stage_hf[-1]:,.0f}) docs/s/core (load {os.getloadavg()[0]:.1f})", flush=True)
    lm, sm = statistics.median(limit), statistics.median(stage)
    cm, hm = statistics.median(compiled), statistics.median(stage_hf)
    text = f"""## Tokenize stage (`bench/tokenize_stage.py`)

Command: `.venv/bin/python bench/tokenize_stage.py --docs {args.docs} --vocab {args.vocab} --rounds {args.rounds}`;
machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, tokenizers
{__import__('tokenizers').__version__}, Spark local[2]. Corpus: {args.docs:,} documents of real text (mean
{sum(map(len, texts)) / len(texts) / 1000:.1f} K characters), {tokens:,} tokens with a {info.vocab_size:,}-id byte-level
BPE ({tokens / len(texts):,.0f} per document). Load average at the end: {os.getloadavg()[0]:.1f}.

| | docs/s per core (median of {args.rounds}) | rounds |
|---|---:|---|
| limit: `encode_batch_fast`, one process, one core | {lm:,.0f} | {", ".join(f"{x:,.0f}" for x in limit)} |
| compiled BPE (`encode_column`), one process, one core, same ids | {cm:,.0f} | {", ".join(f"{x:,.0f}" for x in compiled)} |
| tokenize stage, Spark local[2], per core, compiled BPE | {sm:,.0f} | {", ".join(f"{x:,.0f}" for x in stage)} |
| tokenize stage, Spark local[2], per core, tokenizers | {hm:,.0f} | {", ".join(f"{x:,.0f}" for x in stage_hf)} |

**Compiled / tokenizers, one core: {cm / lm:.1f}x. Stage with the compiled BPE / the tokenizers limit, per
core: {sm / lm:.2f}x** (with tokenizers in the stage: {hm / lm:.2f}x). Tokens per second per core in the
stage: {sm * tokens / len(texts):,.0f}.
"""
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
