"""The whole pipeline on a realistic corpus: what the stage engine costs, and what resume saves.

    .venv/bin/python bench/pipeline.py [--docs 20000] [--baseline 1c2bd4e] [--rounds 2]

In one run, on the same corpus (`bench/corpus.py`: real text, 1-20 KB, mean about 6 KB,
planted duplicates and PII), each `shardforge pipeline` a fresh process on local[2]:
1. the baseline commit (before the stage engine) and this checkout, alternated `rounds`
   times, each into a fresh output: wall time of the whole command;
2. in the same rounds, this checkout killed (SIGKILL of the driver's process group) in the
   middle of dedup, then the same command again: the rerun's wall time, against the round's
   uninterrupted run and the time of the stages it reused.
Results: bench/results/pipeline.md and .json.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from baseline import baseline_python  # noqa: E402
from corpus import ensure_corpus  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from proctree import kill_tree  # noqa: E402  (the tests' crash: driver, JVM and workers)

CONF = """
[pipeline]
name = "bench"
write_raw = true

[spark]
master = "local[2]"
shuffle_partitions = 8
properties = { "spark.ui.enabled" = "false", "spark.driver.memory" = "3g" }

[clean]
min_chars = 200

[shards]
num_shards = 8
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYTHONPATH")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    return env


