"""The shard contract: same input, same bytes; Python finds any key's shard; atomic
publication; balance; clear errors for bad input."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from shardforge.config import ShardsSection, load_config
from shardforge.keys import shard_of, spark_xxhash64
from shardforge.shards.manifest import ManifestError, read_manifest, verify
from shardforge.engine.records import recorded_config

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = ["shards.num_shards=8", "shards.row_group_rows=100"]


def _docs(spark, n: int, start: int = 0):
    return spark.range(start, start + n).selectExpr(
        "concat('doc-', cast(id as string)) AS id",
        "concat('text of document ', cast(id as string), ' ', repeat('lorem ', cast(id % 23 as int))) AS text",
        "IF(id % 5 = 0, NULL, 'src') AS source",
        "map('EMAIL', cast(id % 3 as int)) AS pii_counts")


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tbl") / "curated")
    _docs(spark, 3000).write.format("delta").save(path)
    return path


def _build(spark, df, out, table, **kwargs):
    from shardforge.shards.build import build_shards

    cfg = load_config(None, OVERRIDES)
    return build_shards(df, str(out), cfg.shards, config=recorded_config(cfg),
                        source={"table": os.path.abspath(table), "version": 0}, **kwargs)


def _manifest_bytes(out) -> bytes:
    return (Path(out) / "manifest.json").read_bytes()


@pytest.mark.slow
def test_four_ways_give_identical_shards_and_manifests(spark, table, tmp_path):
    df = spark.read.format("delta").load(table)
    one = _build(spark, df.repartition(1), tmp_path / "one", table)
    seven = _build(spark, df.repartition(7), tmp_path / "seven", table)
    again = _build(spark, df.repartition(7), tmp_path / "seven", table)  # rerun into the same place
    env = {**os.environ, "SHARDFORGE_SPARK_LOG_LEVEL": "ERROR"}
    proc = subprocess.run([sys.executable, "-m", "shardforge.engine.cli", "build-shards", "--master", "local[1]",
                           "--input", table, "--output", str(tmp_path / "local1"),
                           "--set", "spark.shuffle_partitions=3", "--set", "spark.properties={'spark.ui.enabled'='false'}",
                           *sum((["--set", o] for o in OVERRIDES), [])],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    local1 = json.loads(_manifest_bytes(tmp_path / "local1"))
    assert one["total_rows"] == 3000
    sums = [[s["sha256"] for s in m["shards"]] for m in (one, seven, again, local1)]
    assert sums[0] == sums[1] == sums[2] == sums[3]
    assert _manifest_bytes(tmp_path / "one") == _manifest_bytes(tmp_path / "seven") == \
        _manifest_bytes(tmp_path / "local1")
    assert "created_at" not in one
    for out in ("one", "seven", "local1"):
        assert verify(read_manifest(str(tmp_path / out))) == []


def test_rows_sit_in_the_shard_python_computes_in_contract_order(spark, table, tmp_path):
    m = _build(spark, spark.read.format("delta").load(table), tmp_path / "b", table)
    man = read_manifest(str(tmp_path / "b"))
    assert [Path(s.file).name for s in man.shards] == [f"part-{i:05d}-of-00008.parquet" for i in range(8)]
    for s in man.shards:
        pf = pq.ParquetFile(man.path_of(s))
        assert [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)] == list(s.row_groups)
        assert all(g <= 100 for g in s.row_groups)
        ids = pf.read(columns=["id"]).column("id").to_pylist()
        assert all(shard_of(i, 8) == s.index for i in ids)
        assert ids == sorted(ids, key=lambda k: (spark_xxhash64(k), k))
    assert m["source"] == {"table": os.path.abspath(table), "version": 0}
    assert m["writer"]["compression"] == "zstd" and m["writer"]["row_group_rows"] == 100
    assert [f["name"] for f in m["schema"]] == ["id", "text", "source", "pii_counts"]


def test_arrow_batch_size_does_not_change_the_bytes(spark, tmp_path):
    """The writer streams: a shard's rows reach it in many Arrow batches or in one, and
    several shards share a batch. Same rows, same bytes either way; rows (including
    non-ASCII keys) in contract order."""
    from shardforge.shards.build import build_shards

    df = _docs(spark, 2000).unionByName(spark.createDataFrame(
        [(k, "t", None, {}) for k in ("ü-1", "日本-2", "z", "Z", "a\u0000b", "")],
        "id string, text string, source string, pii_counts map<string,int>"))
    cfg = ShardsSection(num_shards=5, row_group_rows=64)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    try:
        spark.conf.set(key, "7")
        small = build_shards(df, str(tmp_path / "small"), cfg, config={}, source={})
        spark.conf.set(key, "100000")
        large = build_shards(df.repartition(3), str(tmp_path / "large"), cfg, config={}, source={})
    finally:
        spark.conf.set(key, old)
    assert [s["sha256"] for s in small["shards"]] == [s["sha256"] for s in large["shards"]]
    man = read_manifest(str(tmp_path / "small"))
    seen = []
    for s in man.shards:
        ids = pq.read_table(man.path_of(s), columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids, key=lambda k: (spark_xxhash64(k), k.encode()))
        assert all(shard_of(i, 5) == s.index for i in ids)
        seen += ids
    assert len(seen) == 2006 and {"ü-1", "日本-2", "", "a\u0000b"} <= set(seen)


def test_shard_writer_streams_to_the_same_bytes_as_one_table(tmp_path):
    """ShardWriter fed in uneven pieces writes the file write_shard writes from the whole
    table: same row groups, same sha256, nothing left under a temporary name; abort()
    removes its temporary file."""
    import pyarrow as pa

    from shardforge.shards.writer import ShardWriter, WriterSettings, write_shard

    n = 2500
    table = pa.table({"id": [f"k{i:05d}" for i in range(n)], "x": list(range(n)),
                      "t": [None if i % 9 == 0 else "w" * (i % 40) for i in range(n)]})
    settings = WriterSettings(row_group_rows=300)
    whole = write_shard(table, str(tmp_path / "a"), 0, 1, settings)
    writer = ShardWriter(str(tmp_path / "b"), 0, 1, table.schema, settings)
    for start, size in ((0, 1), (1, 299), (300, 0), (300, 1000), (1300, 7), (1307, 1193)):
        writer.write(table.slice(start, size))
    streamed = writer.close()
    assert streamed == whole
    assert whole.row_groups == (300,) * 8 + (100,)
    assert (tmp_path / "a" / whole.file).read_bytes() == (tmp_path / "b" / streamed.file).read_bytes()
    assert sorted(os.listdir(tmp_path / "b")) == [whole.file]
    aborted = ShardWriter(str(tmp_path / "c"), 1, 2, table.schema, settings)
    aborted.write(table.slice(0, 700))
    aborted.abort()
    assert os.listdir(tmp_path / "c") == []


def test_empty_shards_are_written(spark, tmp_path):
    from shardforge.shards.build import build_shards

    df = _docs(spark, 3)
    m = build_shards(df, str(tmp_path / "e"), ShardsSection(num_shards=16), config={}, source={})
    assert m["num_shards"] == 16 and m["total_rows"] == 3
    assert sum(1 for s in m["shards"] if s["rows"] == 0) >= 13
    man = read_manifest(str(tmp_path / "e"))
    assert verify(man) == [] and all(Path(man.path_of(s)).exists() for s in man.shards)


def test_failed_build_leaves_previous_build_readable_and_rerun_succeeds(spark, table, tmp_path, monkeypatch):
    import shardforge.shards.build as shards
    from shardforge.loaders import ShardedDataset

    out = tmp_path / "pub"
    first = _build(spark, spark.read.format("delta").load(table), out, table)
    newer = spark.read.format("delta").load(table).unionByName(_docs(spark, 500, start=10_000))
    original = shards.new_staging_dir

    def blocked_staging(output, *args):
        """The staging folder, with a directory where shard 3's file must go: its task fails."""
        staging = original(output, *args)
        os.makedirs(os.path.join(staging, "part-00003-of-00008.parquet", "in-the-way"))
        return staging

    monkeypatch.setattr(shards, "new_staging_dir", blocked_staging)
    with pytest.raises(Exception, match="part-00003-of-00008.parquet"):
        _build(spark, newer, out, table)
    monkeypatch.setattr(shards, "new_staging_dir", original)
    assert any(p.name.startswith("_staging-") for p in out.iterdir())  # the failed build's leftovers
    man = read_manifest(str(out))
    assert man.build_id == first["build_id"] and verify(man) == []
    assert sum(1 for _ in ShardedDataset(str(out), rank=0, world_size=1, shuffle=False)) == 3000
    second = _build(spark, newer, out, table)
    assert second["total_rows"] == 3500 and second["build_id"] != first["build_id"]
    assert not any(p.name.startswith("_staging-") for p in out.iterdir())
    assert read_manifest(str(out)).build_id == second["build_id"]
    assert (out / first["build_id"]).is_dir()  # the previous build stays for readers that opened it


