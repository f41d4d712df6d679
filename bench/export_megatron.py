"""`export-megatron`'s rate against the pyarrow read limit of the same tokens, in one run.

    .venv/bin/python bench/export_megatron.py [--docs 100000] [--length 2048] [--rounds 3] [--dir DIR]

Data: `docs` documents of `length` uint16 token ids each (Zipf frequencies over a 50,000-id
vocabulary, as bench/loader_data.py draws them), written by the project's shard writer as a
build of 16 shards with 1,024-row groups (zstd), once per folder (kept between runs).
Each round runs, one after the other in this process, with the build's files in the page
cache (one untimed read first):
- pyarrow limit: every shard's token column read row group by row group
  (`ParquetFile(memory_map=True).read_row_group(g, columns=["tokens"], use_threads=False)`:
  each option the faster one here), values to numpy;
- write floor: the same read, each row group's values written to one file (preallocated) and
  hashed with sha256: the least work any export of these tokens does (no index, no checks);
- export: `export_megatron(build, prefix)`, the command's whole work: shard checksums, decoding,
  the `.bin` and `.idx` written and hashed, the sidecar; the output is removed after the round.
Reported: tokens/s of each (median of the rounds), the ratio export / limit per round
(same-run ratios: the machine is shared), the process's CPU seconds (user + sys, all threads)
of each, and the load average. Results: BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import resource
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loader_data import _zipf_table  # noqa: E402


def make_build(path: Path, docs: int, length: int, shards: int = 16) -> None:
    """The build (once: an existing manifest.json is kept)."""
    from shardforge.shards.writer import WriterSettings, write_build

    if (path / "manifest.json").exists():
        return
    rng = np.random.default_rng(0)
    zipf = _zipf_table(rng, 50_000).astype(np.uint16)
    per = -(-docs // shards)
    tables = []
    for s in range(shards):
        n = max(0, min(docs, (s + 1) * per) - s * per)
        toks = zipf[rng.integers(0, len(zipf), n * length)]
        tables.append(pa.table({"id": pa.array(np.arange(s * per, s * per + n, dtype=np.int64)),
                                "tokens": pa.ListArray.from_arrays(
                                    np.arange(0, n * length + 1, length, dtype=np.int32), toks)}))
    write_build(str(path), tables, settings=WriterSettings(row_group_rows=1024))


def pyarrow_limit(build: Path) -> int:
    """Tokens read: every shard's token column, row group by row group, values as numpy."""
    total = 0
    for f in sorted(glob.glob(str(build / "*" / "part-*.parquet"))):
        pf = pq.ParquetFile(f, memory_map=True)
        for g in range(pf.num_row_groups):
            col = pf.read_row_group(g, columns=["tokens"], use_threads=False).column(0).combine_chunks()
            total += len(np.asarray(col.values))
    return total


def write_floor(build: Path, out: Path, nbytes: int) -> int:
    """The limit's read, plus each row group's values written to one file (of `nbytes`,
    allocated up front) and hashed."""
    total, sha = 0, hashlib.sha256()
    files = sorted(glob.glob(str(build / "*" / "part-*.parquet")))
    with open(out / "floor.bin", "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, nbytes)
        for f in files:
            pf = pq.ParquetFile(f, memory_map=True)
            for g in range(pf.num_row_groups):
                col = pf.read_row_group(g, columns=["tokens"], use_threads=False).column(0).combine_chunks()
                values = memoryview(np.asarray(col.values)).cast("B")
                fh.write(values)
                sha.update(values)
                total += len(col.values)
    sha.hexdigest()
    return total


def export(build: Path, out: Path) -> int:
    from shardforge.shards.megatron import export_megatron

    side = export_megatron(str(build), str(out / "corpus"))
    return side["tokens"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--length", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "shardforge-bench-megatron"))
    args = ap.parse_args()
    root = Path(args.dir)
    build = root / f"build-{args.docs}x{args.length}"
    t = time.perf_counter()
    make_build(build, args.docs, args.length)
    print(f"build: {build} ({time.perf_counter() - t:.1f} s)", flush=True)
    want = args.docs * args.length
    assert pyarrow_limit(build) == want                         # warms the page cache
    out = root / "out"
    runs = {"pyarrow": lambda: pyarrow_limit(build), "floor": lambda: write_floor(build, out, want * 2),
            "export": lambda: export(build, out)}
    rates: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    loads = []
    for r in range(args.rounds):
        for kind, run in runs.items():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            loads.append(os.getloadavg()[0])
            u0 = resource.getrusage(resource.RUSAGE_SELF)
            t = time.perf_counter()
            n = run()
            dt = time.perf_counter() - t
            u1 = resource.getrusage(resource.RUSAGE_SELF)
            assert n == want, (kind, n, want)
            rates[kind].append(n / dt)
            cpu[kind].append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
            print(f"round {r} {kind:8s} {dt:6.2f} s  {n / dt / 1e6:7.1f} M tokens/s  cpu {cpu[kind][-1]:5.2f} s",
                  flush=True)
    shutil.rmtree(out, ignore_errors=True)
    ratios = [e / p for e, p in zip(rates["export"], rates["pyarrow"], strict=True)]
    result = {"docs": args.docs, "length": args.length, "tokens": want, "rounds": args.rounds,
              "pyarrow_tokens_per_s": [round(x) for x in rates["pyarrow"]],
              "floor_tokens_per_s": [round(x) for x in rates["floor"]],
              "export_tokens_per_s": [round(x) for x in rates["export"]],
              "ratios": [round(x, 3) for x in ratios],
              "ratios_to_floor": [round(e / f, 3) for e, f in zip(rates["export"], rates["floor"], strict=True)],
              "cpu_s": {k: [round(x, 2) for x in v] for k, v in cpu.items()},
              "median": {"pyarrow": round(statistics.median(rates["pyarrow"])),
                         "floor": round(statistics.median(rates["floor"])),
                         "export": round(statistics.median(rates["export"])),
                         "ratio": round(statistics.median(ratios), 3),
                         "cpu_s": {k: round(statistics.median(v), 2) for k, v in cpu.items()}},
              "load_avg": [round(min(loads), 1), round(max(loads), 1)],
              "machine": f"{os.cpu_count()} cores, {platform.machine()}, python {platform.python_version()}, "
                         f"pyarrow {pa.__version__}, numpy {np.__version__}",
              "bin_bytes": want * 2}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
