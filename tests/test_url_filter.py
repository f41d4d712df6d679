"""URL filtering in the clean stage ([url_filter], shardforge.clean.urls): block lists in UT1's
layout written here by hand, and every expected label written by hand beside its URL (from
the lists below and the rules in the README, not from the code under test)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from shardforge.clean.urls import BlocklistError, UrlFilter
from shardforge.config import ConfigError, UrlFilterSection, load_config

ADULT_DOMAINS = """# UT1 adult, a few entries
example.com
www.casino-like.net

.dotted.org
10.1.2.3
shared.info
"""
ADULT_URLS = """# pages and folders
geocities.com/bad/page.html
www.geocities.com/dir/
whole.site.net
"""
GAMBLING_DOMAINS = "casino.com\nshared.info\nblog.host.net\n"

# (url, label with blocklists=[<ut1>] (categories sorted: adult, gambling), banned_words=["porn"],
#  soft_banned_words=["hot", "girls", "live"], soft_word_threshold=2)
CASES = [
    ("http://example.com/", "adult"),                          # a blocked domain
    ("https://video.example.com/watch?v=1", "adult"),          # its subdomain
    ("http://a.b.example.com:8080/x", "adult"),                # deeper, with a port
    ("HTTP://WWW.EXAMPLE.COM/Index.html", "adult"),            # case and www.
    ("http://user:pw@example.com./", "adult"),                 # user info, trailing dot
    ("example.com/no/scheme", "adult"),                        # no scheme
    ("http://notblocked-example.com/", None),                  # look-alikes
    ("http://notexample.com/", None),
    ("http://example.com.evil.org/", None),
    ("http://evil.org/?next=example.com", None),               # the domain in the query only
    ("http://example.co/", None),
    ("http://casino-like.net/", "adult"),                      # listed as www.casino-like.net
    ("https://www.casino-like.net/a", "adult"),
    ("https://live.casino-like.net/a", "adult"),
    ("http://x.dotted.org/", "adult"),                         # listed as .dotted.org
    ("http://10.1.2.3/admin", "adult"),                        # an IP address, as listed
    ("http://5.10.1.2.3/", None),                              # not a subdomain of an IP
    ("http://geocities.com/bad/page.html", "adult"),           # a blocked full URL
    ("https://www.geocities.com/bad/page.html#top", "adult"),  # www., fragment
    ("http://geocities.com/bad/page.html?id=7", "adult"),
    ("http://geocities.com/bad/page.htmlx", None),
    ("http://geocities.com/bad/other.html", None),
    ("http://geocities.com/", None),
    ("http://geocities.com/dir/sub/file.html", "adult"),       # under a listed folder
    ("http://geocities.com/dir", "adult"),
    ("http://geocities.com/directory/file.html", None),
    ("http://fr.geocities.com/bad/page.html", None),           # url entries name their host only
    ("http://whole.site.net", "adult"),                        # a urls entry without a path
    ("http://whole.site.net/any/page?x=1", "adult"),
    ("http://sub.whole.site.net/", None),
    ("http://casino.com/", "gambling"),
    ("http://shared.info/", "adult"),                          # in both: the first category
    ("http://blog.host.net/", "gambling"),                     # a listed subdomain
    ("http://host.net/", None),                                # does not block its parent
    ("http://other.host.net/", None),
    ("http://x.org/free-PORN-videos", "banned_word"),          # a token, any case
    ("http://porn.x.org/", "banned_word"),
    ("http://x.org/pornography", None),                        # not a token
    ("http://x.org/hot/girls", "soft_banned_words"),           # two distinct soft words
    ("http://x.org/hot-hot-hot", None),                        # one, three times
    ("http://x.org/live/hot/girls", "soft_banned_words"),
    ("http://example.com/porn", "adult"),                      # categories before words
    ("http://wikipedia.org/wiki/Blocklist", None),
    ("", None),
    (None, None),
]


def _ut1(root: Path) -> Path:
    """A UT1 tree: blacklists/<category>/{domains,urls,usage} and a top-level README."""
    top = root / "blacklists"
    (top / "adult").mkdir(parents=True)
    (top / "gambling").mkdir()
    (top / "adult" / "domains").write_text(ADULT_DOMAINS)
    (top / "adult" / "urls").write_text(ADULT_URLS)
    (top / "adult" / "usage").write_text("black\n")
    (top / "gambling" / "domains").write_text(GAMBLING_DOMAINS)   # no urls file: allowed
    (top / "README").write_text("UT1 blacklists\n")
    return top


def _filter(top: Path, lists=None) -> UrlFilter:
    return UrlFilter.build([str(p) for p in (lists or [top])], banned_words=("porn",),
                           soft_banned_words=("hot", "girls", "live"), soft_word_threshold=2)


def test_labels_match_the_hand_labelled_urls(tmp_path):
    f = _filter(_ut1(tmp_path))
    assert f.categories == ("adult", "gambling")
    got = f.labels(pa.array([u for u, _ in CASES], pa.string()))
    assert list(zip([u for u, _ in CASES], got)) == CASES
    # batching does not matter: one URL at a time gives the same labels
    assert [f.labels(pa.array([u], pa.string()))[0] for u, _ in CASES] == [want for _, want in CASES]


def test_category_folders_given_one_by_one_keep_their_order(tmp_path):
    top = _ut1(tmp_path)
    f = _filter(top, [top / "gambling", top / "adult"])
    assert f.categories == ("gambling", "adult")
    assert f.labels(pa.array(["http://shared.info/", "http://example.com/", "http://casino.com/"])) == [
        "gambling", "adult", "gambling"]


def test_the_lists_travel_compactly_and_are_rebuilt_once(tmp_path):
    import pickle

    from shardforge.clean import urls

    f = _filter(_ut1(tmp_path))
    g = pickle.loads(pickle.dumps(f))
    assert g == f and len(pickle.dumps(f)) < 2_000
    urls._TABLES.clear()
    assert g.labels(pa.array(["http://casino.com/"])) == ["gambling"]
    tables = urls._TABLES[f.digest]
    assert f.labels(pa.array(["http://example.com/"])) == ["adult"] and urls._TABLES[f.digest] is tables


def test_bad_block_lists_and_words_are_errors_naming_them(tmp_path):
    top = _ut1(tmp_path)
    with pytest.raises(BlocklistError, match="nowhere"):
        UrlFilter.build([str(tmp_path / "nowhere")])
    (top / "empty").mkdir()
    with pytest.raises(BlocklistError, match=r"blacklists/empty'.*neither"):
        UrlFilter.build([str(top)])
    with pytest.raises(BlocklistError, match="neither"):
        UrlFilter.build([str(top / "empty")])
    with pytest.raises(ConfigError, match=r"url_filter.banned_words\[1\]"):
        load_config(None, ['url_filter.banned_words=["porn", "x-rated"]'])
    with pytest.raises(ConfigError, match="url_filter.soft_word_threshold"):
        load_config(None, ["url_filter.soft_word_threshold=0"])
    assert UrlFilter.from_config(UrlFilterSection()) is None


def test_the_clean_fingerprint_covers_the_lists_content_not_their_place(tmp_path):
    from shardforge.engine.runner import config_part
    from shardforge.stages import REGISTRY

    def part(top):
        return config_part(load_config(None, [f'url_filter.blocklists=["{top}"]']), REGISTRY["clean"])

    a = part(_ut1(tmp_path / "a"))
    assert a == part(_ut1(tmp_path / "b"))                         # same content elsewhere
    (tmp_path / "b" / "blacklists" / "gambling" / "domains").write_text(GAMBLING_DOMAINS + "dice.com\n")
    assert part(tmp_path / "b" / "blacklists") != a                # a list changed
    shutil.move(tmp_path / "a" / "blacklists" / "gambling", tmp_path / "a" / "blacklists" / "betting")
    assert part(tmp_path / "a" / "blacklists") != a                # a category renamed
    cat = tmp_path / "c" / "adult"                                  # a category folder given itself
    shutil.copytree(tmp_path / "b" / "blacklists" / "adult", cat)
    one = part(cat)
    shutil.move(cat, tmp_path / "c" / "porn")
    assert part(tmp_path / "c" / "porn") != one


# -- in the clean stage (Spark) --------------------------------------------------------------
pyspark = pytest.importorskip("pyspark")

PROSE = "The committee met on Tuesday to discuss the budget for the coming year in detail."


def _doc(i, url, text=PROSE):
    return {"id": f"d{i}", "text": text, "source": "test", "url": url, "kind": "document", "meta": None,
            "image": None, "image_width": None, "image_height": None}


def _rows():
    rows = [_doc(i, u) for i, (u, _) in enumerate(CASES)]
    rows.append(_doc(len(rows), "http://example.com/short", text="tiny"))   # fails min_words too
    rows.append(_doc(len(rows), "http://fine.org/short", text="tiny"))
    return rows


def _expected_reasons():
    want = {f"d{i}": label for i, (_, label) in enumerate(CASES) if label is not None}
    reasons = {k: {"banned_word": "filter:url_banned_word", "soft_banned_words": "filter:url_soft_banned_words"}.get(
        v, f"filter:url_blocklist:{v}") for k, v in want.items()}
    n = len(CASES)
    return {**reasons, f"d{n}": "filter:url_blocklist:adult", f"d{n + 1}": "filter:min_words"}


def test_clean_rejects_blocked_urls_first_and_accounts(spark, tmp_path):
    from shardforge.clean.stage import clean
    from shardforge.config import CleanSection, QualitySection
    from shardforge.schemas import DOCUMENT

    f = _filter(_ut1(tmp_path))
    rows = _rows()
    df = spark.createDataFrame(rows, DOCUMENT)
    results = []
    for parts in (1, 5):
        res = clean(df.repartition(parts), CleanSection(min_words=3), QualitySection(), f)
        kept = sorted(map(tuple, res.kept.collect()))
        rejected = {r["id"]: r["reason"] for r in res.rejected.collect()}
        assert len(kept) + len(rejected) == len(rows)
        assert "signals" not in res.kept.columns
        results.append((kept, rejected))
    assert results[0] == results[1]                     # partitioning does not matter
    kept, rejected = results[0]
    assert rejected == _expected_reasons()
    assert {k[0] for k in kept} == {r["id"] for r in rows} - set(rejected)


def test_annotate_mode_drops_nothing_for_urls_and_sets_the_signal(spark, tmp_path):
    from shardforge.clean.stage import clean
    from shardforge.config import CleanSection, QualitySection
    from shardforge.schemas import DOCUMENT

    f = _filter(_ut1(tmp_path))
    rows = _rows()
    res = clean(spark.createDataFrame(rows, DOCUMENT), CleanSection(min_words=3), QualitySection(mode="annotate"), f)
    rejected = {r["id"]: r["reason"] for r in res.rejected.collect()}
    n = len(CASES)
    assert rejected == {f"d{n}": "filter:min_words", f"d{n + 1}": "filter:min_words"}   # text rules still drop
    got = {r["id"]: r["signals"]["url_blocklist"] for r in res.kept.select("id", "signals").collect()}
    assert len(got) + len(rejected) == len(rows)
    assert got == {f"d{i}": label for i, (_, label) in enumerate(CASES)}

    # beside the quality groups' signals; an image (no quality signals) keeps its URL's label
    rows = [_doc(0, "http://example.com/"), _doc(1, "http://fine.org/"),
            {**_doc(2, "http://cdn.example.com/a.jpg", "a caption"), "kind": "image"},
            {**_doc(3, "http://fine.org/b.jpg", "a caption"), "kind": "image"}]
    res = clean(spark.createDataFrame(rows, DOCUMENT), CleanSection(),
                QualitySection(mode="annotate", filters=("gopher_quality",)), f)
    kept = {r["id"]: r["signals"] for r in res.kept.select("id", "signals").collect()}
    assert res.rejected.count() == 0 and sorted(kept) == ["d0", "d1", "d2", "d3"]
    assert [kept[k]["url_blocklist"] for k in sorted(kept)] == ["adult", None, "adult", None]
    assert kept["d0"]["gopher_words"] == kept["d1"]["gopher_words"] == 15      # PROSE's 15 words
    assert kept["d2"]["gopher_words"] is None and kept["d3"]["gopher_words"] is None   # images: no quality signals


# -- through the pipeline command --------------------------------------------------------------
@pytest.mark.slow
def test_pipeline_reports_the_url_reasons(spark, tmp_path, capsys):
    from shardforge.engine.cli import main

    top = _ut1(tmp_path)
    docs = tmp_path / "docs.jsonl"
    urls = ["http://example.com/a", "https://news.example.com/b", "http://geocities.com/bad/page.html",
            "http://casino.com/", "http://x.org/porn-clip", "http://x.org/hot/girls", "http://fine.org/1",
            "http://notblocked-example.com/", None]
    docs.write_text("".join(json.dumps({"id": f"p{i}", "text": f"{PROSE} Number {i}.", "url": u}) + "\n"
                            for i, u in enumerate(urls)))
    out = tmp_path / "out"
    args = ["--set", 'pipeline.stages=["ingest", "clean"]', "--set", "spark.shuffle_partitions=2",
            "--set", f'url_filter.blocklists=["{top}"]', "--set", 'url_filter.banned_words=["porn"]',
            "--set", 'url_filter.soft_banned_words=["hot", "girls"]']
    assert main(["pipeline", "--input", str(docs), "--output", str(out), *args]) == 0
    capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    stage = next(s for s in report["stages"] if s["name"] == "clean")
    assert (stage["rows_in"], stage["kept"], stage["rejected"]) == (9, 3, 6)
    assert stage["rejects_by_reason"] == {"filter:url_blocklist:adult": 3, "filter:url_blocklist:gambling": 1,
                                          "filter:url_banned_word": 1, "filter:url_soft_banned_words": 1}

    # annotate mode: nothing dropped, the labels counted in the report
    assert main(["pipeline", "--input", str(docs), "--output", str(tmp_path / "annotated"), *args,
                 "--set", 'quality.mode="annotate"']) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "annotated" / "report.json").read_text())
    stage = next(s for s in report["stages"] if s["name"] == "clean")
    assert (stage["rows_in"], stage["kept"], stage["rejected"]) == (9, 9, 0)
    assert report["url_blocklist"] == {"adult": 3, "banned_word": 1, "gambling": 1, "none": 3, "soft_banned_words": 1}


def test_a_missing_block_list_exits_2_naming_it_before_spark_starts(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": PROSE, "url": "http://example.com/"}) + "\n")
    env = {**os.environ, "SHARDFORGE_JARS": str(tmp_path / "no-jars")}   # Spark could not even start
    empty = tmp_path / "lists" / "adult"
    empty.mkdir(parents=True)
    for path in (tmp_path / "missing", empty):
        proc = subprocess.run([sys.executable, "-m", "shardforge.engine.cli", "pipeline", "--input", str(docs),
                               "--output", str(tmp_path / "o"), "--set", f'url_filter.blocklists=["{path}"]',
                               "--set", 'spark.jars_dir="/nonexistent"'],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert str(path) in proc.stderr and "url_filter.blocklists" in proc.stderr and "Traceback" not in proc.stderr
