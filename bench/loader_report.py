"""The loader benchmark's markdown report, from its results.json (bench/loader.py)."""
from __future__ import annotations

from loader_plan import BASE, READERS, summary

BUDGET_MB = 128
TARGETS = "targets of issue 14"


def _mb(x) -> str:
    return f"{x:,.0f}"


def _ratio(s: dict) -> str:
    lo, hi = min(s["ratios"]), max(s["ratios"])
    return f"**{s['ratio']:.2f}x** ({lo:.2f}-{hi:.2f})"


def _profile(name: str, R: dict, args: dict) -> list[str]:
    S = summary(R)
    loads = ", ".join(f"{a:.1f}-{b:.1f}" for a, b in R["load"])
    rows = args["rows"]
    out = [f"### Profile `{name}`", "",
           f"{rows:,} rows in 16 uneven shards, {R['bytes'] / 1e6:,.0f} MB of Parquet; load average at the "
           f"start and end of each round: {loads}.", "",
           "| reader | samples/s (median) | vs its baseline, median of same-round ratios (range) | baseline "
           "| samples per CPU-second | peak RSS MB: process (largest worker) |",
           "|---|---:|---:|---|---:|---:|"]
    for key, label, _kind, _kw in READERS:
        if key not in S:
            continue
        s = S[key]
        base = "" if BASE[key] == key else BASE[key]
        ratio = "1.00x" if not base else _ratio(s)
        worker = f" ({_mb(s['worker_rss_mb'])})" if s["worker_rss_mb"] > 1 else ""
        out.append(f"| {label} | {s['rate']:,.0f} | {ratio} | {base} | {s['cpu_rate']:,.0f} | "
                   f"{_mb(s['rss_mb'])}{worker} |")
    fb = R["first_batch"]
    sec, groups = fb["seconds"], fb["row_groups"]
    out += ["", f"Time to the first batch (num_workers=0, medians of 5 alternated runs in one process): fresh "
            f"epoch {sec['fresh'] * 1000:.0f} ms ({groups['fresh']} row groups decoded), after `load_state_dict` "
            f"at 1% {sec['resume_1'] * 1000:.0f} ms ({groups['resume_1']}), at 90% {sec['resume_90'] * 1000:.0f} ms "
            f"({groups['resume_90']}): **{sec['resume_90'] / sec['fresh']:.2f}x** a fresh epoch's.", ""]
    base_rss = R["baseline"]["rss_mb"]
    mem = ["| data | reader | samples/s | peak RSS MB: process (largest worker) | over the import baseline |",
           "|---|---|---:|---:|---:|"]
    for tag, keys in (("1x", ("limit", "batch_0", "batch_2", "batch_p2")),
                      ("10x", ("limit_10x", "batch_0_10x", "batch_2_10x", "batch_p2_10x"))):
        for key in keys:
            src = S.get(key) or R.get(key)
            if not src:
                continue
            label = {"limit": "pyarrow limit", "batch_0": "batch, num_workers=0",
                     "batch_2": "batch, num_workers=2, lanes=2",
                     "batch_p2": "batch, reader_processes=2, lanes=2 (readers without torch)"}[key.replace("_10x", "")]
            if src.get("reader_peak_mb"):      # the readers' own VmHWM; the training process reads nothing
                peak = src["rss_mb"]
                worker = f" ({_mb(src['reader_peak_mb'])})"
            else:
                peak = max(src["rss_mb"], src["worker_rss_mb"])
                worker = f" ({_mb(src['worker_rss_mb'])})" if src["worker_rss_mb"] > 1 else ""
            mem.append(f"| {tag} | {label} | {src['rate']:,.0f} | {_mb(src['rss_mb'])}{worker} | "
                       f"+{_mb(peak - base_rss)} |")
    out += [f"Peak RSS (window_bytes = {BUDGET_MB} MB, the default). A process that only imports torch, pyarrow "
            f"and the loader peaks at {_mb(base_rss)} MB here (torch is most of it).", ""] + mem
    if "plain" in R:
        pb = R["plain_baseline"]["rss_mb"]
        runs = [("1x", R["plain"])] + ([("10x", R["plain_10x"])] if "plain_10x" in R else [])
        out += ["", "Without torch: `ShardReader.iter_batches(64)` (the loader's torch-free core) in a process that "
                f"imports only pyarrow and that core ({_mb(pb)} MB): " + "; ".join(
                    f"{tag} {r['samples'] / r['seconds']:,.0f} samples/s, peak RSS {_mb(r['rss_mb'])} MB "
                    f"(+{_mb(r['rss_mb'] - pb)})" for tag, r in runs) + "."]
    return out


