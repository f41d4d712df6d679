"""The pipeline's steps, each: read what it needs, call its stage, account, write.

Jobs in `jobs/` are thin wrappers over these, and `jobs/pipeline.py` runs them in
order. Output layout under `--output` (every table is Delta unless noted):
`raw/` ingested documents, `downloads/` one row per fetched URL (for resuming),
`curated/` the deduplicated corpus (merged by id), `dedup_state/` the signatures
side table, `dedup_audit/` one row per removed duplicate, `rejects/` every rejected
row with its reason, `shards/` the published build (Parquet + manifest.json), and
`report.json` / `report.html`.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window
from pyspark.sql import functions as F

from .config import Config
from .curated import append_rejects, is_delta, merge_new, read_table, table_version
from .ingest import InputError, detect_format, read_documents
from .run import Run
from .stage import StageResult, empty_rejects, rejects

log = logging.getLogger("shardforge.steps")


@dataclass(frozen=True)
class Layout:
    root: str

    def __getattr__(self, name: str) -> str:  # raw, curated, rejects, downloads, _download_spool ...
        if name.startswith("__"):
            raise AttributeError(name)
        return os.path.join(self.root, name)


def build_config(cfg: Config) -> dict[str, Any]:
    """What a build records of its config: everything but where it ran and its paths."""
    d = cfg.to_dict()
    d.pop("spark", None)
    for k in ("input", "urls", "output"):
        d["pipeline"].pop(k, None)
    return d


def unique_ids(df: DataFrame) -> StageResult:
    """One row per id: of rows sharing an id, the one with the smallest (sha256(text), source)
    is kept; the others are rejected as `invalid:duplicate_id` (exact copies included:
    the dedup stage only sees distinct ids)."""
    w = Window.partitionBy("id").orderBy(F.sha2(F.coalesce("text", F.lit("")), 256), F.col("source"),
                                         F.sha2(F.coalesce("image", F.lit(b"").cast("binary")), 256))
    ranked = df.withColumn("_n", F.row_number().over(w))
    kept = ranked.filter("_n = 1").drop("_n")
    return StageResult(kept, rejects(ranked.filter("_n > 1"), "ingest", "invalid:duplicate_id"))


def read_inputs(spark: SparkSession, cfg: Config, run: Run) -> StageResult:
    """Documents and downloads of this batch, accounted as the `ingest` (and `download`) stages."""
    parts: list[StageResult] = []
    if cfg.pipeline.input:
        t = time.monotonic()
        parts.append(run.account("read", None, read_documents(spark, cfg.pipeline.input, cfg.ingest,
                                                             cfg.pipeline.input_format), t))
    if cfg.pipeline.urls:
        parts.append(download_step(spark, cfg, run))
    if not parts:
        raise InputError("no input: pass --input PATH and/or --urls PATH (or set pipeline.input/urls)")
    kept, rejected = parts[0]
    for p in parts[1:]:
        kept, rejected = kept.unionByName(p.kept), rejected.unionByName(p.rejected)
    rows_in = sum(s["kept"] for s in run.report["stages"] if s["name"] in ("read", "download"))
    t = time.monotonic()
    return run.account("ingest", rows_in, unique_ids(kept), t)


def download_step(spark: SparkSession, cfg: Config, run: Run) -> StageResult:
    """Fetch the URL lists. Executors spool each finished row (default `<output>/_download_spool`)
    and results merge into `<output>/downloads` by url, so a killed run resumes without
    fetching an ok URL twice."""
    from dataclasses import replace

    from .download import (clear_spool, download, load_previous, merge_results, read_url_list,
                           summary_dict)

    layout = Layout(cfg.pipeline.output)
    dl = cfg.download if cfg.download.spool_dir else replace(cfg.download, spool_dir=layout._download_spool)
    t = time.monotonic()
    urls = None
    for path in cfg.pipeline.urls:
        df = read_url_list(spark, path, dl)
        urls = df if urls is None else urls.unionByName(df)
    res = download(urls, dl, previous=load_previous(spark, layout.downloads, dl.spool_dir))
    results = run.persist(res.results)
    run.report["downloads"] = summary_dict(results)
    out = run.account("download", None, StageResult(res.kept, res.rejected), t)
    merge_results(spark, results, layout.downloads)
    clear_spool(dl.spool_dir)
    return out


def stage_input(spark: SparkSession, cfg: Config) -> DataFrame:
    """A stage job's input: a Delta table or Parquet of DOCUMENT rows is used as it is;
    raw document files go through the reader first (their rejects are not this stage's)."""
    from shardforge.schemas import DOCUMENT

    paths = list(cfg.pipeline.input)
    if not paths:
        raise InputError("no --input given")
    frames = []
    for path in paths:
        fmt = detect_format(path) if cfg.pipeline.input_format == "auto" else cfg.pipeline.input_format
        if fmt in ("delta", "parquet"):
            df = read_table(spark, path) if fmt == "delta" else spark.read.parquet(path)
            if set(DOCUMENT.fieldNames()) <= set(df.columns):
                frames.append(df)
                continue
        frames.append(read_documents(spark, [path], cfg.ingest, fmt).kept)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f, allowMissingColumns=True)
    return out


def clean_step(cfg: Config, run: Run, docs: DataFrame, n: int) -> StageResult:
    from .clean import clean

    t = time.monotonic()
    return run.account("clean", n, clean(docs, cfg.clean), t)


