"""The stage functions the registry (`shardforge.stages`) names, one per stage.

Each takes the runner's StageContext and its input DataFrame (None for the stages that
read the run's inputs) and returns a StageOutput: kept rows, rejected rows, extra frames
to keep, and a finish step that publishes once those are written. None of them counts,
accounts, writes markers or the report: the runner does (`shardforge.engine.runner`).
"""
from __future__ import annotations

import logging
import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from shardforge.engine.records import recorded_config
from shardforge.curated.tables import MergeOutcome, merge_new, read_table
from shardforge.engine.context import Finished, Handle, StageContext, StageOutput
from shardforge.ingest.stage import unique_ids  # noqa: F401 - ingest's id check, named here too
from shardforge.stage import StageResult, empty_rejects, rejects

log = logging.getLogger("shardforge.engine.steps")


def _union(results: list[tuple[str, StageResult]]) -> StageResult:
    """Kept rows by column name (a column one part lacks is null there), rejects appended,
    the readers' shared frames and extras carried."""
    from shardforge.ingest.stage import merge_results

    return merge_results(results)


def _input_report(done) -> dict:
    """The report of a reading stage: WARC records by type (responses and conversions are
    rows; the other types are counted here and skipped) and the HTML extractor; WebDataset
    tar members by what became of them."""
    out = _tar_report(done.extras["tar_members"]) if "tar_members" in done.extras else {}
    counts = done.extras.get("input_records")
    if counts is None:
        return out
    from shardforge.ingest.extract import extractor_info

    rows = counts.collect()
    by_type: dict[str, int] = {}
    for r in rows:
        by_type[r["record_type"]] = by_type.get(r["record_type"], 0) + int(r["count"])
    as_rows = sum(v for k, v in by_type.items() if k in ("response", "conversion", "unreadable"))
    return {**out, "warc": {"files": len({r["source"] for r in rows}), "records_by_type": dict(sorted(by_type.items())),
                            "rows": as_rows, "skipped_records": sum(by_type.values()) - as_rows},
            "extractor": extractor_info()}


def _tar_report(counts) -> dict:
    """`webdataset`: files; rows and members by unit (sample, member: a member in no sample,
    damage: a damaged file's last row, skipped: directories); members in kept samples and in
    rejects. Every tar member is counted once: members = in_kept_samples + rejected + skipped."""
    rows = counts.collect()
    by_unit: dict[str, dict[str, int]] = {}
    for r in rows:
        u = by_unit.setdefault(r["unit"], {"rows": 0, "members": 0, "rejected_members": 0})
        for k in u:
            u[k] += int(r[k] or 0)
    total = sum(u["members"] for u in by_unit.values())
    rejected = sum(u["rejected_members"] for u in by_unit.values())
    skipped = by_unit.get("skipped", {}).get("members", 0)
    return {"webdataset": {"files": len({r["source"] for r in rows}), "members": total,
                           "members_in_kept_samples": total - rejected - skipped, "members_rejected": rejected,
                           "directories_skipped": skipped,
                           "rows": sum(u["rows"] for k, u in by_unit.items() if k != "skipped"),
                           "by_unit": dict(sorted(by_unit.items()))}}


def read(ctx: StageContext, _df: None) -> StageOutput:
    """The run's input files as documents, for a plan that does not start with ingest: tables
    of DOCUMENT rows are taken as they are, other files go through the document reader
    (whose rejects, e.g. malformed JSONL lines, are this stage's)."""
    from shardforge.schemas import DOCUMENT

    from shardforge.ingest.stage import detect_format, read_documents

    cfg = ctx.cfg
    parts = []
    for path in cfg.pipeline.input:
        fmt = detect_format(path) if cfg.pipeline.input_format == "auto" else cfg.pipeline.input_format
        if fmt in ("delta", "parquet"):
            df = read_table(ctx.spark, path) if fmt == "delta" else ctx.spark.read.parquet(path)
            if set(DOCUMENT.fieldNames()) <= set(df.columns):
                parts.append((path, StageResult(df, empty_rejects(ctx.spark))))
                continue
        parts.append((path, read_documents(ctx.spark, [path], cfg.ingest, fmt)))
    res = _union(parts)
    return StageOutput(res.kept, res.rejected, shared=res.shared, extras=res.extras, finish=_input_report)


