"""Packed-sequence reading (`TokenDataset` / `SequenceReader`) against the pyarrow read limit of
the same token column and against LitData's token loader on the same tokens.

    .venv/bin/python bench/sequences.py [--docs 100000] [--length 2048] [--rounds 3] [--epochs 4]

Data: `docs` documents of log-normally distributed lengths (mean about 1,000 tokens) of
uint16 ids, as a shardforge build of 16 shards with 1,024-row groups; the same documents as
a LitData dataset (`litdata.optimize` with `TokensLoader`, in its own venv,
`.bench-venvs/litdata`, reusing this venv's torch). Each reader runs in a fresh process, one
after the other, alternated `rounds` times; each reads `epochs` epochs (default 4: one epoch takes
well under a second here, too short to measure) of rank 0 of 1, batches of
8 sequences of `length` + 1 tokens, and reports tokens/s (inputs: length x sequences), timed
from after the reader's imports (torch's import, 2-3 s here, is a training process's, not an
epoch's; it is reported apart) to the last batch.
- pyarrow limit: `ParquetFile.iter_batches` over the token column of every shard, values to
  numpy (no packing, no shuffle);
- shardforge, num_workers 0: `SequenceReader.iter_sequences(8)` (window shuffle);
- shardforge, num_workers 2: `TokenDataset(lanes=2, batched=True)` in a DataLoader;
- shardforge, reader processes: the same with `reader_processes=2` and num_workers 0;
- LitData, num_workers 0 and 2: `StreamingDataset(item_loader=TokensLoader(length + 1),
  shuffle=True)` in a DataLoader of batch 8.
Results: bench/results/sequences.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LITDATA_PY = ROOT / ".bench-venvs" / "litdata" / "bin" / "python"


def make_build(path: Path, docs: int) -> None:
    import numpy as np
    import pyarrow as pa

    from shardforge.shards.writer import WriterSettings, write_build

    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(6.6, 0.7, docs).astype(np.int64), 1, 16_000)
    values = rng.integers(3, 32_000, int(lengths.sum()), dtype=np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    per = -(-docs // 16)
    tables = []
    for s in range(16):
        a, b = s * per, min(docs, (s + 1) * per)
        off = offsets[a:b + 1] - offsets[a]
        lists = pa.ListArray.from_arrays(pa.array(off), pa.array(values[offsets[a]:offsets[b]]))
        tables.append(pa.table({"id": pa.array(np.arange(a, b)), "tokens": lists}))
    write_build(str(path), tables, settings=WriterSettings(row_group_rows=1024))


def _imports(kind: str) -> None:
    """What a reader imports, before its clock starts: a training process has imported torch
    long before its first epoch (2-3 s here, the same for every reader; DataLoader workers
    are forked with it)."""
    import importlib

    names = ["pyarrow.parquet"] + ([] if kind == "pyarrow" else ["torch.utils.data"])
    names += ["shardforge.loaders"] if kind.startswith("ours") else ["litdata"] if kind.startswith("litdata") else []
    for name in names:
        importlib.import_module(name)


def run_one(kind: str, build: str, length: int, litdata_dir: str, epochs: int = 4) -> dict:
    i0 = time.perf_counter()
    _imports(kind)
    t0 = time.perf_counter()
    tokens = 0
    if kind == "pyarrow":
        import pyarrow.parquet as pq

        from shardforge.shards.manifest import read_manifest

        m = read_manifest(build)
        for _ in range(epochs):
            for s in m.shards:
                for rb in pq.ParquetFile(m.path_of(s)).iter_batches(batch_size=1024, columns=["tokens"]):
                    tokens += len(rb.column(0).values.to_numpy(zero_copy_only=False))
    elif kind == "ours-0":
        from shardforge.loaders import SequenceReader

        reader = SequenceReader(build, sequence_length=length, rank=0, world_size=1, seed=0)
        for epoch in range(epochs):
            reader.set_epoch(epoch)
            for chunk in reader.iter_sequences(8):
                tokens += chunk.shape[0] * length
    elif kind in ("ours-2", "ours-p2"):    # two DataLoader workers, or two torch-free reader processes
        from torch.utils.data import DataLoader

        from shardforge.loaders import TokenDataset

        readers = 2 if kind == "ours-p2" else 0
        ds = TokenDataset(build, sequence_length=length, rank=0, world_size=1, seed=0, batch_size=8, batched=True,
                          lanes=2, reader_processes=readers)
        loader = DataLoader(ds, batch_size=None, num_workers=0 if readers else 2)
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            for batch in loader:
                tokens += batch.shape[0] * length
    elif kind.startswith("litdata"):
        from litdata import StreamingDataset, TokensLoader
        from torch.utils.data import DataLoader

        ds = StreamingDataset(litdata_dir, item_loader=TokensLoader(block_size=length + 1), shuffle=True, seed=0)
        loader = DataLoader(ds, batch_size=8, num_workers=int(kind[-1]))
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            for batch in loader:
                tokens += batch.shape[0] * length
    seconds = time.perf_counter() - t0
    return {"kind": kind, "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
            "import_seconds": t0 - i0}


def _litdata_docs(item):
    """LitData's optimize function (module level: its workers pickle it): one token tensor
    per document of one row group."""
    import pyarrow.parquet as pq
    import torch

    path, group = item
    col = pq.ParquetFile(path).read_row_group(group, columns=["tokens"]).column(0).combine_chunks()
    for doc in col:
        yield torch.tensor(doc.values.to_numpy(zero_copy_only=False).astype("int32"))


def litdata_optimize(build: str, out: str) -> None:
    """In the LitData venv: the build's documents, one token tensor each, into LitData chunks."""
    from litdata import TokensLoader, optimize

    manifest = json.loads((Path(build) / "manifest.json").read_text())   # (no shardforge in LitData's venv)
    inputs = [(str(Path(build) / s["file"]), g) for s in manifest["shards"] for g in range(len(s["row_groups"]))]
    optimize(fn=_litdata_docs, inputs=inputs, output_dir=out, chunk_size=(2049 * 8000), item_loader=TokensLoader(),
             num_workers=2, mode="overwrite")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--length", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4, help="epochs each reader process reads (one clock)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--optimize", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "sequences.md")
    args = ap.parse_args()
    build = ROOT / ".bench" / f"seq-build-{args.docs}"
    lit = ROOT / ".bench" / f"seq-litdata-{args.docs}"
    if args.optimize:
        litdata_optimize(str(build), str(lit))
        return 0
    if args.one:
        print(json.dumps(run_one(args.one, str(build), args.length, str(lit), args.epochs)))
        return 0
    if not (build / "manifest.json").exists():
        make_build(build, args.docs)
    if not LITDATA_PY.exists():
        raise SystemExit(f"LitData's venv is missing: python3 -m venv {LITDATA_PY.parent.parent} && echo "
                         f"{sys.prefix}/lib/python3.11/site-packages > {LITDATA_PY.parent.parent}/lib/python3.11/"
                         f"site-packages/main.pth && {LITDATA_PY.parent / 'pip'} install litdata")
    if not (lit / "index.json").exists():
        subprocess.run([str(LITDATA_PY), __file__, "--docs", str(args.docs), "--optimize"], check=True)
    kinds = ["pyarrow", "ours-0", "ours-2", "ours-p2", "litdata-0", "litdata-2"]
    results: dict[str, list[float]] = {k: [] for k in kinds}
    imports: dict[str, list[float]] = {k: [] for k in kinds}
    with_imports: dict[str, list[float]] = {k: [] for k in kinds}
    loads = []
    for r in range(args.rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            py = str(LITDATA_PY) if kind.startswith("litdata") else sys.executable
            proc = subprocess.run([py, __file__, "--docs", str(args.docs), "--length", str(args.length),
                                   "--epochs", str(args.epochs), "--one", kind], capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{kind} failed:\n{proc.stderr[-3000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            results[kind].append(res["tokens_per_s"])
            imports[kind].append(res["import_seconds"])
            with_imports[kind].append(res["tokens"] / (res["seconds"] + res["import_seconds"]))
            loads.append(os.getloadavg()[0])
            print(f"round {r}: {kind:<10} {res['tokens_per_s'] / 1e6:7.1f} M tokens/s  "
                  f"({res['tokens'] / 1e6:.0f} M tokens, load {loads[-1]:.1f})", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    rows = "\n".join(f"| {k} | {med[k] / 1e6:.1f} | " + ", ".join(f"{x / 1e6:.1f}" for x in results[k]) +
                     f" | {statistics.median(imports[k]):.1f} | {statistics.median(with_imports[k]) / 1e6:.1f} |"
                     for k in kinds)
    wmed = {k: statistics.median(v) for k, v in with_imports.items()}
    text = f"""## Packed token sequences in the loader (`bench/sequences.py`)

Command: `.venv/bin/python bench/sequences.py --docs {args.docs} --length {args.length} --rounds {args.rounds} --epochs {args.epochs}`;
machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; load average
{min(loads):.1f}-{max(loads):.1f} during the run. Data: {args.docs:,} documents of uint16 token ids (log-normal
lengths, mean about 1,000), 16 shards, 1,024-row groups; LitData {_litdata_version()} on the same documents.
Sequences of {args.length} + 1 tokens, batches of 8, {args.epochs} epoch(s) of rank 0 of 1, each reader in a fresh process,
timed from after its imports (their time, median, in the fourth column) to its last batch; the last
column counts the imports in, as a one-epoch script would see it.

| reader | M tokens/s (median) | rounds | imports (s) | M tokens/s with imports |
|---|---:|---|---:|---:|
{rows}

- shardforge sequence mode, num_workers 0 / the pyarrow limit: **{med['ours-0'] / med['pyarrow']:.2f}x** (target >= 0.8x)
- shardforge, num_workers 2 / the pyarrow limit: {med['ours-2'] / med['pyarrow']:.2f}x
- shardforge / LitData at num_workers 0: **{med['ours-0'] / med['litdata-0']:.2f}x**; at num_workers 2:
  **{med['ours-2'] / med['litdata-2']:.2f}x** (target >= 1.5x)
- shardforge with `reader_processes=2` (num_workers 0, two torch-free readers) / LitData at num_workers 2:
  {med['ours-p2'] / med['litdata-2']:.2f}x; / shardforge num_workers 2: {med['ours-p2'] / med['ours-2']:.2f}x
- the same with the imports counted in: {wmed['ours-0'] / wmed['litdata-0']:.2f}x at num_workers 0,
  {wmed['ours-2'] / wmed['litdata-2']:.2f}x at num_workers 2
"""
    args.out.write_text(text)
    print(text)
    return 0


def _litdata_version() -> str:
    out = subprocess.run([str(LITDATA_PY), "-c", "import litdata; print(litdata.__version__)"], capture_output=True,
                         text=True)
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    sys.exit(main())
