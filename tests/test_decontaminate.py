"""The decontaminate stage: benchmark items found in documents by word n-gram overlap.

Expected values come from how the texts below are written (counted by hand in the comments)
or from `reference`, a plain-Python set-of-word-tuples implementation written from the rule
(lowercase; words are runs of Unicode letters, marks and digits; n-grams of 13; items of 8 to
12 words looked for whole), sharing no code with the stage."""
from __future__ import annotations

import gzip
import json
import random
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardforge.config import Benchmark, ConfigError, DecontaminateSection, load_config
from shardforge.decontaminate.ngrams import build_index, ngram_texts, scan, words

# 19 words: 7 distinct 13-grams
ITEM = "The committee decided that the annual harvest festival would be moved to the first weekend of October this year."
ITEM_B = "Which river flows through the capital city and empties into the northern sea near the old harbour?"  # 17: 5
SHORT9 = "Name the largest planet in our solar system today."     # 9 words: looked for whole
SHORT5 = "What is two plus two?"                                   # 5 words: too short, not looked for

DOCS = {
    "verbatim": ITEM,                                                           # 7 n-grams
    "recased": "THE COMMITTEE decided—that the Annual harvest-festival would be moved, to the FIRST "
               "weekend of October; this year!!",                               # 7 n-grams
    # one 13-word window: "that the annual ... weekend of" ("heard" before it, "next" after it)
    "window": "Local news from the valley. Residents heard that the annual harvest festival would be "
              "moved to the first weekend of next month, a rare change for the town.",
    # 12 words only: "the annual ... weekend of" ("said" before it, "next" after it)
    "twelve": "Officials said the annual harvest festival would be moved to the first weekend of next month.",
    "clean": "A recipe for bread: flour, water, salt and yeast, kneaded and left to rise overnight.",
    "short_item": "Quiz time! Name the LARGEST planet in our solar-system today, and explain why.",   # 1 (whole 9-gram)
    "too_short": "Question: what is two plus two? Everyone knows.",             # 0 (5 words: not indexed)
    "both": ITEM + " " + ITEM_B,                                                # 7 of a, 5 of b
    "only_b": "Trivia: " + ITEM_B,                                              # 5 of b
    "empty": "",
    "null": None,
}
COUNTS = {"verbatim": 7, "recased": 7, "window": 1, "twelve": 0, "clean": 0, "short_item": 1, "too_short": 0,
          "both": 12, "only_b": 5, "empty": 0, "null": 0}
FIRST = {"verbatim": "a", "recased": "a", "window": "a", "short_item": "a", "both": "a", "only_b": "b"}


def reference_words(text: str | None) -> list[str]:
    out, cur = [], []
    for ch in (text or "").lower() + " ":
        if unicodedata.category(ch)[0] in "LMN":
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    return out


def reference(benchmarks: list[tuple[str, list[str]]], docs: list, n: int = 13, min_n: int = 8):
    """Per document: (distinct benchmark n-grams found, name of the first benchmark matched)."""
    index: dict[tuple, int] = {}
    for b, (_name, items) in enumerate(benchmarks):
        for item in items:
            w = reference_words(item)
            grams = [tuple(w[i:i + n]) for i in range(len(w) - n + 1)] if len(w) >= n else (
                [tuple(w)] if len(w) >= min_n else [])
            for g in grams:
                index[g] = min(index.get(g, b), b)
    lengths = {len(g) for g in index}
    out = []
    for doc in docs:
        w = reference_words(doc)
        found = {tuple(w[i:i + k]) for k in lengths for i in range(len(w) - k + 1)} & index.keys()
        out.append((len(found), benchmarks[min(index[g] for g in found)][0] if found else None))
    return out


def _index(a=(ITEM, SHORT9, SHORT5), b=(ITEM_B,), n=13, min_n=8):
    return build_index([("a", pa.array(list(a), pa.large_string())), ("b", pa.array(list(b), pa.large_string()))],
                       n, min_n)


