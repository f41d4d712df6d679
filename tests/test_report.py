"""Run report: JSON and self-contained HTML with inline SVG plots, checked in headless Chromium."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from shardforge.report import render_html, render_text, write_report
from shardforge.report import svg

KEPT, REJECTED, BAR, ALT = (svg.COLORS[k] for k in ("kept", "rejected", "bar", "alt"))


def realistic_report() -> dict:
    """A report shaped like the pipeline's, with every section filled."""
    shard_rows = [1210 + (i * 37) % 90 for i in range(64)]
    return {
        "run": {"name": "nightly-web-en", "started": "2026-11-30T01:00:00Z", "finished": "2026-11-30T02:41:13Z",
                "shardforge_version": "0.1.0", "master": "spark://127.0.0.1:7077",
                "config": {"shards": {"num_shards": 64, "key": "id"}, "dedup": {"threshold": 0.8}}},
        "stages": [
            {"name": "ingest", "rows_in": 100_000, "kept": 99_200, "rejected": 800, "seconds": 41.5,
             "rejects_by_reason": {"download:http_4xx": 500, "download:timeout": 200, "invalid:no_text": 100}},
            {"name": "clean", "rows_in": 99_200, "kept": 91_000, "rejected": 8_200, "seconds": 63.0,
             "rejects_by_reason": {"filter:min_words": 5_000, "filter:max_symbol_ratio": 3_000,
                                   "filter:max_duplicate_line_fraction": 200}},
            {"name": "redact", "rows_in": 91_000, "kept": 91_000, "rejected": 0, "seconds": 120.2},
            {"name": "dedup", "rows_in": 91_000, "kept": 80_000, "rejected": 11_000, "seconds": 300.7,
             "rejects_by_reason": {"duplicate_of": 11_000}},
            {"name": "build-shards", "rows_in": 80_000, "kept": 80_000, "rejected": 0, "seconds": 55.1},
        ],
        "redactions": {"EMAIL": 1_204, "PHONE": 388, "IP_ADDRESS": 97, "CREDIT_CARD": 4, "KEY": 12},
        "downloads": {"ok": 99_200, "http_4xx": 500, "timeout": 200, "http_5xx": 0},
        "duplicates": {"removed_exact": 6_000, "removed_near": 5_000,
                       "cluster_sizes": {"2": 3_100, "3": 900, "4": 240, "5": 80, "8": 11, "17": 2, "120": 1}},
        "shards": {"num_shards": 64, "rows": shard_rows, "bytes": [r * 2_050 for r in shard_rows],
                   "build_id": "20261130-6f1c2a"},
        "timings": {"raw": 30.8, "curate": 17.6, "build-shards": 15.8},
        "funnel": {"ok": True, "violations": [], "notes": [],
                   "stages": [{"stage": i, "tasks": t} for i, t in enumerate([4, 4, 1, 4, 64, 64])]},
    }


def test_write_report_files_and_json_roundtrip(tmp_path):
    rep = realistic_report()
    json_path, html_path = write_report(rep, tmp_path / "out")
    assert json_path.name == "report.json" and html_path.name == "report.html"
    assert json.loads(json_path.read_text()) == rep
    html = html_path.read_text()
    # self-contained: no script, no external resource, all plots inline
    assert "<script" not in html.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:|//|file:)', html)
    # stages, durations, rejects, redactions, downloads, duplicates, shards, parallelism
    assert html.count("<svg") == 8
    assert not list(tmp_path.glob("out/*.tmp"))


