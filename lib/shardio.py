"""Writing one shard file and publishing a build: pure pyarrow, no Spark.

The Spark job streams each shard through a `ShardWriter` on the executors and calls
`publish_build` once on the driver; tests and tools that make shards without Spark
call `write_shard` (the same writer, one table at a time) and `publish_build`, so
there is one writer and one layout.

Bytes are a function of the rows and the writer settings only: fixed codec and
level, fixed rows per row group, no timestamps (the Parquet `created_by` field
names the pyarrow version, which the manifest records as well).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__
from .manifest import (FORMAT, FORMAT_VERSION, MANIFEST_NAME, ShardInfo, fingerprint, read_manifest,
                       to_json)

STAGING_PREFIX = "_staging-"


@dataclass(frozen=True)
class WriterSettings:
    row_group_rows: int = 1024
    compression: str = "zstd"
    compression_level: int = 3

    def to_dict(self) -> dict[str, Any]:
        return {"row_group_rows": self.row_group_rows, "compression": self.compression,
                "compression_level": self.compression_level, "pyarrow": pa.__version__}


def shard_name(index: int, num_shards: int) -> str:
    return f"part-{index:05d}-of-{num_shards:05d}.parquet"


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _fs(path: str):
    from pyarrow import fs

    if "://" in path and not path.startswith("file://"):
        scheme, rest = path.split("://", 1)
        if scheme in ("s3a", "s3n"):  # Hadoop's names for S3; pyarrow knows it as s3
            path = "s3://" + rest
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), os.path.abspath(_local(path))


class _HashingSink:
    """A file-like object for ParquetWriter: forwards bytes to a pyarrow output stream
    and keeps their sha256 and count, so a shard is hashed as it is written."""

    def __init__(self, out):
        self._out = out
        self.sha = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data) -> int:
        view = memoryview(data)
        self.sha.update(view)
        self._out.write(view)
        self.size += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._out.close()


class ShardWriter:
    """Streams one shard into the staging folder: rows arrive already in shard order,
    in tables of any size, and leave as row groups of exactly `row_group_rows` rows
    (the last one shorter). Memory is one row group plus the Parquet writer's buffers,
    whatever the shard's size. Each row group is written from one contiguous chunk,
    so the bytes do not depend on how the rows were batched on the way in.

    The file is written under a temporary name and renamed by `close()`, so a retried
    task never leaves a half-written shard under the final name.
    """

    def __init__(self, staging_dir: str, index: int, num_shards: int, schema: pa.Schema,
                 settings: WriterSettings):
        self.index, self.num_shards, self.schema, self.settings = index, num_shards, schema, settings
        self.name = shard_name(index, num_shards)
        base = staging_dir.rstrip("/")
        self.final = f"{base}/{self.name}"
        self.tmp = f"{base}/.{self.name}.{uuid.uuid4().hex}.tmp"
        self._fs, tmp = _fs(self.tmp)
        self._fs.create_dir(tmp.rsplit("/", 1)[0], recursive=True)
        self._sink = _HashingSink(self._fs.open_output_stream(tmp))
        codec = None if settings.compression == "none" else settings.compression
        level = settings.compression_level if codec in ("zstd", "gzip") else None
        self._writer = pq.ParquetWriter(self._sink, schema, compression=codec or "none",
                                        compression_level=level, use_dictionary=True,
                                        write_statistics=True, version="2.6",
                                        data_page_version="1.0", store_schema=True)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self.rows = 0
        self.groups: list[int] = []
        self._lists = [f.name for f in schema if (pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
                       and pa.types.is_integer(f.type.value_type)]
        self.list_lengths: dict[str, list[int]] = {name: [] for name in self._lists}

    def write(self, table: pa.Table) -> None:
        """Append rows (in order); full row groups are written out at once."""
        if table.num_rows == 0:
            return
        if table.schema != self.schema:
            table = table.select(self.schema.names).cast(self.schema)
        self._pending.append(table)
        self._pending_rows += table.num_rows
        size = self.settings.row_group_rows
        while self._pending_rows >= size:
            self._flush(size)

    def _flush(self, n: int) -> None:
        pending = pa.concat_tables(self._pending)
        group = pending.slice(0, n).combine_chunks()
        rest = pending.slice(n)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        self._writer.write_table(group, row_group_size=self.settings.row_group_rows)
        self.rows += group.num_rows
        self.groups.append(group.num_rows)
        for name in self._lists:
            col = group.column(name).chunk(0)
            self.list_lengths[name].append(int(col.offsets[-1].as_py() - col.offsets[0].as_py()))

    def close(self) -> ShardInfo:
        """Write the last row group, close the file and move it to its final name."""
        if self._pending_rows:
            self._flush(self._pending_rows)
        self._writer.close()
        self._sink.close()
        _, tmp = _fs(self.tmp)
        _, final = _fs(self.final)
        self._fs.move(tmp, final)
        return ShardInfo(index=self.index, file=self.name, rows=self.rows, bytes=self._sink.size,
                         sha256=self._sink.sha.hexdigest(), row_groups=tuple(self.groups),
                         list_lengths={k: tuple(v) for k, v in self.list_lengths.items()})

    def abort(self) -> None:
        """Give up on this shard: close what is open and delete the temporary file."""
        try:
            self._writer.close()
        except Exception:   # the writer may be the reason we are aborting
            pass
        self._sink.close()
        try:
            self._fs.delete_file(_fs(self.tmp)[1])
        except OSError:
            pass


def write_shard(table: pa.Table, staging_dir: str, index: int, num_shards: int,
                settings: WriterSettings) -> ShardInfo:
    """Write one whole shard (rows in the given order) into the staging folder; returns
    its manifest entry (with `file` relative to the staging folder: the build id is not
    known yet). The same `ShardWriter` the Spark job streams through."""
    writer = ShardWriter(staging_dir, index, num_shards, table.schema, settings)
    try:
        writer.write(table)
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def new_staging_dir(output: str) -> str:
    """A fresh staging folder beside the published build; leftovers of failed builds are removed.
    Call it holding the build folder's lock (the runner does): the leftovers are then known
    to belong to dead builds, never to one running beside this one."""
    filesystem, root = _fs(output)
    from pyarrow import fs

    filesystem.create_dir(root, recursive=True)
    for info in filesystem.get_file_info(fs.FileSelector(root)):
        if info.base_name.startswith(STAGING_PREFIX):
            filesystem.delete_dir(info.path)
    staging = f"{output.rstrip('/')}/{STAGING_PREFIX}{uuid.uuid4().hex}"
    filesystem.create_dir(_fs(staging)[1], recursive=True)
    return staging


def schema_fields(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


def publish_build(output: str, staging_dir: str, shards: Sequence[ShardInfo], schema: pa.Schema, *,
                  key: str, config: dict[str, Any], source: dict[str, Any],
                  settings: WriterSettings, keep_builds: int = 2) -> dict[str, Any]:
    """Turn a complete staging folder into the published build, atomically.

    The build id is the fingerprint of the shards' checksums, so the same rows
    give the same folder name. The staging folder is renamed to `<build_id>/`,
    then `manifest.json` is written to a temp name and renamed over the old one:
    a reader sees the previous complete build or this one, never a mix.
    """
    shards = sorted(shards, key=lambda s: s.index)
    num = len(shards)
    if [s.index for s in shards] != list(range(num)):
        raise ValueError(f"publish_build: shards {[s.index for s in shards]} are not 0..{num - 1}")
    build_id = "b-" + fingerprint([s.sha256 for s in shards])
    filesystem, root = _fs(output)
    final = f"{root}/{build_id}"
    staged = _fs(staging_dir)[1]
    from pyarrow import fs

    if filesystem.get_file_info(final).type == fs.FileType.NotFound:
        filesystem.move(staged, final)
    else:  # the same content was published before: keep the old files, drop the copy
        filesystem.delete_dir(staged)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "shardforge_version": __version__,
        "build_id": build_id,
        "key": key,
        "hash": "pmod(xxhash64(key, seed=42), num_shards)",
        "row_order": "xxhash64(key), then key",
        "num_shards": num,
        "total_rows": sum(s.rows for s in shards),
        "writer": settings.to_dict(),
        "shards": [{**s.to_dict(), "file": f"{build_id}/{s.file}"} for s in shards],
        "schema": schema_fields(schema),
        "config": config,
        "source": source,
    }
    write_manifest(filesystem, root, manifest)
    _prune(filesystem, root, keep=max(1, keep_builds), current=build_id)
    return manifest


def write_manifest(filesystem, root: str, manifest: dict[str, Any]) -> None:
    """The commit point of a build: `manifest.json` replaced whole (a temp name, then a rename)."""
    tmp = f"{root}/.{MANIFEST_NAME}.{uuid.uuid4().hex}.tmp"
    with filesystem.open_output_stream(tmp) as out:
        out.write(to_json(manifest))
    filesystem.move(tmp, f"{root}/{MANIFEST_NAME}")


def _prune(filesystem, root: str, keep: int, current: str) -> None:
    """Delete published build folders beyond the newest `keep` (by modification time)."""
    from pyarrow import fs

    builds = [i for i in filesystem.get_file_info(fs.FileSelector(root))
              if i.type == fs.FileType.Directory and i.base_name.startswith("b-") and i.base_name != current]
    builds.sort(key=lambda i: i.mtime_ns or 0, reverse=True)
    for info in builds[keep - 1:]:
        filesystem.delete_dir(info.path)


def write_build(output: str, tables: Sequence[pa.Table], *, key: str = "id",
                settings: WriterSettings = WriterSettings(), config: dict[str, Any] | None = None,
                source: dict[str, Any] | None = None):
    """Write a complete build from in-memory tables, one per shard (for tests and tools;
    rows are written in the order given). Returns the parsed manifest."""
    if not tables:
        raise ValueError("write_build: at least one shard is needed")
    staging = new_staging_dir(output)
    infos = [write_shard(t, staging, i, len(tables), settings) for i, t in enumerate(tables)]
    publish_build(output, staging, infos, tables[0].schema, key=key, config=config or {},
                  source=source or {}, settings=settings)
    return read_manifest(output)


def remove_build(output: str) -> None:
    shutil.rmtree(_local(output), ignore_errors=True)
