"""Opening a shard build for reading: manifest, column checks, row-group reads, checksums.

Pure pyarrow (fsspec only for non-local URLs); no torch, no Spark. A `Source` is
cheap to pickle (DataLoader workers get a copy) and opens files lazily in the
process that reads them.
"""
from __future__ import annotations

from collections import OrderedDict

import pyarrow as pa
import pyarrow.parquet as pq

from shardforge.manifest import Manifest, ManifestError, read_manifest, sha256_file

from .order import Block, block_table


class LoaderError(ValueError):
    """A loader argument or saved state that cannot be used, with the reason."""


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


class Source:
    """One shard build: its manifest, the projected columns, and row-group reads.

    `read(block)` returns one row group as a pyarrow Table of the projected columns.
    With `verify=True` each shard's sha256 is checked the first time this process
    opens it (a mismatch raises ManifestError). A missing shard file raises
    ManifestError naming the shard, at construction for local builds and on first
    open for remote ones.
    """

    def __init__(self, path, *, columns=None, verify: bool = False, max_open: int = 16):
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
        self.blocks = block_table([(s.index, g, n) for s in self.manifest.shards
                                   for g, n in enumerate(s.row_groups) if n > 0])
        if not _is_remote(self.manifest.root):
            import os

            for s in self.manifest.shards:
                p = _local(self.manifest.path_of(s))
                if not os.path.exists(p):
                    raise ManifestError(f"shard {s.index} is missing: {p} (listed in the manifest "
                                        f"of {self.path})")
        self._open: OrderedDict[int, pq.ParquetFile] = OrderedDict()
        self._verified: set[int] = set()

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    @property
    def total(self) -> int:
        return self.manifest.total_rows

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_open"] = OrderedDict()  # file handles stay in the process that opened them
        return state

    def _check(self, index: int, path: str) -> None:
        shard = self.manifest.shards[index]
        try:
            digest, size = sha256_file(path)
        except FileNotFoundError:
            raise ManifestError(f"shard {index} is missing: {path}") from None
        if size != shard.bytes or digest != shard.sha256:
            raise ManifestError(f"checksum mismatch for shard {index} ({path}): sha256 {digest} "
                                f"({size} bytes) != manifest {shard.sha256} ({shard.bytes} bytes)")
        self._verified.add(index)

    def file(self, index: int) -> pq.ParquetFile:
        """The open ParquetFile of shard `index` (a small LRU of handles per process)."""
        pf = self._open.get(index)
        if pf is not None:
            self._open.move_to_end(index)
            return pf
        path = self.manifest.path_of(self.manifest.shards[index])
        if self.verify and index not in self._verified:
            self._check(index, path)
        try:
            if _is_remote(path):
                import fsspec

                pf = pq.ParquetFile(fsspec.open(path, "rb").open())
            else:
                pf = pq.ParquetFile(_local(path))
        except FileNotFoundError:
            raise ManifestError(f"shard {index} is missing: {path}") from None
        self._open[index] = pf
        if len(self._open) > self.max_open:
            self._open.popitem(last=False)
        return pf

    def read(self, block: Block) -> pa.Table:
        return self.file(block.shard).read_row_group(block.group, columns=self.columns)

    def read_many(self, blocks: list[Block]) -> pa.Table:
        """The blocks' rows concatenated, in order, as one contiguous table."""
        tables = [self.read(b) for b in blocks]
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables(tables).combine_chunks()
