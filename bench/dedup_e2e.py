"""End-to-end dedup benchmark: `shardforge dedup` against datatrove's MinHash pipeline.

On a realistic corpus (bench/corpus.py): time and memory of each, and the quality of both
against exact Jaccard on the planted duplicates.

    python bench/corpus.py --docs 100000 --out /work/bench18/corpus-100k.jsonl
    python bench/dedup_e2e.py --corpus /work/bench18/corpus-100k.jsonl --work /tmp/sf-e2e --datatrove \\
        [--label after] [--src /path/to/checkout] [--rounds 1] [--json bench/results/dedup_e2e.json] [--memory 6g]

(The CLI needs Delta's jars: `make jars`, or SHARDFORGE_JARS pointing at a folder of them.)

1. shardforge: `python -m shardforge.engine.cli dedup --input <corpus> --output <work>/out-<label>` in a fresh
   process per round (SPARK_LOCAL_IP=127.0.0.1; with --memory, spark.driver.memory through
   `--set spark.properties=...`, else the embedded session's default heap): wall clock from spawn
   to exit, peak memory of its process tree
   (the driver's Python, the JVM, the Python workers), and from its report.json the stage
   seconds, the engine steps, dedup's phases; startup = wall - (run.finished - run.started)
   (interpreter and session start; report timestamps are whole seconds). With --src DIR that
   checkout's `lib/` is imported instead (a `shardforge` symlink first on PYTHONPATH, same venv;
   `shardforge.jobs` and `shardforge.schemas` still come from the installed checkout).
2. datatrove (--datatrove): bench/dedup.py's run_datatrove on the same documents, split into two
   JSONL files (its tasks take whole files: one file would leave one of its 2 workers idle; its own
   venv, MinhashConfig() defaults); per-stage seconds and wall clock.
3. quality, computed here, independent of both (only tokenisation follows
   shardforge.dedup.normalize's `lower_alnum`, checked against it on the first documents):
   exact 5-word-shingle Jaccard. recall@0.8: planted near pairs with J >= 0.8 and planted exact
   pairs of which not both documents were kept. over-removal: documents removed as duplicates
   whose best exact Jaccard with a kept document (candidates: the top 10 kept documents by shared
   rare shingles, in at most 200 documents; the audit's duplicate_of; kept members of the planted
   family) is < 0.5 (< 0.8). Every input row must be kept or rejected exactly once.

Results go into --json under --label (other labels kept); a markdown summary is printed.
On 2 cores: 2,000 documents take ~1.5-2 min for shardforge (mostly fixed costs), ~20 s for
datatrove, ~1 s of evaluation; 100,000 (558 M characters) ~2.5 min for shardforge, ~15-25 min
for datatrove (its spaCy-tokenised signatures; estimated from bench/results/dedup.md) and
under a minute of evaluation CPU (~1.5 GB).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import unicodedata
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import dedup as dedup_bench  # noqa: E402
from procmem import PeakRss  # noqa: E402

from shardforge.dedup.normalize import normalize  # noqa: E402

SHINGLE = 5
MAX_DF = 200        # "rare" shingles: in at most this many documents
TOP = 10            # kept candidates per removed document, by shared rare shingles
GB = 2**30


def machine() -> dict:
    mem = next(line for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    return {"nproc": len(os.sched_getaffinity(0)), "mem_total_gb": round(int(mem.split()[1]) * 1024 / GB, 1)}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def commit_of(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"],
                          capture_output=True, text=True).stdout.strip() or "not a git checkout"


def shardforge_env(work: Path, src: Path | None) -> dict[str, str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    if src:
        shim = work / "src-shim"
        shim.mkdir(parents=True, exist_ok=True)
        link = shim / "shardforge"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(src.resolve() / "lib")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH")) if p)
    return env


def run_shardforge(corpus: Path, out: Path, env: dict[str, str], memory: str, log: Path) -> dict:
    """One `shardforge dedup` process into a fresh `out`: wall clock, peak memory, its report."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "shardforge.engine.cli", "dedup", "--input", str(corpus), "--output", str(out)]
    if memory:
        cmd += ["--set", f'spark.properties={{"spark.driver.memory" = "{memory}"}}']
    load_before = load()
    with open(log.with_suffix(".out"), "w") as fo, open(log.with_suffix(".err"), "w") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=out.parent, env=env, stdout=fo, stderr=fe)
        mon = PeakRss(proc.pid)
        code = proc.wait()
        wall = time.perf_counter() - t0
        mon.stop()
    res = {"cmd": cmd, "wall_s": round(wall, 1), "exit": code, "load_before": load_before, "load_after": load(),
           "peak_root_gb": round(mon.peak_root / GB, 2), "peak_total_gb": round(mon.peak_total / GB, 2),
           "peak_pss_gb": round(mon.peak_pss / GB, 2)}
    if code != 0:
        res["error"] = log.with_suffix(".err").read_text()[-2000:]
        return res
    report = json.loads((out / "report.json").read_text())
    run = {k: report["run"][k] for k in ("started", "finished", "master")}
    span = datetime.fromisoformat(run["finished"]) - datetime.fromisoformat(run["started"])
    res.update(run=run, startup_s=round(wall - span.total_seconds(), 1),
               stages=[{k: s[k] for k in ("name", "seconds", "rows_in", "kept", "rejected")} for s in report["stages"]],
               timings=report.get("timings", {}), dedup_timings=report.get("dedup_timings", {}),
               duplicates=report.get("duplicates", {}))
    return res


