"""Reading documents: every line is a document or a reject with a reason; ids are stable;
bad paths and bad config give clear messages."""
import json

import pytest

from shardforge.config import IngestSection
from shardforge.ingest.stage import InputError, read_documents
from shardforge.keys import derived_id

LINES = [
    '{"id": "a", "text": "first document", "lang": "en"}',
    '{"id": "b", "text": "cut off',
    '',
    '[1, 2, 3]',
    '{"text": "no id here", "topic": {"x": 1}}',
    '{"id": 7, "text": "numeric id"}',
    '{"id": "c"}',
]


def test_jsonl_rows_are_kept_or_rejected_with_reasons(spark, tmp_path):
    p = tmp_path / "in" / "docs.jsonl"
    p.parent.mkdir()
    p.write_text("\n".join(LINES) + "\n")
    kept, rejected = read_documents(spark, str(p.parent), IngestSection())
    docs = {r.id: r for r in kept.collect()}
    rej = sorted((r.reason, r.detail) for r in rejected.collect())
    assert len(docs) + len(rej) == len(LINES)
    assert set(docs) == {"a", "7", derived_id("no id here", "docs.jsonl")}
    assert docs["a"].source == "docs.jsonl" and json.loads(docs["a"].meta) == {"lang": "en"}
    assert json.loads(docs[derived_id("no id here", "docs.jsonl")].meta) == {"topic": '{"x":1}'}
    assert [r[0] for r in rej] == ["invalid:blank_line", "invalid:malformed_json", "invalid:missing_text",
                                   "invalid:not_an_object"]
    assert rej[1][1].startswith('{"id": "b"')


def test_jsonl_reject_rows_whole(spark, tmp_path):
    """Every column of each kind of JSONL reject, written out by hand: a line the reader marks
    (over ingest.max_record_bytes), lines that are not documents, a document without text."""
    d = tmp_path / "in"
    d.mkdir()
    long_line = json.dumps({"id": "big", "text": "y" * 300})
    lines = ['{"id": "k", "text": "kept"}', "  ", "[1, 2]", '{"id": "b", "text": ', '{"id": "c", "url": "http://x"}',
             long_line]
    (d / "a.jsonl").write_text("\n".join(lines) + "\n")
    offset = sum(len(x) + 1 for x in lines[:-1])
    kept, rejected = read_documents(spark, str(d), IngestSection(max_record_bytes=200))
    assert [r.id for r in kept.collect()] == ["k"]
    got = sorted((tuple(r) for r in rejected.select("id", "stage", "reason", "detail", "source", "record").collect()),
                 key=lambda r: r[2])
    assert got == sorted([
        (None, "ingest", "invalid:blank_line", "  ", "a.jsonl", '{"source":"a.jsonl","line":"  "}'),
        (None, "ingest", "invalid:not_an_object", "[1, 2]", "a.jsonl", '{"source":"a.jsonl","line":"[1, 2]"}'),
        (None, "ingest", "invalid:malformed_json", '{"id": "b", "text": ', "a.jsonl",
         '{"source":"a.jsonl","line":"{\\"id\\": \\"b\\", \\"text\\": "}'),
        ("c", "ingest", "invalid:missing_text", None, "a.jsonl", '{"id":"c","source":"a.jsonl","url":"http://x"}'),
        (None, "ingest", "invalid:record_too_large",
         f"a.jsonl: line at byte {offset}: {len(long_line)} bytes > ingest.max_record_bytes 200", "a.jsonl",
         '{"source":"a.jsonl"}'),
    ], key=lambda r: r[2])


