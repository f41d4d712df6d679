"""Where a run keeps what: every path under `--output`, each an explicit field.

    OUT/raw            Delta  ingested documents as they came (pipeline.write_raw)
    OUT/downloads      Delta  one row per fetched URL (row-level resume of downloads)
    OUT/clean|score|decontaminate|redact|dedup|tokenize  Delta  a plan's result when it ends at that stage
    OUT/curated        Delta  the deduplicated corpus, merged by id, versioned
    OUT/dedup_state    Delta  the MinHash side table of curated documents
    OUT/dedup_audit    Delta  one row per removed duplicate
    OUT/rejects        Delta  every rejected row with its reason
    OUT/shards/        the published shard build (manifest.json + b-<build id>/)
    OUT/report.json|html
    OUT/_run/          the run's stage outputs and completion markers (removed after success)
    OUT/_lock.json     the run lock (owner and heartbeat)

`shardforge build-shards --output S` publishes the build at S itself; its report, rejects
and run folder live beside the build (`S/_report`, `S/rejects`, `S/_run`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace


def join(root: str, *names: str) -> str:
    """`root/name/...` for local paths and URLs alike (no os.path: `hdfs://` must survive)."""
    return "/".join([root.rstrip("/") or "/", *names]) if root else "/".join(names)


@dataclass(frozen=True)
class Layout:
    root: str
    raw: str
    downloads: str
    clean: str
    score: str
    decontaminate: str
    redact: str
    dedup: str
    tokenize: str
    curated: str
    dedup_state: str
    dedup_audit: str
    rejects: str
    shards: str
    report: str          # folder of report.json / report.html
    work: str            # stage outputs and completion markers of the current run
    lock: str
    download_spool: str
    checkpoints: str

    @classmethod
    def for_output(cls, root: str) -> "Layout":
        def p(*names: str) -> str:
            return join(root, *names)

        return cls(root=root, raw=p("raw"), downloads=p("downloads"), clean=p("clean"), score=p("score"),
                   redact=p("redact"), dedup=p("dedup"), tokenize=p("tokenize"), curated=p("curated"),
                   dedup_state=p("dedup_state"), dedup_audit=p("dedup_audit"), rejects=p("rejects"),
                   shards=p("shards"), report=root,
                   work=p("_run"), lock=p("_lock.json"), download_spool=p("_download_spool"),
                   checkpoints=p("_checkpoints"), decontaminate=p("decontaminate"))

    @classmethod
    def for_build(cls, shards: str) -> "Layout":
        """`build-shards --output S`: the build is published at S; everything else sits beside it."""
        base = cls.for_output(shards)
        return replace(base, shards=shards, report=join(shards, "_report"))

    def output_of(self, stage_output: str) -> str:
        """The path a StageSpec.output names ("" for stages that publish nothing)."""
        return getattr(self, stage_output) if stage_output else ""

    def relative(self, path: str) -> str:
        """`path` relative to the root when it lies under it (markers stay valid if the folder moves)."""
        prefix = self.root.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else path

    def absolute(self, path: str) -> str:
        return path if "://" in path or path.startswith("/") else join(self.root, path)
