"""Connected components of a graph held as a Spark DataFrame of edges, across executors.

First each partition's edges become stars on their local components' smallest nodes (a
vectorised min-label propagation per partition, `local_stars`); the partitions are sized by
adaptive execution, so a graph that fits one partition is labelled in that pass. Then
alternating large-star / small-star (Kiveris et al., "Connected Components in
MapReduce and Beyond", 2014) on bigint node ids until the edges form a star forest:
O(log^2 n) rounds, each four shuffles (each star's minimum is a window, not an aggregate
joined back); every round is materialised (Parquet under a
checkpoint folder, or a local checkpoint) so the lineage stays short. Nothing is
collected to the driver but one row-count per round (the star-forest test). The result labels every node with the smallest node id
of its component, so it does not depend on partitioning.
"""
from __future__ import annotations

import logging
import uuid
from typing import Iterator

import numpy as np
import pyarrow as pa

from pyspark.sql import DataFrame
from pyspark.sql import Window
from pyspark.sql import functions as F

log = logging.getLogger("shardforge.dedup.components")


class Materializer:
    """Writes DataFrames to Parquet under `root` (or local-checkpoints them when root is
    empty) and reads them back, cutting the lineage. Everything goes under
    `<root>/dedup-<token>/`: a random token by default, so concurrent runs sharing a folder
    never meet. A caller that names the token (the stage engine: one per output and stage
    fingerprint) may set `reuse`: then a result that an earlier attempt with the same token
    finished (its `_COMPLETE` marker, written after the data) is read back instead of
    recomputed, and its name is listed in `reused`. Same token means same input and
    settings, and every result here depends only on those, so what is reused equals what
    would be recomputed."""

    DONE = "_COMPLETE"

    def __init__(self, spark, root: str, token: str | None = None, reuse: bool = False):
        self.spark = spark
        self.root = root.rstrip("/") if root else ""
        self.token = token or uuid.uuid4().hex[:12]
        self.reuse = reuse and bool(self.root)
        self.reused: list[str] = []
        self._files = None
        self._observed: dict[str, object] = {}

    @staticmethod
    def folder_name(token: str) -> str:
        """The name of the folder under `root` that a token's results go in."""
        return f"dedup-{token}"

    @property
    def folder(self) -> str:
        """Where this run's results go (empty when they are local checkpoints)."""
        return f"{self.root}/{self.folder_name(self.token)}" if self.root else ""

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def files(self):
        if self._files is None:
            from shardforge.fs import HadoopFiles

            self._files = HadoopFiles(self.spark)
        return self._files

    def __call__(self, df: DataFrame, name: str, observe: dict | None = None) -> DataFrame:
        """`df` materialised as `name` and read back. `observe` (name -> aggregate Column):
        aggregates computed over the rows as they are written, in the write's own job
        (`pyspark.sql.Observation`); `metrics(name)` gives them, or None where no write ran
        (a local checkpoint, a result reused), and the caller then queries the result."""
        if not self.root:
            return df.localCheckpoint(eager=True)
        p = self.path(name)
        # read back with the frame's own schema: inferring it would cost a Spark job per result
        if self.reuse and self.files().exists(f"{p}/{self.DONE}"):
            self.reused.append(name)
            return self.spark.read.schema(df.schema).parquet(p)
        self._observed.pop(name, None)
        obs = None
        if observe:
            from pyspark.sql import Observation

            obs = Observation()
            df = df.observe(obs, *[col.alias(k) for k, col in observe.items()])
        df.write.mode("overwrite").parquet(p)
        if obs is not None:
            self._observed[name] = obs
        if self.reuse:
            self.files().write_text(f"{p}/{self.DONE}", "")
        return self.spark.read.schema(df.schema).parquet(p)

    def metrics(self, name: str) -> dict | None:
        """The `observe` aggregates of the write of `name` (None when none ran)."""
        obs = self._observed.get(name)
        return None if obs is None else dict(obs.get)

    def delete(self, name: str) -> None:
        if not self.root:
            return
        from shardforge.fs import delete_path

        delete_path(self.spark, self.path(name))


def _canonical(edges: DataFrame) -> DataFrame:
    """Undirected edges as (u < v), deduplicated, self-loops removed."""
    return (edges.select(F.least("src", "dst").alias("u"), F.greatest("src", "dst").alias("v"))
            .where(F.col("u") != F.col("v")).distinct())


