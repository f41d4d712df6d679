"""The stage registry: every stage declared once, and the one place their order is written.

A `StageSpec` says what a stage is: its name, the config it reads (the part of the
config its fingerprint covers), the schemas asserted at its boundaries, the Layout
field its final output is published to, and the function that runs it
(`shardforge.engine.steps.<function>`). `pipeline.stages` picks from `ORDER`; the runner
(`shardforge.engine.runner`) executes the picked stages in this order for every entry
point: `shardforge pipeline`, each single-stage subcommand and `build-shards`.

This module imports nothing heavy, so the config can validate stage names without Spark.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageSpec:
    name: str
    # Config its fingerprint covers: whole sections ("clean") or single keys
    # ("pipeline.input_format"). Keys that say where, not what, are left out (`ignore`).
    reads: tuple[str, ...]
    function: str                       # attribute of shardforge.engine.steps
    output: str                         # Layout field the stage's result is published to when it ends a plan
    input_schema: str | None = "DOCUMENT"   # name in shardforge.schemas; "ANY": no check; None: reads the run's inputs
    output_schema: str | None = "DOCUMENT"  # asserted on kept rows (extra columns allowed); None: a sink
    # keys of `reads` left out of the fingerprint; `section.key[].field` names a field of every
    # table in a list of tables (`score.models[].path`)
    ignore: tuple[str, ...] = ()
    # keys naming files or folders (or lists of them) whose content the fingerprint covers (same forms)
    content_of: tuple[str, ...] = ()
    listable: bool = True               # may appear in pipeline.stages (else the runner adds it)
    # (extra, Layout field): written extras merged by id into these Delta tables once the
    # stages are done, beside the run's other table writes (also from a reused stage: merges
    # are idempotent, so a run killed before them completes them when resumed)
    tables: tuple[tuple[str, str], ...] = ()
    # its Spark work grows with its input rows alone (beside them it reads only the table
    # versions the run pinned, `runner._pins`): below `[spark] codegen_min_rows` input rows, and
    # with no pinned table to read, it runs on interpreted expressions (`session.interpreted`;
    # a sink's input rows are known when this run made the table it reads: `runner._published_rows`)
    by_rows: bool = False

    @property
    def is_source(self) -> bool:
        """Reads the run's inputs itself (files, URL lists), so it has no upstream stage."""
        return self.input_schema is None

    @property
    def is_sink(self) -> bool:
        """Moves no rows on: it publishes what it reads (the shard build)."""
        return self.output_schema is None


_SPECS = (
    # `read` is not listed by users: the runner puts it first when a plan does not start with
    # `ingest` and its input is document files (JSONL, text, Parquet or Delta of other columns).
    StageSpec("read", reads=("pipeline.input_format", "ingest"), function="read", output="",
              input_schema=None, listable=False),
    StageSpec("ingest", reads=("pipeline.input_format", "pipeline.write_raw", "ingest", "download"),
              function="ingest", output="raw", input_schema=None, ignore=("download.spool_dir",)),
    # the block lists are covered by their content (and their folder names), not their paths
    StageSpec("clean", reads=("clean", "quality", "url_filter"), function="clean", output="clean",
              ignore=("url_filter.blocklists",), content_of=("url_filter.blocklists",), by_rows=True),
    # the model files are covered by their content (sha256), not by their paths
    StageSpec("score", reads=("score",), function="score", output="score",
              ignore=("score.models[].path",), content_of=("score.models[].path",)),
    # the benchmark files are covered by their content, not by their paths
    StageSpec("decontaminate", reads=("decontaminate", "quality.mode"), function="decontaminate",
              output="decontaminate", ignore=("decontaminate.benchmarks[].path",),
              content_of=("decontaminate.benchmarks[].path",)),
    StageSpec("redact", reads=("redact",), function="redact", output="redact", output_schema="CURATED",
              by_rows=True),
    StageSpec("dedup", reads=("dedup",), function="dedup", output="dedup", ignore=("dedup.checkpoint_dir", "dedup.local_graph_max_nodes"),
              tables=(("audit", "dedup_audit"),), by_rows=True),
    # the tokenizer file is covered by its content (sha256), not by its path
    StageSpec("tokenize", reads=("tokenize",), function="tokenize", output="tokenize",
              ignore=("tokenize.tokenizer",), content_of=("tokenize.tokenizer",), by_rows=True),
    StageSpec("curate", reads=(), function="curate", output="curated", by_rows=True),
    StageSpec("build-shards", reads=("shards", "select"), function="build_shards", output="shards",
              input_schema="ANY", output_schema=None, by_rows=True),
)

REGISTRY: dict[str, StageSpec] = {s.name: s for s in _SPECS}
ORDER: tuple[str, ...] = tuple(s.name for s in _SPECS if s.listable)
# score needs model files, decontaminate benchmark files and tokenize a tokenizer: listed only
# by users who give them
DEFAULT_STAGES: tuple[str, ...] = tuple(n for n in ORDER if n not in ("score", "decontaminate", "tokenize"))


def check_stages(names) -> tuple[str, ...]:
    """The stage names as given, checked: known, listable, each once, in ORDER's order.
    Raises ValueError naming the first bad one (and listing the known ones)."""
    names = tuple(names)
    for i, n in enumerate(names):
        if n not in ORDER:
            raise ValueError(f"unknown stage {n!r} (known, in order: {', '.join(ORDER)})")
        if n in names[:i]:
            raise ValueError(f"stage {n!r} is listed twice")
        if i and ORDER.index(n) < ORDER.index(names[i - 1]):
            raise ValueError(f"stage {n!r} must come before {names[i - 1]!r} (order: {', '.join(ORDER)})")
    if not names:
        raise ValueError(f"no stage listed (known, in order: {', '.join(ORDER)})")
    return names
