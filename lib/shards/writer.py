"""Writing one shard file and publishing a build: pure pyarrow, no Spark.

The Spark job streams each shard through a `ShardWriter` on the executors and publishes
once on the driver; tests and tools that make shards without Spark call `write_build`
(the same writer, one table at a time), so there is one writer and one layout.

Bytes are a function of the rows and the writer settings only: fixed codec and
level, fixed rows per row group, no timestamps (the Parquet `created_by` field
names the pyarrow version, which the manifest records as well).

Publication. `manifest.json` is the commit point: a reader sees the previous complete
build or the new one, never a part. The build id is a fingerprint of the shards' sha256s.
- Filesystems with an atomic rename (local, HDFS): shards are written into a
  `_staging-*` folder, which is renamed to `b-<build id>/`, then the manifest is written
  to a temporary name and renamed over the old one.
- Object stores (`s3a://`, `s3://`, ...; no rename, a "rename" is a copy): the build id
  is computed first (the shards are encoded once to hash them, writing nothing), then each
  shard is written once, straight to `b-<build id>/part-...` (one upload, which appears
  whole or not at all), then the manifest is one PUT.
Either way `_builds.json` lists the builds that were current before (newest first, kept
for readers that opened them: `keep_builds` in all); every `b-*` folder that neither the
manifest nor that list names (a crashed build's files) is removed by the next build.
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

from shardforge import __version__
from shardforge.shards.manifest import (FORMAT, FORMAT_VERSION, MANIFEST_NAME, ShardInfo, fingerprint, read_manifest,
                       to_json)
from shardforge.fs import StorageOptions, filesystem as _filesystem, is_object_store

STAGING_PREFIX = "_staging-"
HISTORY_NAME = "_builds.json"


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


def _fs(path: str, storage: StorageOptions | None = None):
    """(pyarrow filesystem, path inside it): see shardforge.fs."""
    return _filesystem(path, storage)


class _NullStream:
    """An output stream that keeps nothing: the hash-only pass of an object-store build."""

    def write(self, data) -> None:
        pass

    def close(self) -> None:
        pass


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
    """Streams one shard into a folder: rows arrive already in shard order,
    in tables of any size, and leave as row groups of exactly `row_group_rows` rows
    (the last one shorter). Memory is one row group plus the Parquet writer's buffers,
    whatever the shard's size. Each row group is written from one contiguous chunk,
    so the bytes do not depend on how the rows were batched on the way in.

    On a filesystem with rename the file is written under a temporary name and renamed
    by `close()`, so a retried task never leaves a half-written shard under the final
    name. On an object store it is one upload to the final name, which appears only
    when complete (a retried task uploads the same bytes again). `folder=None` writes
    nothing and only hashes (the first pass of an object-store build).
    """

    def __init__(self, folder: str | None, index: int, num_shards: int, schema: pa.Schema,
                 settings: WriterSettings, storage: StorageOptions | None = None):
        self.index, self.num_shards, self.schema, self.settings = index, num_shards, schema, settings
        self.name = shard_name(index, num_shards)
        self._fs = None
        if folder is None:
            self._sink = _HashingSink(_NullStream())
        else:
            base = folder.rstrip("/")
            self.final = f"{base}/{self.name}"
            direct = is_object_store(base)
            self.tmp = self.final if direct else f"{base}/.{self.name}.{uuid.uuid4().hex}.tmp"
            self._fs, tmp = _fs(self.tmp, storage)
            if not direct:
                self._fs.create_dir(tmp.rsplit("/", 1)[0], recursive=True)
            self._tmp_in_fs, self._final_in_fs = tmp, _fs(self.final, storage)[1]
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
        if self._fs is not None and self._tmp_in_fs != self._final_in_fs:
            self._fs.move(self._tmp_in_fs, self._final_in_fs)
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
        if self._fs is None:
            return
        try:
            self._fs.delete_file(self._tmp_in_fs)
        except OSError:
            pass


def write_shard(table: pa.Table, staging_dir: str | None, index: int, num_shards: int,
                settings: WriterSettings, storage: StorageOptions | None = None) -> ShardInfo:
    """Write one whole shard (rows in the given order) into a folder (None: only hash it);
    returns its manifest entry (with `file` relative to the folder). The same
    `ShardWriter` the Spark job streams through."""
    writer = ShardWriter(staging_dir, index, num_shards, table.schema, settings, storage)
    try:
        writer.write(table)
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def new_staging_dir(output: str, storage: StorageOptions | None = None) -> str:
    """A fresh staging folder beside the published build; leftovers of failed builds are removed.
    Call it holding the build folder's lock (the runner does): the leftovers are then known
    to belong to dead builds, never to one running beside this one."""
    filesystem, root = _fs(output, storage)
    from pyarrow import fs

    filesystem.create_dir(root, recursive=True)
    for info in filesystem.get_file_info(fs.FileSelector(root)):
        if info.base_name.startswith(STAGING_PREFIX):
            filesystem.delete_dir(info.path)
    staging = f"{output.rstrip('/')}/{STAGING_PREFIX}{uuid.uuid4().hex}"
    filesystem.create_dir(_fs(staging, storage)[1], recursive=True)
    return staging


def schema_fields(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]


def build_id_of(shards: Sequence[ShardInfo]) -> str:
    """`b-` + the fingerprint of the shards' sha256s in shard order: same rows, same name."""
    return "b-" + fingerprint([s.sha256 for s in sorted(shards, key=lambda s: s.index)])