def test_same_report_same_bytes(tmp_path):
    a = write_report(realistic_report(), tmp_path / "a")
    b = write_report(realistic_report(), tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_every_svg_is_well_formed_xml():
    html = render_html(realistic_report())
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    assert len(svgs) == 8
    for s in svgs:
        root = ET.fromstring(s)
        assert root.tag.endswith("svg")
        assert len(root.findall(".//{http://www.w3.org/2000/svg}rect")) >= 1


def test_plots_carry_the_numbers():
    html = render_html(realistic_report())
    assert "filter:min_words: 5,000" in html            # hover title on the reject bar
    assert "EMAIL: 1,204" in html
    assert "balanced" in html and "off by" not in html
    assert ">120<" in html                               # cluster size 120 on the histogram axis
    assert "raw (step): 30.8 s" in html                  # non-stage steps among the durations
    assert "No stage funnelled the data" in html


def test_funnel_violations_are_listed():
    rep = realistic_report()
    rep["funnel"] = {"ok": False, "violations": [{"kind": "coalesce-1", "execution": 7, "stage": None,
                                                  "detail": "coalesce(1) in 'save'"}]}
    html = render_html(rep)
    assert 'class="bad">Data was funnelled' in html and "coalesce-1" in html


def test_accounting_mismatch_is_flagged():
    rep = realistic_report()
    rep["stages"][1]["kept"] -= 3
    html = render_html(rep)
    assert 'class="bad">off by +3' in html


@pytest.mark.parametrize("rep", [
    {},
    {"run": None, "stages": None, "shards": "nope"},
    {"stages": [{"name": "ingest"}], "duplicates": {}, "shards": {"rows": [], "bytes": []}},
    {"stages": [{"name": "x", "rows_in": "12", "kept": None, "rejected": float("nan"), "seconds": "fast",
                 "rejects_by_reason": {"filter:a": None}}], "redactions": {"EMAIL": "7"},
     "duplicates": {"cluster_sizes": {"two": 3, "2": 1}}, "downloads": []},
])
def test_tolerates_missing_and_odd_sections(tmp_path, rep):
    json_path, html_path = write_report(rep, tmp_path)
    html = html_path.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "not recorded" in html
    render_text(rep)


def test_text_is_escaped():
    rep = {"run": {"name": "<b>x</b>"}, "stages": [{"name": "<script>alert(1)</script>", "rows_in": 1, "kept": 1,
                                                     "rejected": 0, "seconds": 1.0}]}
    html = render_html(rep)
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>x</b>" not in html


def test_many_shards_become_a_histogram():
    rep = {"shards": {"num_shards": 1000, "rows": [1000 + i % 50 for i in range(1000)], "bytes": [1] * 1000}}
    html = render_html(rep)
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    assert len(svgs) == 1
    assert svgs[0].count("<rect") == 20   # 20 bins, not 1000 columns


def test_render_text_summary():
    text = render_text(realistic_report())
    assert "nightly-web-en" in text
    assert re.search(r"dedup\s+in\s+91,000\s+kept\s+80,000\s+rejected\s+11,000", text)
    assert "duplicate_of 11,000" in text
    assert "max/mean" in text


# --- the page in a real browser ---------------------------------------------------------------
def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return exe


def _shoot(html_path, png, tmp_path, width=1200, height=2600):
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'chromium-profile'}",
           f"--screenshot={png}", f"--window-size={width},{height}", html_path.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return proc


def _page_errors(log: str) -> list[str]:
    """Console errors, failed loads and renderer crashes that Chromium logs for the page."""
    pat = re.compile(r"CONSOLE|Uncaught|Failed to load resource|net::ERR_|renderer.*crash|Aw, Snap", re.I)
    return [line for line in log.splitlines() if pat.search(line)]


@pytest.mark.slow
def test_report_opens_in_headless_chromium_and_shows_plots(tmp_path):
    import numpy as np
    from PIL import Image

    _, html_path = write_report(realistic_report(), tmp_path / "out")
    png = tmp_path / "report.png"
    proc = _shoot(html_path, png, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert png.exists() and png.stat().st_size > 10_000
    assert _page_errors(proc.stderr) == [], proc.stderr[-3000:]

    img = Image.open(png).convert("RGB")
    assert img.size == (1200, 2600)
    small = img.resize((300, 650))
    colors = small.getcolors(maxcolors=1 << 20)
    # not blank: many colours, and no single colour covers almost everything
    assert len(colors) > 50
    assert max(n for n, _ in colors) / (300 * 650) < 0.9

    pixels = np.asarray(img, dtype=np.int16)

    def share(hex_color: str, tol: int = 12) -> float:
        target = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
        return float((np.abs(pixels - target).max(axis=2) <= tol).mean())

    # the plots were drawn: each chart colour covers a visible area of the page
    for name, col in (("kept bars", KEPT), ("rejected bars", REJECTED), ("blue bars", BAR), ("durations", ALT)):
        assert share(col) > 0.002, f"{name} ({col}) not visible in the screenshot"


@pytest.mark.slow
def test_chromium_sees_the_whole_dom(tmp_path):
    """--dump-dom: the browser parsed every section and every SVG of the page."""
    _, html_path = write_report(realistic_report(), tmp_path / "out")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", html_path.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dom = proc.stdout
    assert dom.count("<svg") == 8
    for anchor in ("stages", "durations", "rejects", "redactions", "downloads", "duplicates", "shards", "funnel"):
        assert f'id="{anchor}"' in dom


@pytest.mark.slow
def test_error_check_catches_a_broken_page(tmp_path):
    """The same check fails on a page that logs an error, so the clean result above means something."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>x</p><script>throw new Error("boom")</script></body></html>')
    proc = _shoot(bad, tmp_path / "bad.png", tmp_path, 400, 300)
    assert proc.returncode == 0
    assert any("boom" in line for line in _page_errors(proc.stderr))


def test_reused_stages_are_marked_and_the_resume_point_is_named():
    rep = realistic_report()
    for i, s in enumerate(rep["stages"]):
        s["reused"] = i < 2
    rep["resumed_from"] = "redact"
    html = render_html(rep)
    rows = re.findall(r"<tr><td>(\w[\w-]*)</td>(.*?)</tr>", html)
    marks = {name: ('class="reused"' in cells) for name, cells in rows if name in {s["name"] for s in rep["stages"]}}
    assert marks == {"ingest": True, "clean": True, "redact": False, "dedup": False, "build-shards": False}
    assert "this run started at <b>redact</b>" in html
    fresh = realistic_report()
    fresh["resumed_from"] = None
    assert "Resumed" not in render_html(fresh) and 'class="reused"' not in render_html(fresh)