def run(python: str, args: list[str], out: Path, log: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env = {**_env(), "PYSPARK_PYTHON": python}
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run([python, "-m", "shardforge.engine.cli", "pipeline", *args, "--output", str(out)],
                              cwd="/tmp", env=env, stdout=fh, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{python} pipeline failed ({proc.returncode}); see {log}")
    return seconds


def crash_in_dedup(python: str, args: list[str], out: Path, log: Path) -> float:
    """Run until dedup's connected components start, SIGKILL the driver, its JVM and its workers;
    seconds until the kill."""
    shutil.rmtree(out, ignore_errors=True)
    flag = out.parent / (out.name + ".frozen")
    flag.unlink(missing_ok=True)
    env = {**_env(), "PYSPARK_PYTHON": python}
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen([python, str(ROOT / "tests" / "crash_run.py"), "in-dedup", str(flag), "--",
                                 "pipeline", *args, "--output", str(out)], cwd="/tmp", env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        while not flag.exists():
            if proc.poll() is not None:
                raise SystemExit(f"the run ended before dedup; see {log}")
            time.sleep(0.2)
        seconds = time.perf_counter() - t0
        kill_tree(proc)
    return seconds


# dedup's materialised results (`dedup_reused`) and the phase (`dedup_timings`) that computes each
PHASE_OF = {"prepared": "prepare", "signatures": "signatures", "candidates": "candidates", "ends": "ends",
            "edges": "verify", "cc-labels": "components", "near-map": "representatives", "state": "assemble"}


def stage_phases(out: Path) -> dict[str, float]:
    return json.loads((out / "report.json").read_text()).get("dedup_timings", {})


def stage_seconds(out: Path) -> dict[str, float]:
    report = json.loads((out / "report.json").read_text())
    return {s["name"]: s["seconds"] for s in report["stages"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--baseline", default="1c2bd4e",
                    help="commit to compare with (before the stage engine); 'none' runs only this checkout")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", type=Path, default=ROOT / ".bench" / "pipeline")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "pipeline.md")
    args = ap.parse_args()

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(ROOT / ".bench" / f"corpus-{args.docs}.jsonl", args.docs)
    conf = work / "bench.toml"
    conf.write_text(CONF)
    cli = ["--conf", str(conf), "--input", str(corpus)]
    pythons = {"current": sys.executable}
    if args.baseline != "none":
        pythons["baseline"] = baseline_python(args.baseline)
    times: dict[str, list[float]] = {"baseline": [], "current": []}
    resumes: list[dict] = []
    stages: dict[str, float] = {}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        order = ["baseline", "current", "resume"] if r % 2 == 0 else ["resume", "current", "baseline"]
        order = [name for name in order if name in pythons or name == "resume"]
        for name in order:
            if name == "resume":     # killed in the middle of dedup, then the same command again
                out = work / f"resumed-{r}"
                killed = crash_in_dedup(pythons["current"], cli, out, work / f"killed-{r}.log")
                rerun = run_keep(pythons["current"], cli, out, work / f"resumed-{r}.log")
                report = json.loads((out / "report.json").read_text())
                resumes.append({"killed_after": round(killed, 1), "rerun": round(rerun, 1),
                                "resumed_from": report["resumed_from"],
                                "reused": [s["name"] for s in report["stages"] if s["reused"]],
                                "rerun_stages": {s["name"]: s["seconds"] for s in report["stages"] if not s["reused"]},
                                "rerun_dedup_phases": report.get("dedup_timings", {}),
                                "dedup_reused": report.get("dedup_reused", [])})
                print(f"round {r}: killed after {killed:.1f} s, rerun {rerun:7.1f} s  (load "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
            else:
                out = work / f"{name}-{r}"
                t = run(pythons[name], cli, out, work / f"{name}-{r}.log")
                times[name].append(t)
                if name == "current":
                    stages = stage_seconds(out)
                print(f"round {r}: {name:<8} {t:7.1f} s  (load {os.getloadavg()[0]:.1f})", flush=True)
            load.append(os.getloadavg()[0])
        resumes[-1]["uninterrupted"] = round(times["current"][-1], 1)
        resumes[-1]["reused_seconds"] = round(sum(stages[n] for n in resumes[-1]["reused"]), 1)
        resumes[-1]["saved"] = round(times["current"][-1] - resumes[-1]["rerun"], 1)
        # dedup's own results read back by the rerun, at what they cost the uninterrupted run
        phases = stage_phases(work / f"current-{r}")
        resumes[-1]["reused_dedup_seconds"] = round(sum(phases.get(PHASE_OF.get(n, ""), 0.0)
                                                        for n in resumes[-1]["dedup_reused"]), 1)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    result = {
        "docs": args.docs, "corpus_mb": round(corpus.stat().st_size / 1e6, 1), "baseline": args.baseline,
        "times": times, "median": med, "ratio": round(med["current"] / med["baseline"], 3) if "baseline" in med else None,
        "ratios": [round(c / b, 3) for c, b in zip(times["current"], times["baseline"])],
        "stage_seconds": stages, "resumes": resumes, "load": [round(x, 1) for x in load],
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
    }
    (args.out.with_suffix(".json")).write_text(json.dumps(result, indent=2))
    args.out.write_text(render(result))
    print(render(result))
    return 0


def run_keep(python: str, args: list[str], out: Path, log: Path) -> float:
    """The same command again into the killed run's output (not removed first)."""
    env = {**_env(), "PYSPARK_PYTHON": python}
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run([python, "-m", "shardforge.engine.cli", "pipeline", *args, "--output", str(out)],
                              cwd="/tmp", env=env, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"the resumed run failed ({proc.returncode}); see {log}")
    return time.perf_counter() - t0


def render(r: dict) -> str:
    rows = "\n".join(f"| {name} | " + " / ".join(f"{t:.1f}" for t in r["times"][name]) + f" | {r['median'][name]:.1f} |"
                     for name in ("baseline", "current") if r["times"][name])
    ratio = ("no baseline run (`--baseline none`)" if r["ratio"] is None else
             f"**This checkout / baseline ({r['baseline']}, before the stage engine): {r['ratio']:.3f}x** (median; per round "
             f"{', '.join(f'{x:.3f}x' for x in r['ratios'])}; the target is at most 1.15x)")
    st = ", ".join(f"{k} {v:.1f} s" for k, v in r["stage_seconds"].items())
    res = "\n".join(f"| {i} | {x['killed_after']} | {x['rerun']} | {x['uninterrupted']} | {x['saved']} | "
                    f"{', '.join(x['reused'])} | {x['reused_seconds']} | "
                    f"{'yes' if x['saved'] >= x['reused_seconds'] else 'no'} | "
                    f"{', '.join(x['dedup_reused']) or '-'} | {x['reused_dedup_seconds']} | "
                    f"{'yes' if x['saved'] >= x['reused_seconds'] + x['reused_dedup_seconds'] else 'no'} |"
                    for i, x in enumerate(r["resumes"]))
    return f"""## Whole pipeline: the stage engine's cost, and resume (`bench/pipeline.py`)

Command: `.venv/bin/python bench/pipeline.py --docs {r['docs']} --baseline {r['baseline']} --rounds {len(r['resumes'])}`;
machine: {r['machine']}, Spark local[2], driver memory 3g; corpus: {r['docs']:,} documents, {r['corpus_mb']} MB
of JSONL (real text from this machine's source and doc files, 1-20 KB, mean about 6 KB; 10% planted near and 2%
exact duplicates). Every figure is the wall time of a whole `shardforge pipeline` process (session start
included); each round runs {"" if r["ratio"] is None else "the baseline commit, "}this checkout, and this checkout killed and resumed, in
alternating order; load average during the run: {min(r['load'])}-{max(r['load'])}.

| version | wall time per round (s) | median (s) |
|---|---|---:|
{rows}

{ratio}.

Stage times of this checkout's last uninterrupted run: {st}.

**Resume.** In each round the same command is killed (SIGKILL of the driver's process group) in the middle of
dedup, then run again into the same output; compared with that round's uninterrupted run:

| round | killed after (s) | rerun (s) | uninterrupted (s) | saved (s) | reused stages | their time uninterrupted (s) | saved >= reused | dedup results read back | their time uninterrupted (s) | saved >= both |
|---|---:|---:|---:|---:|---|---:|---|---|---:|---|
{res}
"""


if __name__ == "__main__":
    sys.exit(main())