def test_balance_of_100000_rows_in_16_shards(spark, tmp_path):
    from shardforge.shards.build import build_shards

    df = spark.range(100_000).selectExpr("uuid() AS u", "cast(id as string) AS id").drop("u")
    m = build_shards(df, str(tmp_path / "bal"), ShardsSection(num_shards=16, row_group_rows=4096),
                     config={}, source={})
    rows = [s["rows"] for s in m["shards"]]
    assert sum(rows) == 100_000
    assert max(rows) / (sum(rows) / 16) <= 1.05


def test_sizing_from_targets(spark, tmp_path):
    from shardforge.shards.build import size_input

    df = _docs(spark, 1000)
    assert size_input(df, ShardsSection(target_rows=300)) == (4, 1000, 1000)
    n, _, _ = size_input(df, ShardsSection(target_bytes=10_000))
    size = sum(len(r.id) + len(r.text) + len(r.source or "") for r in df.collect())
    assert n == -(-size // 10_000)


def test_null_keys_and_missing_columns_are_clear_errors(spark, tmp_path):
    from shardforge.shards.build import ShardBuildError, build_shards

    df = _docs(spark, 10).selectExpr("IF(id = 'doc-3', NULL, id) AS id", "text")
    with pytest.raises(ShardBuildError, match=r"'id' has 1 null value"):
        build_shards(df, str(tmp_path / "n"), ShardsSection(num_shards=2), config={}, source={})
    with pytest.raises(ShardBuildError, match="column 'doc_id' is not in the input"):
        build_shards(df, str(tmp_path / "n"), ShardsSection(num_shards=2, key="doc_id"), config={}, source={})
    assert not (tmp_path / "n" / "manifest.json").exists()


def test_verify_and_inspect_cli(spark, table, tmp_path, capsys):
    from shardforge.engine.cli import main

    out = tmp_path / "v"
    _build(spark, spark.read.format("delta").load(table), out, table)
    assert main(["verify", str(out)]) == 0
    assert main(["inspect", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert summary["total_rows"] == 3000 and summary["num_shards"] == 8
    man = read_manifest(str(out))
    victim = Path(man.path_of(man.shards[5]))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert main(["verify", str(out)]) == 3
    err = capsys.readouterr().err
    assert "FAIL shard 5" in err and "part-00005-of-00008.parquet" in err
    (tmp_path / "notabuild").mkdir()
    assert main(["verify", str(tmp_path / "notabuild")]) == 2
    assert "no shard build here" in capsys.readouterr().err
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(ManifestError, match="not a shardforge shard manifest"):
        read_manifest(str(tmp_path / "x.json"))


@pytest.mark.slow
def test_repeated_keys_keep_one_order_across_partitionings(spark, tmp_path):
    """Rows that share a key (a curated table keyed by `source`, say, or a build keyed by
    a column that repeats) still give the same bytes whatever the input's partitioning and
    row order: ties are broken by the whole row, map columns included (two rows below
    differ only in `pii_counts`)."""
    from shardforge.shards.build import build_shards

    rows = []
    for k in range(40):
        for j in range(k % 6 + 1):          # 1..6 rows per key
            rows.append((f"key-{k}", f"text {k} variant {j % 3}", "src" if j % 2 else None,
                         {"EMAIL": j, "PHONE": k % 4} if j != 5 else {"PHONE": k % 4, "EMAIL": 4}))
    rows += [("dup", "same text", "s", {"EMAIL": 1}), ("dup", "same text", "s", {"EMAIL": 2}),
             ("dup", "same text", "s", {"EMAIL": 1})]
    schema = "id string, text string, source string, pii_counts map<string,int>"
    cfg = ShardsSection(num_shards=4, row_group_rows=16, key="id")
    a = build_shards(spark.createDataFrame(rows, schema).repartition(1), str(tmp_path / "a"), cfg,
                     config={}, source={})
    b = build_shards(spark.createDataFrame(list(reversed(rows)), schema).repartition(7), str(tmp_path / "b"),
                     cfg, config={}, source={})
    c = build_shards(spark.createDataFrame(rows[1::2] + rows[0::2], schema).repartition(3, "text"),
                     str(tmp_path / "c"), cfg, config={}, source={})
    assert a["total_rows"] == len(rows)
    assert [s["sha256"] for s in a["shards"]] == [s["sha256"] for s in b["shards"]] == \
        [s["sha256"] for s in c["shards"]]
    man = read_manifest(str(tmp_path / "a"))
    got = []
    for s in man.shards:
        t = pq.read_table(man.path_of(s)).to_pylist()
        ids = [r["id"] for r in t]
        assert ids == sorted(ids, key=lambda k: (spark_xxhash64(k), k.encode()))   # keys still in contract order
        got += [(r["id"], r["text"], r["source"] or "", tuple(sorted(r["pii_counts"]))) for r in t]
    assert sorted(got) == sorted((i, t, s or "", tuple(sorted(m.items()))) for i, t, s, m in rows)
