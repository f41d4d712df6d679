"""The dedup stage on a real SparkSession: accounting, rules for images and short or
empty documents, transitive clusters, partition independence, incremental batches."""
from __future__ import annotations

import random

import pytest

from shardforge.config import DedupSection

pytest.importorskip("pyspark")

WORDS = ("the of and to in is was for on that with as by at from his her they this which be are "
         "river mountain city garden market engine letter winter summer village station museum "
         "bridge forest harbour castle library theatre school island valley temple tower palace "
         "north south east west old new great small early late first second third final long short "
         "built opened closed named moved carried painted wrote sailed grew became remained "
         "history science music trade railway empire council church battle treaty festival").split()


def make_doc(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) + (str(rng.randrange(50)) if rng.random() < 0.3 else "") for _ in range(n)]


def substitute(tokens: list[str], positions, rng: random.Random) -> list[str]:
    out = list(tokens)
    for p in positions:
        out[p] = "zz" + str(rng.randrange(10**9))
    return out


def rows_of(spark, docs, kind="document"):
    from shardforge.schemas import DOCUMENT
    rows = [(i, t, "test", None, kind, None) for i, t in docs]
    return spark.createDataFrame(rows, DOCUMENT)


def run(df, tmp_path, **kw):
    from shardforge.dedup import dedup
    cfg = DedupSection(**{"rank_by": "none", **kw})
    return dedup(df, cfg, checkpoint_dir=str(tmp_path / "ckpt"))


@pytest.mark.slow
def test_transitive_cluster_collapses(spark, tmp_path):
    rng = random.Random(3)
    a = make_doc(rng, 300)
    b = substitute(a, [20, 90, 160, 230], rng)          # J(a,b) ~ 0.87
    c = substitute(b, [55, 125, 195, 265], rng)         # J(b,c) ~ 0.87, J(a,c) ~ 0.76
    other = make_doc(rng, 300)
    df = rows_of(spark, [("a", " ".join(a)), ("b", " ".join(b)), ("c", " ".join(c)), ("z", " ".join(other))])
    res = run(df, tmp_path)
    assert sorted(r.id for r in res.kept.collect()) == ["a", "z"]
    audit = {r.id: r for r in res.audit.collect()}
    assert set(audit) == {"b", "c"}
    assert all(r.duplicate_of == "a" and r.stage == "near" and r.cluster_size == 3 for r in audit.values())
    assert audit["c"].jaccard < 0.8 < audit["b"].jaccard
    rej = {r.id: r.reason for r in res.rejected.collect()}
    assert rej == {"b": "duplicate_of:a", "c": "duplicate_of:a"}
    from shardforge.dedup import summary
    assert summary(res.audit) == {"removed_exact": 0, "removed_near": 2, "clusters": 1, "cluster_sizes": {"3-4": 1}}


def test_summary_counts_each_cluster_once_in_its_bucket(spark):
    """The report's dedup section from an audit written by hand: removed rows by stage, and
    clusters (a representative with its removed rows, cluster_size counting both) by size."""
    from shardforge.dedup import summary
    from shardforge.schemas import DEDUP_AUDIT, conform

    rows = [("b", "a", "near", 3), ("c", "a", "exact", 3),               # one cluster of 3: a, b, c
            ("e", "d", "exact", 2),                                      # one of 2
            ("g", "f", "near", 2),                                       # another of 2
            *[(f"h{i}", "h", "near", 12) for i in range(11)]]            # one of 12
    audit = spark.createDataFrame(rows, "id string, duplicate_of string, stage string, cluster_size long")
    audit = conform(audit.withColumn("estimated_similarity", audit.cluster_size * 0.0)
                    .withColumn("jaccard", audit.cluster_size * 0.0), DEDUP_AUDIT)
    assert summary(audit) == {"removed_exact": 2, "removed_near": 13, "clusters": 4,
                              "cluster_sizes": {"2": 2, "3-4": 1, "10-99": 1}}


