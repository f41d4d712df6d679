"""Annotate, then select: the quality groups' quantities kept as `signals` (quality.mode =
"annotate"), and shards re-selected from the curated table with `select.where`, without
running any earlier stage.

The texts are real: translated manual pages in ten languages (tests/data/quality/
multilang.jsonl.gz, made by make_multilang.py). The selection expression below is written
out by hand from the documented defaults of [quality] (README.md), not derived from the code.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardforge.config import QUALITY_GROUPS, ConfigError, QualitySection, load_config
from shardforge.clean.quality import annotate, apply, signal_fields

DATA = Path(__file__).resolve().parent / "data" / "quality" / "multilang.jsonl.gz"
ALL = QualitySection(filters=QUALITY_GROUPS)

# filter mode's defaults, as a selection (a rule rejects above a max_ or below a min_)
DEFAULT_WHERE = " and ".join([
    "signals.gopher_dup_para_frac <= 0.3", "signals.gopher_dup_para_char_frac <= 0.2",
    "signals.gopher_dup_line_frac <= 0.3", "signals.gopher_dup_line_char_frac <= 0.2",
    "signals.gopher_top_2gram_frac <= 0.2", "signals.gopher_top_3gram_frac <= 0.18",
    "signals.gopher_top_4gram_frac <= 0.16", "signals.gopher_dup_5gram_frac <= 0.15",
    "signals.gopher_dup_6gram_frac <= 0.14", "signals.gopher_dup_7gram_frac <= 0.13",
    "signals.gopher_dup_8gram_frac <= 0.12", "signals.gopher_dup_9gram_frac <= 0.11",
    "signals.gopher_dup_10gram_frac <= 0.10",
    "signals.gopher_words between 50 and 100000", "signals.gopher_avg_word_length between 3 and 10",
    "signals.gopher_hash_word_ratio <= 0.1", "signals.gopher_ellipsis_word_ratio <= 0.1",
    "signals.gopher_bullet_lines_ratio <= 0.9", "signals.gopher_ellipsis_lines_ratio <= 0.3",
    "signals.gopher_alpha_words_ratio >= 0.8", "signals.gopher_stop_words >= 2",
    "signals.c4_lorem_ipsum = 0", "signals.c4_curly_bracket = 0", "signals.c4_sentences >= 5",
    "signals.fineweb_line_punct_ratio >= 0.12", "signals.fineweb_short_line_ratio <= 0.67",
    "signals.fineweb_dup_line_char_ratio <= 0.01", "signals.fineweb_newline_word_ratio <= 0.3",
])


def _docs() -> list[dict]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# --- the kernel's quantities ----------------------------------------------------------------

def test_signals_of_a_small_document_counted_by_hand():
    line1, line2 = "The cat sat on the mat and it was happy.", "The dog ran to the park with the ball."
    text = "\n".join([line1, line2, line1, "short line"])           # 40 + 1 + 38 + 1 + 40 + 1 + 10 = 131
    _, new, sig = annotate(pa.array([text]), ALL)
    got = dict(zip(signal_fields(ALL.filters), sig[0]))
    assert new.to_pylist() == ["\n".join([line1, line2, line1])]   # C4 drops the line without end punctuation
    want = {
        "gopher_dup_line_frac": 1 / 4, "gopher_dup_line_char_frac": 40 / 131,
        "gopher_dup_para_frac": 0.0,
        # words: 10 + 9 + 10 + 2 with letters, plus three "." that are symbols only
        "gopher_words": 31, "gopher_avg_word_length": (30 + 29 + 30 + 9) / 31,
        "gopher_alpha_words_ratio": 31 / 34, "gopher_stop_words": 4,          # the, to, and, with
        "gopher_hash_word_ratio": 0.0, "gopher_bullet_lines_ratio": 0.0,
        "c4_sentences": 3, "c4_curly_bracket": 0, "c4_lorem_ipsum": 0,
        # FineWeb reads C4's text: three lines, all ending in ".", none of 30 characters or fewer
        "fineweb_line_punct_ratio": 1.0, "fineweb_short_line_ratio": 0.0,
        "fineweb_dup_line_char_ratio": 40 / (40 + 38 + 40), "fineweb_newline_word_ratio": 2 / 32,
    }
    assert {k: got[k] for k in want} == pytest.approx(want)


def test_annotate_decides_as_filter_mode_and_the_signals_reproduce_each_decision():
    texts = pa.array([d["text"] for d in _docs()])
    configs = [ALL, QualitySection(filters=QUALITY_GROUPS, c4_terminal_punct=False, gopher_min_stop_words=1),
               QualitySection(filters=("gopher_repetition", "fineweb"))]
    for q in configs:
        want, want_texts = apply(texts, q)
        got, got_texts, sig = annotate(texts, q)
        assert got == want
        if "c4" in q.filters:                  # annotate applies C4's line removal to every document
            kept = [i for i, r in enumerate(want) if r is None]
            assert [got_texts[i].as_py() for i in kept] == [want_texts[i].as_py() for i in kept]
        assert sig.shape == (len(texts), len(signal_fields(q.filters)))
    # the documented thresholds, applied to the signals by hand, keep what filter mode keeps
    want, _ = apply(texts, ALL)
    _, _, sig = annotate(texts, ALL)
    s = {name: sig[:, j] for j, name in enumerate(signal_fields(ALL.filters))}
    keep = np.ones(len(texts), dtype=bool)
    for name, hi in [("gopher_dup_para_frac", .3), ("gopher_dup_para_char_frac", .2), ("gopher_dup_line_frac", .3),
                     ("gopher_dup_line_char_frac", .2), ("gopher_top_2gram_frac", .2), ("gopher_top_3gram_frac", .18),
                     ("gopher_top_4gram_frac", .16), ("gopher_dup_5gram_frac", .15), ("gopher_dup_6gram_frac", .14),
                     ("gopher_dup_7gram_frac", .13), ("gopher_dup_8gram_frac", .12), ("gopher_dup_9gram_frac", .11),
                     ("gopher_dup_10gram_frac", .10), ("gopher_hash_word_ratio", .1), ("gopher_ellipsis_word_ratio", .1),
                     ("gopher_bullet_lines_ratio", .9), ("gopher_ellipsis_lines_ratio", .3), ("c4_lorem_ipsum", 0),
                     ("c4_curly_bracket", 0), ("fineweb_short_line_ratio", .67), ("fineweb_dup_line_char_ratio", .01),
                     ("fineweb_newline_word_ratio", .3)]:
        keep &= s[name] <= hi
    for name, lo in [("gopher_words", 50), ("gopher_avg_word_length", 3), ("gopher_alpha_words_ratio", .8),
                     ("gopher_stop_words", 2), ("c4_sentences", 5), ("fineweb_line_punct_ratio", .12)]:
        keep &= s[name] >= lo
    keep &= (s["gopher_words"] <= 100_000) & (s["gopher_avg_word_length"] <= 10)
    assert keep.tolist() == [r is None for r in want]
    assert 0 < keep.sum() < len(texts)                 # the set decides something: some kept, some not


# --- per-language thresholds ----------------------------------------------------------------

GERMAN_STOP = ("der", "die", "und", "in", "den", "von", "zu", "das", "mit", "sich", "des", "auf", "für", "ist", "im")


def test_a_language_override_judges_only_that_languages_documents(spark):
    from shardforge.clean.stage import clean
    from shardforge.config import CleanSection

    docs = _docs()
    df = spark.createDataFrame([(d["id"], d["text"]) for d in docs], "id string, text string").repartition(3)
    cfg = CleanSection(detect_language=True)
    plain = QualitySection(filters=QUALITY_GROUPS)
    german = QualitySection(filters=QUALITY_GROUPS, languages={"de": {"gopher_stop_words": GERMAN_STOP}})

    def outcome(q):
        kept, rejected = clean(df, cfg, q)
        langs = {r["id"]: r["language"] for r in kept.select("id", "language").collect()}
        reasons = {r["id"]: r["reason"] for r in rejected.select("id", "reason").collect()}
        return langs, reasons

    langs0, reasons0 = outcome(plain)
    langs1, reasons1 = outcome(german)
    de_ids = {d["id"] for d in docs if d["lang_hint"] == "de"}
    # with English stop words, German pages fail for stop words; with German ones many pass
    stop_fail_de = {i for i in de_ids if reasons0.get(i) == "filter:gopher_min_stop_words"}
    assert len(stop_fail_de) >= 10
    assert len([i for i in stop_fail_de if i in langs1]) >= 5
    # every document not identified as German is judged exactly as before
    for d in docs:
        if d["id"] not in de_ids:
            assert (d["id"] in langs0, reasons0.get(d["id"])) == (d["id"] in langs1, reasons1.get(d["id"])), d["id"]


def test_language_overrides_are_checked_like_the_section():
    cfg = load_config(None, ["clean.detect_language=true", "quality.languages={de = {gopher_min_stop_words = 3}}"])
    assert cfg.quality.for_language("de").gopher_min_stop_words == 3
    assert cfg.quality.for_language("fr").gopher_min_stop_words == 2
    with pytest.raises(ConfigError, match="quality.languages.de.gopher_min_stop_wrds: unknown key"):
        load_config(None, ["clean.detect_language=true", "quality.languages={de = {gopher_min_stop_wrds = 3}}"])
    with pytest.raises(ConfigError, match="quality.languages.de.gopher_min_stop_words: expected an integer"):
        load_config(None, ["clean.detect_language=true", "quality.languages={de = {gopher_min_stop_words = 'x'}}"])
    with pytest.raises(ConfigError, match="quality.languages.de.filters: cannot be set per language"):
        load_config(None, ["clean.detect_language=true", "quality.languages={de = {filters = ['c4']}}"])
    with pytest.raises(ConfigError, match="quality.languages: per-language thresholds need clean.detect_language"):
        load_config(None, ["clean.detect_language=false", "quality.languages={de = {gopher_min_stop_words = 3}}"])
    with pytest.raises(ConfigError, match="quality.mode: 'drop' is not one of filter, annotate"):
        load_config(None, ["quality.mode=drop"])


# --- the pipeline: annotate, then select at build time -----------------------------------------

def _run(*argv) -> int:
    from shardforge.engine.cli import main

    return main(list(argv))


def _ids(folder: Path) -> set[str]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return {i for s in manifest["shards"] for i in pq.read_table(folder / s["file"], columns=["id"])["id"].to_pylist()}


def _versions(out: Path) -> dict[str, list[str]]:
    return {t.name: sorted(p.name for p in (t / "_delta_log").glob("*.json"))
            for t in sorted(out.iterdir()) if (t / "_delta_log").is_dir()}


COMMON = ["--set", 'pipeline.stages=["ingest", "clean", "redact", "curate", "build-shards"]',
          "--set", 'quality.filters=["gopher_repetition", "gopher_quality", "c4", "fineweb"]',
          "--set", "clean.detect_language=true", "--set", "spark.shuffle_partitions=2"]


@pytest.mark.slow
def test_annotate_then_select_keeps_what_filter_mode_keeps(spark, tmp_path, capsys):
    filtered, annotated = tmp_path / "filter", tmp_path / "annotate"
    assert _run("pipeline", "--input", str(DATA), "--output", str(filtered), *COMMON) == 0
    assert _run("pipeline", "--input", str(DATA), "--output", str(annotated), *COMMON,
                "--set", "quality.mode=annotate") == 0
    want = _ids(filtered / "shards")
    everything = _ids(annotated / "shards")
    assert 0 < len(want) < len(everything) == 300           # annotate drops nothing for quality
    report = json.loads((annotated / "report.json").read_text())
    fails = report["quality_fail"]
    assert fails["none"] == len(want) and sum(fails.values()) == 300

    # the curated table holds the signals; select with filter mode's thresholds
    versions = _versions(annotated)
    capsys.readouterr()
    selected = tmp_path / "selected"
    assert _run("build-shards", "--input", str(annotated / "curated"), "--output", str(selected),
                "--set", f'select.where="{DEFAULT_WHERE}"') == 0
    assert _ids(selected) == want
    manifest = json.loads((selected / "manifest.json").read_text())
    assert manifest["source"]["select"] == {"where": DEFAULT_WHERE, "selected": len(want),
                                            "not_selected": 300 - len(want)}
    assert manifest["config"]["select"]["where"] == DEFAULT_WHERE
    sel_report = json.loads((selected / "_report" / "report.json").read_text())
    assert sel_report["select"]["selected"] == len(want)
    # `quality_fail is null` is the same selection
    by_fail = tmp_path / "by_fail"
    assert _run("build-shards", "--input", str(annotated / "curated"), "--output", str(by_fail),
                "--set", 'select.where="quality_fail is null"') == 0
    assert _ids(by_fail) == want
    again = tmp_path / "again"
    assert _run("build-shards", "--input", str(annotated / "curated"), "--output", str(again),
                "--set", f'select.where="{DEFAULT_WHERE}"') == 0
    assert json.loads((again / "manifest.json").read_text())["build_id"] == manifest["build_id"]   # same bytes

    # a stricter selection: a subset, and nothing upstream changes (no new Delta version)
    stricter = tmp_path / "stricter"
    assert _run("build-shards", "--input", str(annotated / "curated"), "--output", str(stricter),
                "--set", f'select.where="{DEFAULT_WHERE} and language = \'en\' and signals.gopher_stop_words >= 4"') == 0
    strict_ids = _ids(stricter)
    assert strict_ids < want and strict_ids
    manifest = json.loads((stricter / "manifest.json").read_text())
    assert {x for s in manifest["shards"] for x in pq.read_table(stricter / s["file"])["language"].to_pylist()} == {"en"}
    assert _versions(annotated) == versions


@pytest.mark.parametrize("where, named", [
    ("signals.nope > 1", "nope"),
    ("no_such_column = 1", "no_such_column"),
    ("quality_fail is", "quality_fail is"),
    ("signals.c4_sentences + 1", "not boolean"),
])
def test_a_bad_selection_exits_2_naming_it_before_any_shard(spark, tmp_path, capsys, where, named):
    table = tmp_path / "table"
    spark.createDataFrame([("a", "some text", 3.0, None)],
                          "id string, text string, c4_sentences double, quality_fail string") \
        .selectExpr("id", "text", "named_struct('c4_sentences', c4_sentences) as signals", "quality_fail") \
        .write.format("delta").save(str(table))
    out = tmp_path / "shards"
    capsys.readouterr()
    assert _run("build-shards", "--input", str(table), "--output", str(out), "--set", f'select.where="{where}"') == 2
    err = capsys.readouterr().err
    assert "select.where" in err and named in err
    assert not (out / "manifest.json").exists() and not list(out.glob("b-*"))