def ingest(ctx: StageContext, _df: None) -> StageOutput:
    """Documents and downloads of this batch, one row per id. Downloads merge into
    `<output>/downloads` by url and spool each finished row under the output, so a killed
    run does not fetch an ok URL twice (row-level resume inside the stage)."""
    from shardforge.ingest.stage import read_documents

    cfg, parts, report = ctx.cfg, [], {}
    if cfg.pipeline.input:
        parts.append(("the documents", read_documents(ctx.spark, cfg.pipeline.input, cfg.ingest,
                                                      cfg.pipeline.input_format)))
    results = None
    if cfg.pipeline.urls:
        from dataclasses import replace

        from shardforge.ingest.download import download, load_previous, read_url_list, summary_dict

        dl = cfg.download if cfg.download.spool_dir else replace(cfg.download, spool_dir=ctx.layout.download_spool)
        urls = None
        for path in cfg.pipeline.urls:
            df = read_url_list(ctx.spark, path, dl)
            urls = df if urls is None else urls.unionByName(df)
        res = download(urls, dl, previous=load_previous(ctx.spark, ctx.layout.downloads, dl.spool_dir))
        results = res.results
        report["downloads"] = summary_dict(results)
        parts.append(("the downloads", StageResult(res.kept, res.rejected)))
    batch = _union(parts)
    for f in batch.shared or ():    # filled by the id count below, then read by the writes (not parsed again)
        ctx.persist(f)
    ids = unique_ids(batch.kept)

    def finish(done) -> dict:
        out = _input_report(done)
        if results is not None:
            from shardforge.ingest.download import merge_results

            with ctx.timed("downloads"):
                merge_results(ctx.spark, results, ctx.layout.downloads)
            # the spool stays until the run succeeds (the runner removes it): a rerun resumes from it
        if cfg.pipeline.write_raw and not ctx.is_last():
            with ctx.timed("raw"):
                merge_new(ctx.spark, done.kept, ctx.layout.raw, key="id")
        return out

    return StageOutput(ids.kept, batch.rejected.unionByName(ids.rejected), shared=batch.shared,
                       extras=batch.extras, finish=finish, report=report)


def ingest_clean(ctx: StageContext) -> tuple[StageOutput, StageOutput, DataFrame]:
    """ingest and clean in one pass over local JSONL (`shardforge.ingest.fused`): their two
    outputs, and the pass's frame, for the runner to persist while both are written."""
    from shardforge.clean.urls import UrlFilter
    from shardforge.ingest.fused import read_and_clean

    f = read_and_clean(ctx.spark, ctx.cfg, UrlFilter.from_config(ctx.cfg.url_filter))
    return (StageOutput(f.ingest.kept, f.ingest.rejected, shared=f.ingest.shared),
            StageOutput(f.clean.kept, f.clean.rejected, shared=f.clean.shared), f.marked)


def clean(ctx: StageContext, df: DataFrame) -> StageOutput:
    from shardforge.clean.stage import clean as run_clean
    from shardforge.clean.urls import UrlFilter

    urls = UrlFilter.from_config(ctx.cfg.url_filter)
    # a rejects table without records (rejects.record = "none") never needs a rejected text
    res = run_clean(df, ctx.cfg.clean, ctx.cfg.quality, urls, rejected_text=ctx.cfg.rejects.record != "none")
    counted = {}        # annotate mode: what filter mode would have dropped, by rule and by URL label
    if "quality_fail" in res.kept.columns:
        counted["quality_fail"] = F.col("quality_fail")
    if urls is not None and ctx.cfg.quality.mode == "annotate":
        counted["url_blocklist"] = F.col("signals.url_blocklist")
    report = None
    if counted:
        def report(done) -> dict:
            out = {}
            for name, col in counted.items():
                rows = done.kept.groupBy(col.alias(name)).count().collect()
                out[name] = {r[name] or "none": int(r["count"]) for r in sorted(rows, key=lambda r: r[name] or "")}
            return out
    return StageOutput(res.kept, res.rejected, shared=res.shared, summary=report)


