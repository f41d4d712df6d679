"""Connected components of a graph held as a Spark DataFrame of edges, across executors.

Alternating large-star / small-star (Kiveris et al., "Connected Components in
MapReduce and Beyond", 2014) on bigint node ids until the edges form a star forest:
O(log^2 n) rounds, each a few shuffles; every round is materialised (Parquet under a
checkpoint folder, or a local checkpoint) so the lineage stays short. Nothing is
collected to the driver but one row-count per round (the star-forest test). The result labels every node with the smallest node id
of its component, so it does not depend on partitioning.

A graph of at most `LOCAL_EDGES` edges (every near-duplicate graph of a batch of tens of
thousands of documents, and most nightly batches) is labelled in the driver instead: its
edges come over once as Arrow (16 bytes each), a vectorised union-find (hooking to the
smaller root, then pointer jumping) labels them, and the labels go back as one DataFrame.
Same labels as the rounds above (tests/test_components.py holds both to a reference), in
one Spark job instead of a few per round: on small graphs the rounds cost seconds of job
overhead and nothing else.
"""
from __future__ import annotations

import uuid

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F


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

    def __call__(self, df: DataFrame, name: str) -> DataFrame:
        if not self.root:
            return df.localCheckpoint(eager=True)
        p = self.path(name)
        if self.reuse and self.files().exists(f"{p}/{self.DONE}"):
            self.reused.append(name)
            return self.spark.read.parquet(p)
        df.write.mode("overwrite").parquet(p)
        if self.reuse:
            self.files().write_text(f"{p}/{self.DONE}", "")
        return self.spark.read.parquet(p)

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
    both = e.select(F.col("u").alias("a"), F.col("v").alias("b")).unionByName(
        e.select(F.col("v").alias("a"), F.col("u").alias("b")))
    mins = both.groupBy("a").agg(F.least(F.min("b"), F.col("a")).alias("m"))
    out = both.join(mins, "a").where(F.col("b") > F.col("a")).select(F.col("b").alias("src"), F.col("m").alias("dst"))
    return _canonical(out)


def _small_star(e: DataFrame) -> DataFrame:
    # in canonical form u < v: each v's smaller neighbours are its u's
    mins = e.groupBy("v").agg(F.min("u").alias("m"))
    j = e.join(mins, "v")
    out = j.select(F.col("u").alias("src"), F.col("m").alias("dst")).unionByName(
        j.select(F.col("v").alias("src"), F.col("m").alias("dst")))
    return _canonical(out)


LOCAL_EDGES = 4_000_000     # 64 MB of edges in the driver at most


def connected_components(edges: DataFrame, materialize: Materializer, *, max_iterations: int = 64,
                         local_edges: int = LOCAL_EDGES) -> DataFrame:
    """(node, component) for every node that appears in `edges` (columns src, dst: bigint);
    component = the smallest node id of its connected component. At most `local_edges`
    edges are labelled in the driver (0: always the distributed rounds).

    Raises RuntimeError if the rounds do not converge within `max_iterations`
    (never returns a partial labelling).
    """
    if local_edges > 0:
        few = edges.select(F.col("src").cast("bigint"), F.col("dst").cast("bigint")).limit(local_edges + 1).toArrow()
        if few.num_rows <= local_edges:
            spark = edges.sparkSession
            node, comp = label_components(few.column("src").to_numpy(), few.column("dst").to_numpy())
            import pyarrow as pa

            labels = spark.createDataFrame(pa.table({"node": pa.array(node, pa.int64()),
                                                     "component": pa.array(comp, pa.int64())}),
                                           "node bigint, component bigint")
            return materialize(labels, "cc-labels")
    e = _canonical(edges)
    rounds = 0
    while not _is_star_forest(e):
        rounds += 1
        if rounds > max_iterations:
            raise RuntimeError(f"connected components did not converge in {max_iterations} rounds "
                               f"(raise dedup.max_component_iterations)")
        e = materialize(_small_star(_large_star(e)), f"cc-{rounds}")
        if rounds > 1:
            materialize.delete(f"cc-{rounds - 1}")
    # a star forest in (u < v) form: every v hangs off its component's smallest node u
    labels = e.select(F.col("v").alias("node"), F.col("u").alias("component")).unionByName(
        e.select(F.col("u").alias("node"), F.col("u").alias("component"))).distinct()
    return materialize(labels, "cc-labels")


def label_components(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(node, component) arrays, nodes ascending, for the nodes of the edges (src[i], dst[i])
    (self-loops count only when their node has another edge, as in the rounds: a self-loop
    alone names no node); component = the smallest node id of its component."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    nodes, idx = np.unique(np.concatenate([src, dst]), return_inverse=True)
    u, v = idx[:len(src)], idx[len(src):]
    lab = np.arange(len(nodes))
    while True:
        lu, lv = lab[u], lab[v]
        if np.array_equal(lu, lv):
            break
        m = np.minimum(lu, lv)
        np.minimum.at(lab, lu, m)      # hook each root under the smaller root it meets
        np.minimum.at(lab, lv, m)
        while True:                    # pointer jumping: every node straight to its root
            nxt = lab[lab]
            if np.array_equal(nxt, lab):
                break
            lab = nxt
    return nodes, nodes[lab]


def _is_star_forest(e: DataFrame) -> bool:
    """True when no node is both a centre (u) and a leaf (v), and no leaf has two centres:
    then each component is one star centred on its smallest node. One Spark job."""
    roles = e.select(F.col("u").alias("n"), F.lit(1).alias("c"), F.lit(0).alias("l")).unionByName(
        e.select(F.col("v").alias("n"), F.lit(0).alias("c"), F.lit(1).alias("l")))
    bad = roles.groupBy("n").agg(F.max("c").alias("c"), F.sum("l").alias("l")).where(
        ((F.col("c") == 1) & (F.col("l") > 0)) | (F.col("l") > 1))
    return bad.limit(1).count() == 0
