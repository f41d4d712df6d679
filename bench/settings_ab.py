"""shardforge's side of the FineWeb recipe (bench/recipe.py's command) under two or more sets of
`--set` overrides, alternated round by round, each run a fresh process: wall seconds, the
report's stage seconds, and each variant's median against the first's. For settings that change
no result (tests say so), the rows kept are printed to show it.

    SHARDFORGE_JARS=.jars .venv/bin/python bench/settings_ab.py --docs 20000 --rounds 3 \\
        --variant 'generated=spark.codegen_min_rows=0 spark.codegen_min_input_bytes=0' --variant default=

Needs bench/recipe.py's corpus and tokenizer for --docs (run it once). Writes --out (.json, .md).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(inp: Path, tok: Path, out: Path, sets: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--conf", str(ROOT / "conf/recipes/fineweb.toml"),
           "--input", str(inp), "--output", str(out), "--set", f'tokenize.tokenizer="{tok}"',
           "--set", 'spark.master="local[2]"', "--set", 'spark.properties={"spark.ui.enabled" = "false"}']
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    env.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"run failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    rep = json.loads((out / "report.json").read_text())
    return {"wall_s": round(wall, 1), "load_before": round(load, 2),
            "stages": {s["name"]: s["seconds"] for s in rep["stages"]},
            "kept": rep["stages"][-1]["kept"], "build_id": rep.get("shards", {}).get("build_id")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", required=True,
                    help="name=space-separated --set overrides (the first variant is the baseline)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sf-settings-ab"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "settings_ab")
    args = ap.parse_args()
    inp = ROOT / ".bench" / f"recipe-input-{args.docs}"
    tok = ROOT / ".bench" / f"tokenizer-{args.vocab}-corpus-{args.docs}.json"
    if not inp.is_dir() or not tok.exists():
        raise SystemExit(f"{inp} or {tok} missing: run bench/recipe.py --docs {args.docs} once")
    variants = []
    for v in args.variant:
        name, _, sets = v.partition("=")
        variants.append((name, sets.split()))
    results: dict[str, list[dict]] = {name: [] for name, _ in variants}
    for r in range(args.rounds):
        for name, sets in variants:
            res = run(inp, tok, args.work / name, sets)
            results[name].append(res)
            print(f"round {r + 1} {name:12s} {res['wall_s']:6.1f} s  kept {res['kept']}  "
                  + " ".join(f"{k}={v:.1f}" for k, v in res["stages"].items()), flush=True)
    base = statistics.median(x["wall_s"] for x in results[variants[0][0]])
    summary = {}
    for name, _ in variants:
        runs = results[name]
        med = statistics.median(x["wall_s"] for x in runs)
        stages = {k: round(statistics.median(x["stages"][k] for x in runs), 2) for k in runs[0]["stages"]}
        summary[name] = {"median_wall_s": med, "vs_first": round(base / med, 3), "stages": stages,
                         "kept": sorted({x["kept"] for x in runs}), "build_ids": sorted({x["build_id"] for x in runs})}
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    out = {"commit": commit, "docs": args.docs, "rounds": args.rounds, "machine": f"{os.cpu_count()} cores, "
           f"{platform.machine()}, Python {platform.python_version()}", "variants": dict(variants),
           "runs": results, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [f"commit {commit}, {args.docs} documents, {args.rounds} rounds alternated, {out['machine']}", "",
             "| variant | wall s per round | median | first / this | stage medians (s) |", "|---|---|---:|---:|---|"]
    for name, _ in variants:
        s = summary[name]
        lines.append(f"| {name} | {' / '.join(str(x['wall_s']) for x in results[name])} | {s['median_wall_s']} | "
                     f"{s['vs_first']:.2f}x | " + ", ".join(f"{k} {v}" for k, v in s["stages"].items()) + " |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