def score(ctx: StageContext, df: DataFrame) -> StageOutput:
    """fastText scores of every document in `signals.<name>` (`shardforge.score.stage`); nothing
    is rejected. The report gets, per model, its file's sha256, the label and the spread of
    the scores."""
    from shardforge.score.model import check_models
    from shardforge.score.stage import score as run_score, score_stats

    models = check_models(ctx.cfg.score)

    def finish(done) -> dict:
        stats = score_stats(done.kept, [m.name for m in models])
        return {"scores": {m.name: {"label": m.label, "model_sha256": m.sha256, **stats[m.name]} for m in models}}

    return StageOutput(run_score(df, ctx.cfg.score, models), empty_rejects(ctx.spark), finish=finish)


def decontaminate(ctx: StageContext, df: DataFrame) -> StageOutput:
    """Documents holding a benchmark's word n-gram (`shardforge.decontaminate`): rejected as
    `contaminated:<benchmark>`, or kept with `signals` in annotate mode. The index is built on
    the driver (once: the check before the run built it) and broadcast; the report gets
    matches per benchmark and the ten most-hit n-grams."""
    from shardforge.decontaminate import decontaminate as run_decontaminate, load_index, summary

    cfg = ctx.cfg.decontaminate
    annotate = ctx.cfg.quality.mode == "annotate"
    index = load_index(cfg)
    res = run_decontaminate(df, index, annotate=annotate)
    return StageOutput(res.kept, res.rejected, shared=res.shared, extras=res.extras,
                       finish=lambda done: {"decontamination": summary(cfg, index, done.extras["contamination"],
                                                                       annotate=annotate)})


def redact(ctx: StageContext, df: DataFrame) -> StageOutput:
    from shardforge.redact.stage import (counts_by_kind, counts_by_kind_aggregates, counts_by_kind_of,
                                         redact as run_redact)

    res = run_redact(df, ctx.cfg.redact)
    kinds = tuple(ctx.cfg.redact.kinds)

    def report(done) -> dict:
        seen = counts_by_kind_of(done.observed, kinds) if done.observed else None
        return {"redactions": seen if seen is not None else counts_by_kind(done.kept)}
    return StageOutput(res.kept, res.rejected, shared=res.shared, summary=report,
                       observe=counts_by_kind_aggregates(kinds))


def dedup(ctx: StageContext, df: DataFrame) -> StageOutput:
    """Exact and near duplicates, against this batch and the documents curated before it
    (the side table and curated table at the versions the run pinned when it started, so a
    resumed run deduplicates against what the first attempt saw). Checkpoints live under
    `<output>/_checkpoints` only while the stage runs."""
    from shardforge.dedup import dedup as run_dedup, summary
    from shardforge.fs import delete_path

    spark, layout, base = ctx.spark, ctx.layout, ctx.base
    previous = read_table(spark, layout.dedup_state, base["dedup_state"]) if base["dedup_state"] is not None else None
    previous_docs = (read_table(spark, layout.curated, base["curated"]).select("id", "text")
                     if base["curated"] is not None else None)
    checkpoint = (ctx.cfg.dedup.checkpoint_dir or layout.checkpoints).rstrip("/")
    token = _checkpoint_token(ctx)
    if token is not None:
        _drop_stale_checkpoints(ctx, checkpoint, token)
    # ingest earlier in this plan leaves one row per id (no stage between changes ids): dedup
    # need not look for repeated ones
    ids_unique = "ingest" in ctx.plan[:ctx.plan.index(ctx.stage)]
    res = run_dedup(df, ctx.cfg.dedup, previous=previous, previous_docs=previous_docs, checkpoint_dir=checkpoint,
                    checkpoint_token=token, ids_unique=ids_unique)
    if res.reused:
        log.info("dedup: reusing what an earlier attempt finished: %s", ", ".join(res.reused))

    def finish(done) -> dict:
        # a shared dedup.checkpoint_dir keeps other outputs' folders; <output>/_checkpoints goes whole
        delete_path(spark, res.scratch if ctx.cfg.dedup.checkpoint_dir else checkpoint)
        return {"dedup_timings": {k: round(v, 3) for k, v in res.timings.items()}, "dedup_reused": list(res.reused)}

    # the audit is merged into layout.dedup_audit by the runner (StageSpec.tables)
    return StageOutput(res.kept, res.rejected, extras={"audit": res.audit, "side": res.signatures}, finish=finish,
                       summary=lambda done: {"duplicates": summary(done.extras["audit"])})