def _read_json(filesystem, path: str) -> Any:
    import json

    try:
        with filesystem.open_input_stream(path) as fh:
            return json.loads(fh.read().decode("utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    except OSError as exc:   # pyarrow's S3 client says "not found" with an OSError
        if "not found" in str(exc).lower() or "nosuchkey" in str(exc).lower():
            return None
        raise


def published(filesystem, root: str) -> tuple[str | None, list[str]]:
    """(the current manifest's build id or None, the earlier builds kept, newest first)."""
    manifest = _read_json(filesystem, f"{root}/{MANIFEST_NAME}")
    history = _read_json(filesystem, f"{root}/{HISTORY_NAME}")
    current = manifest.get("build_id") if isinstance(manifest, dict) else None
    earlier = [b for b in (history or {}).get("builds", []) if b != current] if isinstance(history, dict) else []
    return current, earlier


def remove_unnamed(filesystem, root: str, keep: set[str]) -> list[str]:
    """Delete every `b-*` folder and `_staging-*` folder whose name is not in `keep`;
    returns the names deleted (files no manifest names: crashed or pruned builds)."""
    from pyarrow import fs

    gone = []
    for info in filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        name = info.base_name
        if info.type == fs.FileType.Directory and name.startswith(("b-", STAGING_PREFIX)) and name not in keep:
            filesystem.delete_dir(info.path)
            gone.append(name)
    return sorted(gone)


def begin_direct_build(output: str, build_id: str, storage: StorageOptions | None = None) -> bool:
    """Before an object-store build writes `b-<build_id>/`: remove the files of builds no
    manifest names (a crashed build's). Returns False when `build_id` is already published
    (the current build or a kept earlier one: its files are complete), True when its files
    must be written."""
    filesystem, root = _fs(output, storage)
    current, earlier = published(filesystem, root)
    named = {b for b in (current, *earlier) if b}
    remove_unnamed(filesystem, root, named)
    return build_id not in named


def check_written(folder: str, shards: Sequence[ShardInfo], storage: StorageOptions | None = None) -> None:
    """One listing of a build folder written in place: every shard is there with the size its
    writer counted (on an object store a task attempt that failed half-way may have left, or
    removed, an object under the final name). Raises RuntimeError naming the shard."""
    from pyarrow import fs

    filesystem, root = _fs(folder, storage)
    sizes = {i.base_name: i.size for i in filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True))
             if i.type == fs.FileType.File}
    for s in shards:
        if sizes.get(s.file) != s.bytes:
            raise RuntimeError(f"shards: {folder}/{s.file} is {sizes.get(s.file)} bytes, its writer wrote {s.bytes}; "
                               f"nothing was published")


def _manifest(build_id: str, shards: Sequence[ShardInfo], schema: pa.Schema, key: str, config: dict[str, Any],
              source: dict[str, Any], settings: WriterSettings) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "shardforge_version": __version__,
        "build_id": build_id,
        "key": key,
        "hash": "pmod(xxhash64(key, seed=42), num_shards)",
        "row_order": "xxhash64(key), then key",
        "num_shards": len(shards),
        "total_rows": sum(s.rows for s in shards),
        "writer": settings.to_dict(),
        "shards": [{**s.to_dict(), "file": f"{build_id}/{s.file}"} for s in shards],
        "schema": schema_fields(schema),
        "config": config,
        "source": source,
    }


