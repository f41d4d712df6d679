"""The run report: `write_report(report, out_dir)` writes report.json and a self-contained report.html.

The report dict (produced by the pipeline) has these optional sections, and the
renderer draws what is there and says "not recorded" for the rest:

    {"run": {"name", "started", "finished", "shardforge_version", "master", "config": {...}},
     "stages": [{"name", "rows_in", "kept", "rejected", "seconds", "rejects_by_reason": {reason: n}}],
     "redactions": {kind: n}, "downloads": {status: n},
     "duplicates": {"removed_exact": n, "removed_near": n, "cluster_sizes": {"2": n, ...}},
     "shards": {"num_shards": n, "rows": [per shard], "bytes": [per shard], "build_id": str},
     "timings": {step: seconds}, "funnel": shardforge.report.funnel.FunnelResult.to_dict()}

The HTML holds its CSS and inline SVG plots: no script, no external resource, no server.
`render_text(report)` gives the same summary for a terminal.
"""
from __future__ import annotations

from shardforge.report.render import render_html, render_text, write_report
from shardforge.report.progress import StageClock

__all__ = ["write_report", "render_html", "render_text", "StageClock"]
