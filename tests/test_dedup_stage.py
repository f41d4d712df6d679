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
    rows = [(i, t, "test", None, kind, None, None, None, None) for i, t in docs]
    return spark.createDataFrame(rows, DOCUMENT)


def run(df, tmp_path, **kw):
    from shardforge.dedup import dedup
    cfg = DedupSection(**{"rank_by": "none", **kw})
    return dedup(df, cfg, checkpoint_dir=str(tmp_path / "ckpt"))


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
