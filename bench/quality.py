"""The quality rules against datatrove's implementations on the same real documents: per-rule
agreement of keep/drop decisions, and throughput of the whole filter set, in the same run.

    .venv/bin/python bench/realtext.py --out .bench/quality/corpus.jsonl     # once: >= 10,000 documents
    .venv/bin/python bench/quality.py --corpus .bench/quality/corpus.jsonl --rounds 3

Decisions: every group (gopher_repetition, gopher_quality, c4, fineweb) runs alone on every
document, with datatrove's defaults on both sides (`QualitySection()` is those defaults), and
each document gets the group's first failed rule or "keep". A rule's agreement is the share
of documents on which both sides agree whether the document fails *that* rule. For C4 the
kept texts are also compared (C4 removes lines). shardforge's decisions are those of
`quality.apply` (the compiled kernel); the run also counts the documents on which it differs
from `apply_reference` (the pyarrow/numpy/spaCy path; 0 expected).

Throughput: the whole set chained in FineWeb's order (C4 without its terminal-punctuation
line rule, as FineWeb runs it), on all documents, single process on every side, alternated
rounds, median; datatrove's time covers only its filter calls (no reading, no executor),
shardforge's its batch calls on Arrow batches of 1,000 documents. Every round starts cold:
datatrove in a new process (spaCy's cache empty), shardforge with its chunk memos cleared.
MB/s per core = UTF-8 megabytes / CPU seconds of the process (time.process_time; the machine
is shared, so wall time is reported too). `--cpu N` pins every side to core N (taskset).
`--reference-rounds` times the pure-Python reference too (slow: ~100 documents/s).

datatrove 0.10.1 runs in its own venv (.bench-venvs/datatrove, created on first use); its
English word tokenizer is spaCy's rule-based one (spacy.blank("en"), no model download).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DT_VENV = ROOT / ".bench-venvs" / "datatrove"
GROUPS = ("gopher_repetition", "gopher_quality", "c4", "fineweb")
BATCH = 1000

# datatrove reason -> shardforge rule
DT_NAMES = {
    "gopher_short_doc": "gopher_min_words", "gopher_long_doc": "gopher_max_words",
    "gopher_below_avg_threshold": "gopher_min_avg_word_length",
    "gopher_above_avg_threshold": "gopher_max_avg_word_length",
    "gopher_too_many_hashes": "gopher_max_symbol_word_ratio",
    "gopher_too_many_ellipsis": "gopher_max_symbol_word_ratio",
    "gopher_too_many_bullets": "gopher_max_bullet_lines_ratio",
    "gopher_too_many_end_ellipsis": "gopher_max_ellipsis_lines_ratio",
    "gopher_below_alpha_threshold": "gopher_min_alpha_words_ratio",
    "gopher_enough_stop_words": "gopher_min_stop_words",
    "dup_para_frac": "gopher_max_dup_para_frac", "dup_para_char_frac": "gopher_max_dup_para_char_frac",
    "dup_line_frac": "gopher_max_dup_line_frac", "dup_line_char_frac": "gopher_max_dup_line_char_frac",
    **{f"top_{n}_gram": f"gopher_top_{n}gram" for n in (2, 3, 4)},
    **{f"duplicated_{n}_n_grams": f"gopher_dup_{n}gram" for n in range(5, 11)},
    "lorem_ipsum": "c4_lorem_ipsum", "curly_bracket": "c4_curly_bracket", "too_few_sentences": "c4_min_sentences",
    "line_punct_ratio": "fineweb_min_line_punct_ratio", "short_line_ratio": "fineweb_max_short_line_ratio",
    "char_dup_ratio": "fineweb_max_dup_line_char_ratio", "list_ratio": "fineweb_max_newline_word_ratio",
}

DT_SCRIPT = r'''
import hashlib, json, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
corpus, mode, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
docs = [json.loads(l) for l in open(corpus, encoding="utf-8")]
def make(name, fineweb=False):
    return {"gopher_repetition": GopherRepetitionFilter, "gopher_quality": GopherQualityFilter,
            "c4": (lambda: C4QualityFilter(filter_no_terminal_punct=False)) if fineweb else C4QualityFilter,
            "fineweb": FineWebQualityFilter}[name]()
def decide(f, text, i):
    d = Document(text=text, id=str(i))
    try:
        r = f.filter(d)
    except Exception as e:
        return "error:" + type(e).__name__, d.text
    return ("keep" if r is True else (r[1] if isinstance(r, tuple) else "drop")), d.text
if mode == "decisions":
    out = {}
    for g in ("gopher_repetition", "gopher_quality", "c4", "fineweb"):
        f = make(g)
        res = [decide(f, d["text"], i) for i, d in enumerate(docs)]
        out[g] = [r for r, _ in res]
        if g == "c4":
            out["c4_text"] = [hashlib.sha1(t.encode()).hexdigest() if r == "keep" else None for r, t in res]
    print(json.dumps(out))
else:
    chain = [make(g, fineweb=True) for g in ("gopher_repetition", "gopher_quality", "c4", "fineweb")]
    for f in chain:
        f.filter(Document(text="warm up the tokenizer. " * 20, id="w"))
    t0 = time.perf_counter()
    c0 = time.process_time()
    kept = 0
    for i, d in enumerate(docs):
        doc = Document(text=d["text"], id=str(i))
        ok = True
        for f in chain:
            try:
                r = f.filter(doc)
            except Exception:
                r = False
            if r is not True:
                ok = False
                break
        kept += ok
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "kept": kept}))
'''


def dt_python() -> Path:
    py = DT_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run(["python3", "-m", "venv", str(DT_VENV)], check=True)
        subprocess.run([str(DT_VENV / "bin" / "pip"), "install", "-q", "datatrove[processing]==0.10.1", "spacy",
                        "xxhash<3.6", "orjson", "regex"], check=True)
    return py


def run_dt(corpus: Path, mode: str) -> dict:
    p = subprocess.run([str(dt_python()), "-c", DT_SCRIPT, str(corpus), mode, "1"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def ours(texts: list[str], q, reference: bool = False) -> tuple[list[str], list]:
    """(decision per document, texts after the groups) with shardforge.clean.quality, in batches
    (`reference`: apply_reference, the pure-Python path)."""
    from shardforge.clean.quality import apply, apply_reference

    fn = apply_reference if reference else apply
    decisions, out_texts = [], []
    for i in range(0, len(texts), BATCH):
        reasons, new = fn(pa.array(texts[i:i + BATCH], pa.string()), q)
        decisions += [r or "keep" for r in reasons]
        out_texts += new.to_pylist()
    return decisions, out_texts


def timed(batches: list, q, reference: bool = False) -> None:
    """`quality.apply` (or `apply_reference`) on prepared Arrow batches: what is timed."""
    from shardforge.clean.quality import apply, apply_reference

    fn = apply_reference if reference else apply
    for b in batches:
        fn(b, q)


def _cold() -> None:
    """Both shardforge paths start without memoised chunk tokens."""
    import importlib

    from shardforge.clean.quality.native import kernel

    kernel().clear_memo()
    importlib.import_module("shardforge.clean.quality.words")._memo.clear()


def agreement(mine: list[str], theirs: list[str]) -> dict:
    theirs = [DT_NAMES.get(t, t) for t in theirs]
    n = len(mine)
    rules = sorted({r for r in mine + theirs if r != "keep"})
    per = {}
    for r in rules:
        a = sum((m == r) != (t == r) for m, t in zip(mine, theirs))
        per[r] = {"agreement": round(1 - a / n, 5), "shardforge_drops": mine.count(r), "datatrove_drops": theirs.count(r)}
    keep = sum((m == "keep") == (t == "keep") for m, t in zip(mine, theirs)) / n
    confusions = Counter((t, m) for m, t in zip(mine, theirs) if m != t).most_common(6)
    return {"keep_drop_agreement": round(keep, 5), "rules": per,
            "top_differences": [{"datatrove": t, "shardforge": m, "docs": c} for (t, m), c in confusions]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT / ".bench" / "quality" / "corpus.jsonl"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reference-rounds", type=int, default=1)
    ap.add_argument("--part", choices=("all", "decisions", "throughput"), default="all",
                    help="run one half (results merge into --out)")
    ap.add_argument("--cpu", type=int, default=None, help="pin this process and datatrove's to one core")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "quality.json"))
    args = ap.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})       # datatrove's process inherits it
    corpus = Path(args.corpus)
    texts = [json.loads(line)["text"] for line in corpus.open(encoding="utf-8")]
    print(f"{len(texts)} documents, {sum(map(len, texts)) / 1e6:.1f} M characters", flush=True)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    result: dict = {"documents": len(texts), "megabytes": round(mb, 2), "corpus": str(corpus), "cpus": os.cpu_count(),
                    "pinned_to": sorted(os.sched_getaffinity(0)), "groups": {}}
    out_path = Path(args.out)
    if args.part != "all" and out_path.exists():
        result = {**json.loads(out_path.read_text()), **{k: v for k, v in result.items() if k != "groups"}}
        result.setdefault("groups", {})
    if args.part != "throughput":
        decisions(texts, corpus, result)
    if args.part != "decisions":
        throughput(texts, corpus, mb, result, args)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result.get("throughput", {}), indent=2))
    return 0


def decisions(texts: list[str], corpus: Path, result: dict) -> None:
    """Per-rule agreement with datatrove, and the kernel's differences from the reference."""
    from shardforge.config import QualitySection

    cache = corpus.with_suffix(".datatrove-decisions.json")   # decisions do not change between runs
    if cache.exists() and json.loads(cache.read_text()).get("corpus_bytes") == corpus.stat().st_size:
        dt = json.loads(cache.read_text())["decisions"]
    else:
        dt = run_dt(corpus, "decisions")
        cache.write_text(json.dumps({"corpus_bytes": corpus.stat().st_size, "decisions": dt}))
    for g in GROUPS:
        mine, new = ours(texts, QualitySection(filters=(g,)))
        result["groups"][g] = agreement(mine, dt[g])
        ref, ref_new = ours(texts, QualitySection(filters=(g,)), reference=True)
        result["groups"][g]["kernel_vs_reference_differences"] = sum(
            a != b or (a == "keep" and t != u) for a, b, t, u in zip(mine, ref, new, ref_new))
        if g == "c4":
            same = [hashlib.sha1(t.encode()).hexdigest() == h for t, h, m in zip(new, dt["c4_text"], mine)
                    if h is not None and m == "keep"]
            result["groups"][g]["kept_text_identical"] = round(sum(same) / max(len(same), 1), 5)
        print(g, json.dumps(result["groups"][g]), flush=True)


