"""Each input file's format, decided by its extension, and the listing of an input path.

Promises: the same path gives the same (sorted) file list and formats; hidden files and
names starting with `_` or `.` are not inputs; a folder may mix every format below.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# suffix -> format; compressed JSONL keeps its codec in the format name
SUFFIXES = (
    (".jsonl.gz", "jsonl.gz"), (".json.gz", "jsonl.gz"), (".ndjson.gz", "jsonl.gz"),
    (".jsonl.bz2", "jsonl.bz2"), (".json.bz2", "jsonl.bz2"), (".ndjson.bz2", "jsonl.bz2"),
    (".jsonl.zst", "jsonl.zst"), (".json.zst", "jsonl.zst"), (".ndjson.zst", "jsonl.zst"),
    (".jsonl", "jsonl"), (".json", "jsonl"), (".ndjson", "jsonl"),
    (".warc.gz", "warc"), (".warc", "warc"), (".wet.gz", "warc"), (".wet", "warc"),
    (".tar", "webdataset"), (".tar.gz", "webdataset"), (".tgz", "webdataset"), (".tar.bz2", "webdataset"),
    (".tar.xz", "webdataset"),
    (".parquet", "parquet"), (".txt", "text"),
)
# read by Python tasks, a record at a time: shardforge.ingest.readers.streams (JSONL, WARC) and .wds (tars)
PYTHON_READ = ("jsonl", "jsonl.gz", "jsonl.bz2", "jsonl.zst", "warc", "webdataset")


@dataclass(frozen=True)
class InputFile:
    path: str        # as Spark and the readers open it (local path or URI)
    source: str      # relative to the input root: the rows' `source`, stable when the corpus moves
    format: str


def format_of(name: str) -> str | None:
    """The format of one file name, or None when its extension is not an input format."""
    low = name.lower()
    for suffix, fmt in SUFFIXES:
        if low.endswith(suffix):
            return fmt
    return None


def _local(path: str) -> str | None:
    p = path[len("file://"):] if path.startswith("file://") else path
    return None if "://" in p else p


def list_inputs(path: str) -> list[InputFile]:
    """The input files under `path` (a file, or a folder searched recursively), with formats;
    files of no known format are left out (`unknown_files` names them). Local paths only:
    other filesystems go through Spark's readers (see shardforge.ingest.stage)."""
    local = _local(path)
    if local is None:
        raise ValueError(f"{path}: only local paths are listed here")
    root = Path(local)
    if root.is_file():
        fmt = format_of(root.name)
        return [InputFile(str(root), root.name, fmt)] if fmt else []
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
        for name in sorted(filenames):
            if name.startswith(("_", ".")):
                continue
            fmt = format_of(name)
            if fmt:
                full = Path(dirpath) / name
                out.append(InputFile(str(full), full.relative_to(root).as_posix(), fmt))
    return sorted(out, key=lambda f: f.source)


def unknown_files(path: str) -> list[str]:
    """Files under a local folder that are of no input format (for error messages)."""
    root = Path(_local(path) or path)
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not p.name.startswith(("_", ".")) and format_of(p.name) is None
                  and not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts))
