"""The demo flow end to end on the bundled sample: download, read, clean, redact, dedup,
curate, shards, loader. Row accounting holds per stage and overall; no planted e-mail
survives; exact duplicates are gone; two ranks read disjoint rows covering the build."""
import json
import re
import unicodedata
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shardforge.config import load_config
from shardforge.shards.manifest import read_manifest, verify

ROOT = Path(__file__).resolve().parent.parent
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


@pytest.fixture(scope="module")
def demo_run(spark, tmp_path_factory):
    from shardforge.jobs.demo import SAMPLE, serve, write_url_list
    from shardforge.jobs.pipeline import run_pipeline

    out = tmp_path_factory.mktemp("demo")
    server, base = serve(SAMPLE / "web")
    try:
        urls = write_url_list(base, out / "_input")
        cfg = load_config(ROOT / "conf" / "demo.toml")
        cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=(str(SAMPLE / "docs.jsonl"),),
                                           urls=(str(urls),), output=str(out)))
        report = run_pipeline(spark, cfg)
    finally:
        server.shutdown()
    return out, report, cfg


def _shard_rows(out: Path) -> list[dict]:
    m = read_manifest(str(out / "shards"))
    rows = []
    for s in m.shards:
        rows += pq.read_table(m.path_of(s)).to_pylist()
    return rows


@pytest.mark.slow
def test_every_row_is_accounted_for(spark, demo_run):
    out, report, _ = demo_run
    for s in report["stages"]:
        assert s["rows_in"] == s["kept"] + s["rejected"], s
        assert sum(s["rejects_by_reason"].values()) == s["rejected"], s
    lines = (ROOT / "data" / "sample" / "docs.jsonl").read_text(encoding="utf-8").splitlines()
    n_urls = len((ROOT / "data" / "sample" / "web" / "urls.txt").read_text().splitlines())
    curated = spark.read.format("delta").load(str(out / "curated")).count()
    rejects = spark.read.format("delta").load(str(out / "rejects"))
    assert len(lines) + n_urls == curated + rejects.count()
    reasons = {r["reason"].split(":")[0] for r in rejects.select("reason").collect()}
    assert reasons <= {"invalid", "filter", "duplicate_of", "download"}
    assert rejects.filter("reason = 'invalid:malformed_json'").count() == 1
    assert rejects.filter("reason = 'download:http_4xx'").count() == 1
    assert rejects.filter("record IS NULL OR reason IS NULL").count() == 0
    assert sum(s["rows"] for s in [{"rows": r} for r in report["shards"]["rows"]]) == curated
    assert json.loads((out / "report.json").read_text())["shards"]["build_id"] == report["shards"]["build_id"]
    assert not (out / "_checkpoints").exists()      # dedup's scratch folder is removed at the end


@pytest.mark.slow
def test_stage_accounting_recomputed_from_the_tables(spark, demo_run):
    """Each stage's rows in, kept, rejected and reasons, recomputed from the input files,
    the rejects table and the curated table alone, must equal the report's."""
    out, report, _ = demo_run
    rows = len((ROOT / "data" / "sample" / "docs.jsonl").read_text(encoding="utf-8").splitlines()) + \
        len((ROOT / "data" / "sample" / "web" / "urls.txt").read_text().splitlines())
    rejects = spark.read.format("delta").load(str(out / "rejects"))
    by_reason: dict[str, dict[str, int]] = {}
    for r in rejects.groupBy("stage", "reason").count().collect():
        # the ingest stage downloads the URL list and reads the files; the rejects table
        # names the part ("download" or "ingest"), the report the stage
        stage = "ingest" if r["stage"] == "download" else r["stage"]
        # the report counts duplicates under one reason, not one per kept document
        reason = "duplicate_of" if r["reason"].startswith("duplicate_of:") else r["reason"]
        by_reason.setdefault(stage, {})[reason] = by_reason.get(stage, {}).get(reason, 0) + r["count"]
    names = [s["name"] for s in report["stages"]]
    assert set(by_reason) <= set(names), (sorted(by_reason), names)
    for s in report["stages"]:
        rejected = sum(by_reason.get(s["name"], {}).values())
        expected = {"rows_in": rows, "kept": rows - rejected, "rejected": rejected,
                    "rejects_by_reason": by_reason.get(s["name"], {})}
        assert {k: s[k] for k in expected} == expected, s["name"]
        rows -= rejected
    assert rows == spark.read.format("delta").load(str(out / "curated")).count()