def throughput(texts: list[str], corpus: Path, mb: float, result: dict, args) -> None:
    """The four groups chained, cold rounds alternated, plus one warm-memo measurement."""
    from shardforge.config import QualitySection

    fineweb_set = QualitySection(filters=GROUPS, c4_terminal_punct=False)
    batches = [pa.array(texts[i:i + BATCH], pa.string()) for i in range(0, len(texts), BATCH)]
    sides = ["shardforge", "datatrove"] + (["shardforge_reference"] if args.reference_rounds else [])
    secs: dict = {k: [] for k in sides}
    cpu: dict = {k: [] for k in sides}
    for r in range(args.rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            if side == "shardforge_reference" and r >= args.reference_rounds:
                continue
            if side == "datatrove":
                got = run_dt(corpus, "throughput")
                secs[side].append(got["seconds"])
                cpu[side].append(got["cpu_seconds"])
            else:
                _cold()
                t0, c0 = time.perf_counter(), time.process_time()
                timed(batches, fineweb_set, reference=side == "shardforge_reference")
                secs[side].append(time.perf_counter() - t0)
                cpu[side].append(time.process_time() - c0)
            print(f"round {r} {side}: {len(texts) / secs[side][-1]:.0f} docs/s wall, "
                  f"{mb / cpu[side][-1]:.2f} MB/s per core (CPU)", flush=True)
    _cold()
    timed(batches, fineweb_set)                       # warm: the kernel's memo holds the corpus's chunks
    c0 = time.process_time()
    timed(batches, fineweb_set)
    warm = time.process_time() - c0
    med = {k: statistics.median(v) for k, v in secs.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    result["throughput"] = {
        "config": dataclasses.asdict(fineweb_set)["filters"], "rounds": args.rounds,
        "docs_per_second_wall": {k: round(len(texts) / v, 1) for k, v in med.items()},
        "mb_per_second_per_core_cpu": {k: round(mb / v, 2) for k, v in med_cpu.items()},
        "shardforge_warm_memo_mb_per_second_per_core_cpu": round(mb / warm, 2),
        "ratio_shardforge_over_datatrove_cpu": round(med_cpu["datatrove"] / med_cpu["shardforge"], 2),
        "ratio_shardforge_over_datatrove_wall": round(med["datatrove"] / med["shardforge"], 2),
        "load_average_after": os.getloadavg()}


if __name__ == "__main__":
    sys.exit(main())