def _checked(shards: Sequence[ShardInfo]) -> list[ShardInfo]:
    shards = sorted(shards, key=lambda s: s.index)
    if [s.index for s in shards] != list(range(len(shards))):
        raise ValueError(f"publish_build: shards {[s.index for s in shards]} are not 0..{len(shards) - 1}")
    return shards


def publish_build(output: str, staging_dir: str | None, shards: Sequence[ShardInfo], schema: pa.Schema, *,
                  key: str, config: dict[str, Any], source: dict[str, Any],
                  settings: WriterSettings, keep_builds: int = 2,
                  storage: StorageOptions | None = None) -> dict[str, Any]:
    """Make a complete build the published one, atomically for readers.

    With a staging folder (filesystems with rename) the folder is renamed to
    `<build_id>/` (or dropped, when that build's files are already there). Without one
    (object stores) the files are already in `<build_id>/` (`begin_direct_build`). Then
    the manifest is written: a reader sees the previous complete build or this one,
    never a mix. Builds beyond `keep_builds` and files no manifest names are removed.
    """
    shards = _checked(shards)
    build_id = build_id_of(shards)
    filesystem, root = _fs(output, storage)
    from pyarrow import fs

    final = f"{root}/{build_id}"
    if staging_dir is not None:
        staged = _fs(staging_dir, storage)[1]
        if filesystem.get_file_info(final).type == fs.FileType.NotFound:
            filesystem.move(staged, final)
        else:  # the same content was published before: keep the old files, drop the copy
            filesystem.delete_dir(staged)
    manifest = _manifest(build_id, shards, schema, key, config, source, settings)
    current, earlier = published(filesystem, root)
    kept = [b for b in ([current] if current else []) + earlier if b != build_id][:max(0, keep_builds - 1)]
    _write(filesystem, f"{root}/{HISTORY_NAME}", to_json({"builds": kept}), single_put=staging_dir is None)
    write_manifest(filesystem, root, manifest, single_put=staging_dir is None)
    remove_unnamed(filesystem, root, {build_id, *kept})
    return manifest


def _write(filesystem, path: str, data: bytes, *, single_put: bool) -> None:
    """Replace a small file whole: one PUT on object stores, a temp name and a rename elsewhere."""
    if single_put:
        with filesystem.open_output_stream(path) as out:
            out.write(data)
        return
    folder, name = path.rsplit("/", 1)
    tmp = f"{folder}/.{name}.{uuid.uuid4().hex}.tmp"
    with filesystem.open_output_stream(tmp) as out:
        out.write(data)
    filesystem.move(tmp, path)


def write_manifest(filesystem, root: str, manifest: dict[str, Any], *, single_put: bool = False) -> None:
    """The commit point of a build: `manifest.json` replaced whole (one PUT on an object
    store; a temp name, then a rename, elsewhere)."""
    _write(filesystem, f"{root}/{MANIFEST_NAME}", to_json(manifest), single_put=single_put)


def write_build(output: str, tables: Sequence[pa.Table], *, key: str = "id",
                settings: WriterSettings = WriterSettings(), config: dict[str, Any] | None = None,
                source: dict[str, Any] | None = None, storage: StorageOptions | None = None):
    """Write a complete build from in-memory tables, one per shard (for tests and tools;
    rows are written in the order given), by the protocol the filesystem needs. Returns
    the parsed manifest."""
    if not tables:
        raise ValueError("write_build: at least one shard is needed")
    n = len(tables)
    if is_object_store(output):
        hashed = [write_shard(t, None, i, n, settings) for i, t in enumerate(tables)]
        folder, staging = f"{output.rstrip('/')}/{build_id_of(hashed)}", None
        if not begin_direct_build(output, build_id_of(hashed), storage):
            infos = hashed
        else:
            infos = [write_shard(t, folder, i, n, settings, storage) for i, t in enumerate(tables)]
            check_written(folder, infos, storage)
    else:
        staging = new_staging_dir(output, storage)
        infos = [write_shard(t, staging, i, n, settings, storage) for i, t in enumerate(tables)]
    publish_build(output, staging, infos, tables[0].schema, key=key, config=config or {},
                  source=source or {}, settings=settings, storage=storage)
    return read_manifest(output)


def remove_build(output: str) -> None:
    shutil.rmtree(_local(output), ignore_errors=True)