def read_delta(table: Path, columns: list[str]) -> dict[str, list]:
    """Columns of a Delta table written once (version 0, as in a fresh output): all its Parquet
    files are live."""
    commits = sorted((table / "_delta_log").glob("*.json"))
    if len(commits) != 1:
        raise SystemExit(f"{table}: {len(commits)} Delta commits; expected a fresh output with one")
    parts = [pq.read_table(f, columns=columns) for f in sorted(table.glob("*.parquet"))]
    return {c: [v for t in parts for v in t.column(c).to_pylist()] for c in columns}


def shardforge_outcome(out: Path) -> dict:
    kept = read_delta(out / "dedup", ["id"])["id"]
    rej = read_delta(out / "rejects", ["id", "stage", "reason"])
    removed = [i for i, s, r in zip(rej["id"], rej["stage"], rej["reason"])
               if s == "dedup" and (r or "").startswith("duplicate_of:")]
    audit = read_delta(out / "dedup_audit", ["id", "duplicate_of"])
    return {"kept": kept, "removed": removed, "rejected": rej["id"],
            "duplicate_of": dict(zip(audit["id"], audit["duplicate_of"]))}


def gz_ids(folder: Path) -> list[str]:
    return [json.loads(line)["id"] for f in sorted(folder.glob("*.jsonl.gz")) for line in gzip.open(f, "rt")]


def split_corpus(corpus: Path, folder: Path, parts: int = 2) -> Path:
    """The corpus as `parts` JSONL files, lines dealt round-robin: datatrove gives each task
    whole files, so one file would keep one of its two workers idle. Returns the glob."""
    folder.mkdir(parents=True, exist_ok=True)
    outs = [open(folder / f"part-{i}.jsonl", "w") for i in range(parts)]
    with open(corpus) as fh:
        for i, line in enumerate(fh):
            outs[i % parts].write(line)
    for f in outs:
        f.close()
    return folder / "part-*.jsonl"