def test_a_dedup_plan_without_ingest_still_rejects_a_reused_id(spark, tmp_path):
    """Only `ingest` vouches for one row per id; a plan that reads files straight into dedup
    looks for repeated ids (the first row by content keeps the id)."""
    import json
    from dataclasses import replace

    from shardforge.config import load_config
    from shardforge.engine.layout import Layout
    from shardforge.engine.runner import run_job

    inp = tmp_path / "docs.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "x", "text": "a first document about rivers and the towns along them"},
        {"id": "x", "text": "zz another document reusing the id x for other words"},
        {"id": "y", "text": "a third document about mountains and the paths across them"}]))
    cfg = load_config(None, ["shards.num_shards=1"])
    cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=(str(inp),), output=str(tmp_path / "out"),
                                       stages=("dedup",)))
    report = run_job(cfg, cfg.pipeline.stages, layout=Layout.for_output(cfg.pipeline.output), spark=spark)
    assert report["plan"] == ["read", "dedup"]
    dedup = report["stages"][-1]
    assert (dedup["rows_in"], dedup["kept"], dedup["rejects_by_reason"]) == (3, 2, {"invalid:duplicate_id": 1})


# --- a planted corpus with the true Jaccard of every planted pair ----------------------

def oracle_tokens(text: str) -> list[str]:
    import re
    return re.findall(r"[a-z0-9]+", text.lower())


def oracle_jaccard(x: str, y: str, k: int = 5) -> float:
    """Exact Jaccard of word 5-gram sets, independent of the stage's hashing."""
    tx, ty = oracle_tokens(x), oracle_tokens(y)
    sx = {tuple(tx[i:i + k]) for i in range(len(tx) - k + 1)}
    sy = {tuple(ty[i:i + k]) for i in range(len(ty) - k + 1)}
    if not sx and not sy:
        return 1.0
    return len(sx & sy) / len(sx | sy)


def edit(tokens: list[str], rate: float, rng: random.Random) -> list[str]:
    """Substitute, insert or delete each word with probability `rate`."""
    out = []
    for tok in tokens:
        r = rng.random()
        if r < rate / 3:
            out.append("q" + str(rng.randrange(10**6)))
        elif r < 2 * rate / 3:
            out += [tok, "ins" + str(rng.randrange(10**6))]
        elif r < rate:
            continue
        else:
            out.append(tok)
    return out


RATES = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.15)


def planted_corpus(seed: int = 7, families: int = 90, singles: int = 60, prefix: str = ""):
    """{id: text}, and the families (lists of ids) whose pairs were planted."""
    rng = random.Random(seed)
    docs, fams = {}, []
    for f in range(families):
        base = make_doc(rng, rng.randrange(120, 320))
        ids = [f"{prefix}f{f:03d}-0"]
        docs[ids[0]] = " ".join(base)
        for v in range(1, rng.randrange(2, 5)):
            rate = rng.choice(RATES)
            toks = edit(base, rate, rng)
            text = " ".join(toks)
            if rate == 0.0:   # an exact copy after normalisation: other case and punctuation
                text = ", ".join(t.upper() if i % 7 == 0 else t for i, t in enumerate(toks)) + "."
            ids.append(f"{prefix}f{f:03d}-{v}")
            docs[ids[-1]] = text
        fams.append(ids)
    for s in range(singles):
        docs[f"{prefix}s{s:03d}"] = " ".join(make_doc(rng, rng.randrange(60, 300)))
    return docs, fams


def quality_metrics(docs, fams, kept_ids, audit_rows):
    removed = {r.id: r.duplicate_of for r in audit_rows}
    assert set(removed) | set(kept_ids) == set(docs) and not set(removed) & set(kept_ids)
    high = hit = 0
    for ids in fams:
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                if oracle_jaccard(docs[ids[i]], docs[ids[j]]) >= 0.85:
                    high += 1
                    hit += ids[i] in removed or ids[j] in removed
    low = sum(oracle_jaccard(docs[d], docs[rep]) < 0.6 for d, rep in removed.items())
    return hit / high, low / max(1, len(removed)), high, len(removed)


