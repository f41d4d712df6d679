"""Benchmark of the PII kernel (shardforge.redact.pii): accuracy on the development and the
independent labeled sets, throughput against scrubadub in the same run, linear time
on adversarial inputs, and a 50 MB document.

    .venv/bin/python bench/redact.py [--quick] [--throughput-only] [--short-dense] [--rounds 3] [--repeat 5]
                                     [--cpu-rounds 3] [--parts] [--out ...]

scrubadub runs in its own venv ($SHARDFORGE_BENCH_VENVS/scrubadub, default
/root/.cache/shardforge/bench-venvs/scrubadub, created on first use) in a
subprocess, on the same documents. Both sides run on one core, one document at a
time, with their default detectors; each round times shardforge's `detect`, its
`redact` (a few passes each) and scrubadub's `clean` one after the other, and every
round's ratios are reported with the load average at its start.
"""
from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds a select.py: with this script's directory first on the path it would shadow the
# standard library's `select`, which subprocess imports
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "data" / "pii"))

import redact_corpus as corpus  # noqa: E402

VENV = Path(os.environ.get("SHARDFORGE_BENCH_VENVS", "/root/.cache/shardforge/bench-venvs")) / "scrubadub"
SCRUBADUB_RUN = r"""
import json, sys, time
import scrubadub
docs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
scrubber = scrubadub.Scrubber()
t0, c0 = time.perf_counter(), time.process_time()
for d in docs:
    scrubber.clean(d)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "version": scrubadub.__version__,
                  "detectors": sorted(scrubber._detectors)}))
"""


NOTES = """### Notes
- Accuracy: exact (start, end, kind) match. The development set was built together with the
  detectors; the independent set was not (see its README).
- Throughput: scrubadub runs its own default detectors, in its own venv, as a subprocess pinned to
  the same core; each round times `detect`, `redact` and scrubadub back to back. On a shared machine
  the ratio moves with the load: compare ratios from one round, not absolute MB/s across runs.
- Linearity: one run per size; linear growth is 16x from 1 to 16 MB, quadratic would be 256x.
"""


def ensure_scrubadub() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable if "venv" not in sys.prefix else "python3", "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "scrubadub"], check=True)
    return py


def single_core() -> None:
    """Pin this process (and children) to one core, where the OS allows it."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})


def mb(text_or_docs) -> float:
    if isinstance(text_or_docs, str):
        return len(text_or_docs.encode("utf-8")) / 1e6
    return sum(len(d.encode("utf-8")) for d in text_or_docs) / 1e6


def time_pass(fn, docs, repeat: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) per pass over `docs`, averaged over `repeat` passes
    (so that our side, like scrubadub's longer run, spans a few seconds of the load)."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        for d in docs:
            fn(d)
    return (time.perf_counter() - t0) / repeat, (time.process_time() - c0) / repeat


def accuracy() -> str:
    import handwritten
    import score

    rows = score.load() + handwritten.load()
    stats, _ = score.score(rows)
    neg = sum(1 for r in rows if r["group"].startswith("neg:"))
    dev = (f"Development set: {len(rows)} snippets ({neg} hard negatives; {len(handwritten.load())} of them "
           f"handwritten, the rest from `tests/data/pii/make_labeled.py`), built together with the detectors. "
           f"Exact span match.\n\n" + score.table(stats))
    sys.path.insert(0, str(ROOT / "tests" / "data" / "pii_independent"))
    import score_independent as ind

    rows = ind.load()
    stats, _, negs, _ = ind.score(rows)
    n_spans = sum(len(r["spans"]) for r in rows)
    independent = (f"Independent set (`tests/data/pii_independent/`): {len(rows)} texts from Debian's Python 3.11 "
                   f"documentation and composed mailing-list messages, {n_spans} labeled spans, "
                   f"{sum(v['n'] for v in negs.values())} hard negatives; labels written before the detectors "
                   f"ran on it. Exact span match; a hard negative counts as flagged when any detection "
                   f"overlaps it.\n\n" + ind.table(stats, negs))
    return dev + "\n\n" + independent


def scrubadub_input(size: int, short_dense: bool) -> tuple[list, str, list[str]]:
    """The documents, a JSONL file of them (the caller deletes it) and the command that runs
    scrubadub over that file on this process's first core."""
    docs = (corpus.documents(size, pii_every=500, doc_bytes=(800, 1_200)) if short_dense
            else corpus.documents(size))
    py = ensure_scrubadub()
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
        path = f.name
    cmd = [str(py), "-c", SCRUBADUB_RUN, path]
    if hasattr(os, "sched_getaffinity"):
        cmd = ["taskset", "-c", str(sorted(os.sched_getaffinity(0))[0])] + cmd
    return docs, path, cmd


