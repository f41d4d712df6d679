"""Connected components of the near-duplicate graph: the distributed rounds give every node the
smallest node id of its component, checked against a plain breadth-first search written here,
on graphs whose components are known by construction (chains, stars, a cycle, a node with a
self-loop only, signed 64-bit ids)."""
from __future__ import annotations

import random
from collections import defaultdict, deque

import pytest

from shardforge.dedup.components import Materializer, connected_components


def _graph(seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    ids = list({rng.randint(-2**63, 2**63 - 1) for _ in range(400)})[:400]
    rng.shuffle(ids)
    edges = []
    chain = ids[:60]                               # a long chain, in shuffled order
    edges += [(a, b) for a, b in zip(chain, chain[1:])]
    star = ids[60:100]
    edges += [(star[0], x) for x in star[1:]]
    cyc = ids[100:130]
    edges += [(a, b) for a, b in zip(cyc, cyc[1:] + cyc[:1])]
    edges += [(ids[130], ids[130])]                # a self-loop alone: no node
    rest = ids[131:]
    edges += [(rng.choice(rest), rng.choice(rest)) for _ in range(150)]
    edges += [(b, a) for a, b in edges[:20]]       # both directions, and repeats
    rng.shuffle(edges)
    return edges


def _reference(edges) -> dict[int, int]:
    adj = defaultdict(set)
    for a, b in edges:
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    out: dict[int, int] = {}
    for start in adj:
        if start in out:
            continue
        seen, todo = {start}, deque([start])
        while todo:
            for n in adj[todo.popleft()]:
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        low = min(seen)
        out.update({n: low for n in seen})
    return out


@pytest.mark.parametrize("seed", [7, 8])
def test_the_rounds_label_like_the_reference(spark, tmp_path, seed):
    edges = _graph(seed)
    df = spark.createDataFrame(edges, "src bigint, dst bigint").repartition(3)
    labels = connected_components(df, Materializer(spark, str(tmp_path)))
    assert labels.schema.simpleString() == "struct<node:bigint,component:bigint>"
    got = {r.node: r.component for r in labels.collect()}
    assert got == _reference(edges)


def test_no_edges(spark, tmp_path):
    df = spark.createDataFrame([], "src bigint, dst bigint")
    assert connected_components(df, Materializer(spark, str(tmp_path))).count() == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_local_stars_hang_every_node_off_its_components_smallest(seed):
    """The per-partition contraction alone (numpy, no Spark), against the breadth-first search."""
    import numpy as np

    from shardforge.dedup.components import local_stars

    edges = [(a, b) for a, b in _graph(seed) if a != b]
    centre, leaf = local_stars(np.array([a for a, _ in edges], dtype=np.int64),
                               np.array([b for _, b in edges], dtype=np.int64))
    want = _reference(edges)
    got = {int(n): int(c) for c, n in zip(centre, leaf)}
    got.update({c: c for c in set(want.values())})
    assert got == want
    assert len(leaf) == len(set(leaf.tolist())) == len(want) - len(set(want.values()))


def test_components_across_many_partitions_and_long_chains(spark, tmp_path):
    """A chain whose links land in different partitions needs the star rounds after the
    contraction: the labels still equal the reference."""
    rng = random.Random(5)
    ids = rng.sample(range(-10**12, 10**12), 600)
    edges = [(a, b) for a, b in zip(ids[:300], ids[1:301])]            # one chain of 301 nodes
    edges += [(ids[400], x) for x in ids[401:450]] + [(ids[449], ids[500])]
    rng.shuffle(edges)
    df = spark.createDataFrame(edges, "src bigint, dst bigint").repartition(5)
    got = {r.node: r.component for r in connected_components(df, Materializer(spark, str(tmp_path))).collect()}
    assert got == _reference(edges)


def test_a_graph_that_fits_one_partition_needs_no_star_round(spark, tmp_path):
    """With adaptive execution free to coalesce (the embedded session's default; the tests'
    session turns it off), the contraction's shuffle puts a small graph in one partition,
    which labels it whole: no star round is materialised (cc-1), and the labels are right."""
    edges = _graph(11)
    df = spark.createDataFrame(edges, "src bigint, dst bigint").repartition(3)
    key = "spark.sql.adaptive.coalescePartitions.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    try:
        got = {r.node: r.component for r in connected_components(df, Materializer(spark, str(tmp_path))).collect()}
    finally:
        spark.conf.set(key, before)
    assert got == _reference(edges)
    assert list(tmp_path.glob("dedup-*/cc-0")) and not list(tmp_path.glob("dedup-*/cc-1"))


def test_a_result_is_measured_as_it_is_written(spark, tmp_path):
    """`observe` aggregates come from the write itself and equal what a query of the written
    result gives (numbers from the rows made here); a result that is not written (a local
    checkpoint, or one an earlier attempt finished) has none, so the caller queries it."""
    from pyspark.sql import functions as F

    rows = [(i, None if i % 3 == 0 else "x" * (i % 7)) for i in range(50)]
    df = spark.createDataFrame(rows, "n bigint, s string").repartition(4)
    observe = {"with_s": F.count_if(F.col("s").isNotNull()), "chars": F.sum(F.length("s"))}
    mat = Materializer(spark, str(tmp_path), token="t1", reuse=True)
    back = mat(df, "r", observe=observe)
    want = {"with_s": sum(1 for _, s in rows if s is not None), "chars": sum(len(s) for _, s in rows if s)}
    assert mat.metrics("r") == want
    assert back.agg(*[c.alias(k) for k, c in observe.items()]).first().asDict() == want
    assert mat.metrics("other") is None
    again = Materializer(spark, str(tmp_path), token="t1", reuse=True)
    again(df, "r", observe=observe)
    assert again.reused == ["r"] and again.metrics("r") is None
    local = Materializer(spark, "")
    local(df, "r", observe=observe)
    assert local.metrics("r") is None