@pytest.mark.slow
def test_no_email_survives_and_exact_duplicates_are_gone(demo_run):
    out, report, _ = demo_run
    rows = _shard_rows(out)
    assert rows, "the build is empty"
    assert [r["id"] for r in rows if r["text"] and EMAIL.search(r["text"])] == []
    assert report["redactions"].get("EMAIL", 0) >= 30
    assert any(r["pii_counts"] and dict(r["pii_counts"]).get("EMAIL") for r in rows)
    texts = [" ".join(unicodedata.normalize("NFC", r["text"]).lower().split()) for r in rows if r["kind"] == "document"]
    assert len(texts) == len(set(texts))
    assert report["duplicates"]["removed_exact"] >= 20
    kinds = {r["kind"] for r in rows}
    assert {"document", "page", "image"} <= kinds
    assert verify(read_manifest(str(out / "shards"))) == []


@pytest.mark.slow
def test_two_ranks_read_disjoint_rows_covering_the_build(demo_run):
    from torch.utils.data import DataLoader

    from shardforge.loaders import ShardedDataset

    out, _, _ = demo_run
    all_ids = {r["id"] for r in _shard_rows(out)}
    seen = {}
    for policy in ("drop", "pad"):
        per_rank = []
        for rank in (0, 1):
            ds = ShardedDataset(str(out / "shards"), rank=rank, world_size=2, seed=3, columns=["id"],
                                policy=policy, batch_size=4)
            ids = [i for b in DataLoader(ds, batch_size=4, num_workers=2) for i in b["id"]]
            per_rank.append(ids)
        assert len(per_rank[0]) == len(per_rank[1])
        seen[policy] = per_rank
    r0, r1 = seen["drop"]
    assert not set(r0) & set(r1) and len(set(r0)) == len(r0)
    assert len(r0) + len(r1) == len(all_ids) - len(all_ids) % 2
    p0, p1 = seen["pad"]
    assert set(p0) | set(p1) == all_ids


def _number(text: str) -> int:
    """A number as the page prints it (1,234 or 12.3M) back to an int."""
    text = text.strip().replace(",", "")
    scale = {"M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return round(float(text[:-1] if scale > 1 else text) * scale)


@pytest.mark.slow
def test_the_written_report_html_shows_report_json_numbers_in_chromium(demo_run, tmp_path):
    """The report.html the pipeline wrote, opened in headless Chromium: the DOM the browser
    built holds, section by section, the numbers of the report.json written beside it."""
    import shutil
    import subprocess

    out, _, _ = demo_run
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is installed by `make setup` (apt-get install chromium)"
    rep = json.loads((out / "report.json").read_text())
    proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--disable-background-networking", "--disable-component-update", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", (out / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dom = proc.stdout

    def section(anchor: str) -> str:
        m = re.search(rf'<section id="{anchor}">(.*?)</section>', dom, re.S)
        assert m, f"no {anchor} section in the page"
        return m.group(1)

    cells = re.findall(r"<tr><td>([\w-]+)</td><td>([\d,.MG]+)</td><td>([\d,.MG]+)</td><td>([\d,.MG]+)</td>",
                       section("stages"))
    assert [(n, _number(a), _number(b), _number(c)) for n, a, b, c in cells] == \
        [(s["name"], s["rows_in"], s["kept"], s["rejected"]) for s in rep["stages"]]
    assert section("stages").count('class="ok">balanced') == len(rep["stages"])

    def total(anchor: str) -> int:
        m = re.search(r"<p>Total ([\d,.MG]+)\.</p>", section(anchor))
        assert m, f"no total in the {anchor} section"
        return _number(m.group(1))

    assert total("redactions") == sum(rep["redactions"].values())
    assert total("downloads") == sum(rep["downloads"].values())
    facts = dict(re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td></tr>", section("shards")))
    assert _number(facts["shards"]) == rep["shards"]["num_shards"]
    assert facts["build"] == rep["shards"]["build_id"]
    assert _number(facts["rows"]) == sum(rep["shards"]["rows"])
    assert _number(facts["bytes"]) == sum(rep["shards"]["bytes"])
    dup = dict(re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td></tr>", section("duplicates")))
    assert _number(dup["removed as exact duplicates"]) == rep["duplicates"]["removed_exact"]
    assert _number(dup["removed as near duplicates"]) == rep["duplicates"]["removed_near"]
    cards = dict((k, v) for v, k in re.findall(r'<div class="v">([^<]+)</div><div class="k">([^<]+)</div>', dom))
    assert _number(cards["documents in"]) == rep["stages"][0]["rows_in"]
    assert _number(cards["rejected"]) == sum(s["rejected"] for s in rep["stages"])
    assert _number(cards["rows in shards"]) == sum(rep["shards"]["rows"])
    # the pipeline records no funnel analysis (that is the cluster tests' event-log check),
    # so its page has no Parallelism section rather than an empty one
    assert "funnel" not in rep and 'id="funnel"' not in dom