# -- the kernel, without Spark ---------------------------------------------------------------

def test_normalisation_lowercases_and_folds_punctuation_and_whitespace():
    w = words(pa.array(["Don't  STOP!", None, "", "Été—naïve_x 3.14\tok", "ab"]))
    assert w.text.to_pylist() == ["don", "t", "stop", "été", "naïve", "x", "3", "14", "ok", "ab"]
    assert w.doc.tolist() == [0, 0, 0, 3, 3, 3, 3, 3, 3, 4]
    # the same words hash the same wherever they stand
    assert w.hashes[0] != w.hashes[1] and len(set(w.hashes[[3, 4]].tolist())) == 2
    again = words(pa.array(["DON"]))
    assert again.hashes[0] == w.hashes[0]


def test_planted_item_is_found_verbatim_recased_and_as_a_window_but_not_in_twelve_words():
    names = list(DOCS)
    s = scan(pa.array([DOCS[k] for k in names], pa.large_string()), _index())
    assert dict(zip(names, s.counts.tolist())) == COUNTS
    assert [r[0] for r in reference([("a", [ITEM, SHORT9, SHORT5]), ("b", [ITEM_B])], list(DOCS.values()))] \
        == [COUNTS[k] for k in names]
    # the bit set: a = 1, b = 2
    masks = dict(zip(names, s.masks.tolist()))
    assert {k: v for k, v in masks.items() if v} == {"verbatim": 1, "recased": 1, "window": 1, "short_item": 1,
                                                     "both": 3, "only_b": 2}
    # each document's hits are its distinct n-gram hashes, in unsigned order
    hits = s.hits.to_pylist()
    assert [len(h) for h in hits] == s.counts.tolist()
    assert all(h == sorted(set(h), key=lambda x: x % 2**64) for h in hits)


def test_ngrams_never_span_two_texts():
    """An item cut in two consecutive texts (no separator at the cut) is in neither."""
    w = reference_words(ITEM)
    cut = [" ".join(w[:8]), " ".join(w[8:]), " ".join(w[:13]), "x"]        # 8 + 11 words, then 13
    assert words(pa.array(cut[:2])).text.to_pylist() == w
    assert scan(pa.array(cut), _index()).counts.tolist() == [0, 0, 1, 0]


def test_index_stats_and_lengths():
    idx = _index()
    assert idx.lengths == (9, 13)                      # 13, and the 9-word item whole
    assert idx.stats == {"a": {"items": 3, "items_too_short": 1, "ngrams": 7 + 1},
                         "b": {"items": 1, "items_too_short": 0, "ngrams": 5}}
    assert len(idx.hashes) == 13 and np.all(np.diff(idx.hashes) > 0)
    # the bounds: 8 words is looked for whole, 7 is too short, 12 whole, 13 is one 13-gram
    sized = build_index([("s", pa.array([" ".join(f"v{i}" for i in range(k)) for k in (7, 8, 12, 13)]))], 13, 8)
    assert sized.lengths == (8, 12, 13) and sized.stats["s"] == {"items": 4, "items_too_short": 1, "ngrams": 3}
    # shared n-grams carry both benchmarks' bits
    both = build_index([("a", pa.array([ITEM])), ("b", pa.array([ITEM + " Again."]))], 13, 8)
    assert len(both.hashes) == 8 and sorted(both.masks.tolist()) == [2] + [3] * 7


def test_min_ngram_equal_to_ngram_looks_for_no_short_item():
    idx = _index(min_n=13)
    assert idx.lengths == (13,) and idx.stats["a"] == {"items": 3, "items_too_short": 2, "ngrams": 7}
    assert scan(pa.array([DOCS["short_item"]]), idx).counts.tolist() == [0]