def _large_star(e: DataFrame) -> DataFrame:
    # each node's smallest neighbour (itself included) as a window over its edges: one shuffle
    # where an aggregate joined back would take two
    both = e.select(F.col("u").alias("a"), F.col("v").alias("b")).unionByName(
        e.select(F.col("v").alias("a"), F.col("u").alias("b")))
    m = F.least(F.min("b").over(Window.partitionBy("a")), F.col("a"))
    out = both.withColumn("m", m).where(F.col("b") > F.col("a")).select(F.col("b").alias("src"), F.col("m").alias("dst"))
    return _canonical(out)


def _small_star(e: DataFrame) -> DataFrame:
    # in canonical form u < v: each v's smaller neighbours are its u's
    j = e.withColumn("m", F.min("u").over(Window.partitionBy("v")))
    out = j.select(F.col("u").alias("src"), F.col("m").alias("dst")).unionByName(
        j.select(F.col("v").alias("src"), F.col("m").alias("dst")))
    return _canonical(out)


def local_stars(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The connected components of the edges (u[i], v[i]) as stars: (centre, leaf) for every
    node but the smallest of its component, the centre being that smallest node. Min-label
    propagation with pointer jumping, vectorised: each label is the index of a node of the
    same component, never above the node's own, so at the fixed point it is the component's
    smallest (nodes are indexed in ascending order)."""
    if len(u) == 0:
        return u[:0], v[:0]
    nodes, inv = np.unique(np.concatenate([u, v]), return_inverse=True)
    a, b = inv[:len(u)], inv[len(u):]
    label = np.arange(len(nodes))
    while True:
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        while True:                       # pointer jumping: every label to its root
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, label):
            break
        label = new
    leaf = label != np.arange(len(nodes))
    return nodes[label[leaf]], nodes[leaf]


def _contract_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    us, vs = [], []
    for rb in batches:
        us.append(rb.column("u").to_numpy())
        vs.append(rb.column("v").to_numpy())
    if not us:
        return
    centre, leaf = local_stars(np.concatenate(us), np.concatenate(vs))
    for start in range(0, len(leaf), 1 << 16):
        yield pa.RecordBatch.from_arrays([pa.array(centre[start:start + (1 << 16)]),
                                          pa.array(leaf[start:start + (1 << 16)])], names=["u", "v"])


def _contract(e: DataFrame) -> DataFrame:
    """The edges (u < v), shuffled by u, each partition's replaced by stars on its local
    components' smallest nodes (`local_stars`): the same components with fewer, shorter paths.
    The shuffle has no fixed partition count, so adaptive execution sizes its partitions
    (`spark.sql.adaptive.advisoryPartitionSizeInBytes`): a graph that fits one is solved in
    this one pass, a larger one leaves the star rounds less to do. Which edges meet depends on
    the partitioning; the components, and so the labels, do not."""
    return e.repartition("u").mapInArrow(_contract_batches, "u bigint, v bigint").distinct()


def connected_components(edges: DataFrame, materialize: Materializer, *, max_iterations: int = 64) -> DataFrame:
    """(node, component) for every node that appears in `edges` (columns src, dst: bigint);
    component = the smallest node id of its connected component.

    The edges are first contracted per partition (`_contract`), then large-star and
    small-star rounds run until they form a star forest.
    Raises RuntimeError if the rounds do not converge within `max_iterations`
    (never returns a partial labelling).
    """
    e = materialize(_contract(_canonical(edges)), "cc-0")
    rounds = 0
    while not _is_star_forest(e):
        rounds += 1
        if rounds > max_iterations:
            raise RuntimeError(f"connected components did not converge in {max_iterations} rounds "
                               f"(raise dedup.max_component_iterations)")
        e = materialize(_small_star(_large_star(e)), f"cc-{rounds}")
        materialize.delete(f"cc-{rounds - 1}")
    log.info("connected components: %d star rounds after the contraction", rounds)
    # a star forest in (u < v) form: every v hangs off its component's smallest node u
    labels = e.select(F.col("v").alias("node"), F.col("u").alias("component")).unionByName(
        e.select(F.col("u").alias("node"), F.col("u").alias("component"))).distinct()
    return materialize(labels, "cc-labels")


def _is_star_forest(e: DataFrame) -> bool:
    """True when no node is both a centre (u) and a leaf (v), and no leaf has two centres:
    then each component is one star centred on its smallest node. One Spark job."""
    roles = e.select(F.col("u").alias("n"), F.lit(1).alias("c"), F.lit(0).alias("l")).unionByName(
        e.select(F.col("v").alias("n"), F.lit(0).alias("c"), F.lit(1).alias("l")))
    bad = roles.groupBy("n").agg(F.max("c").alias("c"), F.sum("l").alias("l")).where(
        ((F.col("c") == 1) & (F.col("l") > 0)) | (F.col("l") > 1))
    return bad.limit(1).count() == 0
