"""The one runner: plans a run's stages, reuses the completed ones, runs the rest.

Every entry point (`shardforge pipeline`, each single-stage subcommand, `build-shards`)
calls `execute`. For each stage of the plan, in `shardforge.stages.ORDER`:

1. Its fingerprint: sha256 of the stage name, the shardforge version, the config it reads,
   and either the run's input fingerprint (first stage) or the previous stage's
   fingerprint; `dedup` and `curate` also cover the table versions the run pinned.
2. When `<work>/<stage>/_COMPLETE.json` holds that fingerprint the stage is reused: its
   outputs are read back from `<work>/<stage>/` and its report entry from the marker.
3. Otherwise the input schema is asserted, the stage function runs, kept, rejected and
   named extra outputs are written as Parquet under `<work>/<stage>/`, counted, rows in =
   kept + rejected is checked (AccountingError), kept's schema is asserted, the stage's
   finish step publishes (Delta merges), and the marker is written last.

Then the rejects of every stage go to the rejects table, the last stage's rows to its
output table, the report is written and `<work>` is removed (`keep_intermediate` keeps it).
A table write whose rows no later stage changes (a stage's extra table such as dedup's
audit; the rejects once only sinks such as build-shards remain) starts in a thread as soon as
they are final, beside the stages still to run; the run waits for it before it reports.
A run killed anywhere resumes from the first stage without a matching marker and gives
the same Delta rows and shard bytes as an uninterrupted run: the table versions a run
reads (curated table, dedup side table) are pinned in `<work>/state.json` when it first
starts, and every publishing step is a merge by id (a rerun merges nothing twice).
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import time
import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from shardforge import __version__
from shardforge.config import Config, ConfigError
from shardforge.engine.records import recorded_config
from shardforge.fs import HadoopFiles, file_sha256
from shardforge.engine.layout import Layout, join
from shardforge.engine.run import Run
from shardforge.report.funnel import funnel_bound
from shardforge.stages import REGISTRY, StageSpec, check_stages
from shardforge.engine.context import (Done, Finished, Handle, Inputs, RunOptions, StageContext,  # noqa: F401
                                       StageOutput)

log = logging.getLogger("shardforge.engine.runner")

MARKER = "_COMPLETE.json"
STATE = "state.json"


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def config_part(cfg: Config, spec: StageSpec) -> dict:
    """The config a stage's fingerprint covers: its `reads` without its `ignore` keys (as the
    config is recorded: secrets as key ids), and the sha256 of the files its `content_of`
    keys name."""
    full = recorded_config(cfg)
    part: dict[str, Any] = {}
    for ref in spec.reads:
        section, _, key = ref.partition(".")
        part[ref] = copy.deepcopy(full[section][key] if key else full[section])
    for ref in spec.content_of:
        for name, holder, key in _named(full, ref):
            value = holder[key]
            if isinstance(value, list):
                if value:
                    part[f"sha256({name})"] = [_content_sha(p) for p in value]
            else:
                part[f"sha256({name})"] = _content_sha(value)
    for ref in spec.ignore:
        for _name, holder, key in _named(part, ref):
            holder.pop(key, None)
    return part


def _named(config: dict, ref: str) -> list[tuple[str, dict, str]]:
    """(name, the dict holding it, its key) of each value `ref` names in a recorded config:
    `section.key`, or `section.key[].field` for that field of every table in a list
    (`score.models[].path` -> `score.models[0].path`, ...). Absent values name nothing."""
    section, _, key = ref.partition(".")
    holder = config.get(section)
    if not isinstance(holder, dict):
        return []
    if "[]." not in key:
        return [(ref, holder, key)] if key in holder else []
    key, _, field = key.partition("[].")
    return [(f"{section}.{key}[{i}].{field}", item, field) for i, item in enumerate(holder.get(key) or [])
            if isinstance(item, dict) and field in item]


def _content_sha(path: str) -> str:
    """sha256 of a file's bytes; of a folder, of every file under it (symlinks
    followed) with its path relative to the folder's parent, so the folder's own name counts
    (it names the category of a block list) but not where it lies."""
    if not os.path.isdir(path):
        return file_sha256(path)
    base = os.path.dirname(os.path.normpath(path))
    h = hashlib.sha256()
    for f in sorted(os.path.join(root, f) for root, _, files in os.walk(path, followlinks=True) for f in files):
        h.update(f"{os.path.relpath(f, base)}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()


def _schema_of(name: str) -> StructType:
    from shardforge import schemas

    return getattr(schemas, name)


def _assert(df: DataFrame, schema_name: str | None, where: str) -> None:
    if schema_name and schema_name != "ANY":
        from shardforge.schemas import assert_schema

        assert_schema(df, _schema_of(schema_name), where, extra_ok=True)


class Runner:
    def __init__(self, spark: SparkSession, cfg: Config, layout: Layout, stages: tuple[str, ...],
                 options: RunOptions = RunOptions(), *, name: str | None = None):
        self.spark, self.cfg, self.layout, self.options = spark, cfg, layout, options
        self.stages = check_stages(stages)
        self.files = HadoopFiles(spark)
        from shardforge.fs import qualify

        self.run = Run(name or cfg.pipeline.name, qualify(spark, layout.report), recorded_config(cfg),
                       master=spark.sparkContext.master, files=self.files)

    # -- planning -------------------------------------------------------------------------
    def resolve_inputs(self) -> Inputs:
        """Fingerprint the input and decide whether the first stage needs the `read` stage."""
        from shardforge.curated.tables import is_delta, table_version
        from shardforge.ingest.stage import InputError, check_exists, detect_format

        cfg, first = self.cfg, REGISTRY[self.stages[0]]
        paths = list(cfg.pipeline.input)
        parts: list[Any] = []
        if first.name == "ingest":
            if not paths and not cfg.pipeline.urls:
                raise InputError("no input: pass --input PATH and/or --urls PATH (or set pipeline.input/urls)")
            for p in [*paths, *cfg.pipeline.urls]:
                check_exists(p)
                parts.append([p, self._file_stats(p)])
            return Inputs(_sha(parts), {"paths": paths, "urls": list(cfg.pipeline.urls)})
        if not paths:
            raise InputError(f"no --input given (the plan starts at {first.name!r}, which reads a table or files)")
        direct: list[Handle] = []
        for p in paths:
            check_exists(p)
            fmt = detect_format(p) if cfg.pipeline.input_format == "auto" else cfg.pipeline.input_format
            if fmt == "delta" and is_delta(p):
                v = self.options.as_of_version
                v = table_version(self.spark, p) if v is None else v
                parts.append([p, "delta", v])
                direct.append(Handle("delta", p, v))
            else:
                parts.append([p, fmt, self._file_stats(p)])
                if fmt == "parquet":
                    direct.append(Handle("parquet", p))
        if len(direct) == 1 and direct[0].kind == "delta":
            source = {"table": direct[0].path, "version": direct[0].version}
        else:
            source = {"paths": paths}
        usable = len(direct) == len(paths) and (
            (first.name == "build-shards" and len(direct) == 1 and direct[0].kind == "delta")
            or all(self._is_document_table(h) for h in direct))
        return Inputs(_sha(parts), source, tuple(direct) if usable else ())

    def _file_stats(self, path: str) -> list:
        return [[f.path, f.size, f.mtime] for f in self.files.list_files(path)]

    def _is_document_table(self, h: Handle) -> bool:
        from shardforge.schemas import DOCUMENT

        return set(DOCUMENT.fieldNames()) <= set(self.load(h).columns)

    def load(self, h: Handle, schema: StructType | None = None) -> DataFrame:
        from shardforge.curated.tables import read_table

        if h.kind == "delta":
            return read_table(self.spark, h.path, h.version)
        reader = self.spark.read
        if schema is not None:
            reader = reader.schema(schema)
        return reader.parquet(h.path)

    def plan(self, inputs: Inputs) -> tuple[str, ...]:
        if REGISTRY[self.stages[0]].is_source or inputs.direct:
            return self.stages
        return ("read", *self.stages)

    # -- run state ------------------------------------------------------------------------
    def _state(self, inputs: Inputs) -> dict:
        """The state of this run: continued from an unfinished run on the same input, or new
        (pinning the table versions the stages will read)."""
        path = join(self.layout.work, STATE)
        text = None if self.options.restart else self.files.read_text(path)
        if text:
            state = json.loads(text)
            if (state.get("input") == inputs.fingerprint and state.get("version") == __version__
                    and not state.get("finished")):
                log.info("run state found: continuing run %s (started %s)", state["run_id"], state["started"])
                return state
            log.info("run state of a finished run, or of another input or version: starting afresh")
        self.files.delete(self.layout.work)
        from shardforge.curated.tables import is_delta, table_version

        base = {name: table_version(self.spark, p) if is_delta(p) else None
                for name, p in (("curated", self.layout.curated), ("dedup_state", self.layout.dedup_state))}
        state = {"run_id": uuid.uuid4().hex[:12], "started": self.run.report["run"]["started"],
                 "input": inputs.fingerprint, "version": __version__, "base": base}
        self.files.write_text(path, json.dumps(state, indent=2, sort_keys=True))
        return state

    # -- the loop -------------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        inputs = self.resolve_inputs()
        plan = self.plan(inputs)
        state = self._state(inputs)
        ctx = StageContext(self.spark, self.cfg, self.layout, inputs, self.options, state["base"],
                           state["run_id"], plan, {}, self.run, self.files)
        self.run.report["plan"] = list(plan)
        with Background(self.spark) as early:
            prev, first_ran = self._stages(ctx, plan, state, inputs, early)
            any_reused = any(d.reused for d in ctx.done.values())
            self.run.report["resumed_from"] = first_ran if any_reused else None
            self._write_tables(ctx, prev, early)
        from shardforge.redact.privacy import privacy_report

        self.run.report["privacy"] = privacy_report(self.cfg)
        report = self.run.finish()
        if self.options.keep_intermediate:
            state["finished"] = True
            self.files.write_text(join(self.layout.work, STATE), json.dumps(state, indent=2, sort_keys=True))
        else:
            self.files.delete(self.layout.work)
            if "ingest" in plan:      # the download spool: kept until now, so a rerun resumed from it
                self.files.delete(self.cfg.download.spool_dir or self.layout.download_spool)
        return report

    def _stages(self, ctx: StageContext, plan: tuple[str, ...], state: dict, inputs: Inputs,
                early: "Background") -> tuple[Done | None, str | None]:
        """Run or reuse each stage of `plan` in order; (the last stage's Done, the first stage
        that ran). A table write that no later stage changes starts in `early` as soon as its
        rows are final (`_start_writes`), so it overlaps the stages still to run."""
        upstream = inputs.fingerprint
        current: Handle | None = None
        prev: Done | None = None
        first_ran: str | None = None
        fused: Done | None = None          # clean's, when ingest ran fused with it
        for i, name in enumerate(plan):
            spec = REGISTRY[name]
            fp = self._fingerprint(spec, upstream, state)
            ctx.stage, ctx.fingerprint = name, fp
            if current is None and not spec.is_source and inputs.direct:
                ctx.input_handle = inputs.direct[0] if len(inputs.direct) == 1 else None
            else:
                ctx.input_handle = current
            nxt = self._fingerprint(REGISTRY[plan[i + 1]], fp, state) if i + 1 < len(plan) else None
            done = self._reuse(spec, fp, (plan[i + 1], nxt) if nxt else None) if first_ran is None else None
            if done is None and fused is not None and name == "clean":
                done, fused = fused, None
            elif done is None:
                first_ran = first_ran or name
                from shardforge.ingest.fused import blocker

                why = blocker(self.cfg, plan, i) if name == "ingest" else "not ingest"
                if why is None:
                    done, fused = self._run_fused(REGISTRY["ingest"], fp, REGISTRY["clean"], nxt, ctx)
                else:
                    if name == "ingest" and plan[i + 1:i + 2] == ("clean",):
                        log.info("stages ingest and clean run one after the other: %s", why)
                    done = self._run_stage(spec, fp, ctx, prev, current, inputs)
            ctx.done[name] = done
            self.run.add_stage(done.entry)
            self.run.report.update(done.report)
            upstream = fp
            if done.next is not None:
                current = done.next
            elif not spec.is_sink:
                current = Handle("parquet", self._dir(name, "kept"))
            prev = done
            self._start_writes(ctx, plan[i + 1:], done, early)
        return prev, first_ran

    def _fingerprint(self, spec: StageSpec, upstream: str, state: dict) -> str:
        return _sha({"stage": spec.name, "version": __version__, "config": config_part(self.cfg, spec),
                     "upstream": upstream, "pins": self._pins(spec, state),
                     # its rejects keep no record (_materialise): a run keeping them must not reuse it
                     **({"rejects_record": "none"} if self.cfg.rejects.record == "none" else {})})

    def _pins(self, spec: StageSpec, state: dict) -> dict:
        if spec.name in ("dedup", "curate"):
            return dict(state["base"])
        return {}

    def _dir(self, stage: str, part: str = "") -> str:
        return join(self.layout.work, stage, part) if part else join(self.layout.work, stage)

    def _reuse(self, spec: StageSpec, fp: str, after: tuple[str, str] | None = None) -> Done | None:
        """The stage's Done from its marker, when the marker holds `fp`. A stage that ran fused
        with the next one (`ingest.fused`: its kept rows were never written) is reused only
        when `after` (the next stage of this plan and its fingerprint now) is that stage, and
        its own marker holds that fingerprint: then the next one is reused too."""
        text = self.files.read_text(join(self._dir(spec.name), MARKER))
        if not text:
            return None
        marker = json.loads(text)
        if marker.get("fingerprint") != fp:
            log.info("stage %s: its inputs or config changed since it completed: running it again", spec.name)
            return None
        with_next = marker.get("fused_with")
        if with_next:
            later = self.files.read_text(join(self._dir(with_next["stage"]), MARKER))
            if (after is None or tuple(after) != (with_next["stage"], with_next["fingerprint"]) or not later
                    or json.loads(later).get("fingerprint") != with_next["fingerprint"]):
                log.info("stage %s: ran in one pass with %s, which is not complete or changed: running both again",
                         spec.name, with_next["stage"])
                return None
        schemas = {k: StructType.fromJson(v) for k, v in marker.get("schemas", {}).items()}

        def part(name: str) -> DataFrame | None:
            return self.load(Handle("parquet", self._dir(spec.name, name)), schemas[name]) if name in schemas else None

        entry = {**marker["entry"], "reused": True, "seconds": 0.0}
        log.info("stage %s: reused (completed earlier: %s in, %s kept, %s rejected)", spec.name,
                 entry.get("rows_in"), entry.get("kept"), entry.get("rejected"))
        nxt = Handle.from_json(marker["next"], self.layout) if marker.get("next") else None
        return Done(spec, fp, entry, marker.get("report", {}), part("kept"), part("rejected"),
                    {k: part(k) for k in schemas if k not in ("kept", "rejected")}, nxt, reused=True,
                    schemas=marker.get("schemas", {}))

    def _input_frame(self, spec: StageSpec, ctx: StageContext, inputs: Inputs, current: Handle | None,
                     prev: Done | None) -> tuple[DataFrame | None, int | None]:
        """The stage's input and its row count (None when the stage counts its own input)."""
        if spec.is_source:
            return None, None
        if current is None:  # the plan starts here, on tables read as they are
            frames = [self.load(h) for h in inputs.direct]
            df = frames[0]
            for f in frames[1:]:
                df = df.unionByName(f, allowMissingColumns=True)
            return df, None if spec.is_sink else df.count()
        if prev is not None and prev.next is None and prev.kept is not None:
            return prev.kept, prev.entry["kept"]
        df = self.load(current)
        return df, None if spec.is_sink else df.count()

    def _run_stage(self, spec: StageSpec, fp: str, ctx: StageContext, prev: Done | None,
                   current: Handle | None, inputs: Inputs) -> Done:
        from shardforge.engine import steps

        df, rows_in = self._input_frame(spec, ctx, inputs, current, prev)
        if df is not None:
            _assert(df, spec.input_schema, f"input of stage {spec.name}")
        log.info("stage %s: started", spec.name)
        t0 = time.monotonic()
        with self._small(spec, rows_in if not spec.is_sink else self._published_rows(prev, ctx), ctx) as small:
            if small:
                log.info("stage %s: a small stage, on Spark's interpreted expressions ([spark] codegen_min_rows, "
                         "codegen_min_input_bytes)", spec.name)
            done = self._run_stage_body(spec, fp, ctx, df, rows_in, steps)
        done.entry["seconds"] = round(time.monotonic() - t0, 3)
        done.entry["reused"] = False
        self._write_marker(spec, done)
        log.info("stage %s: done in %.1f s", spec.name, done.entry["seconds"])
        return done

    def _small(self, spec: StageSpec, rows_in: int | None, ctx: StageContext):
        """`session.interpreted` for a small stage: one whose work follows its input rows
        (StageSpec.by_rows), reading no pinned table version (a first batch: the run's tables
        did not exist), under `[spark] codegen_min_rows` rows; or a source stage whose input is
        local files under `codegen_min_input_bytes`."""
        from shardforge.engine.session import input_size, interpreted

        sp = self.cfg.spark
        if spec.is_source:
            limit = sp.codegen_min_input_bytes
            size = input_size((*self.cfg.pipeline.input, *self.cfg.pipeline.urls), limit=limit) if limit else None
            return interpreted(self.spark, size is not None and size < limit)
        pinned = any(v is not None for v in self._pins(spec, {"base": ctx.base or {}}).values())
        return interpreted(self.spark, spec.by_rows and not pinned and rows_in is not None
                           and rows_in < sp.codegen_min_rows)

    def _published_rows(self, prev: Done | None, ctx: StageContext) -> int | None:
        """The rows of the curated table a sink reads, when this run made that table: the rows
        curate kept (the table did not exist when the run first started, `state.json`); else
        None (not known without a query)."""
        if prev is None or prev.spec.name != "curate" or (ctx.base or {}).get("curated") is not None:
            return None
        return prev.entry.get("kept")

    def _run_stage_body(self, spec: StageSpec, fp: str, ctx: StageContext, df: DataFrame | None,
                        rows_in: int | None, steps) -> Done:
        out: StageOutput = getattr(steps, spec.function)(ctx, df)
        if spec.is_sink:
            entry = {"name": spec.name, "rows_in": out.rows_in, "kept": out.rows_out, "rejected": 0,
                     "rejects_by_reason": {}}
            done = Done(spec, fp, entry, dict(out.report))
            if out.rows_in != out.rows_out:
                from shardforge.engine.run import AccountingError

                raise AccountingError(f"stage {spec.name}: {out.rows_in} rows in, but {out.rows_out} written")
        else:
            done = self._materialise(spec, fp, out)
            # a source stage's input is files: its rows in are the rows it made, kept or rejected
            self.run.check(spec.name, rows_in, done.entry)
            _assert(done.kept, spec.output_schema, f"output of stage {spec.name}")
            from shardforge.schemas import REJECT, assert_schema

            assert_schema(done.rejected, REJECT, f"rejects of stage {spec.name}")
            if out.finish is not None:
                fin = out.finish(done)
                fin = fin if isinstance(fin, Finished) else Finished(fin or {})
                done.report.update(fin.report)
                done.next = fin.next
        return done

    def _run_fused(self, ing: StageSpec, ing_fp: str, cl: StageSpec, cl_fp: str,
                   ctx: StageContext) -> tuple[Done, Done]:
        """ingest and clean in one pass (`ingest.fused`): each stage's rejects and clean's kept
        rows written, each counted and checked (ingest's kept counted from the pass, clean's
        rows in against it), ingest's marker (naming clean's fingerprint), then clean's."""
        from shardforge.engine import steps
        from shardforge.schemas import REJECT, assert_schema

        log.info("stages ingest and clean: started, in one pass over the JSONL files")
        t0 = time.monotonic()
        with self._small(ing, None, ctx) as small:
            if small:
                log.info("stages ingest and clean: small input, on Spark's interpreted expressions "
                         "([spark] codegen_min_input_bytes)")
            ing_out, cl_out, marked = steps.ingest_clean(ctx)       # the pass ran: marked is persisted
            t1 = time.monotonic()
            try:
                ing_done, cl_done = self._materialise_all([(ing, ing_fp, ing_out, False),
                                                           (cl, cl_fp, cl_out, True)])
            finally:
                marked.unpersist()
        self.run.check(ing.name, None, ing_done.entry)
        assert_schema(ing_done.rejected, REJECT, f"rejects of stage {ing.name}")
        self.run.check(cl.name, ing_done.entry["kept"], cl_done.entry)
        _assert(cl_done.kept, cl.output_schema, f"output of stage {cl.name}")
        assert_schema(cl_done.rejected, REJECT, f"rejects of stage {cl.name}")
        # ingest's seconds: the pass (reading, the id check, clean's kernels); clean's: writing
        # and counting both stages' outputs
        ing_done.entry["seconds"] = round(t1 - t0, 3)
        cl_done.entry["seconds"] = round(time.monotonic() - t1, 3)
        for d in (ing_done, cl_done):
            d.entry["reused"] = False
            d.entry["fused"] = True
        self._write_marker(ing, ing_done, fused_with={"stage": cl.name, "fingerprint": cl_fp})
        self._write_marker(cl, cl_done)
        log.info("stages ingest and clean: done in %.1f s", time.monotonic() - t0)
        return ing_done, cl_done

    def _materialise(self, spec: StageSpec, fp: str, out: StageOutput) -> Done:
        """Write kept, rejected and extras as Parquet (the stage's kernels run once: the
        shared frame is persisted while its parts are written), read them back, count."""
        return self._materialise_all([(spec, fp, out, True)])[0]

    def _materialise_all(self, parts: list[tuple[StageSpec, str, StageOutput, bool]]) -> list[Done]:
        """`_materialise` for the stages of one pass (spec, fingerprint, output, write_kept):
        each stage's kept parts first, then every other part side by side, then the counts
        and report queries side by side. Without write_kept a stage's kept rows are counted
        where they are, not written (ingest fused with clean, which reads them in the pass)."""
        shared = [f for _, _, out, _ in parts
                  for f in (out.shared if isinstance(out.shared, (tuple, list)) else (out.shared,)) if f is not None]
        shared = [f if f.is_cached else self.run.persist(f) for f in shared]
        frames: dict[str, dict[str, DataFrame]] = {}
        written: dict[str, dict[str, DataFrame]] = {spec.name: {} for spec, _, _, _ in parts}
        schemas: dict[str, dict[str, Any]] = {spec.name: {} for spec, _, _, _ in parts}
        for spec, _, out, _ in parts:
            rejected = out.rejected
            if self.cfg.rejects.record == "none" and rejected is not None:
                from shardforge.redact.stage import without_records

                # the rejects table will keep no record: never build one (a JSON copy of every
                # rejected row, text included), nor read the text back for it
                rejected = without_records(rejected)
            frames[spec.name] = {"kept": out.kept, "rejected": rejected, **out.extras}

        observed: dict[str, dict[str, Any]] = {spec.name: {} for spec, _, _, _ in parts}

        asked = {spec.name: out.observe for spec, _, out, _ in parts}

        def write(stage: str, name: str) -> None:
            df = frames[stage][name]
            path = self._dir(stage, name)
            out, obs = df, None
            if name in ("kept", "rejected"):
                # counted as the rows are written, in the write's own job (no job reads them back),
                # with the aggregates the stage's summary asks of its kept rows
                from pyspark.sql import Observation

                obs = Observation()
                extra = asked[stage] if name == "kept" else {}
                out = df.observe(obs, F.count(F.lit(1)).alias("rows"), *[c.alias(k) for k, c in extra.items()])
            out.write.mode("overwrite").parquet(path)
            if obs is not None:
                observed[stage][name] = obs
            written[stage][name] = self.load(Handle("parquet", path), df.schema)
            schemas[stage][name] = df.schema.jsonValue()

        # kept first, alone: it fills the shared frames' cache, which the other parts then
        # read; those (rejects, extras: mostly small) are written side by side in threads, so
        # their jobs' fixed driver-side costs overlap. With no shared frame to fill, every
        # part goes side by side.
        first = [(spec.name, "kept") for spec, _, _, write_kept in parts if write_kept]
        for spec, _, out, write_kept in parts:
            if not write_kept:
                written[spec.name]["kept"] = out.kept
        later = [(spec.name, n) for spec, _, _, _ in parts for n in frames[spec.name] if n != "kept"]
        if shared:
            for stage, name in first:
                write(stage, name)
        else:
            later = first + later
        side_by_side(self.spark, [lambda s=stage, n=name: write(s, n) for stage, name in later])
        for f in shared:
            f.unpersist()
        dones, calls, summaries = [], [], []
        for spec, fp, out, _ in parts:
            got, order = written[spec.name], frames[spec.name]
            kinds = {n: schemas[spec.name][n] for n in order if n in schemas[spec.name]}  # in the parts' order
            extras = {k: v for k, v in got.items() if k not in ("kept", "rejected")}
            done = Done(spec, fp, {}, dict(out.report), got["kept"], got["rejected"], extras, schemas=kinds)
            summary: dict[str, Any] = {}
            seen = observed[spec.name]
            if "kept" in seen and out.observe:
                values = seen["kept"].get
                done.observed = {k: values[k] for k in out.observe}
            if "kept" in seen and "rejected" in seen:
                calls.append(lambda d=done, g=got, n=spec.name, o=seen: d.entry.update(self.run.count_observed(
                    n, o["kept"].get["rows"], o["rejected"].get["rows"], g["rejected"])))
            else:
                calls.append(lambda d=done, g=got, n=spec.name: d.entry.update(self.run.count(n, g["kept"],
                                                                                              g["rejected"])))
            if out.summary is not None:
                calls.append(lambda d=done, o=out, m=summary: m.update(o.summary(d)))
            dones.append(done)
            summaries.append(summary)
        side_by_side(self.spark, calls)     # the counts and the stages' report queries overlap
        for done, summary in zip(dones, summaries):
            done.report.update(summary)
        return dones

    def _write_marker(self, spec: StageSpec, done: Done, fused_with: dict | None = None) -> None:
        marker = {"stage": spec.name, "fingerprint": done.fingerprint, "shardforge_version": __version__,
                  "entry": done.entry, "report": done.report,
                  "next": done.next.to_json(self.layout) if done.next else None,
                  "schemas": done.schemas, **({"fused_with": fused_with} if fused_with else {})}
        self.files.write_text(join(self._dir(spec.name), MARKER), json.dumps(marker, indent=2, sort_keys=True,
                                                                              default=str))

    # -- after the stages -----------------------------------------------------------------
    def _start_writes(self, ctx: StageContext, rest: tuple[str, ...], done: Done, early: "Background") -> None:
        """Start the table writes whose rows are final once `done`'s stage is through: its
        extra tables (StageSpec.tables, e.g. dedup's audit) now, and the run's rejects when
        every stage still to run (`rest`) is a sink, which rejects nothing (build-shards).
        Each is an idempotent merge into a table no later stage touches, so it may overlap
        them; `execute` waits for all of them before it reports or raises."""
        for extra, field_name in done.spec.tables:
            if done.extras.get(extra) is not None:
                early.submit(lambda d=done, e=extra, f=field_name: self._merge_extra(d, e, f))
        if rest and not early.rejects_started and all(REGISTRY[n].is_sink for n in rest):
            frames = [d.rejected for d in ctx.done.values() if d.rejected is not None]
            names = tuple(ctx.done)
            early.submit(lambda: self._write_rejects(ctx, frames, names))
            early.rejects_started = True

    def _write_tables(self, ctx: StageContext, last: Done | None, early: "Background") -> None:
        """The run's table writes once its stages are done, side by side in threads of one
        session with those `_start_writes` began earlier: the last stage's rows (then the
        dedup side table) and the rejects, unless they began already. They touch different
        Delta tables and each is an idempotent merge, so their order does not matter; most of
        a small write's time is the driver's commit bookkeeping, which threads overlap."""
        early.submit(lambda: self._publish_last(ctx, last))
        if not early.rejects_started:
            frames = [d.rejected for d in ctx.done.values() if d.rejected is not None]
            early.submit(lambda: self._write_rejects(ctx, frames, tuple(ctx.done)))

    def _merge_extra(self, done: Done, extra: str, field_name: str) -> None:
        from shardforge.curated.tables import merge_new

        with self.run.timed(field_name):
            merge_new(self.spark, done.extras[extra], getattr(self.layout, field_name), key="id")

    def _publish_last(self, ctx: StageContext, last: Done | None) -> None:
        """A plan that ends on a row stage other than curate publishes its rows to that
        stage's table (merged by id, so a rerun adds nothing)."""
        from shardforge.engine import steps

        if last is None or last.spec.is_sink or last.spec.name == "curate":
            return
        target = self.layout.output_of(last.spec.output)
        if not target:
            return
        with self.run.timed("write"):
            outcome = steps.publish_rows(ctx, last.kept, target)
        self.run.report["output_table"] = {"path": target, "inserted": outcome.inserted, "version": outcome.version}

    def _write_rejects(self, ctx: StageContext, frames: list[DataFrame], stages: tuple[str, ...]) -> None:
        """The rejects of `stages` (`frames`, their rejected parts) merged into the rejects table."""
        from shardforge.curated.tables import append_rejects
        from shardforge.stage import empty_rejects

        if not frames and all(REGISTRY[n].is_sink for n in stages):
            return      # a shard build alone (build-shards from a table) rejects nothing: no Delta commit
        rej = frames[0] if frames else empty_rejects(self.spark)
        for f in frames[1:]:
            rej = rej.unionByName(f)
        # as few files as their rows need (each stage's rejects are in files of their own: a
        # union of them would write one small file per part, and its tasks compete with the
        # stages still running)
        rows = sum(int(ctx.done[n].entry.get("rejected") or 0) for n in stages if n in ctx.done)
        per_file = REJECT_ROWS_PER_FILE if self.cfg.rejects.record == "none" else REJECT_RECORDS_PER_FILE
        files = max(1, -(-rows // per_file))
        rej = rej.coalesce(files)     # never more parts than it has
        from shardforge.redact.stage import rejects_for_output

        # the write's queries say their bound, so the no-funnel check (shardforge.report.funnel)
        # can tell this coalesce, which grows with the rows, from one that squeezes a stage
        with self.run.timed("rejects"), described(self.spark, f"shardforge: the run's rejects into {files} "
                                                              f"file(s) {funnel_bound(per_file)}"):
            append_rejects(self.spark, rejects_for_output(rej, self.cfg), self.layout.rejects)


# rows per file of the rejects table as a run writes it: rows without a record are about 100
# bytes, rows with one about the size of the rejected document (a few KB on web data)
REJECT_ROWS_PER_FILE = 1_000_000
REJECT_RECORDS_PER_FILE = 20_000


class Background:
    """Calls run in threads of one session while the caller goes on (`submit`), each with the
    session as its thread's active one, as `side_by_side` runs them. Leaving the `with` block
    waits for every call; then the block's own error is raised if it had one (a call's error
    is logged), else the first call's error."""

    def __init__(self, spark: SparkSession, workers: int = 4):
        self.spark, self.workers = spark, workers
        self.futures: list = []
        self.rejects_started = False
        self.pool = None

    def __enter__(self) -> "Background":
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="shardforge-write")
        return self

    def submit(self, call) -> None:
        self.futures.append(self.pool.submit(_in_session(self.spark, call)))

    def __exit__(self, kind, exc, tb) -> bool:
        self.pool.shutdown(wait=True)
        errors = [f.exception() for f in self.futures if f.exception() is not None]
        if exc is not None:
            for e in errors:
                log.error("a table write that ran beside the stages failed too: %s", e)
            return False
        if errors:
            raise errors[0]
        return False


def _in_session(spark: SparkSession, call):
    def run():
        spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)
        try:
            return call()
        finally:
            spark._jvm.SparkSession.clearActiveSession()
    return run


