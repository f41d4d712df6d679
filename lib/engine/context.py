"""The contract between the runner and the stage functions (`shardforge.engine.steps`):
what a stage function is given (`StageContext`) and what it returns (`StageOutput`,
`Finished`), and how a stage's input is named (`Handle`). The runner and the stage
functions both import this module; neither imports the other's internals through it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from pyspark.sql import DataFrame, SparkSession

from shardforge.config import Config
from shardforge.engine.layout import Layout
from shardforge.engine.run import Run
from shardforge.fs import HadoopFiles
from shardforge.stages import StageSpec


@dataclass(frozen=True)
class RunOptions:
    restart: bool = False              # ignore completed stages of an earlier, unfinished run
    keep_intermediate: bool = False    # keep <work> (stage outputs, markers) after success
    as_of_version: int | None = None   # build-shards reads this version of its Delta input / the curated table


class Handle(NamedTuple):
    """Where a stage's input comes from: a Parquet folder or a Delta table (at a version)."""
    kind: str                  # parquet | delta
    path: str
    version: int | None = None

    def to_json(self, layout: Layout) -> dict:
        return {"kind": self.kind, "path": layout.relative(self.path), "version": self.version}

    @classmethod
    def from_json(cls, d: dict, layout: Layout) -> "Handle":
        return cls(d["kind"], layout.absolute(d["path"]), d.get("version"))


class Finished(NamedTuple):
    """What a stage's finish step returns: report sections, and (curate) the next stage's input."""
    report: dict
    next: Handle | None = None


@dataclass
class StageOutput:
    """What a stage function returns. Row stages: `kept` and `rejected` (REJECT rows), and
    `extras` (named frames to keep, e.g. dedup's audit). `shared` is a frame both are
    filtered from; it is persisted while they are written, so the stage's kernels run once.
    `finish` runs after everything is written (on the written frames). `summary` gives report
    sections from the written frames and only reads them: the runner computes it side by side
    with its row count, so their jobs overlap. Sinks: `rows_in`, `rows_out` and `report`."""
    kept: DataFrame | None = None
    rejected: DataFrame | None = None
    extras: dict[str, DataFrame] = field(default_factory=dict)
    shared: DataFrame | tuple[DataFrame, ...] | None = None     # or several such frames
    finish: Callable[["Done"], Finished | dict] | None = None
    summary: Callable[["Done"], dict] | None = None
    # aggregates over the kept rows (name -> Column), computed as they are written; `summary`
    # finds them in `Done.observed` (None when the rows were not written here: it then queries)
    observe: dict = field(default_factory=dict)
    rows_in: int | None = None
    rows_out: int | None = None
    report: dict = field(default_factory=dict)


@dataclass
class Done:
    """A completed stage of this plan (run now, or reused): its written outputs."""
    spec: StageSpec
    fingerprint: str
    entry: dict                         # the report's stage entry
    report: dict                        # report sections the stage adds (redactions, duplicates, shards...)
    kept: DataFrame | None = None
    rejected: DataFrame | None = None
    extras: dict[str, DataFrame] = field(default_factory=dict)
    next: Handle | None = None
    reused: bool = False
    schemas: dict = field(default_factory=dict)   # Spark schema (JSON) of each written part
    observed: dict | None = None        # StageOutput.observe's values, from the kept rows' write


@dataclass(frozen=True)
class Inputs:
    """The run's input: what it is, its fingerprint, and how the first stage gets it."""
    fingerprint: str
    source: dict                        # recorded in manifests: {"table", "version"} or {"paths"}
    direct: tuple[Handle, ...] = ()     # tables the first stage reads as they are (no `read` stage)


@dataclass
class StageContext:
    """What a stage function may use; it returns a StageOutput and writes nothing of the
    run's bookkeeping itself."""
    spark: SparkSession
    cfg: Config
    layout: Layout
    inputs: Inputs
    options: RunOptions
    base: dict                          # table versions pinned when the run first started
    run_id: str
    plan: tuple[str, ...]
    done: dict[str, Done]
    run: Run
    files: HadoopFiles
    stage: str = ""
    fingerprint: str = ""
    input_handle: Handle | None = None

    def persist(self, df: DataFrame) -> DataFrame:
        return self.run.persist(df)

    def is_last(self) -> bool:
        return self.plan[-1] == self.stage


    def timed(self, name: str):
        return self.run.timed(name)