@pytest.mark.slow
@pytest.mark.parametrize("exact_check", [True, False])
def test_planted_corpus_quality(spark, tmp_path, exact_check):
    docs, fams = planted_corpus()
    df = rows_of(spark, sorted(docs.items()))
    res = run(df, tmp_path, exact_jaccard_check=exact_check, rank_by="length")
    kept = [r.id for r in res.kept.collect()]
    audit = res.audit.collect()
    recall, low_share, pairs, removed = quality_metrics(docs, fams, kept, audit)
    print(f"exact_check={exact_check} recall={recall:.4f} low_share={low_share:.4f} pairs={pairs} removed={removed}")
    assert pairs > 60 and removed > 60
    assert recall >= 0.95, recall
    assert low_share <= (0.0 if exact_check else 0.01), low_share
    if exact_check:   # the audit's Jaccard is the true one
        for r in audit[:50]:
            assert r.jaccard == pytest.approx(oracle_jaccard(docs[r.id], docs[r.duplicate_of]), abs=1e-9)
    assert res.rejected.count() == len(audit)


@pytest.mark.slow
def test_same_result_for_any_partitioning(spark, tmp_path, monkeypatch):
    """Also: the same result whether the near map is broadcast to the assembly (one
    partition, default) or every row's outcome is materialised first (seven partitions,
    the path of large near maps)."""
    from shardforge.dedup import stage

    docs, _ = planted_corpus(seed=11, families=40, singles=20)
    df = rows_of(spark, sorted(docs.items()))
    one = run(df.repartition(1), tmp_path / "one", rank_by="length")
    monkeypatch.setattr(stage, "BROADCAST_NEAR_MAP_BYTES", 0)
    many = run(df.repartition(7, "text"), tmp_path / "many", rank_by="length")
    assert (tmp_path / "many" / "ckpt").exists() and list((tmp_path / "many" / "ckpt").glob("dedup-*/state"))
    assert not list((tmp_path / "one" / "ckpt").glob("dedup-*/state"))
    assert sorted(r.id for r in one.kept.collect()) == sorted(r.id for r in many.kept.collect())
    key = lambda r: r.id  # noqa: E731
    assert sorted(one.audit.collect(), key=key) == sorted(many.audit.collect(), key=key)
    assert sorted(one.signatures.collect(), key=key) == sorted(many.signatures.collect(), key=key)
    assert sorted(one.rejected.collect(), key=key) == sorted(many.rejected.collect(), key=key)
    # the kernels report their own seconds per step, summed over tasks
    for name in ("signatures.tokenize", "signatures.shingle_hash", "signatures.permutations", "verify.exact_jaccard"):
        assert one.timings[name] > 0, (name, one.timings)


@pytest.mark.slow
@pytest.mark.parametrize("rank_by", ["length", "none"])
def test_a_small_graph_in_one_task_equals_the_distributed_phases(spark, tmp_path, rank_by):
    """Without the exact check, a first batch's graph of at most dedup.local_graph_max_nodes
    documents is solved in one task (`near.local_near_map`); `local_graph_max_nodes = 0` runs
    the distributed phases. Both on a planted corpus with exact copies, near families and a
    transitive chain (a~b, b~c, a not ~ c): the same kept rows, audit, rejects and side rows."""
    docs, fams = planted_corpus(seed=17, families=40, singles=20)
    rng = random.Random(5)
    a = make_doc(rng, 300)
    b = substitute(a, [20, 90, 160, 230], rng)
    c = substitute(b, [55, 125, 195, 265], rng)
    docs.update({"chain-a": " ".join(a), "chain-b": " ".join(b), "chain-c": " ".join(c)})
    df = rows_of(spark, sorted(docs.items()))
    local = run(df, tmp_path / "local", exact_jaccard_check=False, rank_by=rank_by)
    dist = run(df, tmp_path / "dist", exact_jaccard_check=False, rank_by=rank_by, local_graph_max_nodes=0)
    assert "local_graph" in local.timings and "candidates" not in local.timings, local.timings
    assert "candidates" in dist.timings and "local_graph" not in dist.timings, dist.timings
    assert not list((tmp_path / "local" / "ckpt").glob("dedup-*/candidates"))
    key = lambda r: r.id  # noqa: E731
    assert sorted(r.id for r in local.kept.collect()) == sorted(r.id for r in dist.kept.collect())
    audit = sorted(local.audit.collect(), key=key)
    assert audit == sorted(dist.audit.collect(), key=key)
    assert sorted(local.rejected.collect(), key=key) == sorted(dist.rejected.collect(), key=key)
    assert sorted(local.signatures.collect(), key=key) == sorted(dist.signatures.collect(), key=key)
    near = [r for r in audit if r.stage == "near"]
    assert len(near) > 30 and any(r.stage == "exact" for r in audit)
    # the chain collapses onto one document in both (which one depends on rank_by)
    chain = {r.id: r.duplicate_of for r in audit if r.id.startswith("chain-")}
    assert len(chain) == 2 and len(set(chain.values())) == 1
    if rank_by == "none":           # equal ranks: the smallest id stays
        assert chain == {"chain-b": "chain-a", "chain-c": "chain-a"}


