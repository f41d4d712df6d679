"""Loader benchmark on realistic rows: ShardedDataset against the pyarrow limit, the DataLoader
floor and HF datasets streaming, in one run; peak RSS at 1x and 10x the data; time to the
first batch after a resume; shuffle quality.

    .venv/bin/python bench/loader.py [--rows 160000] [--scale 10] [--rounds 3] [--profiles text tokens]

Profiles (bench/loader_data.py): `text` (2-12 KB texts, mean about 6 KB, plus 512 int32
tokens) and `tokens` (2,048 int32 tokens); batches of 64, rank 0 of 1. Each measurement
runs in its own process (bench/loader_readers.py); in every round all readers run once,
one after the other, so the readers are alternated and each round's ratios are same-run
ratios; the report gives medians over the rounds. HF `datasets` runs in its own venv,
.bench-venvs/hf-datasets (made on first use; it borrows this interpreter's torch).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from loader_data import COLUMNS, make_build  # noqa: E402
from loader_plan import READERS  # noqa: E402
from loader_readers import HF_SCRIPT  # noqa: E402

WORK = ROOT / ".bench" / "loader"
VENVS = ROOT / ".bench-venvs"
BATCH = 64


def hf_python() -> Path:
    """HF datasets' own venv; torch comes from this interpreter's site-packages, placed
    after the venv's own packages."""
    py = VENVS / "hf-datasets" / "bin" / "python"
    if not py.exists():
        VENVS.mkdir(exist_ok=True)
        (VENVS / ".gitignore").write_text("*\n")
        subprocess.run([sys.executable, "-m", "venv", str(VENVS / "hf-datasets")], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "datasets==5.2.0"], check=True)
    import importlib.util

    torch_site = Path(importlib.util.find_spec("torch").origin).parent.parent   # without importing torch
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz-project-torch.pth").write_text(f"{torch_site}\n")
    return py


