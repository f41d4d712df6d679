"""Opening a shard build for reading: manifest, column checks, row-group reads, checksums.

Pure pyarrow (fsspec only for non-local URLs); no torch, no Spark. A `Source` is
cheap to pickle (DataLoader workers get a copy) and opens files lazily in the
process that reads them. At construction it reads every shard's Parquet footer
(one small read per shard) for the decoded size of each row group, which sizes the
loader's windows; a footer whose row groups differ from the manifest's is an error.
With `cache_dir`, remote shards are read from whole local copies (`cache.ShardCache`).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from shardforge.shards.manifest import Manifest, ManifestError, open_file, read_manifest, shard_mismatch

from .cache import ShardCache
from .order import Block, block_table


class LoaderError(ValueError):
    """A loader argument or saved state that cannot be used, with the reason."""


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12, "BYTE_ARRAY": 4}


def decoded_sizes(metadata: pq.FileMetaData) -> list[int]:
    """Estimated bytes of each row group once decoded to Arrow, all columns: per column
    chunk the larger of its uncompressed Parquet size and values x value width (a
    dictionary-encoded column is smaller in Parquet than in memory), plus 4 bytes per
    row and nesting level for list offsets. Within a few per cent of Arrow's `nbytes`
    for numbers, token lists and text; low-cardinality dictionary strings are
    underestimated."""
    schema = metadata.schema
    out = []
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        total = 0
        for i in range(rg.num_columns):
            c, leaf = rg.column(i), schema.column(i)
            width = leaf.length if c.physical_type == "FIXED_LEN_BYTE_ARRAY" else _WIDTH.get(c.physical_type, 8)
            total += max(c.total_uncompressed_size, c.num_values * width)
            total += rg.num_rows * 4 * leaf.max_repetition_level
        out.append(int(total))
    return out


class Source:
    """One shard build: its manifest, the projected columns, and row-group reads.

    `read(block)` returns one row group as a pyarrow Table of the projected columns.
    With `verify=True` each shard's sha256 is checked the first time this process
    opens it (a mismatch raises ManifestError). A missing shard file raises
    ManifestError naming the shard, at construction for local builds and on first
    open for remote ones.

    `cache_dir` and `cache_limit_bytes` (both, or neither): a remote build's shards are
    fetched whole into a cache shared by the machine's processes, under that budget,
    and read from there (see `shardforge.loaders.cache`); the copies are always checked
    against the manifest's sha256, whatever `verify` says. A shard larger than the
    budget is a LoaderError at construction. Local builds are never copied.
    """

    def __init__(self, path, *, columns=None, verify: bool = False, max_open: int = 16,
                 cache_dir=None, cache_limit_bytes: int | None = None):
        self.path = str(path)
        self.manifest: Manifest = read_manifest(self.path)
        names = self.manifest.column_names
        if columns is None:
            self.columns = list(names)
        else:
            self.columns = [columns] if isinstance(columns, str) else list(columns)
            unknown = [c for c in self.columns if c not in names]
            if unknown:
                raise LoaderError(f"unknown column(s) {unknown} for the build at {self.path}; "
                                  f"it has {names}")
        self.verify = bool(verify)
        self.max_open = max_open
        self.cache = self._cache(cache_dir, cache_limit_bytes)
        if not _is_remote(self.manifest.root):
            import os

            for s in self.manifest.shards:
                p = _local(self.manifest.path_of(s))
                if not os.path.exists(p):
                    raise ManifestError(f"shard {s.index} is missing: {p} (listed in the manifest "
                                        f"of {self.path})")
        self._local = threading.local()       # each thread its own file handles
        self._verified: set[int] = set()
        self._unreadable: dict[int, str] = {}
        self.blocks = self._block_table()

    def _cache(self, cache_dir, limit) -> ShardCache | None:
        if (cache_dir is None) != (limit is None):
            raise LoaderError("cache_dir and cache_limit_bytes go together: give both or neither")
        if cache_dir is None or not _is_remote(self.manifest.root):
            return None
        if int(limit) < 1:
            raise LoaderError(f"cache_limit_bytes must be >= 1, got {limit}")
        for s in self.manifest.shards:
            if s.bytes > int(limit):
                raise LoaderError(f"shard {s.index} of {self.path} has {s.bytes} bytes, more than "
                                  f"cache_limit_bytes={int(limit)}; raise the budget or read without a cache")
        return ShardCache(str(cache_dir), int(limit))

    def _block_table(self):
        """(shard, group, rows, decoded bytes) of every non-empty row group, manifest order."""
        shards = [s for s in self.manifest.shards if s.rows > 0]
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(shards)))) as pool:
            sizes = list(pool.map(self._sizes, shards))
        return block_table([(s.index, g, n, b) for s, sz in zip(shards, sizes)
                            for g, (n, b) in enumerate(zip(s.row_groups, sz)) if n > 0])

    def _sizes(self, shard) -> list[int]:
        """Decoded sizes of a shard's row groups (from the cache's copy when it has one, so a
        cached build makes no shard request at all). A footer that cannot be read gives sizes
        of 0 here and its error when the shard is first read (after the checksum check,
        with verify=True), as any other damage inside a shard does."""
        path = self.manifest.path_of(shard)
        local = self.cache.cached(shard.sha256, shard.bytes) if self.cache is not None else None
        try:
            if local is not None:                     # a cached shard's footer is read from the copy
                with local:
                    md = pq.read_metadata(local)
            elif _is_remote(path):
                with open_file(path) as fh:
                    md = pq.read_metadata(fh)
            else:
                md = pq.read_metadata(_local(path))
        except FileNotFoundError:
            raise ManifestError(f"shard {shard.index} is missing: {path}") from None
        except (OSError, ValueError) as exc:   # pyarrow's errors, and undecodable metadata
            self._unreadable[shard.index] = f"shard {shard.index} ({path}) is not a readable Parquet file: {exc}"
            return [0] * len(shard.row_groups)
        groups = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
        if groups != list(shard.row_groups):
            raise ManifestError(f"shard {shard.index} ({path}) has row groups of {groups} rows; the "
                                f"manifest says {list(shard.row_groups)}")
        return decoded_sizes(md)

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    @property
    def total(self) -> int:
        return self.manifest.total_rows

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_local"] = None   # file handles stay in the process (and thread) that opened them
        return state

    def _check(self, index: int, path: str) -> None:
        try:
            problem = shard_mismatch(self.manifest, index)
        except FileNotFoundError:
            raise ManifestError(f"shard {index} is missing: {path}") from None
        if problem:
            raise ManifestError(problem)
        self._verified.add(index)

    def file(self, index: int) -> pq.ParquetFile:
        """The open ParquetFile of shard `index` (a small LRU of handles per thread: a
        ParquetFile must not decode in two threads at once)."""
        if self._local is None:
            self._local = threading.local()
        handles = getattr(self._local, "open", None)
        if handles is None:
            handles = self._local.open = OrderedDict()
        pf = handles.get(index)
        if pf is not None:
            handles.move_to_end(index)
            return pf
        shard = self.manifest.shards[index]
        path = self.manifest.path_of(shard)
        local = None
        if self.cache is not None:       # checked against the manifest's sha256 by the cache
            local = self.cache.open(path, shard.sha256, shard.bytes, index=index)
        elif self.verify and index not in self._verified:
            self._check(index, path)
        if index in self._unreadable:
            raise ManifestError(self._unreadable[index])
        try:
            if local is not None:
                pf = pq.ParquetFile(local)
            elif _is_remote(path):
                pf = pq.ParquetFile(open_file(path))
            else:
                pf = pq.ParquetFile(_local(path))
        except FileNotFoundError:
            raise ManifestError(f"shard {index} is missing: {path}") from None
        handles[index] = pf
        if len(handles) > self.max_open:
            handles.popitem(last=False)
        return pf

    def read(self, block: Block, *, threads: bool = True) -> pa.Table:
        """One row group, projected, each column in one chunk; `threads`: decode its
        columns on pyarrow's thread pool (worth it only when no other process reads)."""
        return self.file(block.shard).read_row_group(block.group, columns=self.columns, use_threads=threads)