def test_local_graph_max_nodes_is_checked():
    from shardforge.config import ConfigError

    with pytest.raises(ConfigError, match="dedup.local_graph_max_nodes"):
        DedupSection(local_graph_max_nodes=-1)


@pytest.mark.slow
def test_rules_for_images_short_empty_and_ids(spark, tmp_path):
    from pyspark.sql.types import StructType

    from shardforge.schemas import DOCUMENT, IMAGE
    rng = random.Random(5)
    long_text = " ".join(make_doc(rng, 80))
    png_a, png_b = b"\x89PNG fake image bytes A", b"\x89PNG fake image bytes B"
    rows = [
        ("t1", long_text, "s", None, "document", None, None, None, None),
        ("t2", long_text.upper() + " !!", "s", None, "document", None, None, None, None),   # exact dup
        ("short1", "Hello  world", "s", None, "document", None, None, None, None),         # 2 tokens < 5
        ("short2", "hello, WORLD", "s", None, "document", None, None, None, None),         # exact dup of short1
        ("short3", "hello there", "s", None, "document", None, None, None, None),          # kept: no near-dedup
        ("empty1", "   ", "s", None, "document", None, None, None, None),
        ("empty2", None, "s", None, "document", None, None, None, None),
        ("img1", "a caption", "s", "http://x/1", "image", None, png_a, 1, 1),
        ("img2", "another caption", "s", "http://x/2", "image", None, png_a, 1, 1),      # same bytes
        ("img3", "a caption", "s", "http://x/3", "image", None, png_b, 1, 1),            # same caption only
        ("img4", "a caption", "s", "http://x/4", "image", None, None, None, None),
        ("t1", "different text reusing the id t1 for another document", "s", None, "document", None, None, None, None),
    ]
    df = spark.createDataFrame(rows, StructType(DOCUMENT.fields + IMAGE.fields)).withColumn("extra", __import__("pyspark.sql.functions", fromlist=["lit"]).lit(7))
    res = run(df, tmp_path, rank_by="length")
    kept = sorted(r.id for r in res.kept.collect())
    assert kept == ["img1", "img3", "short1", "short3", "t2"]
    assert "extra" in res.kept.columns and res.kept.where("extra = 7").count() == 5
    reasons = sorted((r.id, r.reason) for r in res.rejected.collect())
    assert reasons == [("empty1", "invalid:empty_text"), ("empty2", "invalid:empty_text"),
                       ("img2", "duplicate_of:img1"), ("img4", "invalid:missing_image"),
                       ("short2", "duplicate_of:short1"), ("t1", "duplicate_of:t2"),
                       ("t1", "invalid:duplicate_id")]
    assert df.count() == res.kept.count() + res.rejected.count()
    side = {r.id: r for r in res.signatures.collect()}
    assert side["t2"].signature is not None and len(side["t2"].bands) == 14
    assert side["short1"].signature is None and side["img1"].kind == "image"


