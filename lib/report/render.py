"""Renders a run report dict to report.json, a self-contained report.html, and terminal text.

Tolerant by design: a missing section, a None or a non-numeric value is shown as "not
recorded" or 0, never an exception, since a report is most wanted when a run went wrong.
Rendering is a function of the dict only (no clock, no randomness).
"""
from __future__ import annotations

import json
import os
import pkgutil
import statistics
from html import escape
from pathlib import Path
from typing import Any, Mapping

from shardforge.report import svg


def _num(v: Any) -> float:
    """A number for plotting: ints and floats as they are, numeric strings parsed, else 0."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return v if v == v and abs(v) != float("inf") else 0  # NaN, inf -> 0
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0


def _int(v: Any) -> int:
    return int(_num(v))


def _counts(d: Any) -> list[tuple[str, float]]:
    """{name: n} -> [(name, n)] sorted by count (largest first), then name."""
    if not isinstance(d, Mapping):
        return []
    return sorted(((str(k), _num(v)) for k, v in d.items()), key=lambda kv: (-kv[1], kv[0]))


def _fmt(v: Any) -> str:
    return svg._fmt(_num(v))


def _stages(report: Mapping) -> list[Mapping]:
    stages = report.get("stages")
    return [s for s in stages if isinstance(s, Mapping)] if isinstance(stages, list) else []


def _section(title: str, body: str, *, anchor: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{body}</section>'


def _missing(what: str) -> str:
    return f'<p class="missing">{escape(what)} not recorded in this run.</p>'


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _stage_section(report: Mapping) -> str:
    stages = _stages(report)
    if not stages:
        return _section("Rows per stage", _missing("Stage counts"), anchor="stages")
    items = [(str(s.get("name", f"stage {i}")), [_num(s.get("kept")), _num(s.get("rejected"))])
             for i, s in enumerate(stages)]
    chart = svg.stacked_hbar(items, [("kept", svg.COLORS["kept"]), ("rejected", svg.COLORS["rejected"])],
                             title="Rows kept and rejected per stage")
    rows = []
    for s in stages:
        rin, kept, rej = s.get("rows_in"), s.get("kept"), s.get("rejected")
        if None in (rin, kept, rej):
            check = '<span class="missing">n/a</span>'
        elif _int(rin) == _int(kept) + _int(rej):
            check = '<span class="ok">balanced</span>'
        else:
            check = f'<span class="bad">off by {_int(rin) - _int(kept) - _int(rej):+,}</span>'
        ran = '<span class="reused">reused</span>' if s.get("reused") else "ran"
        rows.append([escape(str(s.get("name", ""))), _fmt(rin), _fmt(kept), _fmt(rej),
                     f"{_num(s.get('seconds')):.1f}", ran, check])
    table = _table(["stage", "rows in", "kept", "rejected", "seconds", "this run", "in = kept + rejected"], rows)
    resumed = report.get("resumed_from")
    note = (f"<p>Resumed: stages completed by an earlier attempt were reused; this run started at "
            f"<b>{escape(str(resumed))}</b>.</p>" if resumed else
            "<p>Every stage was reused from an earlier attempt.</p>" if all(s.get("reused") for s in stages)
            else "")
    return _section("Rows per stage", f'{note}<div class="grid"><div>{chart}</div><div>{table}</div></div>',
                    anchor="stages")


def _durations_section(report: Mapping) -> str:
    items = [(str(s.get("name", "")), _num(s.get("seconds"))) for s in _stages(report) if "seconds" in s]
    timings = report.get("timings")  # steps that move no rows through a stage (writes, publishing)
    if isinstance(timings, Mapping):
        items += [(f"{k} (step)", _num(v)) for k, v in timings.items()]
    if not items:
        return _section("Stage durations", _missing("Stage durations"), anchor="durations")
    total = sum(v for _, v in items)
    return _section("Stage durations", svg.hbar(items, title="Seconds per stage", unit=" s",
                                                color=svg.COLORS["alt"], label_width=160)
                    + f"<p>Total {total:,.1f} s.</p>", anchor="durations")


def _rejects_section(report: Mapping) -> str:
    merged: dict[str, float] = {}
    for s in _stages(report):
        for reason, n in _counts(s.get("rejects_by_reason")):
            key = reason if ":" in reason or not s.get("name") else f"{s.get('name')}:{reason}"
            merged[key] = merged.get(key, 0) + n
    items = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))
    if not items:
        return _section("Rejects by reason", _missing("Rejects by reason") if not any(
            _num(s.get("rejected")) for s in _stages(report)) else _missing("A breakdown of rejects"),
                        anchor="rejects")
    shown, rest = items[:25], items[25:]
    if rest:
        shown.append((f"{len(rest)} other reasons", sum(v for _, v in rest)))
    return _section("Rejects by reason", svg.hbar(shown, title="Rejected rows by reason",
                                                  color=svg.COLORS["rejected"]), anchor="rejects")


def _counts_section(report: Mapping, key: str, title: str, what: str, color: str) -> str:
    items = _counts(report.get(key))
    if not items:
        return _section(title, _missing(what), anchor=key)
    total = sum(v for _, v in items)
    return _section(title, svg.hbar(items, title=title, color=color) + f"<p>Total {_fmt(total)}.</p>", anchor=key)


def _duplicates_section(report: Mapping) -> str:
    d = report.get("duplicates")
    if not isinstance(d, Mapping):
        return _section("Duplicates", _missing("Duplicate statistics"), anchor="duplicates")
    sizes = sorted(((_int(k), _num(v)) for k, v in (d.get("cluster_sizes") or {}).items()
                    if str(k).lstrip("-").isdigit()), key=lambda kv: kv[0])
    facts = _table(["", "rows"], [["removed as exact duplicates", _fmt(d.get("removed_exact"))],
                                  ["removed as near duplicates", _fmt(d.get("removed_near"))],
                                  ["clusters of 2 or more", _fmt(sum(v for _, v in sizes))]])
    if sizes:
        spread = max(v for _, v in sizes) / max(min(v for _, v in sizes if v > 0) if any(v for _, v in sizes) else 1, 1)
        chart = svg.columns([(str(k), v) for k, v in sizes], title="Duplicate clusters by size",
                            x_label="cluster size (documents)", y_label="clusters", log=spread > 50)
    else:
        chart = _missing("Cluster sizes")
    return _section("Duplicates", f'<div class="grid"><div>{facts}</div><div>{chart}</div></div>',
                    anchor="duplicates")


def _decontamination_section(report: Mapping) -> str:
    """Benchmark matches and the most-hit n-grams (only for runs with the decontaminate stage)."""
    d = report.get("decontamination")
    if not isinstance(d, Mapping):
        return ""
    benches = [b for b in d.get("benchmarks") or [] if isinstance(b, Mapping)]
    per = _table(["benchmark", "items", "too short", "n-grams", "documents (first match)", "documents matching",
                  "n-grams matched"],
                 [[escape(str(b.get("name"))), *(_fmt(b.get(k)) for k in (
                     "items", "items_too_short", "ngrams", "documents", "documents_matching", "ngrams_matched"))]
                  for b in benches])
    top = _table(["n-gram", "documents", "benchmarks"],
                 [[escape(str(t.get("ngram"))), _fmt(t.get("documents")), escape(", ".join(t.get("benchmarks") or []))]
                  for t in d.get("top_ngrams") or [] if isinstance(t, Mapping)])
    mode = "kept with signals (annotate mode)" if d.get("mode") == "annotate" else "rejected"
    return _section("Benchmark contamination",
                    f"<p>{_fmt(d.get('contaminated_documents'))} documents hold a benchmark's "
                    f"{_fmt(d.get('ngram'))}-gram ({mode}).</p>{per}<h3>Most-hit n-grams</h3>{top}",
                    anchor="decontamination")


def _funnel_section(report: Mapping) -> str:
    f = report.get("funnel")
    if not isinstance(f, Mapping):
        return ""
    ok = bool(f.get("ok"))
    msg = ("No stage funnelled the data through one task or the driver." if ok
           else "Data was funnelled through one task or the driver:")
    head = f'<p class="{"ok" if ok else "bad"}">{escape(msg)}</p>'
    rows = [[escape(str(v.get("kind"))), escape(str(v.get("execution"))), escape(str(v.get("stage"))),
             escape(str(v.get("detail", ""))[:160])] for v in (f.get("violations") or []) if isinstance(v, Mapping)]
    table = _table(["finding", "query", "stage", "detail"], rows) if rows else ""
    stages = [s for s in f.get("stages") or [] if isinstance(s, Mapping)]
    counts: dict[int, int] = {}
    for s in stages:
        counts[_int(s.get("tasks"))] = counts.get(_int(s.get("tasks")), 0) + 1
    chart = svg.columns([(str(k), v) for k, v in sorted(counts.items())], title="Spark stages by task count",
                        x_label="tasks in the stage", y_label="stages") if counts else ""
    return _section("Parallelism", head + table + chart, anchor="funnel")


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    mean = statistics.fmean(values)
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "mean": mean,
            "max/mean": (max(values) / mean) if mean else 0.0}


def _shards_section(report: Mapping) -> str:
    s = report.get("shards")
    if not isinstance(s, Mapping):
        return _section("Shards", _missing("Shard statistics"), anchor="shards")
    rows = [_num(v) for v in s.get("rows") or [] if v is not None]
    sizes = [_num(v) for v in s.get("bytes") or [] if v is not None]
    facts = [["shards", _fmt(s.get("num_shards", len(rows)))], ["build", escape(str(s.get("build_id", "")))],
             ["rows", _fmt(sum(rows))], ["bytes", _fmt(sum(sizes))]]
    for name, vals in (("rows", rows), ("bytes", sizes)):
        for k, v in _spread(vals).items():
            facts.append([f"{name} per shard, {k}", f"{v:.2f}" if k == "max/mean" else _fmt(round(v))])
    body = [f"<div>{_table(['', ''], facts)}</div>"]
    if rows:
        if len(rows) <= 256:
            items = [(str(i), v) for i, v in enumerate(rows)]
            x_label = "shard"
        else:  # too many columns: a histogram of shard sizes instead
            lo, hi = min(rows), max(rows)
            bins = 20
            width = (hi - lo) / bins or 1
            hist = [0] * bins
            for v in rows:
                hist[min(int((v - lo) / width), bins - 1)] += 1
            items = [(svg._fmt(round(lo + i * width)), n) for i, n in enumerate(hist)]
            x_label = "rows per shard (bin start)"
        body.append("<div>" + svg.columns(items, title="Rows per shard", x_label=x_label,
                                          y_label="rows" if len(rows) <= 256 else "shards",
                                          reference=statistics.fmean(rows) if len(rows) <= 256 else None,
                                          reference_label="mean rows per shard") + "</div>")
    return _section("Shards", f'<div class="grid">{"".join(body)}</div>', anchor="shards")


def _header(report: Mapping) -> str:
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    name = escape(str(run.get("name") or "shardforge run"))
    meta = " · ".join(escape(f"{k}: {run[k]}") for k in ("started", "finished", "master", "shardforge_version")
                      if run.get(k) not in (None, ""))
    return f"<header><h1>{name}</h1><div class='meta'>{meta}</div></header>"


def _cards(report: Mapping) -> str:
    stages = _stages(report)
    shards = report.get("shards") if isinstance(report.get("shards"), Mapping) else {}
    cards = []
    if stages:
        cards.append(("documents in", _fmt(stages[0].get("rows_in"))))
        cards.append(("rejected", _fmt(sum(_num(s.get("rejected")) for s in stages))))
        timings = report.get("timings") if isinstance(report.get("timings"), Mapping) else {}
        seconds = sum(_num(s.get("seconds")) for s in stages) + sum(_num(v) for v in timings.values())
        cards.append(("seconds", f"{seconds:,.1f}"))
    if shards:
        cards.append(("rows in shards", _fmt(sum(_num(v) for v in shards.get("rows") or []))))
        cards.append(("shards", _fmt(shards.get("num_shards", len(shards.get("rows") or [])))))
    if not cards:
        return ""
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{v}</div><div class="k">{escape(k)}</div></div>' for k, v in cards) + "</div>"


def _privacy_section(report: Mapping) -> str:
    p = report.get("privacy")
    if not isinstance(p, Mapping):
        return ""
    rows = [["raw table (input as it came, PII included)", "kept" if p.get("raw_kept") else "not written"],
            ["rejects table records", escape(str(p.get("rejects_record")))],
            ["URL credentials", escape(str(p.get("url_credentials")))],
            ["PII kinds redacted", escape(", ".join(p.get("redact_kinds") or []))]]
    if p.get("pseudonym_key_id"):
        rows.append(["pseudonym key id", escape(str(p["pseudonym_key_id"]))])
    return _section("Privacy", _table(["output", "holds"], rows), anchor="privacy")


def _scores_section(report: Mapping) -> str:
    """Per score-stage model: its label, file hash and score spread, and a histogram. Absent
    (no section at all) when the run scored nothing."""
    scores = report.get("scores")
    if not isinstance(scores, Mapping) or not scores:
        return ""
    parts = []
    for name, m in sorted(scores.items()):
        if not isinstance(m, Mapping):
            continue
        facts = _table(["signals." + str(name), ""], [
            ["label", escape(str(m.get("label")))], ["model sha256", escape(str(m.get("model_sha256") or "")[:16])],
            ["documents scored", _fmt(m.get("documents"))], ["mean", escape(str(m.get("mean")))],
            ["min / max", f"{escape(str(m.get('min')))} / {escape(str(m.get('max')))}"]])
        bins = [(str(k), _num(v)) for k, v in (m.get("histogram") or {}).items()]
        chart = svg.columns(bins, title=f"signals.{name}", x_label="score", y_label="documents") if bins else ""
        parts.append(f'<div class="grid"><div>{facts}</div><div>{chart}</div></div>')
    return _section("Model scores", "".join(parts), anchor="scores")


def _config_section(report: Mapping) -> str:
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    cfg = run.get("config")
    if not cfg:
        return ""
    text = json.dumps(cfg, indent=2, sort_keys=True, default=str)
    return _section("Configuration", f"<details><summary>Show the run's configuration</summary>"
                                     f"<pre>{escape(text)}</pre></details>", anchor="config")


def render_html(report: Mapping) -> str:
    """The whole page: inline CSS and SVG only (no script, no fetch), UTF-8."""
    css = (pkgutil.get_data("shardforge.report", "style.css") or b"").decode()
    title = escape(str((report.get("run") or {}).get("name") or "shardforge run") if isinstance(
        report.get("run"), Mapping) else "shardforge run")
    parts = [_cards(report), _stage_section(report), _durations_section(report), _rejects_section(report),
             _counts_section(report, "redactions", "Redactions by kind", "Redaction counts", svg.COLORS["bar"]),
             _counts_section(report, "downloads", "Downloads by status", "Download statuses", svg.COLORS["bar"]),
             _scores_section(report), _duplicates_section(report), _decontamination_section(report),
             _shards_section(report), _funnel_section(report), _privacy_section(report), _config_section(report)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title} — report</title>"
            f"<style>{css}</style></head><body>{_header(report)}<main>{''.join(parts)}</main></body></html>\n")


def render_text(report: Mapping, width: int = 40) -> str:
    """A plain-text summary for a terminal: stages with bars, top reject reasons, shard spread."""
    lines = []
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    lines.append(f"{run.get('name') or 'shardforge run'}  {run.get('started') or ''} -> {run.get('finished') or ''}")
    stages = _stages(report)
    top = max([_num(s.get("rows_in")) for s in stages] + [1]) or 1
    for s in stages:
        kept, rej = _num(s.get("kept")), _num(s.get("rejected"))
        bar = "#" * round(width * kept / top) + "x" * round(width * rej / top)
        lines.append(f"  {str(s.get('name', '')):<14} in {_fmt(s.get('rows_in')):>9}  kept {_fmt(kept):>9}  "
                     f"rejected {_fmt(rej):>8}  {_num(s.get('seconds')):7.1f}s  {bar}")
    reasons: dict[str, float] = {}
    for s in stages:
        for r, n in _counts(s.get("rejects_by_reason")):
            reasons[r] = reasons.get(r, 0) + n
    if reasons:
        lines.append("  rejects: " + ", ".join(f"{r} {_fmt(n)}" for r, n in
                                               sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:8]))
    for key in ("redactions", "downloads"):
        items = _counts(report.get(key))
        if items:
            lines.append(f"  {key}: " + ", ".join(f"{k} {_fmt(v)}" for k, v in items))
    d = report.get("duplicates")
    if isinstance(d, Mapping):
        lines.append(f"  duplicates: exact {_fmt(d.get('removed_exact'))}, near {_fmt(d.get('removed_near'))}")
    s = report.get("shards")
    if isinstance(s, Mapping):
        sp = _spread([_num(v) for v in s.get("rows") or []])
        if sp:
            lines.append(f"  shards: {_fmt(s.get('num_shards', len(s.get('rows') or [])))}, rows per shard "
                         f"min {_fmt(round(sp['min']))} median {_fmt(round(sp['median']))} "
                         f"max {_fmt(round(sp['max']))} (max/mean {sp['max/mean']:.2f})")
    return "\n".join(lines)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_report(report: Mapping, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """Write `out_dir/report.json` (the dict, pretty-printed) and `out_dir/report.html`.

    Both files are replaced atomically; the same dict gives the same bytes. Values that
    JSON cannot hold (e.g. a Path) are written as strings.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "report.json", out / "report.html"
    _atomic_write(json_path, json.dumps(report, indent=2, default=str) + "\n")
    _atomic_write(html_path, render_html(report))
    return json_path, html_path