def test_ngram_texts_are_the_normalised_words():
    idx = _index()
    s = scan(pa.array([DOCS["window"], DOCS["short_item"]]), idx)
    wanted = {int(h) for h in np.array(s.hits.flatten().to_pylist(), np.int64).view(np.uint64)}
    texts = ngram_texts([("a", pa.array([ITEM, SHORT9, SHORT5]))], 13, 8, wanted)
    assert sorted(texts.values()) == ["name the largest planet in our solar system today",
                                      "that the annual harvest festival would be moved to the first weekend of"]


def test_scan_agrees_with_the_reference_on_a_random_corpus():
    """Documents of random words with benchmark windows of 10 to 15 words planted, recased and
    re-punctuated at random: counts and first benchmarks equal the set-of-tuples reference."""
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(300)] + ["Ärger", "naïve", "東京", "x2", "ﬁne"]
    bench = {name: [" ".join(rng.choice(vocab) for _ in range(rng.randint(5, 30))) for _ in range(40)]
             for name in ("alpha", "beta", "gamma")}
    bench["beta"] += bench["alpha"][:3]                # shared items: both bits
    docs = []
    for _ in range(400):
        w = [rng.choice(vocab) for _ in range(rng.randint(0, 120))]
        for _ in range(rng.randint(0, 2)):
            item = reference_words(rng.choice(rng.choice(list(bench.values()))))
            k = min(len(item), rng.randint(10, 15))
            at = rng.randint(0, len(item) - k)
            w[len(w) // 2:len(w) // 2] = [x.upper() if rng.random() < 0.3 else x for x in item[at:at + k]]
        seps = [rng.choice([" ", "  ", ", ", "—", "\n", " (", ") ", "...", "'"]) for _ in w]
        docs.append("".join(a + b for a, b in zip(w, seps)))
    benchmarks = [(k, v) for k, v in bench.items()]
    idx = build_index([(k, pa.array(v)) for k, v in benchmarks], 13, 8)
    s = scan(pa.array(docs), idx)
    ref = reference(benchmarks, docs)
    names = [k for k, _ in benchmarks]
    first = [names[int(m & -m).bit_length() - 1] if m else None for m in s.masks.tolist()]
    assert list(zip(s.counts.tolist(), first)) == ref
    assert sum(1 for c, _ in ref if c) > 100          # the planting worked: many contaminated documents


def test_invalid_utf8_does_not_stop_the_scan():
    bad = pa.array([b"\xff\xfe " + ITEM.encode(), ITEM.encode()], pa.binary()).cast(pa.string(), safe=False)
    assert scan(bad, _index()).counts.tolist() == [7, 7]


# -- config and errors -----------------------------------------------------------------------

def test_config_reads_a_list_of_benchmark_tables(tmp_path):
    conf = tmp_path / "c.toml"
    conf.write_text('[decontaminate]\nngram = 10\nbenchmarks = [{ name = "mmlu", path = "m.jsonl" },\n'
                    '  { name = "gsm8k", path = "g.parquet", text_field = "question" }]\n')
    cfg = load_config(conf)
    assert cfg.decontaminate == DecontaminateSection(
        benchmarks=(Benchmark("mmlu", "m.jsonl"), Benchmark("gsm8k", "g.parquet", "question")), ngram=10)
    assert cfg.to_dict()["decontaminate"]["benchmarks"][1] == {"name": "gsm8k", "path": "g.parquet",
                                                               "text_field": "question"}


@pytest.mark.parametrize("override, message", [
    ('decontaminate.benchmarks=[{name="a", path="x", txt="t"}]', "decontaminate.benchmarks[0].txt: unknown key"),
    ('decontaminate.benchmarks=[{name="a b", path="x"}]', "decontaminate.benchmarks[0].name: a name of letters"),
    ('decontaminate.benchmarks=[{name="a", path="x"}, {name="a", path="y"}]',
     "decontaminate.benchmarks[1].name: 'a' is given twice"),
    ('decontaminate.benchmarks=[{name="a"}]', "decontaminate.benchmarks[0].path: no file given"),
    ('decontaminate.benchmarks=["a.jsonl"]', "decontaminate.benchmarks[0]: expected a table"),
    ("decontaminate.min_ngram=14", "decontaminate.min_ngram: must be between 1 and decontaminate.ngram (13)"),
    ("decontaminate.ngram=0", "decontaminate.ngram: must be >= 1"),
])
def test_bad_decontaminate_config_names_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert str(err.value).startswith(message), str(err.value)


def _write_jsonl(path: Path, texts, field="text", gz=False) -> str:
    data = "".join(json.dumps({field: t, "id": i}) + "\n" for i, t in enumerate(texts))
    if gz:
        path.write_bytes(gzip.compress(data.encode()))
    else:
        path.write_text(data)
    return str(path)


def test_benchmark_files_jsonl_gz_and_parquet_folder_read_alike(tmp_path):
    from shardforge.decontaminate.stage import benchmark_items

    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(pa.table({"question": [ITEM, SHORT9]}), folder / "part-0.parquet")
    pq.write_table(pa.table({"question": [SHORT5]}), folder / "part-1.parquet")
    cfg = DecontaminateSection(benchmarks=(
        Benchmark("j", _write_jsonl(tmp_path / "a.jsonl.gz", [ITEM, SHORT9, SHORT5], gz=True)),
        Benchmark("p", str(folder), "question")))
    got = benchmark_items(cfg)
    assert [(n, sorted(a.to_pylist())) for n, a in got] == [("j", sorted([ITEM, SHORT9, SHORT5])),
                                                            ("p", sorted([ITEM, SHORT9, SHORT5]))]


@pytest.mark.parametrize("make, message", [
    (lambda p: str(p / "missing.jsonl"), "decontaminate.benchmarks[0].path: {p}/missing.jsonl: no such file"),
    (lambda p: _write_jsonl(p / "b.jsonl", [ITEM], field="question"),
     "decontaminate.benchmarks[0].text_field: {p}/b.jsonl line 1: no string field 'text'"),
    (lambda p: (p / "c.jsonl").write_text('{"text": "ok"}\n{broken\n') and str(p / "c.jsonl"),
     "decontaminate.benchmarks[0].path: {p}/c.jsonl line 2: not valid JSON"),
    (lambda p: (p / "d.jsonl.gz").write_bytes(b"not gzip") and str(p / "d.jsonl.gz"),
     "decontaminate.benchmarks[0].path: cannot read {p}/d.jsonl.gz"),
    (lambda p: (p / "e.csv").write_text("text\nx\n") and str(p / "e.csv"),
     "decontaminate.benchmarks[0].path: {p}/e.csv: not a benchmark file"),
    (lambda p: (p / "g.jsonl").write_text("\n") and str(p / "g.jsonl"),
     "decontaminate.benchmarks[0].path: {p}/g.jsonl holds no benchmark items"),
    (lambda p: pq.write_table(pa.table({"q": [1]}), p / "f.parquet") or str(p / "f.parquet"),
     "decontaminate.benchmarks[0].text_field: {p}/f.parquet has no column 'text'"),
])
def test_unreadable_benchmarks_are_config_errors_naming_the_file(tmp_path, make, message):
    from shardforge.decontaminate.stage import load_index

    path = make(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_index(DecontaminateSection(benchmarks=(Benchmark("x", path),)))
    assert str(err.value).startswith(message.format(p=tmp_path)), str(err.value)


def test_the_fingerprint_covers_benchmark_content_not_paths(tmp_path):
    from shardforge.engine.runner import config_part
    from shardforge.stages import REGISTRY

    spec = REGISTRY["decontaminate"]
    a = _write_jsonl(tmp_path / "a.jsonl", [ITEM])
    moved = _write_jsonl(tmp_path / "moved.jsonl", [ITEM])
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(pa.table({"text": [ITEM_B]}), folder / "part-0.parquet")

    def part(*paths, **kw):
        benches = tuple(Benchmark(f"b{i}", p) for i, p in enumerate(paths))
        cfg = load_config(None).replace(decontaminate=DecontaminateSection(benchmarks=benches, **kw))
        return config_part(cfg, spec)

    first = part(a, str(folder))
    assert part(moved, str(folder)) == first                       # same content elsewhere
    assert part(a, str(folder), ngram=12) != first                 # settings count
    _write_jsonl(tmp_path / "a.jsonl", [ITEM, SHORT9])
    assert part(a, str(folder)) != first                           # content counts
    _write_jsonl(tmp_path / "a.jsonl", [ITEM])
    pq.write_table(pa.table({"text": [ITEM]}), folder / "part-1.parquet")
    assert part(a, str(folder)) != first                           # a new file in the folder counts


# -- the stage on Spark ------------------------------------------------------------------------

def _frame(spark, docs=DOCS, partitions=3):
    from shardforge.schemas import DOCUMENT

    rows = [{"id": k, "text": v, "source": "s", "url": None, "kind": "document", "meta": None}
            for k, v in docs.items()]
    return spark.createDataFrame(rows, DOCUMENT).repartition(partitions)


def _run(spark, index, annotate=False, partitions=3):
    from shardforge.decontaminate.stage import decontaminate

    res = decontaminate(_frame(spark, partitions=partitions), index, annotate=annotate)
    kept = sorted((r.asDict(recursive=True) for r in res.kept.collect()), key=lambda r: r["id"])
    rejected = sorted((r.id, r.reason, r.detail) for r in res.rejected.collect())
    extras = sorted(tuple(r) for r in res.extras["contamination"].collect())
    return kept, rejected, extras


def test_stage_rejects_contaminated_documents_naming_the_first_benchmark(spark):
    kept, rejected, extras = _run(spark, _index())
    contaminated = {k for k, c in COUNTS.items() if c}
    assert sorted(r["id"] for r in kept) == sorted(set(DOCS) - contaminated)
    assert rejected == sorted((k, f"contaminated:{FIRST[k]}", f"{COUNTS[k]} benchmark n-grams") for k in contaminated)
    assert len(kept) + len(rejected) == len(DOCS)
    assert "signals" not in kept[0]
    assert [(e[0], e[1], e[3], len(e[4])) for e in extras] == sorted(
        (k, FIRST[k], COUNTS[k], COUNTS[k]) for k in contaminated)
    # the priority is config order: with b first, the document holding both is b's
    idx = build_index([("b", pa.array([ITEM_B])), ("a", pa.array([ITEM, SHORT9, SHORT5]))], 13, 8)
    _, rejected, _ = _run(spark, idx)
    assert dict((i, r) for i, r, _ in rejected)["both"] == "contaminated:b"


@pytest.mark.slow
def test_stage_output_does_not_depend_on_partitioning(spark):
    idx = _index()
    one = _run(spark, idx, partitions=1)
    prev = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
    try:
        many = _run(spark, idx, partitions=5)
        many_annotated = _run(spark, idx, annotate=True, partitions=7)
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", prev)
    assert many == one
    assert many_annotated == _run(spark, idx, annotate=True, partitions=1)


def test_annotate_mode_keeps_every_document_with_signals(spark):
    kept, rejected, extras = _run(spark, _index(), annotate=True)
    assert rejected == [] and len(kept) == len(DOCS)
    signals = {r["id"]: r["signals"] for r in kept}
    assert signals == {k: {"contaminated_ngrams": COUNTS[k], "contaminated_benchmark": FIRST.get(k)} for k in DOCS}
    assert len(extras) == sum(1 for c in COUNTS.values() if c)


def test_annotate_mode_adds_fields_to_an_existing_signals_struct(spark):
    from pyspark.sql import functions as F

    from shardforge.decontaminate.stage import decontaminate
    from shardforge.stage import with_signals

    df = with_signals(_frame(spark), {"quality_words": F.lit(3)})
    kept = decontaminate(df, _index(), annotate=True).kept
    row = {r.id: r.signals.asDict() for r in kept.collect()}["window"]
    assert row == {"quality_words": 3, "contaminated_ngrams": 1, "contaminated_benchmark": "a"}


# -- through the pipeline CLI ----------------------------------------------------------------------

@pytest.mark.slow
def test_pipeline_cli_decontaminates_and_reports(spark, tmp_path, capsys):
    from shardforge.engine.cli import main

    inp = tmp_path / "docs.jsonl"
    inp.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in DOCS.items() if v))
    bench_a = _write_jsonl(tmp_path / "a.jsonl", [ITEM, SHORT9, SHORT5])
    folder = tmp_path / "b"
    folder.mkdir()
    pq.write_table(pa.table({"question": [ITEM_B]}), folder / "part-0.parquet")
    out = tmp_path / "out"
    benches = f'[{{name="a", path="{bench_a}"}}, {{name="b", path="{folder}", text_field="question"}}]'
    args = ["pipeline", "--input", str(inp), "--output", str(out), "--set", "spark.shuffle_partitions=2",
            "--set", 'pipeline.stages=["ingest","clean","decontaminate","redact"]',
            "--set", "clean.detect_language=false", "--set", f"decontaminate.benchmarks={benches}"]
    assert main(args) == 0
    capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    stage = {s["name"]: s for s in report["stages"]}["decontaminate"]
    present = {k for k, v in DOCS.items() if v}
    contaminated = {k for k, c in COUNTS.items() if c}
    assert stage["rows_in"] == len(present) == stage["kept"] + stage["rejected"]
    assert stage["rejects_by_reason"] == {"contaminated:a": 5, "contaminated:b": 1}
    section = report["decontamination"]
    assert [(b["name"], b["items"], b["items_too_short"], b["ngrams"], b["documents"], b["documents_matching"],
             b["ngrams_matched"]) for b in section["benchmarks"]] == [("a", 3, 1, 8, 5, 5, 8), ("b", 1, 0, 5, 1, 2, 5)]
    assert section["contaminated_documents"] == len(contaminated) and section["mode"] == "filter"
    top = section["top_ngrams"]
    assert len(top) == 10 and [t["documents"] for t in top] == [4] + [3] * 6 + [2] * 3
    # the 13-gram of the window document is in all four documents holding the item
    assert top[0] == {"ngram": "that the annual harvest festival would be moved to the first weekend of",
                      "documents": 4, "benchmarks": ["a"]}
    assert {t["ngram"] for t in top[7:]} <= {" ".join(reference_words(ITEM_B)[i:i + 13]) for i in range(5)}
    html = (out / "report.html").read_text()
    assert 'id="decontamination"' in html and top[0]["ngram"] in html
    rejects = spark.read.format("delta").load(str(out / "rejects")).filter("stage = 'decontaminate'")
    assert sorted((r.id, r.reason) for r in rejects.collect()) == sorted((k, f"contaminated:{FIRST[k]}")
                                                                         for k in contaminated)
    kept = {r.id for r in spark.read.format("delta").load(str(out / "redact")).collect()}
    assert kept == present - contaminated


def test_cli_exits_2_naming_the_missing_benchmark_or_key(tmp_path, capsys):
    from shardforge.engine.cli import main

    inp = tmp_path / "docs.jsonl"
    inp.write_text(json.dumps({"id": "x", "text": ITEM}) + "\n")
    base = ["pipeline", "--input", str(inp), "--output", str(tmp_path / "out"),
            "--set", 'pipeline.stages=["clean","decontaminate"]']
    assert main(base) == 2
    assert "decontaminate.benchmarks: the decontaminate stage needs at least one benchmark" in capsys.readouterr().err
    missing = tmp_path / "nope.jsonl"
    assert main(base + ["--set", f'decontaminate.benchmarks=[{{name="x", path="{missing}"}}]']) == 2
    assert f"decontaminate.benchmarks[0].path: {missing}: no such file" in capsys.readouterr().err
    assert not (tmp_path / "out" / "_run").exists()                # stopped before any stage ran