@pytest.mark.slow
def test_incremental_equals_all_at_once(spark, tmp_path):
    """Batch B deduplicated against A's side table removes what A∪B at once removes.
    Ids of A sort first and rank_by = none, so the kept member of a cluster is the same
    in both runs (the by-design difference, an existing document always winning, does
    not arise)."""
    from shardforge.dedup import dedup, read_side_table, update_side_table
    rng = random.Random(21)
    docs_a, fams = planted_corpus(seed=13, families=30, singles=15, prefix="a-")
    docs_b = {}
    for f, ids in enumerate(fams[:20]):          # near copies of A's bases, and one exact copy
        base = oracle_tokens(docs_a[ids[0]])
        docs_b[f"b-f{f:03d}-n"] = " ".join(edit(base, 0.01, rng))
    docs_b["b-exact"] = docs_a[fams[25][0]].upper()
    for s in range(10):
        docs_b[f"b-s{s:03d}"] = " ".join(make_doc(rng, 150))
    cfg = DedupSection(rank_by="none")
    side = str(tmp_path / "side")
    ck = str(tmp_path / "ck")
    assert read_side_table(spark, side) is None
    res_a = dedup(rows_of(spark, sorted(docs_a.items())), cfg, checkpoint_dir=ck)
    update_side_table(spark, res_a.signatures, side)
    kept_a = res_a.kept
    prev = read_side_table(spark, side)
    assert prev.count() == kept_a.count()
    res_b = dedup(rows_of(spark, sorted(docs_b.items())), cfg, previous=prev,
                  previous_docs=kept_a.select("id", "text"), checkpoint_dir=ck)
    both = dedup(rows_of(spark, sorted({**docs_a, **docs_b}.items())), cfg, checkpoint_dir=ck)
    audit_inc = {r.id: (r.duplicate_of, r.stage) for r in res_a.audit.collect() + res_b.audit.collect()}
    audit_all = {r.id: (r.duplicate_of, r.stage) for r in both.audit.collect()}
    assert audit_inc == audit_all
    removed_b = {i for i in audit_inc if i.startswith("b-")}
    assert len(removed_b) >= 18 and "b-exact" in removed_b
    assert all(audit_inc[i][0].startswith("a-") for i in removed_b)     # existing documents are kept
    assert audit_inc["b-exact"] == (fams[25][0], "exact")
    kept_b = {r.id for r in res_b.kept.collect()}
    assert kept_b | removed_b == set(docs_b)
    update_side_table(spark, res_b.signatures, side)
    assert read_side_table(spark, side).count() == kept_a.count() + len(kept_b)


def test_the_one_task_graph_bound_counts_documents_with_a_signature(spark, tmp_path):
    """The bound on the one-task graph counts the documents that get a signature (observed as
    the signatures are written), not every row: with as many long documents as the bound the
    graph is solved in one task even beside short documents (too few words for a shingle),
    and one long document more sends it to the distributed phases. Same kept rows either way."""
    rng = random.Random(23)
    long_docs = {f"long-{i:02d}": " ".join(make_doc(rng, 80)) for i in range(12)}
    long_docs["long-copy"] = " ".join(substitute(long_docs["long-03"].split(), [7], rng))
    short = {f"short-{i:02d}": " ".join(make_doc(rng, 3)) for i in range(9)}
    df = rows_of(spark, sorted({**long_docs, **short}.items()))
    n_long = len(long_docs)         # every long text differs: each is its own exact group
    at = run(df, tmp_path / "at", exact_jaccard_check=False, local_graph_max_nodes=n_long)
    over = run(df, tmp_path / "over", exact_jaccard_check=False, local_graph_max_nodes=n_long - 1)
    assert "local_graph" in at.timings and "candidates" not in at.timings, at.timings
    assert "candidates" in over.timings and "local_graph" not in over.timings, over.timings
    kept = sorted(r.id for r in at.kept.collect())
    assert kept == sorted(r.id for r in over.kept.collect())
    assert "long-copy" not in kept and "long-03" in kept and all(s in kept for s in short)
