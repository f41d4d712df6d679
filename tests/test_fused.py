"""ingest and clean in one pass (`shardforge.ingest.fused`) against the two stages run one after
the other: on a folder with repeated ids (between decoded lines, and between a decoded line and
one the reader declines), lines without an id, lines with other keys, bad lines, a line without
text, an oversized line and a gzip file, both paths give the same stage counts and reasons, the
same rejects, the same curated rows and the same shard bytes. Also: which plans take the fused
path, and resume: a fused ingest is reused only with its clean."""
from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from shardforge.config import load_config
from shardforge.engine.layout import Layout
from sample_docs import sample_rows

pytestmark = pytest.mark.slow

STAGES = ("ingest", "clean", "redact", "curate", "build-shards")
SETTINGS = ["pipeline.write_raw=false", 'rejects.record="none"', "clean.detect_language=true",
            'clean.languages=["en"]', 'quality.filters=["gopher_repetition", "gopher_quality", "c4", "fineweb"]',
            "ingest.max_record_bytes=65536", "shards.num_shards=3", "dedup.near=false"]
# the folder's lines the reader cannot make a document of, and the ids that repeat
BAD = ["{broken json\n", "\n", "[1, 2]\n", '{"id": "no-text"}\n', '{"id": "null-text", "text": null}\n']


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Two files. plain.jsonl: sample documents with only the named keys (decoded by the
    reader), three without an id, an exact copy of one line, one id reused with another text,
    one reused by a line of other.jsonl.gz, and an oversized line. other.jsonl.gz: sample lines
    with their `lang` key (declined by the reader: Spark parses them) and the bad lines."""
    rows = sample_rows()
    assert len(rows) >= 200
    d = tmp_path_factory.mktemp("fused") / "input"
    d.mkdir()
    plain = [{"id": r["id"], "text": r["text"]} for r in rows[:120]]
    for r in plain[:3]:
        del r["id"]
    plain[10]["url"] = "https://example.org/a"
    plain[11]["source"] = "crawl-7"
    lines = [json.dumps(r) for r in plain]
    lines.append(lines[20])                                                   # exact copy: same id, same text
    # same id, another text; both texts pass clean (as do those of rows 27 and 128), so which
    # row keeps the id shows in the curated table
    lines.append(json.dumps({"id": plain[25]["id"], "text": rows[27]["text"]}))
    lines.append(json.dumps({"id": "big", "text": "word " * 20000}))            # 100 KB > 64 KB cap
    (d / "plain.jsonl").write_text("\n".join(lines) + "\n")
    other = [json.dumps(r) for r in rows[120:200]]
    other.append(json.dumps({"id": plain[27]["id"], "text": rows[128]["text"], "lang": "en"}))
    with gzip.open(d / "other.jsonl.gz", "wt") as fh:
        fh.write("\n".join(other) + "\n" + "".join(BAD))
    return d


def _cfg(inp: Path, out: Path, *overrides: str):
    cfg = load_config(None, [*SETTINGS, *overrides])
    return cfg.replace(pipeline=replace(cfg.pipeline, input=(str(inp),), output=str(out), stages=STAGES))


def _run(spark, cfg):
    from shardforge.engine.runner import RunOptions, run_job

    return run_job(cfg, cfg.pipeline.stages, layout=Layout.for_output(cfg.pipeline.output),
                   options=RunOptions(), spark=spark)


def _entries(report: dict) -> list[dict]:
    return [{k: s[k] for k in ("name", "rows_in", "kept", "rejected", "rejects_by_reason")} for s in report["stages"]]


def _table(spark, path: Path, cols=None) -> list[str]:
    df = spark.read.format("delta").load(str(path))
    return sorted(df.select(*(cols or df.columns)).toJSON().collect())


def _shard_bytes(out: Path) -> dict[str, str]:
    m = json.loads((out / "shards" / "manifest.json").read_text())
    return {s["file"]: hashlib.sha256((out / "shards" / s["file"]).read_bytes()).hexdigest() for s in m["shards"]}


@pytest.fixture(scope="module")
def both(spark, corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("fused-runs")
    fused = _run(spark, _cfg(corpus, d / "fused"))
    apart = _run(spark, _cfg(corpus, d / "apart", "pipeline.fuse=false"))
    return d, fused, apart


@pytest.fixture(scope="module")
def decoded_only(spark, tmp_path_factory):
    """Every line decoded by the reader (the pass's short path: no line takes ingest's usual
    one): sample documents with only the named keys, two without an id, and two ids that
    repeat, one with the same text and one with another text that clean keeps."""
    rows = sample_rows()
    d = tmp_path_factory.mktemp("fused-decoded")
    (d / "input").mkdir()
    plain = [{"id": r["id"], "text": r["text"]} for r in rows[100:200]]
    for r in plain[:2]:
        del r["id"]
    lines = [json.dumps(r) for r in plain]
    lines += [lines[50], json.dumps({"id": plain[25]["id"], "text": rows[128]["text"]})]
    (d / "input" / "docs.jsonl").write_text("\n".join(lines) + "\n")
    fused = _run(spark, _cfg(d / "input", d / "fused"))
    apart = _run(spark, _cfg(d / "input", d / "apart", "pipeline.fuse=false"))
    return d, fused, apart


def test_all_lines_decoded_same_outputs_as_the_two_stages(decoded_only, spark):
    rows = sample_rows()
    d, fused, apart = decoded_only
    assert [s.get("fused", False) for s in fused["stages"]][:2] == [True, True]
    assert _entries(fused) == _entries(apart)
    assert _entries(fused)[0]["rows_in"] == 102 and _entries(fused)[0]["rejects_by_reason"] == {
        "invalid:duplicate_id": 2}
    assert _table(spark, d / "fused" / "rejects") == _table(spark, d / "apart" / "rejects")
    assert _table(spark, d / "fused" / "curated") == _table(spark, d / "apart" / "curated")
    assert _shard_bytes(d / "fused") == _shard_bytes(d / "apart")
    curated = {r["id"]: r["text"] for r in spark.read.format("delta").load(str(d / "fused" / "curated")).collect()}
    texts = [rows[125]["text"], rows[128]["text"]]
    winner = min(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    assert curated[rows[125]["id"]].split()[:8] == winner.split()[:8]


def test_the_fused_pass_ran_and_the_stages_did_not(both):
    _, fused, apart = both
    assert [s.get("fused", False) for s in fused["stages"]] == [True, True, False, False, False]
    assert not any(s.get("fused") for s in apart["stages"])


def test_same_counts_and_reasons_as_the_two_stages(both):
    _, fused, apart = both
    assert _entries(fused) == _entries(apart)
    ingest, clean = _entries(fused)[:2]
    # from the fixture: 120 + 3 plain lines and 81 + 5 gzip lines; ingest rejects the oversized
    # line, the five bad lines, and three repeated ids (the copy, the other text, the gzip line)
    assert ingest["rows_in"] == 123 + 86
    assert ingest["rejects_by_reason"] == {"invalid:blank_line": 1, "invalid:duplicate_id": 3,
                                           "invalid:malformed_json": 1, "invalid:missing_text": 2,
                                           "invalid:not_an_object": 1, "invalid:record_too_large": 1}
    assert clean["rows_in"] == ingest["kept"] == 123 + 86 - 9
    assert clean["kept"] > 0 and clean["rejected"] > 0 and len(clean["rejects_by_reason"]) >= 2


def test_same_rejects_curated_rows_and_shard_bytes(both, spark):
    d, fused, apart = both
    assert _table(spark, d / "fused" / "rejects") == _table(spark, d / "apart" / "rejects")
    assert _table(spark, d / "fused" / "curated") == _table(spark, d / "apart" / "curated")
    assert fused["shards"]["build_id"] == apart["shards"]["build_id"]
    assert _shard_bytes(d / "fused") == _shard_bytes(d / "apart")


def test_a_repeated_id_keeps_the_row_the_stages_keep(both, spark):
    """Of two rows sharing an id, the one with the smaller sha256 of its text stays, whichever
    path read it: two decoded lines, and a decoded line against a declined one."""
    rows = sample_rows()
    d, _, _ = both
    curated = {r["id"]: r["text"] for r in spark.read.format("delta").load(str(d / "fused" / "curated")).collect()}
    rejected = spark.read.format("delta").load(str(d / "fused" / "rejects")).where(
        "reason = 'invalid:duplicate_id'").collect()
    assert sorted(r["id"] for r in rejected) == sorted([rows[20]["id"], rows[25]["id"], rows[27]["id"]])
    for doc, pair in ((25, (25, 27)), (27, (27, 128))):
        texts = [rows[k]["text"] for k in pair]
        winner = min(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
        assert curated[rows[doc]["id"]].split()[:8] == winner.split()[:8], doc


@pytest.mark.parametrize("override, why", [
    ("pipeline.write_raw=true", "pipeline.write_raw"),
    ('rejects.record="redacted"', "rejects.record"),
    ('quality.mode="annotate"', "annotate"),
    ("pipeline.fuse=false", "pipeline.fuse is off"),
])
def test_plans_that_keep_the_stages_apart(corpus, tmp_path, override, why):
    from shardforge.ingest.fused import blocker

    cfg = _cfg(corpus, tmp_path / "o", override)
    assert why in blocker(cfg, STAGES, 0)
    assert blocker(_cfg(corpus, tmp_path / "o"), STAGES, 0) is None
    assert "clean does not follow" in blocker(_cfg(corpus, tmp_path / "o"), ("ingest", "redact"), 0)


def test_a_folder_with_parquet_keeps_the_stages_apart(corpus, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import shutil

    from shardforge.ingest.fused import blocker

    mixed = tmp_path / "mixed"
    shutil.copytree(corpus, mixed)
    pq.write_table(pa.table({"id": ["p1"], "text": ["a parquet document"]}), mixed / "more.parquet")
    assert "other than JSONL" in blocker(_cfg(mixed, tmp_path / "o"), STAGES, 0)


def test_a_fused_ingest_is_reused_only_with_its_clean(spark, corpus, tmp_path, stage_runs):
    """A run stopped after the pass (markers kept) reuses both stages; with clean's marker gone
    (a run killed between the two markers) or clean's settings changed, it reads the files again."""
    from shardforge.engine.runner import RunOptions, run_job

    cfg = _cfg(corpus, tmp_path / "out")

    def run(c):
        stage_runs.clear()
        return run_job(c, c.pipeline.stages, layout=Layout.for_output(c.pipeline.output),
                       options=RunOptions(keep_intermediate=True), spark=spark)

    first = run(cfg)
    assert stage_runs == list(STAGES)
    work = tmp_path / "out" / "_run"
    marker = json.loads((work / "ingest" / "_COMPLETE.json").read_text())
    assert marker["fused_with"]["stage"] == "clean" and "kept" not in marker["schemas"]

    def unfinish(*stages):        # a run killed after its last remaining marker
        state = json.loads((work / "state.json").read_text())
        state.pop("finished", None)
        (work / "state.json").write_text(json.dumps(state))
        for stage in stages:
            (work / stage / "_COMPLETE.json").unlink()

    unfinish("redact", "curate", "build-shards")
    again = run(cfg)
    assert stage_runs == ["redact", "curate", "build-shards"]
    assert again["resumed_from"] == "redact"
    assert again["shards"]["build_id"] == first["shards"]["build_id"]
    unfinish("clean", "redact", "curate", "build-shards")      # killed between the pass's two markers
    third = run(cfg)
    assert stage_runs == list(STAGES) and third["resumed_from"] is None
    assert third["shards"]["build_id"] == first["shards"]["build_id"]
    unfinish()
    changed = run(_cfg(corpus, tmp_path / "out", "clean.min_chars=300"))
    assert stage_runs == list(STAGES) and changed["resumed_from"] is None
