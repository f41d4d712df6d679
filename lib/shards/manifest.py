"""The shard build's manifest: its format, reading, writing and verification.

Pure Python and pyarrow; the loader imports it, so nothing here may import Spark.
A build is a folder holding `manifest.json` (the commit point, replaced atomically)
and the build's data under `<build_id>/part-{shard:05d}-of-{num:05d}.parquet`.
Shard `file` entries are relative to the manifest's folder.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

FORMAT = "shardforge.shards"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


class ManifestError(ValueError):
    """A path that is not a readable shard build, or a build that fails its checks."""


@dataclass(frozen=True)
class ShardInfo:
    index: int
    file: str
    rows: int
    bytes: int
    sha256: str
    row_groups: tuple[int, ...]
    # integer-list columns (token ids): the sum of the lists' lengths in each row group, so a
    # reader finds a token offset without reading the shard (absent in older builds)
    list_lengths: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"index": self.index, "file": self.file, "rows": self.rows, "bytes": self.bytes,
               "sha256": self.sha256, "row_groups": list(self.row_groups)}
        if self.list_lengths:
            out["list_lengths"] = {k: list(v) for k, v in sorted(self.list_lengths.items())}
        return out


@dataclass(frozen=True)
class Manifest:
    """A parsed manifest; `root` is the folder (local path or fsspec URL) it came from."""
    root: str
    build_id: str
    key: str
    hash: str
    num_shards: int
    total_rows: int
    shards: tuple[ShardInfo, ...]
    schema: tuple[dict[str, Any], ...]
    config: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    shardforge_version: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """Identifies the build's content: 16 hex chars over the shards' checksums."""
        return fingerprint([s.sha256 for s in self.shards])

    def path_of(self, shard: ShardInfo) -> str:
        return join(self.root, shard.file)

    @property
    def column_names(self) -> list[str]:
        return [f["name"] for f in self.schema]


def fingerprint(shard_sha256s: list[str]) -> str:
    return hashlib.sha256("\n".join(shard_sha256s).encode()).hexdigest()[:16]


def join(root: str, rel: str) -> str:
    if "://" in root:
        return posixpath.join(root.rstrip("/"), rel)
    return os.path.join(root, rel)


def open_file(path: str, mode: str = "rb"):
    """A file object of its own for `path` (a local path, file:// or any fsspec URL)."""
    if "://" in path and not path.startswith("file://"):
        import fsspec  # optional: only for remote URLs

        fs, inner = fsspec.core.url_to_fs(path)
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        if mode == "rb" and "memory" in protocols:
            # memory:// hands every opener the one stored file object, position included: two
            # threads reading a shard (a decode and a checksum) would move each other's reads
            return io.BytesIO(fs.cat_file(inner))
        return fs.open(inner, mode)
    if path.startswith("file://"):
        path = path[len("file://"):]
    return open(path, mode)


def manifest_path(path: str) -> tuple[str, str]:
    """(root folder, manifest file) for a build folder or a manifest file path."""
    path = str(path)
    if path.rstrip("/").endswith(".json"):
        root = posixpath.dirname(path) if "://" in path else os.path.dirname(os.path.abspath(path))
        return root, path
    root = path.rstrip("/") if "://" in path else os.path.abspath(path)
    return root, join(root, MANIFEST_NAME)


def to_json(data: dict[str, Any]) -> bytes:
    """The one serialisation of a manifest: sorted keys, 2-space indent, newline."""
    return (json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def parse(data: dict[str, Any], root: str, where: str = "manifest") -> Manifest:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(f"{where}: not a shardforge shard manifest (no \"format\": \"{FORMAT}\")")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ManifestError(f"{where}: unknown manifest format_version {version!r}; this shardforge "
                            f"reads version {FORMAT_VERSION} (upgrade shardforge or rebuild the shards)")
    try:
        shards = tuple(ShardInfo(index=int(s["index"]), file=str(s["file"]), rows=int(s["rows"]),
                                 bytes=int(s["bytes"]), sha256=str(s["sha256"]),
                                 row_groups=tuple(int(r) for r in s["row_groups"]),
                                 list_lengths={str(k): tuple(int(n) for n in v)
                                               for k, v in (s.get("list_lengths") or {}).items()})
                       for s in data["shards"])
        m = Manifest(root=root, build_id=str(data["build_id"]), key=str(data["key"]),
                     hash=str(data["hash"]), num_shards=int(data["num_shards"]),
                     total_rows=int(data["total_rows"]), shards=shards,
                     schema=tuple(data["schema"]), config=dict(data.get("config", {})),
                     source=dict(data.get("source", {})),
                     shardforge_version=str(data.get("shardforge_version", "")), raw=data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"{where}: malformed manifest: {exc!r}") from None
    if len(m.shards) != m.num_shards or [s.index for s in m.shards] != list(range(m.num_shards)):
        raise ManifestError(f"{where}: lists {len(m.shards)} shards for num_shards={m.num_shards}")
    if sum(s.rows for s in m.shards) != m.total_rows:
        raise ManifestError(f"{where}: shard rows do not add up to total_rows={m.total_rows}")
    for s in m.shards:
        if sum(s.row_groups) != s.rows:
            raise ManifestError(f"{where}: shard {s.index} row_groups do not add up to its rows")
    return m


def read_manifest(path: str) -> Manifest:
    """Open a build by its folder or its manifest.json (local path or fsspec URL)."""
    root, mpath = manifest_path(path)
    try:
        with open_file(mpath) as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ManifestError(f"{path}: no shard build here ({MANIFEST_NAME} not found)") from None
    except IsADirectoryError:
        raise ManifestError(f"{path}: {mpath} is a folder, not a manifest") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{mpath}: not valid JSON: {exc}") from None
    return parse(data, root, where=mpath)


def sha256_file(path: str, chunk: int = 1 << 20) -> tuple[str, int]:
    """(hex sha256, size in bytes) of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    n = 0
    with open_file(path) as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                break
            h.update(block)
            n += len(block)
    return h.hexdigest(), n


def shard_mismatch(m: Manifest, index: int) -> str | None:
    """None when shard `index`'s file has the manifest's size and sha256, else what differs
    (one line). A missing file raises FileNotFoundError."""
    shard = m.shards[index]
    path = m.path_of(shard)
    digest, size = sha256_file(path)
    if size != shard.bytes or digest != shard.sha256:
        return (f"checksum mismatch for shard {index} ({path}): sha256 {digest} ({size} bytes) "
                f"!= manifest {shard.sha256} ({shard.bytes} bytes)")
    return None


@dataclass(frozen=True)
class ShardProblem:
    index: int
    file: str
    problem: str


def verify(m: Manifest) -> list[ShardProblem]:
    """Re-checks every shard's existence, size and sha256; returns the problems found."""
    problems = []
    for s in m.shards:
        path = m.path_of(s)
        try:
            digest, size = sha256_file(path)
        except FileNotFoundError:
            problems.append(ShardProblem(s.index, s.file, "missing"))
            continue
        if size != s.bytes:
            problems.append(ShardProblem(s.index, s.file, f"size {size} != manifest {s.bytes}"))
        elif digest != s.sha256:
            problems.append(ShardProblem(s.index, s.file, f"sha256 {digest[:12]}… != manifest {s.sha256[:12]}…"))
    return problems


def is_token_list(t) -> bool:
    """True for an Arrow type that can hold a document's token ids: a list (or large list) of
    integers. The loader's sequence mode and the Megatron export accept only such columns."""
    import pyarrow as pa

    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type)


def token_column_problem(schema, column: str, where: str) -> str | None:
    """Why `column` of a build's Arrow `schema` cannot hold token ids (missing, or not a list
    of integers), naming the build (`where`), or None when it can."""
    if column not in schema.names:
        return f"no token column {column!r} in the build at {where} (columns: {schema.names})"
    t = schema.field(column).type
    return None if is_token_list(t) else f"column {column!r} is {t}, not a list of integers (the build at {where})"
