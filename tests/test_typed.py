"""Training-ready output: the user's columns keep their types from input to shards, the
curated table evolves when a batch adds a column (a type conflict is an exit-2 error naming
it), text-only builds carry no image columns, and the tokenize stage writes token ids as
the tokenizers library computes them, in the narrowest type, the same bytes however the
input is partitioned."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardforge.config import load_config
from shardforge.engine.layout import Layout
from shardforge.shards.manifest import read_manifest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
WORDS = "river stone light garden paper signal window market harbor lantern meadow copper".split()


def _text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] + str((i + j) % 11) for j in range(30))


def _parquet(path: Path, n: int, start: int = 0, **extra) -> str:
    table = pa.table({
        "id": [f"p{i:04d}" for i in range(start, start + n)],
        "text": [_text(i) for i in range(start, start + n)],
        "tokens": pa.array([[i, i + 1, i % 5] for i in range(start, start + n)], pa.list_(pa.int32())),
        "score": [i / 8 for i in range(start, start + n)],
        "lang": ["en" if i % 3 else "de" for i in range(start, start + n)],
        **extra,
    })
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "part-0.parquet")
    return str(path)


def _run(spark, inp, out, stages, *overrides):
    from shardforge.engine.runner import RunOptions, run_job

    cfg = load_config(None, ["dedup.near=false", "shards.num_shards=3", "pipeline.write_raw=false", *overrides])
    cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=(inp,), output=str(out), stages=tuple(stages)))
    return run_job(cfg, cfg.pipeline.stages, layout=Layout.for_output(str(out)), options=RunOptions(), spark=spark)


def _shard_schema(out: Path) -> pa.Schema:
    m = read_manifest(str(out / "shards"))
    return pq.read_schema(m.path_of(m.shards[0]))


def test_parquet_columns_keep_their_types_into_the_shards_and_the_loader(spark, tmp_path):
    from torch.utils.data import DataLoader

    from shardforge.loaders import ShardedDataset, no_collate

    out = tmp_path / "out"
    _run(spark, _parquet(tmp_path / "a", 60), out, ["ingest", "clean", "dedup", "curate", "build-shards"])
    schema = _shard_schema(out)
    tokens = schema.field("tokens").type
    assert pa.types.is_list(tokens) and tokens.value_type == pa.int32()
    assert schema.field("score").type == pa.float64() and schema.field("lang").type == pa.string()
    assert schema.field("id").type == pa.string() and schema.field("text").type == pa.string()
    assert not {"image", "image_width", "image_height"} & set(schema.names)      # a text-only build
    m = read_manifest(str(out / "shards"))
    assert all(pq.read_table(m.path_of(s)).column("meta").null_count == s.rows for s in m.shards)   # not JSON text
    ds = ShardedDataset(str(out / "shards"), rank=0, world_size=1, shuffle=False, batch_size=8, batched=True,
                        columns=["id", "tokens", "score"])
    batch = next(iter(DataLoader(ds, batch_size=None, collate_fn=no_collate)))
    assert batch["tokens"].dtype.is_floating_point is False and batch["tokens"].shape == (8, 3)
    assert batch["score"].dtype.is_floating_point and batch["score"].shape == (8,)
    by_id = {i: (t.tolist(), float(s)) for i, t, s in zip(batch["id"], batch["tokens"], batch["score"])}
    for i, (tokens, score) in by_id.items():
        n = int(i[1:])
        assert tokens == [n, n + 1, n % 5] and score == n / 8


def test_a_new_column_evolves_the_table_and_a_type_conflict_names_the_column(spark, tmp_path):
    from shardforge.curated.tables import SchemaConflict, table_version

    out = tmp_path / "out"
    stages = ["ingest", "curate", "build-shards"]
    _run(spark, _parquet(tmp_path / "a", 20), out, stages)
    v0 = table_version(spark, str(out / "curated"))
    _run(spark, _parquet(tmp_path / "b", 20, start=100, rating=pa.array([1.5] * 20, pa.float32())), out, stages)
    now = spark.read.format("delta").load(str(out / "curated"))
    assert dict(now.dtypes)["rating"] == "float" and now.count() == 40
    assert now.where("rating IS NULL").count() == 20                   # the first batch's rows
    old = spark.read.format("delta").option("versionAsOf", v0).load(str(out / "curated"))
    assert "rating" not in old.columns and old.count() == 20           # time travel still works
    assert pa.types.is_floating(_shard_schema(out).field("rating").type)

    bad = _parquet(tmp_path / "c", 5, start=200, score=pa.array(["high"] * 5))
    with pytest.raises(SchemaConflict, match=r"column 'score' is string in this batch but double in "):
        _run(spark, bad, out, stages)

    from shardforge.engine.cli import main

    code = main(["pipeline", "--input", bad, "--output", str(out), "--set", 'pipeline.stages=["ingest","curate"]'])
    assert code == 2


def test_declared_jsonl_fields_are_typed_and_bad_values_rejected(spark, tmp_path):
    from shardforge.ingest.stage import read_documents
    from shardforge.config import IngestSection

    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "text": "one", "tokens": [1, 2, 3], "score": 0.5, "note": "kept in meta"},
        {"id": "b", "text": "two", "tokens": "not a list", "score": 1.0},
        {"id": "c", "text": "three", "score": 2},
    ]))
    kept, rejected = read_documents(spark, str(p), IngestSection(columns={"tokens": "array<int>", "score": "double"}))
    types = dict(kept.dtypes)
    assert types["tokens"] == "array<int>" and types["score"] == "double"
    rows = {r.id: r for r in kept.collect()}
    assert set(rows) == {"a", "c"}
    assert rows["a"].tokens == [1, 2, 3] and json.loads(rows["a"].meta) == {"note": "kept in meta"}
    assert rows["c"].tokens is None and rows["c"].score == 2.0
    assert [(r.reason, json.loads(r.record)["line"].startswith('{"id": "b"')) for r in rejected.collect()] == \
        [("invalid:column_type", True)]


def _tokenizer(tmp_path: Path) -> str:
    from shardforge.tokenize.stage import train_bpe

    return train_bpe([_text(i) for i in range(200)], str(tmp_path / "tok.json"), vocab_size=300)


def test_tokenize_writes_the_tokenizers_ids_in_the_narrowest_type(spark, tmp_path):
    from tokenizers import Tokenizer

    tok_path = _tokenizer(tmp_path)
    rows = [{"id": f"t{i:03d}", "text": _text(i)} for i in range(40)] + [{"id": "empty", "text": ""}]
    inp = tmp_path / "docs.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    report = _run(spark, str(inp), out, ["ingest", "tokenize", "curate", "build-shards"],
                  f"tokenize.tokenizer={json.dumps(tok_path)}", "tokenize.eos_id=1", "clean.min_chars=0")
    schema = _shard_schema(out)
    assert schema.field("tokens").type.value_type == pa.uint16()     # a 300-token vocabulary
    assert schema.field("num_tokens").type == pa.int32()
    m = read_manifest(str(out / "shards"))
    got = {r["id"]: r for s in m.shards for r in pq.read_table(m.path_of(s)).to_pylist()}
    reference = Tokenizer.from_file(tok_path)                        # the library itself, outside Spark
    for r in rows:
        want = reference.encode(r["text"], add_special_tokens=False).ids + [1]
        assert got[r["id"]]["tokens"] == want and got[r["id"]]["num_tokens"] == len(want)
    assert got["empty"]["tokens"] == [1]
    total = sum(len(reference.encode(r["text"], add_special_tokens=False).ids) + 1 for r in rows)
    assert report["tokens"]["total"] == total and report["tokens"]["documents"] == len(rows)
    assert report["tokens"]["dtype"] == "uint16" and sum(report["tokens"]["per_document_histogram"].values()) == 41


def test_tokenized_shards_are_the_same_bytes_for_any_partitioning(spark, tmp_path):
    from shardforge.config import ShardsSection, TokenizeSection
    from shardforge.shards.build import build_shards
    from shardforge.tokenize.stage import load_tokenizer, tokenize

    info = load_tokenizer(_tokenizer(tmp_path))
    df = spark.createDataFrame([(f"x{i:03d}", _text(i)) for i in range(300)], "id string, text string")
    shas = []
    for parts in (1, 7):
        tokenized = tokenize(df.repartition(parts), TokenizeSection(eos_id=1), info)
        m = build_shards(tokenized, str(tmp_path / f"b{parts}"), ShardsSection(num_shards=4, row_group_rows=16),
                         config={}, source={})
        shas.append([s["sha256"] for s in m["shards"]])
    assert shas[0] == shas[1]


def test_a_missing_or_broken_tokenizer_exits_2_before_spark(tmp_path):
    inp = tmp_path / "d.jsonl"
    inp.write_text('{"id": "a", "text": "x"}\n')
    (tmp_path / "broken.json").write_text('{"model": "nope"}')
    env = {**os.environ, "SHARDFORGE_JARS": str(tmp_path / "no-jars")}       # Spark could not start at all
    for path, message in ((tmp_path / "missing.json", "cannot read"), (tmp_path / "broken.json", "is not a tokenizer.json")):
        proc = subprocess.run([sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--input", str(inp), "--output",
                               str(tmp_path / "o"), "--set", 'pipeline.stages=["ingest","tokenize"]', "--set",
                               f"tokenize.tokenizer={json.dumps(str(path))}", "--set", 'spark.jars_dir="/nonexistent"'],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "tokenize.tokenizer" in proc.stderr and message in proc.stderr and "Traceback" not in proc.stderr


def test_token_stats_observed_as_the_rows_are_written(spark, tmp_path):
    """The tokenize report's totals and power-of-two histogram, computed by an Observation while
    the rows are written, equal the grouped query's and a histogram computed here (bin = the
    power of two at or above the count, 0 for none)."""
    from pyspark.sql import Observation

    from shardforge.tokenize.stage import token_stats, token_stats_aggregates, token_stats_of

    counts = [0, 1, 2, 3, 4, 5, 7, 1000, 1024, 1025, 2**20 + 1, 3, 0]
    df = spark.createDataFrame([(f"d{i}", n) for i, n in enumerate(counts)], "id string, num_tokens int")
    obs = Observation()
    df.observe(obs, *[c.alias(k) for k, c in token_stats_aggregates().items()]).write.parquet(str(tmp_path / "t"))
    hist: dict[str, int] = {}
    for n in counts:
        b = str(0 if n <= 0 else 1 << (n - 1).bit_length())
        hist[b] = hist.get(b, 0) + 1
    want = {"documents": len(counts), "total": sum(counts), "per_document_histogram": hist, "empty_documents": 2}
    got = token_stats_of(obs.get)
    assert got == want and got == token_stats(df)
    assert list(got["per_document_histogram"]) == sorted(hist, key=int)