def run(kind: str, build: Path, profile: str, **kw) -> dict:
    args = dict(build=str(build), columns=COLUMNS[profile], batch=BATCH, **kw)
    if kind == "hf":
        from shardforge.shards.manifest import read_manifest

        m = read_manifest(str(build))
        payload = {"files": [m.path_of(s) for s in m.shards], "columns": args["columns"], "batch": BATCH,
                   "workers": kw["workers"]}
        cmd = [str(hf_python()), "-c", HF_SCRIPT, json.dumps(payload)]
    else:
        cmd = [sys.executable, str(HERE / "loader_readers.py"), kind, json.dumps(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise RuntimeError(f"{kind} {kw} failed: {out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res.get("samples"):
        res["rate"] = res["samples"] / res["seconds"]
        res["cpu_rate"] = res["samples"] / max(res["cpu_seconds"], 1e-9)
    return res


def shuffle_quality(build: Path, window_bytes, lanes: int) -> dict:
    """Over rank 0 of 1's sequence (batches of 64): Spearman correlation of manifest vs
    sequence position, share of sequence neighbours that were manifest neighbours, and
    distinct shards and row groups per batch (uniform expectation for shards alongside)."""
    import numpy as np

    from shardforge.loaders import ShardReader, assignment as A
    from shardforge.loaders.reader import epoch_positions

    r = ShardReader(build, rank=0, world_size=1, seed=1, shuffle=window_bytes != 0,
                    window_bytes=window_bytes or None, lanes=lanes)
    pos = epoch_positions(r)
    layout = A.Pass(len(pos), BATCH, lanes)
    seq = np.concatenate([np.arange(*layout.batch(j)) for j in range(layout.num_batches)])
    pos = pos[seq]
    m = r.source.manifest
    shard_start = np.concatenate([[0], np.cumsum([s.rows for s in m.shards])])
    group_start = {(s.index, g): int(shard_start[s.index]) + sum(s.row_groups[:g])
                   for s in m.shards for g in range(len(s.row_groups))}
    manifest_pos = np.array([group_start[(int(a), int(b))] for a, b in pos[:, :2]]) + pos[:, 2]
    n = len(manifest_pos)
    full = n // BATCH * BATCH
    p = np.array([s.rows for s in m.shards], dtype=float) / n
    return {"window_bytes": window_bytes, "lanes": lanes, "windows": r.order().num_windows,
            "spearman": float(np.corrcoef(manifest_pos, np.arange(n))[0, 1]),
            "neighbours": float(np.mean(np.abs(np.diff(manifest_pos)) == 1)),
            "distinct_shards": float(np.mean([len(set(b)) for b in pos[:full, 0].reshape(-1, BATCH)])),
            "distinct_groups": float(np.mean([len(set(map(tuple, b))) for b in pos[:full, :2].reshape(-1, BATCH, 2)])),
            "uniform_shards": float(np.sum(1 - (1 - p) ** BATCH))}


def bench_profile(profile: str, args) -> dict:
    small = WORK / f"{profile}-{args.rows}"
    big = WORK / f"{profile}-{args.rows * args.scale}"
    t0 = time.time()
    make_build(small, profile, args.rows)
    if not args.skip_10x:
        make_build(big, profile, args.rows * args.scale)
    print(f"[{profile}] builds ready ({time.time() - t0:.0f}s)", flush=True)
    for f in small.rglob("*.parquet"):            # warm the page cache: time reading, not the disk
        f.read_bytes()
    R: dict = {"rounds": [], "load": [], "bytes": sum(f.stat().st_size for f in small.rglob("*.parquet"))}
    readers = [r for r in READERS if not (args.skip_hf and r[2] == "hf")]
    for rnd in range(args.rounds):
        load0 = os.getloadavg()[0]
        got = {}
        for key, _label, kind, kw in readers:
            got[key] = run(kind, small, profile, **kw)
            print(f"[{profile}] round {rnd + 1} {key}: {got[key]['rate']:,.0f}/s "
                  f"(rss {got[key]['rss_mb']:.0f} MB, worker {got[key]['worker_rss_mb']:.0f} MB)", flush=True)
        R["rounds"].append(got)
        R["load"].append((load0, os.getloadavg()[0]))
    R["baseline"] = run("baseline", small, profile)
    R["plain_baseline"] = run("plain_baseline", small, profile)
    R["plain"] = run("plain", small, profile)
    R["first_batch"] = run("first_batch", small, profile)
    print(f"[{profile}] first batch: {R['first_batch']['seconds']} {R['first_batch']['row_groups']}", flush=True)
    if not args.skip_10x:
        for key, kind, kw in (("limit_10x", "limit", {}), ("batch_0_10x", "sharded", {"mode": "batch"}),
                              ("batch_2_10x", "sharded", {"mode": "batch", "workers": 2, "lanes": 2}),
                              ("batch_p2_10x", "sharded", {"mode": "batch", "lanes": 2, "readers": 2}),
                              ("plain_10x", "plain", {})):
            R[key] = run(kind, big, profile, **kw)
            print(f"[{profile}] {key}: {R[key]['rate']:,.0f}/s rss {R[key]['rss_mb']:.0f} MB "
                  f"worker {R[key]['worker_rss_mb']:.0f} MB", flush=True)
    if profile == "text":
        R["shuffle"] = [shuffle_quality(small, wb, lanes) for wb, lanes in
                        ((0, 1), (16 << 20, 1), (64 << 20, 1), (128 << 20, 1), (128 << 20, 2), (512 << 20, 1))]
    return R


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=160_000)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profiles", nargs="+", default=["text", "tokens"])
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-10x", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "loader.md"))
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from the last results")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    results = WORK / "results.json"
    if args.report_only:
        R = json.loads(results.read_text())
    else:
        R = {"args": vars(args), "cpus": os.cpu_count(), "python": platform.python_version(),
             "started": time.strftime("%Y-%m-%d %H:%M"), "load_start": os.getloadavg(),
             "torch": importlib.metadata.version("torch")}
        for profile in args.profiles:
            R[profile] = bench_profile(profile, args)
            results.write_text(json.dumps(R, indent=1))
        R["load_end"] = os.getloadavg()
        results.write_text(json.dumps(R, indent=1))
    from loader_report import report

    Path(args.out).write_text(report(R))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