def _targets(R: dict) -> list[str]:
    out = ["", f"### Against the {TARGETS} (same run, medians of same-round ratios)", "",
           "| target | profile | measured | holds |", "|---|---|---:|---|"]

    def row(target, profile, value, ok):
        out.append(f"| {target} | {profile} | {value} | {'yes' if ok else '**no**'} |")

    for name in ("text", "tokens"):
        if name not in R:
            continue
        S = summary(R[name])
        row("batch, num_workers=0 >= 0.8x the pyarrow limit", name, f"{S['batch_0']['ratio']:.2f}x",
            S["batch_0"]["ratio"] >= 0.8)
        row("batch, num_workers=2 >= 0.8x the DataLoader floor", name, f"{S['batch_2']['ratio']:.2f}x",
            S["batch_2"]["ratio"] >= 0.8)
        if "vs_hf_2" in S["batch_2"]:
            row("batch, num_workers=2 >= 2x HF datasets num_workers=2", name, f"{S['batch_2']['vs_hf_2']:.2f}x",
                S["batch_2"]["vs_hf_2"] >= 2)
        row("per-sample >= 0.9x pyarrow + to_pylist", name, f"{S['sample_0']['ratio']:.2f}x",
            S["sample_0"]["ratio"] >= 0.9)
        base = R[name]["baseline"]["rss_mb"]
        peaks = [max(S[k]["rss_mb"], S[k]["worker_rss_mb"]) for k in ("batch_0", "batch_2")]
        peaks += [max(R[name][k]["rss_mb"], R[name][k]["worker_rss_mb"]) for k in ("batch_0_10x", "batch_2_10x")
                  if k in R[name]]
        row(f"peak RSS per reading process <= {BUDGET_MB} + 300 MB, 1x and 10x (torch included): num_workers=0 "
            "and DataLoader workers", name, f"{max(peaks):,.0f} MB", max(peaks) <= BUDGET_MB + 300)
        row(f"the same, above a process that only imported torch ({base:,.0f} MB)", name,
            f"+{max(peaks) - base:,.0f} MB", max(peaks) - base <= BUDGET_MB + 300)
        procs = [S["batch_p2"]] if "batch_p2" in S else []
        procs += [R[name]["batch_p2_10x"]] if "batch_p2_10x" in R[name] else []
        if procs:
            readers = max(p["reader_peak_mb"] for p in procs)
            row(f"peak RSS per reading process <= {BUDGET_MB} + 300 MB, 1x and 10x: reader_processes=2 "
                "(the reading processes, without torch)", name, f"{readers:,.0f} MB", readers <= BUDGET_MB + 300)
            trainer = max(p["rss_mb"] for p in procs) - base
            row("  their training process (reads nothing) above the import baseline", name, f"+{trainer:,.0f} MB",
                trainer <= BUDGET_MB + 300)
            if "batch_p2" in S:
                row("  reader_processes=2 >= 0.8x the DataLoader floor", name, f"{S['batch_p2']['ratio']:.2f}x",
                    S["batch_p2"]["ratio"] >= 0.8)
            if "vs_hf_2" in S.get("batch_p2", {}):
                row("  reader_processes=2 >= 2x HF datasets num_workers=2", name,
                    f"{S['batch_p2']['vs_hf_2']:.2f}x", S["batch_p2"]["vs_hf_2"] >= 2)
        fb = R[name]["first_batch"]["seconds"]
        row("first batch after load_state_dict at 90% < 2x a fresh epoch's", name,
            f"{fb['resume_90'] / fb['fresh']:.2f}x", fb["resume_90"] < 2 * fb["fresh"])
    return out


def _shuffle(R: dict) -> list[str]:
    if "text" not in R or "shuffle" not in R["text"]:
        return []
    out = ["", "### Shuffle quality and memory (profile `text`, 1x, seed 1, epoch 0, rank 0 of 1's sequence)", "",
           "Spearman: rank correlation between a sample's manifest position and its position in the sequence "
           "(0 = no trace of the file order). Neighbours: share of consecutive samples that are consecutive in the "
           "manifest. Per batch of 64: distinct shards (a uniform shuffle's expectation alongside) and distinct row "
           "groups. Memory: a reading process holds at most `window_bytes` of decoded rows (per lane it reads, "
           "the window it reads and the next, each `window_bytes / (2 * lanes)`).", "",
           "| shuffle | windows | Spearman | neighbours kept | shards / batch (uniform) | row groups / batch |",
           "|---|---:|---:|---:|---:|---:|"]
    for s in R["text"]["shuffle"]:
        name = "off (manifest order)" if not s["window_bytes"] else \
            f"window_bytes={s['window_bytes'] >> 20} MB, lanes={s['lanes']}"
        out.append(f"| {name} | {s['windows']} | {s['spearman']:+.4f} | {s['neighbours']:.4f} | "
                   f"{s['distinct_shards']:.2f} ({s['uniform_shards']:.2f}) | {s['distinct_groups']:.2f} |")
    return out


def report(R: dict) -> str:
    args = R["args"]
    out = ["## Loader (`bench/loader.py`)", "",
           f"Command: `.venv/bin/python bench/loader.py --rows {args['rows']} --scale {args['scale']} "
           f"--rounds {args['rounds']}`, started {R['started']}. Machine: {R['cpus']} cores, 24 GiB; load average "
           f"{R['load_start'][0]:.1f} at the start, {R.get('load_end', [float('nan')])[0]:.1f} at the end (the "
           "benchmark's own readers keep up to 3 processes busy; anything above that is other jobs); Python "
           f"{R['python']}{', torch ' + R['torch'] if 'torch' in R else ''}. Batches of 64, rank 0 "
           "of 1, window_bytes 128 MB (default). Each reader runs in its own process, all readers once per "
           "round, rounds one after the other; a ratio is taken within a round, then the median over rounds.", ""]
    for name in ("text", "tokens", "toy"):
        if name in R:
            out += _profile(name, R[name], args) + [""]
    out += _targets(R) + _shuffle(R)
    return "\n".join(out) + "\n"