def run_datatrove(corpus: Path, work: Path) -> tuple[dict, dict | None]:
    """datatrove's pipeline (bench/dedup.py: 2 tasks on 2 workers) on the corpus split in two
    files, with its wall clock and its process tree's peak PSS; the outcome: ids it removed
    (its exclusion writer) and ids it wrote out."""
    parts = split_corpus(corpus, work.parent / "dt-input")
    load_before = load()
    mon = PeakRss(os.getpid())       # this process and datatrove's; its processes = the children
    t0 = time.perf_counter()
    res = dedup_bench.run_datatrove(parts, work)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    mon.stop()
    res.update(load_before=load_before, load_after=load(), peak_pss_gb=round(mon.peak_children_pss / GB, 2))
    if "error" in res:
        return res, None
    removed = gz_ids(work / "removed")
    return res, {"kept": gz_ids(work / "out"), "removed": removed, "rejected": removed, "duplicate_of": {}}


_CHARS: dict[int, str] = {}    # code point -> itself (a letter or digit) or " ", filled as met


def tokens(text: str) -> list[str]:
    """normalize(text, "lower_alnum").split() with str.translate (~10x faster): lower case,
    then every character outside Unicode L*/N* becomes a space, as normalize does."""
    low = text.lower()
    for o in {ord(c) for c in set(low)} - _CHARS.keys():
        _CHARS[o] = chr(o) if unicodedata.category(chr(o))[0] in "LN" else " "
    return low.translate(_CHARS).split()


MULT = np.uint64(0x9E3779B97F4A7C15)
EMPTY = np.zeros(0, np.uint64)


def shingles(toks: list[str]) -> np.ndarray:
    """Sorted unique 64-bit hashes of the 5-token shingles (a polynomial over the tokens'
    hashes; equal within this process exactly when the tuples are equal, but for ~2^-64)."""
    n = len(toks) - SHINGLE + 1
    if n <= 0:
        return EMPTY
    th = np.fromiter(map(hash, toks), np.int64, len(toks)).view(np.uint64)
    h = th[:n].copy()
    for j in range(1, SHINGLE):
        h *= MULT
        h += th[j:j + n]
    return np.unique(h)