def throughput(redactor, size: int, rounds: int, repeat: int, short_dense: bool = False) -> tuple[str, dict]:
    docs, path, cmd = scrubadub_input(size, short_dense)
    size_mb = mb(docs)
    runs = []
    try:
        for _ in range(rounds):           # alternating, every round complete: the machine is shared
            load = os.getloadavg()[0]
            det, det_cpu = time_pass(redactor.detect, docs, repeat)
            red, red_cpu = time_pass(redactor.redact, docs, repeat)
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            sc = json.loads(res.stdout.strip().splitlines()[-1])
            runs.append({"load": load, "detect_s": det, "redact_s": red, "scrubadub_s": sc["seconds"],
                         "detect_ratio": sc["seconds"] / det, "redact_ratio": sc["seconds"] / red,
                         "redact_cpu_ratio": sc["cpu_seconds"] / red_cpu, "detect_cpu_ratio": sc["cpu_seconds"] / det_cpu})
    finally:
        os.unlink(path)
    shape = "~1 KB each, one labeled snippet per ~500 characters" if short_dense else \
        "4-40 KB each, one labeled snippet per ~2 KB"
    lines = [f"Same {len(docs)} documents ({size_mb:.1f} MB of prose, code and log lines, {shape}), one core, one document at a time; {rounds} rounds, each timing `detect` and `redact` "
             f"({repeat} passes each, seconds per pass) and scrubadub {sc['version']} "
             f"({', '.join(sc['detectors'])}, one pass) one after the other:\n",
             "| round | load | `detect` s (MB/s) | `redact` s (MB/s) | scrubadub s (MB/s) | detect / scrubadub | "
             "redact / scrubadub | redact / scrubadub, CPU time |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | {r['load']:.2f} | {r['detect_s']:.3f} ({size_mb / r['detect_s']:.1f}) | "
                     f"{r['redact_s']:.3f} ({size_mb / r['redact_s']:.1f}) | {r['scrubadub_s']:.2f} "
                     f"({size_mb / r['scrubadub_s']:.2f}) | {r['detect_ratio']:.1f}x | {r['redact_ratio']:.1f}x | "
                     f"{r['redact_cpu_ratio']:.1f}x |")
    red = sorted(r["redact_ratio"] for r in runs)
    det = sorted(r["detect_ratio"] for r in runs)
    lines.append(f"\n`redact` / scrubadub over the rounds: {red[0]:.1f}x-{red[-1]:.1f}x (median "
                 f"{red[len(red) // 2]:.1f}x); `detect` / scrubadub: {det[0]:.1f}x-{det[-1]:.1f}x.\n")
    return "\n".join(lines), {"rounds": runs, "redact_ratio_median": red[len(red) // 2],
                              "redact_ratio_min": red[0], "redact_ratio_max": red[-1]}


def cpu_rounds(redactor, size: int, rounds: int, short_dense: bool) -> tuple[str, dict]:
    """CPU time (process_time) of one `redact` pass over the documents, then scrubadub's one pass
    (its own process_time, in its subprocess on the same core), back to back, `rounds` times: CPU
    time moves less than wall time with other work on the machine."""
    docs, path, cmd = scrubadub_input(size, short_dense)
    runs = []
    try:
        for _ in range(rounds):
            load = os.getloadavg()[0]
            _, ours = time_pass(redactor.redact, docs, 1)
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            sc = json.loads(res.stdout.strip().splitlines()[-1])
            runs.append({"load": load, "redact_cpu_s": ours, "scrubadub_cpu_s": sc["cpu_seconds"],
                         "ratio": sc["cpu_seconds"] / ours})
    finally:
        os.unlink(path)
    lines = [f"CPU time (process_time), one pass each, back to back, over the same {len(docs)} documents "
             f"({mb(docs):.1f} MB), one core:\n", "| round | load | `redact` CPU s | scrubadub CPU s | ratio |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {i} | {r['load']:.2f} | {r['redact_cpu_s']:.3f} | {r['scrubadub_cpu_s']:.3f} | {r['ratio']:.1f}x |"
              for i, r in enumerate(runs, 1)]
    ratios = sorted(r["ratio"] for r in runs)
    lines.append(f"\nCPU-time ratio over the rounds: {ratios[0]:.1f}x-{ratios[-1]:.1f}x.\n")
    return "\n".join(lines), {"cpu_rounds": runs}


def parts(redactor, size: int, short_dense: bool, repeat: int = 5) -> tuple[str, dict]:
    """Where a `redact` pass goes: CPU seconds per pass over the documents (the least of
    `repeat` passes) of each part timed alone: the shared scan, each detector given the
    scan's results, all of detection, `detect` (with the glued neighbours), `redact`; then
    `redact` on non-ASCII text, and without the compiled scan (as from the --py-files zip)."""
    from shardforge.redact.pii import card, email, iban, ip, phone, redaction, secrets, ssn
    from shardforge.redact.pii.scan import scan

    docs = (corpus.documents(size, pii_every=500, doc_bytes=(800, 1_200)) if short_dense
            else corpus.documents(size))
    assert all(d.isascii() for d in docs)
    scans = [scan(d) for d in docs]
    pairs = list(zip(docs, scans))
    steps = {
        "shared scan (compiled)": lambda d, sc: scan(d),
        "PHONE": lambda d, sc: sc.starts and phone.find(d, False, sc.starts),
        "CREDIT_CARD": lambda d, sc: sc.starts and card.find(d, False, sc.starts),
        "US_SSN": lambda d, sc: ssn.find(d, False, sc.starts, keyword_starts=sc.ssn_keywords),
        "EMAIL": lambda d, sc: "@" in d and email.find(d),
        "IP_ADDRESS": lambda d, sc: ip.find(d, False, v6_run=sc.v6_run),
        "IBAN": lambda d, sc: sc.iban_heads and iban.find(d, False, sc.iban_heads),
        "KEY": lambda d, sc: secrets.find(d, False, first=sc.first, keyword_ends=sc.keyword_ends, b64_run=sc.b64_run),
        "detection (all of the above, overlaps resolved)": lambda d, sc: redactor._raw_detect(d),
        "`detect` (detection, glued neighbours, placeholders left alone)": lambda d, sc: redactor.detect(d),
        "`redact` (`detect`, replacement, re-detection around glued values)": lambda d, sc: redactor.redact(d),
    }
    non_ascii = "the same documents with a non-ASCII character (’) in each"
    steps[f"`redact`, {non_ascii}"] = lambda d, sc: redactor.redact(d)
    zipped = "with the detectors' own scans (shardforge from the --py-files zip)"
    steps[f"`redact` {zipped}"] = lambda d, sc: redactor.redact(d)
    steps[f"`redact` {zipped}, {non_ascii}"] = lambda d, sc: redactor.redact(d)
    cpu = {}
    for name, fn in steps.items():
        data = [(d + "’", sc) for d, sc in pairs] if non_ascii in name else pairs
        redaction.COMPILED = zipped not in name
        best = float("inf")
        for _ in range(repeat):
            c0 = time.process_time()
            for d, sc in data:
                fn(d, sc)
            best = min(best, time.process_time() - c0)
        cpu[name] = best
    redaction.COMPILED = True
    lines = [f"CPU seconds per pass over the {len(docs)} documents, each part timed alone "
             f"(least of {repeat} passes):\n", "| part | CPU s |", "|---|---:|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in cpu.items()]
    return "\n".join(lines) + "\n", {"parts_cpu_s": cpu}


def linearity(redactor, sizes_mb: list[int]) -> tuple[str, dict]:
    head = "| input | " + " | ".join(f"{s} MB (s)" for s in sizes_mb) + f" | t({sizes_mb[-1]})/t({sizes_mb[0]}) | MB/s at {sizes_mb[-1]} MB |"
    lines = [head, "|---|" + "---:|" * (len(sizes_mb) + 2)]
    ratios = {}
    for name in corpus.ADVERSARIAL:
        times = []
        for s in sizes_mb:
            text = corpus.adversarial(name, s * 1_000_000)
            t0 = time.perf_counter()
            redactor.redact(text)
            times.append(time.perf_counter() - t0)
        ratio = times[-1] / max(times[0], 1e-9)
        ratios[name] = ratio
        lines.append(f"| `{corpus.ADVERSARIAL[name]}` run ({name}) | " + " | ".join(f"{t:.2f}" for t in times)
                     + f" | {ratio:.1f} | {sizes_mb[-1] / times[-1]:.1f} |")
    return "\n".join(lines) + "\n", ratios


def big_document(redactor, size_mb: int) -> tuple[str, float]:
    text = "".join(corpus.documents(size_mb * 1_000_000, seed=50))
    t0 = time.perf_counter()
    out, counts = redactor.redact(text)
    dt = time.perf_counter() - t0
    n = sum(counts.values())
    return (f"One {mb(text):.1f} MB document (the same mix as above): completed in {dt:.1f} s "
            f"({mb(text) / dt:.2f} MB/s), {n} spans redacted, output {mb(out):.1f} MB.\n"), dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--throughput-only", action="store_true", help="only the scrubadub comparison")
    ap.add_argument("--rounds", type=int, default=3, help="alternating throughput rounds")
    ap.add_argument("--repeat", type=int, default=5, help="passes of detect and of redact per round")
    ap.add_argument("--short-dense", action="store_true",
                    help="throughput on ~1 KB documents with one labeled snippet per ~500 characters")
    ap.add_argument("--cpu-rounds", type=int, default=0,
                    help="also this many CPU-time rounds: one `redact` pass, then scrubadub's, back to back")
    ap.add_argument("--parts", action="store_true", help="also the CPU time of each part of a `redact` pass")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from shardforge.redact.pii import Redactor

    single_core()
    redactor = Redactor()
    sizes = [1, 2, 4] if args.quick else [1, 2, 4, 8, 16]
    big = 5 if args.quick else 50
    cmd = "python bench/redact.py" + (" --quick" if args.quick else "") + (
        " --throughput-only" if args.throughput_only else "") + (" --short-dense" if args.short_dense else "") + (
        f" --cpu-rounds {args.cpu_rounds}" if args.cpu_rounds else "") + (" --parts" if args.parts else "")
    args.out = args.out or str(HERE / "results" / ("redact-short.md" if args.short_dense else "redact.md"))
    sections = [f"## PII redaction (`{cmd}`)\n",
                f"Machine: {os.cpu_count()} cores, single core pinned, Python {platform.python_version()}; "
                f"load average at the start {os.getloadavg()[0]:.2f}.\n"]
    if not args.throughput_only:
        print("accuracy ...", flush=True)
        sections += ["### Accuracy per kind\n", accuracy() + "\n"]
    print("throughput vs scrubadub ...", flush=True)
    md, tp = throughput(redactor, 1_000_000 if args.quick else 4_000_000, args.rounds, args.repeat, args.short_dense)
    sections += ["### Throughput, same run, same text\n", md]
    if args.cpu_rounds:
        print("CPU-time rounds vs scrubadub ...", flush=True)
        md, cpu = cpu_rounds(redactor, 1_000_000 if args.quick else 4_000_000, args.cpu_rounds, args.short_dense)
        sections += ["### CPU time, one pass each, same run\n", md]
        tp.update(cpu)
    if args.parts:
        print("parts of a pass ...", flush=True)
        md, cpu = parts(redactor, 1_000_000 if args.quick else 4_000_000, args.short_dense)
        sections += ["### Where a pass goes\n", md]
        tp.update(cpu)
    ratios = {}
    if not args.throughput_only:
        print("adversarial linearity ...", flush=True)
        md, ratios = linearity(redactor, sizes)
        sections += [f"### Linear time on adversarial inputs ({sizes[0]}..{sizes[-1]} MB; linear = "
                     f"{sizes[-1] // sizes[0]}x, quadratic = {(sizes[-1] // sizes[0]) ** 2}x)\n", md]
        print(f"{big} MB document ...", flush=True)
        md, _ = big_document(redactor, big)
        sections += [f"### A {big} MB document\n", md]
    sections += [f"Load average at the end {os.getloadavg()[0]:.2f}.\n", NOTES]
    text = "\n".join(sections)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    print(json.dumps({"throughput": tp, "linearity_ratios": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