@contextlib.contextmanager
def described(spark: SparkSession, text: str):
    """Spark's job description for the jobs and SQL queries this thread starts inside the
    block (the UI's and the event log's name for them); the previous one is restored after."""
    sc = spark.sparkContext
    before = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(text)
    try:
        yield
    finally:
        sc.setJobDescription(before)


def side_by_side(spark: SparkSession, calls: list) -> None:
    """Run `calls` (no arguments each) side by side in threads of this session, each with the
    session as its thread's active one (Spark's is per thread: `is_delta` on a remote path
    and Delta's helpers look it up); every call finishes before the first error is raised.
    A single call runs in the calling thread."""
    from concurrent.futures import ThreadPoolExecutor

    if len(calls) <= 1:
        for call in calls:
            call()
        return

    with ThreadPoolExecutor(max_workers=max(1, len(calls)), thread_name_prefix="shardforge-write") as pool:
        futures = [pool.submit(_in_session(spark, c)) for c in calls]
    for f in futures:
        f.result()


def validate(cfg: Config, stages: tuple[str, ...]) -> None:
    """Check every planned stage's settings before any Spark job: a ConfigError names the key."""
    for name in check_stages(stages):
        try:
            if name == "ingest" and cfg.pipeline.urls:
                from shardforge.ingest.download import check_config

                check_config(cfg.download)
            elif name == "clean" and cfg.url_filter.blocklists:
                from shardforge.clean.urls import category_folders

                category_folders(cfg.url_filter.blocklists)
            elif name == "redact":
                from shardforge.redact.stage import redactor_from_config

                redactor_from_config(cfg.redact)
            elif name == "dedup":
                from shardforge.dedup.stage import resolve_params

                resolve_params(cfg.dedup)
            elif name == "tokenize":
                from shardforge.tokenize.stage import load_tokenizer

                load_tokenizer(cfg.tokenize.tokenizer)
            elif name == "score":
                from shardforge.score.model import binding, check_models

                check_models(cfg.score)
                binding()
            elif name == "decontaminate":
                from shardforge.decontaminate import load_index

                load_index(cfg.decontaminate)   # reads every benchmark file and builds the index (kept for the stage)
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def _lock_before_session(cfg: Config, layout: Layout, spark) -> bool:
    """A local output of an embedded local run is locked before Spark starts (a second run
    stops at once); anything else once the session resolves the path as Spark will. With
    a Hadoop configuration (HADOOP_CONF_DIR, YARN_CONF_DIR, spark.hadoop.fs.defaultFS) a
    path without a scheme may resolve to HDFS, so only the session can tell."""
    import os

    from shardforge.fs import is_local

    if not is_local(layout.lock):
        return False
    hadoop_conf = any(os.environ.get(v) for v in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"))
    if not layout.lock.startswith("file:") and (hadoop_conf or "spark.hadoop.fs.defaultFS" in cfg.spark.properties):
        return False
    if spark is not None:
        return spark.sparkContext.master.startswith("local")
    return not os.environ.get("PYSPARK_GATEWAY_PORT") and cfg.spark.master.startswith("local")


def run_job(cfg: Config, stages, *, layout: Layout, options: RunOptions = RunOptions(), name: str | None = None,
            spark: SparkSession | None = None) -> dict[str, Any]:
    """One job, from checked config to report: validate the planned stages' settings, take
    the output's lock, start (or reuse) the session, run, release. Raises ConfigError,
    InputError, LockHeld, AccountingError, SchemaMismatch: the CLI maps them to exit codes."""
    from shardforge.fs import LocalFiles
    from shardforge.engine.lock import RunLock

    try:
        stages = check_stages(stages)
    except ValueError as exc:
        raise ConfigError(f"pipeline.stages: {exc}") from None
    validate(cfg, stages)
    lock = None
    if _lock_before_session(cfg, layout, spark):
        lock = RunLock(layout.lock, LocalFiles(), timeout=cfg.pipeline.lock_timeout).acquire()
    warm = None
    try:
        if spark is None:
            from shardforge.engine.session import QUICK_JIT_MAX_INPUT, get_spark, input_size, local_cores, warm_up

            fresh = SparkSession.getActiveSession() is None
            size = input_size((*cfg.pipeline.input, *cfg.pipeline.urls), limit=QUICK_JIT_MAX_INPUT) if fresh else None
            spark = get_spark(cfg.spark, input_bytes=size)
            master = spark.sparkContext.master
            if fresh and master.startswith("local"):     # a session started here: its workers are cold
                warm = warm_up(spark, local_cores(master))
        if lock is None:
            lock = RunLock(layout.lock, HadoopFiles(spark), timeout=cfg.pipeline.lock_timeout).acquire()
        from shardforge.ingest.stage import declared_schema

        declared_schema(cfg.ingest)    # Spark parses the declared JSONL column types: a ConfigError names a bad one
        return Runner(spark, cfg, layout, stages, options, name=name).execute()
    finally:
        if warm is not None:
            warm.join()
        if lock is not None:
            lock.release()