def _owner(ctx: StageContext) -> str:
    """This output's mark on its dedup folders in a shared `dedup.checkpoint_dir`."""
    import hashlib

    return hashlib.sha256(ctx.layout.root.encode("utf-8")).hexdigest()[:8]


def _checkpoint_token(ctx: StageContext) -> str | None:
    """dedup's scratch folder token for this stage fingerprint: the fingerprint under the
    output's own `_checkpoints`, `<output hash>-<fingerprint>` in a shared
    `dedup.checkpoint_dir`. An earlier attempt's finished results under it are reused (same
    fingerprint: same input rows, settings and pinned tables). None without a fingerprint
    (a random folder, nothing reused)."""
    if not ctx.fingerprint:
        return None
    return ctx.fingerprint[:16] if not ctx.cfg.dedup.checkpoint_dir else f"{_owner(ctx)}-{ctx.fingerprint[:16]}"


def _drop_stale_checkpoints(ctx: StageContext, checkpoint: str, token: str) -> None:
    """Delete this output's dedup folders of other fingerprints (stale), and the one of
    `token` on `--restart`. Other outputs' folders in a shared `dedup.checkpoint_dir` are
    left alone."""
    from shardforge.dedup.components import Materializer

    private = not ctx.cfg.dedup.checkpoint_dir       # <output>/_checkpoints: this output's alone
    ours = Materializer.folder_name(f"{_owner(ctx)}-")
    current = Materializer.folder_name(token)
    for name in ctx.files.children(checkpoint):
        if (private or name.startswith(ours)) and (name != current or ctx.options.restart):
            ctx.files.delete(f"{checkpoint}/{name}")


def tokenize(ctx: StageContext, df: DataFrame) -> StageOutput:
    """Token ids of every document (`shardforge.tokenize.stage`); the report gets total tokens, a
    tokens-per-document histogram and tokens per second."""
    import time

    from shardforge.tokenize.stage import (load_tokenizer, token_stats, token_stats_aggregates, token_stats_of,
                                           tokenize as run_tokenize)

    info = load_tokenizer(ctx.cfg.tokenize.tokenizer)
    if info.encoder == "shardforge":
        log.info("tokenize: shardforge's compiled byte-level BPE (same ids as tokenizers for this file)")
    else:
        log.info("tokenize: the tokenizers library's encoder (%s)", info.encoder_note)
    t0 = time.monotonic()

    def report(done) -> dict:
        stats = token_stats_of(done.observed) if done.observed else token_stats(done.kept)
        seconds = time.monotonic() - t0
        return {"tokens": {**stats, "column": ctx.cfg.tokenize.column, "dtype": info.dtype,
                           "vocab_size": info.vocab_size, "tokenizer_sha256": info.sha256,
                           "encoder": info.encoder, **({"encoder_note": info.encoder_note} if info.encoder_note else {}),
                           "tokens_per_second": round(stats["total"] / seconds, 1) if seconds > 0 else None}}

    return StageOutput(run_tokenize(df, ctx.cfg.tokenize, info), empty_rejects(ctx.spark), summary=report,
                       observe=token_stats_aggregates())


def _commit_side_table(ctx: StageContext) -> None:
    """Once a batch's documents are in their table, record their signatures in the dedup
    side table (merged by id: idempotent)."""
    done = ctx.done.get("dedup")
    if done is not None:
        from shardforge.dedup import update_side_table

        with ctx.timed("dedup_state"):
            update_side_table(ctx.spark, done.extras["side"], ctx.layout.dedup_state)