def redact_step(cfg: Config, run: Run, docs: DataFrame, n: int) -> StageResult:
    from .redact import counts_by_kind, redact

    t = time.monotonic()
    res = run.account("redact", n, redact(docs, cfg.redact), t)
    run.report["redactions"] = counts_by_kind(res.kept)
    return res


def dedup_step(spark: SparkSession, cfg: Config, run: Run, docs: DataFrame, n: int):
    """Returns (kept/rejected, a callable that records the kept documents' signatures in the
    side table: call it once they are in the curated table). The stage's checkpoints live
    under `<output>/_checkpoints` until the run finishes."""
    from .dedup import dedup, read_side_table, summary, update_side_table

    layout = Layout(cfg.pipeline.output)
    previous = read_side_table(spark, layout.dedup_state)
    previous_docs = read_table(spark, layout.curated).select("id", "text") if is_delta(layout.curated) else None
    checkpoint = cfg.dedup.checkpoint_dir or layout._checkpoints
    t = time.monotonic()
    res = dedup(docs, cfg.dedup, previous=previous, previous_docs=previous_docs, checkpoint_dir=checkpoint)
    out = run.account("dedup", n, StageResult(res.kept, res.rejected), t)
    audit = run.persist(res.audit)
    run.report["duplicates"] = summary(audit)
    merge_new(spark, audit, layout.dedup_audit, key="id")
    run.cleanup(spark, checkpoint)
    return out, lambda: update_side_table(spark, res.signatures, layout.dedup_state)


def write_curated(spark: SparkSession, cfg: Config, run: Run, docs: DataFrame, n: int, after=None) -> int:
    """Merge this batch into the curated table, accounted as the `curate` stage: rows whose
    id is already in the table are rejected as `duplicate_of:<id>` (a rerun of a batch adds
    nothing and commits nothing). Then `after` runs (e.g. the dedup side-table update).
    Returns the table version to build from."""
    layout = Layout(cfg.pipeline.output)
    t = time.monotonic()
    if is_delta(layout.curated):
        existing = read_table(spark, layout.curated).select("id")
        fresh = docs.join(existing, "id", "left_anti")
        present = rejects(docs.join(existing, "id", "left_semi"), "curate",
                          F.concat(F.lit("duplicate_of:"), F.col("id")))
    else:
        fresh, present = docs, empty_rejects(spark)
    fresh, _ = run.account("curate", n, StageResult(fresh, present), t)
    with run.timed("merge"):
        outcome = merge_new(spark, fresh, layout.curated, key="id")
        if after is not None:
            after()
    run.report["curated"] = {"path": layout.curated, "inserted": outcome.inserted, "version": outcome.version}
    log.info("curated: %d new documents, table version %d", outcome.inserted, outcome.version)
    return outcome.version


def write_rejects(spark: SparkSession, cfg: Config, run: Run, path: str | None = None) -> None:
    rej = run.all_rejects()
    if rej is None:
        rej = empty_rejects(spark)
    with run.timed("rejects"):
        append_rejects(spark, rej, path or Layout(cfg.pipeline.output).rejects)


def shards_step(spark: SparkSession, cfg: Config, run: Run, table: str, version: int | None,
                output: str, **kwargs) -> dict[str, Any]:
    from .shards import build_shards

    if version is None:
        version = table_version(spark, table)
    df = read_table(spark, table, version)
    with run.timed("build-shards"):
        manifest = build_shards(df, output, cfg.shards, config=build_config(cfg),
                                source={"table": os.path.abspath(table), "version": version}, **kwargs)
    run.report["shards"] = {"num_shards": manifest["num_shards"], "build_id": manifest["build_id"],
                            "path": output, "rows": [s["rows"] for s in manifest["shards"]],
                            "bytes": [s["bytes"] for s in manifest["shards"]]}
    return manifest


def single_stage_job(spark: SparkSession, cfg: Config, name: str) -> dict[str, Any]:
    """Run one stage alone: read --input, run it, merge kept rows into `<output>/<name>`
    (Delta, by id), add rejects to `<output>/rejects`, write the report."""
    layout = Layout(cfg.pipeline.output)
    run = Run(name, cfg.pipeline.output, build_config(cfg), master=spark.sparkContext.master)
    if name == "ingest":
        docs, _ = read_inputs(spark, cfg, run)
        target = layout.raw
    else:
        t = time.monotonic()
        docs, _ = run.account("read", None, StageResult(stage_input(spark, cfg), empty_rejects(spark)), t)
        n = run.report["stages"][-1]["kept"]
        after = None
        if name == "clean":
            docs, _ = clean_step(cfg, run, docs, n)
        elif name == "redact":
            docs, _ = redact_step(cfg, run, docs, n)
        elif name == "dedup":
            (docs, _), after = dedup_step(spark, cfg, run, docs, n)
        else:
            raise ValueError(f"unknown stage {name!r}")
        target = getattr(layout, name)
    with run.timed("write"):
        outcome = merge_new(spark, docs, target, key="id")
        if name == "dedup" and after is not None:
            after()
    run.report["output_table"] = {"path": target, "inserted": outcome.inserted, "version": outcome.version}
    write_rejects(spark, cfg, run)
    return run.finish()