def test_ids_do_not_depend_on_partitioning(spark, tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text("\n".join(json.dumps({"text": f"document number {i}"}) for i in range(200)) + "\n")
    a = sorted(r.id for r in read_documents(spark, str(p), IngestSection()).kept.collect())
    spark.conf.set("spark.sql.files.maxPartitionBytes", "512")
    try:
        df = read_documents(spark, str(p), IngestSection()).kept
        assert df.rdd.getNumPartitions() > 1
        b = sorted(r.id for r in df.collect())
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert a == b and len(set(a)) == 200


def test_one_big_jsonl_file_is_split_like_sparks_own_files(spark, tmp_path):
    """Plain JSONL splits follow Spark's FilePartition.maxSplitBytes rule: min(maxPartitionBytes,
    max(openCostInBytes, (bytes + files * openCost) / minPartitionNum)). A single file under
    128 MiB is not one task: it is spread over minPartitionNum tasks, and its rows are the same."""
    from shardforge.ingest.readers.spark import split_bytes_of

    keys = ("spark.sql.files.minPartitionNum", "spark.sql.files.openCostInBytes", "spark.sql.files.maxPartitionBytes")
    before = {k: spark.conf.get(k, None) for k in keys}
    p = tmp_path / "docs.jsonl"
    p.write_text("".join(json.dumps({"id": f"d{i}", "text": "word " * 40}) + "\n" for i in range(2000)))
    size = p.stat().st_size
    try:
        spark.conf.set("spark.sql.files.minPartitionNum", "6")
        assert split_bytes_of(spark, 110_000_000, 1) == (110_000_000 + (4 << 20)) // 6   # 19,032,384
        assert split_bytes_of(spark, 1 << 40, 8) == 128 << 20                          # capped
        assert split_bytes_of(spark, 1000, 1) == 4 << 20                               # floored
        spark.conf.set("spark.sql.files.openCostInBytes", "1k")
        expected = (size + 1024) // 6
        assert split_bytes_of(spark, size, 1) == expected
        df = read_documents(spark, str(p), IngestSection()).kept
        assert df.rdd.getNumPartitions() == -(-size // expected)    # ceil: 6 or 7 byte ranges
        assert sorted(r.id for r in df.collect()) == sorted(f"d{i}" for i in range(2000))
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def test_parquet_and_text_inputs(spark, tmp_path):
    spark.createDataFrame([("x1", "parquet text", 3)], "doc_id string, body string, n int") \
        .write.parquet(str(tmp_path / "pq"))
    kept, rej = read_documents(spark, str(tmp_path / "pq"), IngestSection(id_column="doc_id", text_column="body"))
    [row] = kept.collect()
    # Parquet columns keep their Spark types as columns; nothing goes to meta
    assert (row.id, row.text, row.n, row.meta) == ("x1", "parquet text", 3, None)
    assert dict(kept.dtypes)["n"] == "int"
    (tmp_path / "txt").mkdir()
    (tmp_path / "txt" / "one.txt").write_text("a whole file\nis one document\n")
    [doc] = read_documents(spark, str(tmp_path / "txt"), IngestSection()).kept.collect()
    assert doc.text.startswith("a whole file") and doc.source == "one.txt"
    with pytest.raises(InputError, match="no text column 'text'"):
        read_documents(spark, str(tmp_path / "pq"), IngestSection())


def test_missing_input_and_unknown_key_are_clear_cli_errors(spark, tmp_path, capsys):
    from shardforge.engine.cli import main

    code = main(["pipeline", "--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o")])
    assert code == 2
    assert f"input not found: {tmp_path / 'nope.jsonl'}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["build-shards", "--input", "x", "--output", "y", "--set", "shards.num_shard=3"])
    assert exit_.value.code == 2
    assert "shards.num_shard: unknown key" in capsys.readouterr().err
    code = main(["build-shards", "--input", str(tmp_path / "nope"), "--output", str(tmp_path / "o")])
    assert code == 2 and "input not found" in capsys.readouterr().err


@pytest.mark.parametrize("broadcast_limit", [100_000, 0], ids=["repeated-ids-broadcast", "every-row-by-id"])
def test_repeated_ids_keep_the_row_with_the_smallest_text_hash_and_source(spark, monkeypatch, broadcast_limit):
    """The ingest stage's one-row-per-id rule, on both of its paths (the few repeated ids
    broadcast to the rows; every row ranked by id): the expected rows come from the rule as
    written, computed here in Python."""
    import hashlib

    from pyspark.sql.types import StringType, StructField, StructType

    import shardforge.engine.steps as steps
    import shardforge.ingest.stage as ingest_stage

    monkeypatch.setattr(ingest_stage, "BROADCAST_REPEATED_IDS", broadcast_limit)
    rows = [("a", "zeta", "s2"), ("a", "alpha", "s1"), ("a", "alpha", "s0"), ("b", "only", "s1"),
            ("c", "one", "s1"), ("c", "one", "s1"), (None, "no id", "s1"), (None, "no id either", "s1")]
    rows += [(f"u{i}", f"unique text {i}", "s3") for i in range(40)]
    schema = StructType([StructField("id", StringType()), StructField("text", StringType()),
                         StructField("source", StringType())])
    df = spark.createDataFrame(rows, schema).repartition(3)
    res = steps.unique_ids(df)

    def rank(r):
        return hashlib.sha256(r[1].encode()).hexdigest(), r[2]
    groups: dict = {}
    for r in rows:
        groups.setdefault(r[0], []).append(r)
    want_kept = sorted((min(g, key=rank) for g in groups.values()), key=repr)
    kept = sorted((tuple(r) for r in res.kept.select("id", "text", "source").collect()), key=repr)
    assert kept == want_kept
    rejected = res.rejected.collect()
    assert sorted((r.id, r.reason) for r in rejected if r.id) == [("a", "invalid:duplicate_id"),
                                                                 ("a", "invalid:duplicate_id"),
                                                                 ("c", "invalid:duplicate_id")]
    assert len(rejected) == 4 and len(kept) + len(rejected) == len(rows)


def test_unique_ids_pass_through_with_nothing_rejected(spark):
    import shardforge.engine.steps as steps

    df = spark.createDataFrame([(f"u{i}", f"text {i}", "s") for i in range(30)], "id string, text string, source string")
    res = steps.unique_ids(df)
    assert res.kept.count() == 30 and res.rejected.count() == 0


def _keyed_lines(n: int, seed: int) -> list[str]:
    """JSONL lines built to sit on the key scan's edges: known and other keys, nested values,
    quotes and colons inside strings, escaped keys, spacing, literals, and malformed lines."""
    import random

    rng = random.Random(seed)
    keys = ["id", "text", "source", "url", "dump", "lang", "te\\u0078t", "id ", "Text", "meta"]
    values = ['"a"', '"say \\"x\\": 1"', "null", "true", "-1.5e3", "[1, {\"k\": \"}\"}]", '{"text": {"id": 2}}',
              '"\\\\"', '"]}{"', "0"]
    lines = []
    for i in range(n):
        chosen = rng.sample(keys, rng.randint(0, 4))
        sep, colon = rng.choice([(",", ":"), (", ", ": "), (" ,\t", " : ")])
        body = sep.join(f'"{k}"{colon}{rng.choice(values)}' for k in chosen)
        line = rng.choice(["{", " {", "{\n"]) + body + "}"
        if rng.random() < 0.15:
            line = rng.choice([line[:-1], line + " x", "[" + line + "]", line.replace(":", "", 1), "{" + line])
        lines.append(line)
    return lines


def test_the_readers_key_scan_agrees_with_a_json_parser():
    """`other_keys` (the compiled scan of each line's top-level keys) answers only where it is
    sure, and there as Python's own JSON parser does; everywhere else it leaves the question
    (null) to Spark."""
    import pyarrow as pa

    from shardforge.ingest.readers.spark import other_keys

    known = ("id", "text", "source", "url")
    lines = _keyed_lines(4000, 5)
    got = other_keys(pa.array(lines), known).to_pylist()
    answered = 0
    for line, g in zip(lines, got):
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if g is not None:
            answered += 1
            assert isinstance(obj, dict), line
            assert g == any(k not in known for k in obj), line
    assert 2000 < answered < 4000 and sum(1 for g in got if g) > 500


def test_meta_is_the_same_whether_the_reader_or_spark_finds_other_keys(spark, tmp_path):
    """The ingest stage's documents and rejects from lines whose other keys the reader's scan
    found are those Spark's json_object_keys finds (the reader's answers all left null)."""
    from shardforge.ingest.readers import spark as pyread
    from shardforge.ingest.readers.files import InputFile
    from shardforge.ingest.stage import _parse_jsonl, known_keys

    lines = _keyed_lines(1500, 11)
    p = tmp_path / "keys.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = IngestSection()
    files = [InputFile(path=str(p), source="keys.jsonl", format="jsonl")]

    def result(known):
        res = _parse_jsonl(pyread.jsonl(spark, files, cfg.max_record_bytes, known), cfg)
        cols = ["id", "text", "source", "url", "meta"]
        order = lambda r: tuple("" if v is None else str(v) for v in r)   # noqa: E731
        return (sorted((tuple(r) for r in res.kept.select(*cols).collect()), key=order),
                sorted((tuple(r) for r in res.rejected.select("reason", "record", "detail").collect()), key=order))

    scanned, asked = result(known_keys(cfg)), result(())
    assert scanned == asked
    metas = [r[4] for r in scanned[0]]
    assert sum(m is not None for m in metas) > 150 and sum(m is None for m in metas) > 50


def _named_lines(n: int, seed: int) -> list[str]:
    """JSONL lines on the edges of the reader's decoding: the four named keys with string values
    written every way JSON allows (escapes, surrogate pairs, raw non-ASCII), and the lines it
    must leave to Spark: lone surrogates, escapes JSON lacks, raw control characters, numbers,
    objects, a key twice, another key, trailing text, damaged lines, blanks."""
    import random

    rng = random.Random(seed)
    keys = ["id", "text", "source", "url"]
    strings = ['"plain words"', '"quote \\" and backslash \\\\ and slash \\/"', '"tab\\tnew\\nline\\r\\b\\f"',
               '"\\u00e9t\\u00C9 caf\u00e9 \u6f22\u5b57"', '"emoji \\ud83d\\ude00 raw \U0001F600"',
               '"nul \\u0000 end"', '""', '"{\\"nested\\": [1, 2]}"', '"a:b,c}"', '"\u2028 line sep"']
    declined = ['"lone \\ud800 high"', '"lone \\udc00 low"', '"bad \\x escape"', '"raw\ttab"', '42', 'true',
                '{"k": "v"}', '["a"]', '"half \\u12"', '"cut \\ud83d\\u0041"']
    lines = []
    for _ in range(n):
        chosen = rng.sample(keys, rng.randint(0, 4))
        if rng.random() < 0.1 and chosen:
            chosen.append(rng.choice(chosen))               # a key twice
        if rng.random() < 0.05:
            chosen.append("lang")                           # another key
        pairs = []
        for k in chosen:
            r = rng.random()
            v = rng.choice(declined) if r < 0.08 else "null" if r < 0.2 else rng.choice(strings)
            pairs.append(f'"{k}"{rng.choice([":", ": ", " :  "])}{v}')
        line = rng.choice(["{", " {", "{\t"]) + rng.choice([",", ", "]).join(pairs) + rng.choice(["}", "} ", " }"])
        r = rng.random()
        if r < 0.04:
            line = rng.choice([line[:-1], line + " x", "[" + line + "]", line.replace(":", "", 1), "   ", "null"])
        elif r < 0.06 and '"text"' in line:
            line = line.replace('"text"', '"te\\u0078t"', 1)  # an escaped key
        lines.append(line)
    return lines


def test_the_readers_decoded_fields_are_pythons_json_values():
    """Where the reader decodes a line's named fields, they are what Python's JSON parser reads
    (absent and null both null); it declines every line Python would read otherwise or reject,
    and decodes most of the rest."""
    import pyarrow as pa

    from shardforge.ingest.readers.spark import LINES, named_fields

    named = ("id", "text", "source", "url")
    lines = _named_lines(4000, 3)
    batch = pa.RecordBatch.from_pylist([{"_line": ln, "_file": "f"} for ln in lines], LINES)
    out = named_fields(batch, named).to_pydict()
    decoded = 0
    for i, line in enumerate(lines):
        if not out["_parsed"][i]:
            assert out["_line"][i] == line and all(out[f"_f{k}"][i] is None for k in range(4))
            continue
        decoded += 1
        obj = json.loads(line)                              # strict: raw control characters refused
        assert isinstance(obj, dict) and set(obj) <= set(named), line
        assert line.count('"id"') + line.count('"text"') + line.count('"source"') + line.count('"url"') == len(obj)
        assert all(v is None or isinstance(v, str) for v in obj.values()), line
        assert not any(0xD800 <= ord(c) < 0xE000 for v in obj.values() if v for c in v), line
        assert [out[f"_f{k}"][i] for k in range(4)] == [obj.get(k) for k in named], line
        assert out["_line"][i] is None and out["_others"][i] is False
    assert 2000 < decoded < 3900


def test_documents_are_the_same_whether_the_reader_or_spark_decodes_the_fields(spark, tmp_path):
    """The ingest stage's documents and rejects from lines whose named fields the reader decoded
    are those Spark's from_json gives when it parses every line; lines over the reader's size cap
    go to Spark too."""
    from shardforge.ingest.readers import spark as pyread
    from shardforge.ingest.readers.files import InputFile
    from shardforge.ingest.stage import _parse_jsonl, known_keys, named_keys

    lines = _named_lines(1500, 17)
    lines += ['{"id": "long-%d", "text": "%s"}' % (i, "x" * (300 + i)) for i in range(5)]
    p = tmp_path / "named.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = IngestSection()
    files = [InputFile(path=str(p), source="named.jsonl", format="jsonl")]

    def result(named, parse_max=pyread.PARSE_MAX_LINE_BYTES):
        res = _parse_jsonl(pyread.jsonl(spark, files, cfg.max_record_bytes, known_keys(cfg), named, parse_max), cfg)
        cols = ["id", "text", "source", "url", "meta"]
        order = lambda r: tuple("" if v is None else str(v) for v in r)   # noqa: E731
        return (sorted((tuple(r) for r in res.kept.select(*cols).collect()), key=order),
                sorted((tuple(r) for r in res.rejected.select("reason", "record", "detail").collect()), key=order))

    decoded, spark_only, capped = result(named_keys(cfg)), result(()), result(named_keys(cfg), 300)
    assert decoded == spark_only == capped
    kept, rejected = decoded
    assert len(kept) > 400 and len(rejected) > 400
    assert any(r[1] and "\U0001F600" in r[1] for r in kept) and any(r[1] == "" for r in kept)


def test_reader_batches_are_the_rows_as_arrow_builds_them():
    """The readers' batches are built a column at a time; Arrow's own row-wise conversion
    (`from_pylist`) is the reference: missing keys null, extra keys ignored, every type kept."""
    import pyarrow as pa

    from shardforge.ingest.readers import spark as R

    rows = [{"_line": '{"id": "a", "text": "naïve 東京"}', "_file": "f.jsonl"},
            {"_file": "f.jsonl", "_reason": "invalid:record_too_large", "_detail": "byte 10", "extra": 1},
            {"_line": "", "_file": None}]
    pages = [{"_rtype": "response", "_file": "w.warc", "id": "x", "http_status": 200, "text": "t" * 5000},
             {"_rtype": "metadata", "_file": "w.warc"}]
    for schema, batch in ((R.LINES, rows), (R.WARC, pages)):
        got = list(R._batches(iter(batch), schema))
        assert pa.Table.from_batches(got).equals(pa.Table.from_batches([pa.RecordBatch.from_pylist(batch, schema)]))
        assert got[0].schema == schema