def publish_rows(ctx: StageContext, kept: DataFrame, target: str) -> MergeOutcome:
    """A plan that ends on a row stage: its rows merged by id into `target` (a rerun adds
    nothing), then the dedup side table when the plan deduplicated. URLs lose their
    credentials, except in raw (the input as it came)."""
    from shardforge.redact.privacy import without_url_credentials

    if target != ctx.layout.raw:
        kept = without_url_credentials(kept)
    outcome = merge_new(ctx.spark, kept, target, key="id")
    _commit_side_table(ctx)
    return outcome


def curate(ctx: StageContext, df: DataFrame) -> StageOutput:
    """Merge this batch into the curated table by id. Rows whose id the table held when the
    run first started (the pinned version) are rejected as `duplicate_of:<id>`; the others
    are kept and merged. The split is against the pinned version, and the merge inserts only
    ids the table lacks, so a rerun after a crash that followed the commit keeps and rejects
    the same rows and commits nothing more."""
    from shardforge.schemas import documents

    from shardforge.curated.tables import check_types
    from shardforge.redact.privacy import without_url_credentials

    spark, layout, base = ctx.spark, ctx.layout, ctx.base["curated"]
    docs = without_url_credentials(documents(df))
    if base is not None:
        check_types(docs, read_table(spark, layout.curated, base), layout.curated)
        existing = read_table(spark, layout.curated, base).select("id")
        fresh = docs.join(existing, "id", "left_anti")
        present = rejects(docs.join(existing, "id", "left_semi"), "curate",
                          F.concat(F.lit("duplicate_of:"), F.col("id")))
    else:
        fresh, present = docs, empty_rejects(spark)

    def finish(done) -> Finished:
        with ctx.timed("merge"):
            outcome = merge_new(spark, done.kept, layout.curated, key="id")
            _commit_side_table(ctx)
        added = done.entry["kept"]       # what this batch adds to the pinned version, merged now or before a crash
        log.info("curated: %d new documents (%d merged by this attempt), table version %d", added,
                 outcome.inserted, outcome.version)
        return Finished({"curated": {"path": layout.curated, "inserted": added, "version": outcome.version}},
                        next=Handle("delta", layout.curated, outcome.version))

    return StageOutput(fresh, present, finish=finish)


def _where(ctx: StageContext, path: str) -> str:
    """A path as the manifest records it: resolved as Spark resolves it (a relative path on
    HDFS is an `hdfs://` URL), a local one made absolute."""
    from shardforge.fs import qualify

    path = qualify(ctx.spark, path)
    return path if "://" in path else os.path.abspath(path)


def build_shards(ctx: StageContext, df: DataFrame) -> StageOutput:
    """Publish the input as a shard build at `<output>/shards` (or --output of build-shards),
    under the build folder's own lock. A Delta input is read at a pinned version, recorded
    in the manifest."""
    from shardforge.engine.lock import RunLock
    from shardforge.shards.build import build_shards as run_build

    handle = ctx.input_handle
    as_of = ctx.options.as_of_version
    if handle is not None and handle.kind == "delta":
        if as_of is not None and as_of != handle.version:
            handle = handle._replace(version=as_of)
            df = read_table(ctx.spark, handle.path, as_of)
        source = {"table": _where(ctx, handle.path), "version": handle.version}
    else:
        source = {"paths": [_where(ctx, p) for p in ctx.cfg.pipeline.input]}
    out = ctx.layout.shards
    lock_path = f"{out.rstrip('/')}/_lock.json"
    lock = None if lock_path == ctx.layout.lock else RunLock(lock_path, ctx.files,
                                                                timeout=ctx.cfg.pipeline.lock_timeout).acquire()
    try:
        manifest = run_build(df, out, ctx.cfg.shards, config=recorded_config(ctx.cfg), source=source,
                             where=ctx.cfg.select.where.strip())
    finally:
        if lock is not None:
            lock.release()
    rows = [s["rows"] for s in manifest["shards"]]
    report = {"shards": {"num_shards": manifest["num_shards"], "build_id": manifest["build_id"], "path": out,
                         "rows": rows, "bytes": [s["bytes"] for s in manifest["shards"]]}}
    if "select" in manifest["source"]:
        report["select"] = manifest["source"]["select"]
    return StageOutput(rows_in=manifest["total_rows"], rows_out=sum(rows), report=report)