def corpus_shingles(corpus: Path, check: int = 200) -> tuple[list[str], list[np.ndarray]]:
    """Ids and shingle sets of the corpus (empty below 5 tokens); `tokens` is checked against
    normalize() on the first `check` documents."""
    ids, sh = [], []
    with open(corpus, encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = doc.get("text") or ""
            toks = tokens(text)
            if len(ids) < check and toks != normalize(text, "lower_alnum").split():
                raise SystemExit(f"tokens() differs from normalize() on {doc['id']}")
            ids.append(doc["id"])
            sh.append(shingles(toks))
    return ids, sh


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


def planted_pairs(corpus: Path, pos: dict[str, int]) -> list[tuple[int, int, str]]:
    planted = json.loads(Path(f"{corpus}.planted.json").read_text())
    return ([(pos[p["id"]], pos[p["of"]], str(p["edit_rate"])) for p in planted["near"]]
            + [(pos[p["id"]], pos[p["of"]], "exact") for p in planted["exact"]])


def families(pairs: list[tuple[int, int, str]]) -> dict[int, list[int]]:
    """Each planted document -> every document of its family (planted pairs chain: a near
    duplicate of a near duplicate)."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b, _ in pairs:
        parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for x in list(parent):
        groups.setdefault(root(x), []).append(x)
    return {x: g for g in groups.values() for x in g}


class RareIndex:
    """Inverted index (shingle -> documents) of the shingles of the `query` documents that
    occur in at most MAX_DF documents of the corpus, as sorted numpy arrays."""

    def __init__(self, sh: list[np.ndarray], query: set[int]):
        self.sh = sh
        self.keys = np.unique(np.concatenate([EMPTY] + [sh[d] for d in query]))
        keys, docs = [], []
        for d, s in enumerate(sh):
            at = np.minimum(np.searchsorted(self.keys, s), max(self.keys.size - 1, 0))
            hit = at[self.keys[at] == s] if self.keys.size else at[:0]
            keys.append(hit.astype(np.int32))
            docs.append(np.full(hit.size, d, np.int32))
        k = np.concatenate(keys)
        self.docs = np.concatenate(docs)[np.argsort(k, kind="stable")]
        self.df = np.bincount(k, minlength=self.keys.size)
        self.start = np.cumsum(self.df) - self.df

    def top(self, d: int, kept: np.ndarray) -> list[int]:
        """The TOP kept documents sharing the most rare shingles with query document `d`."""
        k = np.searchsorted(self.keys, self.sh[d])
        k = k[self.df[k] <= MAX_DF]
        lens = self.df[k]
        at = np.repeat(self.start[k] - (np.cumsum(lens) - lens), lens) + np.arange(lens.sum())
        cand = self.docs[at]
        docs, counts = np.unique(cand[kept[cand]], return_counts=True)
        return docs[np.argsort(-counts, kind="stable")[:TOP]].tolist()


def recall(kept: np.ndarray, pairs: list[tuple[int, int, str]], pair_j: list[float | None]) -> dict:
    """Planted pairs (near with J >= 0.8, and exact) of which not both documents were kept,
    overall and per edit rate; near pairs with a document under 5 tokens are left out."""
    rates: dict[str, list[int]] = {}     # rate -> [pairs, J >= 0.8, removed, removed among J >= 0.8]
    for (a, b, rate), j in zip(pairs, pair_j):
        if j is None and rate != "exact":
            continue
        hit = not (kept[a] and kept[b])
        high = rate == "exact" or j >= 0.8
        r = rates.setdefault(rate, [0, 0, 0, 0])
        r[0] += 1
        r[1] += high
        r[2] += hit
        r[3] += hit and high
    wanted = sum(r[1] for r in rates.values())
    return {"pairs": wanted, "recall": round(sum(r[3] for r in rates.values()) / max(wanted, 1), 4),
            "per_rate": {k: {"pairs": r[0], "share_j_ge_0.8": round(r[1] / r[0], 3),
                             "share_removed": round(r[2] / r[0], 3),
                             "recall": round(r[3] / r[1], 3) if r[1] else None} for k, r in sorted(rates.items())}}


def over_removal(kept: np.ndarray, removed: list[int], ids: list[str], pos: dict[str, int], sh: list[np.ndarray],
                 family: dict[int, list[int]], index: RareIndex, dup_of: dict[str, str]) -> dict:
    """Documents removed as duplicates whose best exact Jaccard with a kept document is low."""
    best = []
    no_cand = 0
    for r in removed:
        if not sh[r].size:
            continue
        cands = set(index.top(r, kept)) | {x for x in family.get(r, ()) if kept[x]}
        if dup_of.get(ids[r]) in pos and kept[pos[dup_of[ids[r]]]]:
            cands.add(pos[dup_of[ids[r]]])
        cands = [c for c in cands if sh[c].size]
        no_cand += not cands
        j, c = max(((jaccard(sh[r], sh[c]), c) for c in cands), default=(0.0, None))
        best.append((j, ids[r], ids[c] if c is not None else None))
    js = np.array([b[0] for b in best])
    share = (lambda t: round(float((js < t).mean()), 4) if js.size else None)
    return {"removed": len(removed), "evaluated": len(best), "under_5_tokens": len(removed) - len(best),
            "no_candidate": no_cand, "share_below_0.5": share(0.5), "share_below_0.8": share(0.8),
            "median_best_jaccard": round(float(np.median(js)), 3) if js.size else None,
            "worst": [{"id": i, "best_jaccard": round(j, 3), "best_kept": k} for j, i, k in sorted(best)[:5]]}


def evaluate(corpus: Path, outcomes: dict[str, dict]) -> dict:
    """Accounting, recall@0.8 and over-removal of each tool's outcome, against exact Jaccard."""
    t0 = time.process_time()
    ids, sh = corpus_shingles(corpus)
    pos = {d: i for i, d in enumerate(ids)}
    pairs = planted_pairs(corpus, pos)
    pair_j = [jaccard(sh[a], sh[b]) if sh[a].size and sh[b].size else None for a, b, _ in pairs]
    family = families(pairs)
    removed = {name: [pos[i] for i in o["removed"]] for name, o in outcomes.items()}
    index = RareIndex(sh, {d for r in removed.values() for d in r})
    res = {}
    for name, o in outcomes.items():
        kept = np.zeros(len(ids), bool)
        kept[[pos[i] for i in o["kept"]]] = True
        seen = o["kept"] + o["rejected"]
        res[name] = {"accounting": {"docs": len(ids), "kept": len(o["kept"]),
                                    "removed_as_duplicate": len(removed[name]),
                                    "other_rejects": len(o["rejected"]) - len(removed[name]),
                                    "complete": len(seen) == len(ids) and set(seen) == set(ids)},
                     "recall_at_0.8": recall(kept, pairs, pair_j),
                     "over_removal": over_removal(kept, removed[name], ids, pos, sh, family, index, o["duplicate_of"])}
    res["eval_cpu_s"] = round(time.process_time() - t0, 1)
    return res


def flat(d: dict, prefix: str = "") -> dict:
    """Nested timings as {"a.b": seconds}."""
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def median_round(rounds: list[dict]) -> dict | None:
    ok = sorted((r for r in rounds if r["exit"] == 0), key=lambda r: r["wall_s"])
    return ok[len(ok) // 2] if ok else None


def summary(r: dict) -> str:
    m = r["machine"]
    lines = [f"## dedup end to end: {r['label']} ({r['commit']}), {r['corpus']}",
             f"{m['nproc']} cores, {m['mem_total_gb']} GB, driver memory {r['memory'] or 'default'}", ""]
    for i, s in enumerate(r["shardforge"]["rounds"]):
        head = (f"shardforge round {i + 1}: wall {s['wall_s']} s, exit {s['exit']}, "
                f"load {s['load_before']} -> {s['load_after']}")
        if s["exit"] != 0:
            lines += [f"- {head}: FAILED\n```\n{s['error'][-600:]}\n```"]
            continue
        phases = flat(s["dedup_timings"])
        lines += [f"- {head}, startup {s['startup_s']} s, peak memory root {s['peak_root_gb']} / tree RSS "
                  f"{s['peak_total_gb']} / tree PSS {s['peak_pss_gb']} GB",
                  "  - stages: " + ", ".join(f"{x['name']} {x['seconds']} s ({x['rows_in']} in, {x['kept']} kept, "
                                             f"{x['rejected']} rejected)" for x in s["stages"]),
                  "  - dedup phases: " + ", ".join(f"{k} {v}" for k, v in phases.items() if "." not in k),
                  "  - within phases: " + (", ".join(f"{k} {v}" for k, v in phases.items() if "." in k) or "-"),
                  "  - engine steps: " + ", ".join(f"{k} {v}" for k, v in flat(s["timings"]).items())]
    med, dt = median_round(r["shardforge"]["rounds"]), r.get("datatrove")
    if dt:
        lines.append(f"- datatrove {dt.get('version')}: " + (
            f"FAILED\n```\n{dt['error'][-600:]}\n```" if "error" in dt else
            ", ".join(f"{k} {v} s" for k, v in dt["timings"].items())
            + f"; total {dt['total_s']} s, wall {dt['wall_s']} s, removed {dt['removed']}, "
              f"peak PSS {dt['peak_pss_gb']} GB, load {dt['load_before']} -> {dt['load_after']}"))
    if med and dt and "total_s" in dt:
        stage = next(x["seconds"] for x in med["stages"] if x["name"] == "dedup")
        lines.append(f"- datatrove total / shardforge wall end to end = {dt['total_s'] / med['wall_s']:.2f}x; "
                     f"datatrove total / dedup stage ({stage} s) = {dt['total_s'] / stage:.2f}x "
                     "(> 1: shardforge faster)")
    q = r.get("quality", {})
    tools = [t for t in ("shardforge", "datatrove") if t in q]
    if tools:
        lines += ["", "| | " + " | ".join(tools) + " |", "|---" * (len(tools) + 1) + "|"]
        rows = {"kept / removed as dup / other rejects": lambda x: "{kept} / {removed_as_duplicate} / {other_rejects}"
                .format(**x["accounting"]),
                "every row accounted for": lambda x: x["accounting"]["complete"],
                "recall@0.8 (pairs)": lambda x: f"{x['recall_at_0.8']['recall']} ({x['recall_at_0.8']['pairs']})",
                "over-removal: best J < 0.5": lambda x: x["over_removal"]["share_below_0.5"],
                "over-removal: best J < 0.8": lambda x: x["over_removal"]["share_below_0.8"],
                "removed: evaluated / no candidate":
                    lambda x: "{evaluated} / {no_candidate}".format(**x["over_removal"])}
        lines += [f"| {name} | " + " | ".join(str(f(q[t])) for t in tools) + " |" for name, f in rows.items()]
        per = q[tools[0]]["recall_at_0.8"]["per_rate"]
        lines += ["", "| edit rate | pairs | J >= 0.8 | " + " | ".join(f"removed {t}" for t in tools) + " |",
                  "|---" * (3 + len(tools)) + "|"]
        lines += [f"| {k} | {v['pairs']} | {v['share_j_ge_0.8']} | "
                  + " | ".join(str(q[t]["recall_at_0.8"]["per_rate"][k]["share_removed"]) for t in tools) + " |"
                  for k, v in per.items()]
        lines.append(f"\nevaluation: {q['eval_cpu_s']} s CPU")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True, help="JSONL from bench/corpus.py (with its .planted.json)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sf-e2e"))
    ap.add_argument("--label", default="after", help="key of this run's results in --json")
    ap.add_argument("--src", type=Path, help="run this checkout's lib/ instead of the installed one")
    ap.add_argument("--datatrove", action="store_true", help="also run datatrove on the same corpus")
    ap.add_argument("--rounds", type=int, default=1, help="shardforge runs (the median one is compared)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "dedup_e2e.json")
    ap.add_argument("--memory", default="", help="spark.driver.memory (local mode: driver = executor); "
                    "default: none passed, the embedded session sizes its heap from the machine")
    ap.add_argument("--no-quality", action="store_true",
                    help="skip the quality evaluation (it holds every document's shingles: ~8 GB at 1M)")
    args = ap.parse_args(argv)
    corpus, work = args.corpus.resolve(), args.work.resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    r = {"label": args.label, "corpus": str(corpus), "machine": machine(), "memory": args.memory,
         "src": str(args.src.resolve()) if args.src else None, "commit": commit_of(args.src or ROOT)}
    env = shardforge_env(work, args.src)
    out = work / f"out-{args.label}"
    rounds = []
    for i in range(args.rounds):
        rounds.append(run_shardforge(corpus, out, env, args.memory, work / "logs" / f"{args.label}-{i + 1}"))
        print(f"shardforge round {i + 1}: wall {rounds[-1]['wall_s']} s, exit {rounds[-1]['exit']}", flush=True)
    r["shardforge"] = {"rounds": rounds}
    outcomes = {"shardforge": shardforge_outcome(out)} if rounds[-1]["exit"] == 0 else {}
    if args.datatrove:
        r["datatrove"], dt_outcome = run_datatrove(corpus, work / "dt")
        print(f"datatrove: {r['datatrove'].get('total_s', 'FAILED')} s", flush=True)
        if dt_outcome:
            outcomes["datatrove"] = dt_outcome
    if outcomes and not args.no_quality:
        r["quality"] = evaluate(corpus, outcomes)
    results = json.loads(args.json.read_text()) if args.json.exists() else {}
    results[args.label] = r
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(summary(r), flush=True)
    return 0 if all(x["exit"] == 0 for x in rounds) and "error" not in r.get("datatrove", {}) else 1


if __name__ == "__main__":
    sys.exit(main())
