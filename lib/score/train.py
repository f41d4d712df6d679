"""Train a fastText classifier from two sets of documents, as DCLM trains its quality filter.

    python -m shardforge.score.train --positive good/ --negative web.jsonl.zst --output model.bin \\
        [--label hq] [--negative-label cc] [--epoch 5] [--lr 0.1] [--word-ngrams 2] [--dim 100] ...

Each set is one or more JSONL files (plain, .gz, .bz2, .zst), Parquet files, plain-text
files (one document each) or folders of them; a document is its `--text-field` (default
`text`). Every positive document becomes a `__label__<label>` line, every negative one a
`__label__<negative-label>` line, newlines replaced by spaces (as the score stage does before
predicting). The lines are shuffled with `--seed` and fastText trains on one thread with that
seed, so the same documents and flags give the same model bytes. Records without a text
(malformed JSON, a missing or non-string field) are counted and named in the summary, never
trained on; an unreadable file stops the command (exit 2).
Prints the `[score] models` entry to use the model with.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter
from typing import Iterator, Sequence

from shardforge.fs import file_sha256
from shardforge.score.model import ModelError, binding


class TrainError(ValueError):
    """An input that cannot be read or gives no document; exit 2."""


def documents(paths: Sequence[str], field: str, skipped: Counter) -> Iterator[str]:
    """The texts of every input file under `paths`, in listing order (sorted per path)."""
    from shardforge.ingest.readers.files import list_inputs, unknown_files
    from shardforge.ingest.readers.streams import jsonl_lines

    for path in paths:
        if not os.path.exists(path):
            raise TrainError(f"{path}: no such file or folder")
        files = list_inputs(path)
        if not files:
            others = unknown_files(path)
            raise TrainError(f"{path}: no JSONL, Parquet or text file" + (f" (found {', '.join(others[:5])})"
                                                                             if others else ""))
        for f in files:
            if f.format.startswith("jsonl"):
                for row in jsonl_lines(f.path, f.source, f.format):
                    if "_line" not in row:
                        raise TrainError(f"{f.path}: {row.get('detail') or row.get('reason')}")
                    if not row["_line"].strip():
                        continue
                    try:
                        value = json.loads(row["_line"]).get(field)
                    except (ValueError, AttributeError):
                        skipped[f"{f.path}: malformed JSON"] += 1
                        continue
                    if isinstance(value, str):
                        yield value
                    else:
                        skipped[f"{f.path}: no string `{field}`"] += 1
            elif f.format == "parquet":
                import pyarrow.parquet as pq

                pf = pq.ParquetFile(f.path)
                if field not in pf.schema_arrow.names:
                    raise TrainError(f"{f.path}: no column `{field}` (columns: {', '.join(pf.schema_arrow.names)})")
                for batch in pf.iter_batches(columns=[field]):
                    for value in batch.column(0).to_pylist():
                        if isinstance(value, str):
                            yield value
                        else:
                            skipped[f"{f.path}: null `{field}`"] += 1
            elif f.format == "text":
                with open(f.path, encoding="utf-8", errors="replace") as fh:
                    yield fh.read()
            else:
                raise TrainError(f"{f.path}: a {f.format} file (give JSONL, Parquet or text documents)")


def training_lines(positive: Sequence[str], negative: Sequence[str], *, label: str, negative_label: str,
                   field: str = "text", seed: int = 0, max_docs: int = 0) -> tuple[list[str], Counter, Counter]:
    """fastText training lines of both sets, shuffled with `seed`; counts per label and of the
    records skipped. `max_docs` > 0 takes the first that many documents of each set."""
    lines, counts, skipped = [], Counter(), Counter()
    for paths, name in ((positive, label), (negative, negative_label)):
        for text in documents(paths, field, skipped):
            if max_docs and counts[name] >= max_docs:
                break
            lines.append(f"__label__{name} " + text.replace("\n", " ") + "\n")
            counts[name] += 1
        if not counts[name]:
            raise TrainError(f"no document with a `{field}` in {', '.join(paths)}")
    random.Random(seed).shuffle(lines)
    return lines, counts, skipped


def train(lines: list[str], output: str, *, epoch: int = 5, lr: float = 0.1, word_ngrams: int = 2, dim: int = 100,
          min_count: int = 1, bucket: int = 2_000_000, seed: int = 0) -> str:
    """Train on `lines` (one thread, `seed`) and save the model to `output`; its sha256."""
    fasttext = binding()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "train.txt")
        with open(data, "w", encoding="utf-8") as fh:
            fh.writelines(lines)
        model = fasttext.train_supervised(input=data, epoch=epoch, lr=lr, wordNgrams=word_ngrams, dim=dim,
                                          minCount=min_count, bucket=bucket, thread=1, seed=seed, verbose=0)
    folder = os.path.dirname(os.path.abspath(output))
    os.makedirs(folder, exist_ok=True)
    tmp_out = f"{output}.tmp-{os.getpid()}"
    model.save_model(tmp_out)
    os.replace(tmp_out, output)          # a reader never sees half a model
    return file_sha256(output)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shardforge.score.train", description=__doc__.splitlines()[0])
    ap.add_argument("--positive", nargs="+", required=True, metavar="PATH", help="documents of the wanted kind")
    ap.add_argument("--negative", nargs="+", required=True, metavar="PATH", help="documents of the other kind")
    ap.add_argument("--output", required=True, help="the model file to write (fastText .bin)")
    ap.add_argument("--label", default="hq", help="the positive label (default: hq, so __label__hq)")
    ap.add_argument("--negative-label", default="cc", help="the negative label (default: cc)")
    ap.add_argument("--text-field", default="text", help="JSON field or Parquet column of the text (default: text)")
    ap.add_argument("--max-docs", type=int, default=0, help="at most this many documents of each set (0: all)")
    ap.add_argument("--epoch", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--word-ngrams", type=int, default=2, help="word n-grams (default 2: bigrams, as DCLM)")
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--min-count", type=int, default=1)
    ap.add_argument("--bucket", type=int, default=2_000_000, help="hash buckets of the n-grams (model size: "
                    "bucket x dim x 4 bytes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="quality", help="the signals field name printed in the config entry")
    args = ap.parse_args(argv)
    if args.label == args.negative_label:
        print("train: --label and --negative-label must differ", file=sys.stderr)
        return 2
    try:
        lines, counts, skipped = training_lines(args.positive, args.negative, label=args.label,
                                                negative_label=args.negative_label, field=args.text_field,
                                                seed=args.seed, max_docs=args.max_docs)
        sha = train(lines, args.output, epoch=args.epoch, lr=args.lr, word_ngrams=args.word_ngrams, dim=args.dim,
                    min_count=args.min_count, bucket=args.bucket, seed=args.seed)
    except (TrainError, ModelError) as exc:
        print(f"train: error: {exc}", file=sys.stderr)
        return 2
    for where, n in sorted(skipped.items()):
        print(f"train: skipped {n} records ({where})", file=sys.stderr)
    print(f"train: {counts[args.label]} positive (__label__{args.label}), {counts[args.negative_label]} negative "
          f"(__label__{args.negative_label}) documents -> {args.output} (sha256 {sha})")
    print(f'[score] models = [{{ name = "{args.name}", path = {json.dumps(args.output)}, '
          f'label = "__label__{args.label}" }}]')
    return 0


if __name__ == "__main__":
    sys.exit(main())
