"""The score stage: each document's fastText classifier scores, in `signals.<name>`.

`score(df, cfg, models)` keeps every row and column and sets one double field of the
`signals` struct per `[score] models` entry (`shardforge.stage.with_signals`): the
probability fastText's `predict` gives the model's configured label for the document's
text, newlines replaced by spaces (fastText reads one line), and 0.0 when the label is not
among its predictions. A null text scores null. fastText adds 1e-5 inside its log, so a
certain label reads 1.00001 (the value datatrove's and DCLM's filters compare against).

Scoring runs per Arrow batch in `mapInArrow`, `batch_size` texts per predict call. The
model files travel once per executor (`SparkContext.addFile`, under a name made from their
sha256, so two files of one name never collide) and are loaded once per Python worker
process (`shardforge.score.model.load`). A score depends on the text and the model file
only: reruns and any partitioning give the same values. Nothing is rejected here.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StructField, StructType

from shardforge.clean.text import to_pylist_safe
from shardforge.fs import file_sha256
from shardforge.score.model import ModelInfo, load
from shardforge.stage import SIGNALS, with_signals

_COL = "_score_{}"


def ship(sc, info: ModelInfo) -> str:
    """Hand `info`'s file to the executors (once per session and content); the name
    `SparkFiles.get` finds it by. Spark keys files by their base name, so the file is handed
    over as `<sha256 prefix>-<name>`, a hard link (a copy across filesystems) in
    `<tmp>/shardforge-models/`: files of one name but different content never meet."""
    folder = os.path.join(tempfile.gettempdir(), "shardforge-models")
    os.makedirs(folder, exist_ok=True)
    name = f"{info.sha256[:32]}-{os.path.basename(info.path)}"
    staged = os.path.join(folder, name)
    if not (os.path.isfile(staged) and file_sha256(staged) == info.sha256):
        tmp = f"{staged}.{os.getpid()}.tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        try:
            os.link(info.path, tmp)
        except OSError:
            shutil.copyfile(info.path, tmp)
        os.replace(tmp, staged)
    if not any(f.endswith("/" + name) for f in sc.listFiles):       # added by an earlier run of this session
        sc.addFile(staged)
    return name


def label_scores(model, texts: list, label: str, batch_size: int) -> list:
    """The probability of `label` for each text (None for a None text, 0.0 when fastText
    does not predict the label), `batch_size` texts per predict call."""
    out: list = [None] * len(texts)
    present = [i for i, t in enumerate(texts) if t is not None]
    for start in range(0, len(present), batch_size):
        idx = present[start:start + batch_size]
        labels, probs = model.predict([texts[i].replace("\n", " ") for i in idx], k=-1)
        for i, names, p in zip(idx, labels, probs, strict=True):
            try:
                out[i] = float(p[names.index(label)])
            except ValueError:
                out[i] = 0.0
    return out


def score(df: DataFrame, cfg, models: tuple[ModelInfo, ...]) -> DataFrame:
    """`df` with `signals.<name>` set for every model (see the module docstring)."""
    if "text" not in df.columns:
        raise ValueError("score: input has no `text` column")
    from pyspark import SparkFiles

    sc = df.sparkSession.sparkContext
    shipped = [(ship(sc, m), m.sha256, m.label) for m in models]
    cols = [_COL.format(i) for i in range(len(models))]
    schema = StructType(df.schema.fields + [StructField(c, DoubleType(), True) for c in cols])
    batch_size = cfg.batch_size

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        loaded = [(load(SparkFiles.get(name), sha), label) for name, sha, label in shipped]
        for batch in batches:
            texts = to_pylist_safe(batch.column("text"))
            extra = [pa.array(label_scores(model, texts, label, batch_size), pa.float64()) for model, label in loaded]
            yield pa.RecordBatch.from_arrays([*batch.columns, *extra], names=[*batch.schema.names, *cols])

    scored = df.mapInArrow(run, schema)
    return with_signals(scored, {m.name: F.col(c) for m, c in zip(models, cols)}).drop(*cols)


def score_stats(df: DataFrame, names: list[str], bins: int = 10) -> dict:
    """Per model: documents scored, mean, min, max and counts in `bins` equal bins over [0, 1]
    (scores above 1, fastText's 1.00001, count in the last), from one Spark aggregation."""
    aggs = []
    for n in names:
        s = F.col(f"{SIGNALS}.`{n}`")
        b = F.least(F.floor(s * bins), F.lit(bins - 1))
        aggs += [F.count(s).alias(f"{n}:n"), F.avg(s).alias(f"{n}:mean"), F.min(s).alias(f"{n}:min"),
                 F.max(s).alias(f"{n}:max")]
        aggs += [F.sum(F.when(b == i, 1).otherwise(0)).alias(f"{n}:b{i}") for i in range(bins)]
    row = df.agg(*aggs).first().asDict()
    out = {}
    for n in names:
        edges = np.round(np.linspace(0.0, 1.0, bins + 1), 6)
        out[n] = {"documents": int(row[f"{n}:n"]),
                  "mean": None if row[f"{n}:mean"] is None else round(row[f"{n}:mean"], 6),
                  "min": row[f"{n}:min"], "max": row[f"{n}:max"],
                  "histogram": {f"{edges[i]:.1f}-{edges[i + 1]:.1f}": int(row[f"{n}:b{i}"] or 0)
                                for i in range(bins)}}
    return out
