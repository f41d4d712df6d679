"""Exporting a build's token column as a Megatron indexed dataset: `PREFIX.bin`, `PREFIX.idx`.

Pure Python, numpy and pyarrow (no Spark, no torch, no megatron). The file format is
megatron-core's `megatron.core.datasets.indexed_dataset` (the one Megatron-LM, NeMo and
GPT-NeoX memory-map): `.bin` is every document's token ids back to back; `.idx` is the
header `MMIDIDX\\x00\\x00`, version 1 (<Q), the dtype code (<B: 8 uint16, 4 int32), the
sequence count and the document-index count (<Q each), then the sequence lengths (int32),
the sequences' byte offsets into `.bin` (int64), and the document indices (int64: 0, then
the sequence index that ends each document). Promises:

* One sequence per document, one document per row, in the manifest's shard order, then
  the rows' order in each shard: document i is row i of that concatenation, so the
  document indices are 0, 1, ..., rows. A row of 0 tokens is a sequence of length 0
  (Megatron's reader returns an empty array for it, and its GPT sample index steps over
  it); a null list, or a null token id, is an error naming the shard and row.
* dtype uint16 when the column stores uint8 or uint16 (the tokenize stage's type for a
  vocabulary of at most 65,536 ids), int32 otherwise; int32 is also used when `append_eos`
  does not fit uint16. A negative id, or one of a wider column beyond int32, is an error.
* `append_eos`: that id after every document (empty ones included, as the loader's packed
  sequences do), for builds tokenized without an EOS.
* Streaming: memory is at most five row groups of the token column (one decoding, up to four
  queued for the threads that write and hash) plus fixed buffers, however large the build;
  the index's arrays go through the temporary `.idx` file, not memory.
* Same build, same bytes: nothing depends on the clock, the machine or where the build is
  read from (a local folder or an fsspec URL: http(s)://, s3://, webhdfs, through
  `manifest.open_file`, as the loader reads).
* Atomic: both files are written under temporary names beside the prefix; an old `.idx` and
  sidecar are removed first, then `.bin` and `.idx` renamed into place, then `PREFIX.json`
  (the sidecar: build id, rows, tokens, dtype, each file's sha256) written last. A prefix
  with no sidecar is not a finished export; a failed run leaves no temporary file.
* Each shard's sha256 is checked against the build's manifest (in a thread of its own, while
  the shards are decoded; a local shard through a memory map); a mismatch fails the export
  (code 3) before anything is published.
* Cost: the `.bin` is preallocated when the manifest records the column's token counts, each
  row group is one numpy buffer written and hashed in two threads while the next decodes,
  with no per-document Python loop.
"""
from __future__ import annotations

import hashlib
import math
import mmap
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shardforge.shards.manifest import (Manifest, ManifestError, open_file, read_manifest,
                                        sha256_file, shard_mismatch, to_json, token_column_problem)
from shardforge.shards.webdataset import ExportError

FORMAT = "shardforge.megatron"
FORMAT_VERSION = 1
ORDER = "manifest shard order, then the rows' order in each shard; one sequence per row"
HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {"uint16": 8, "int32": 4}          # megatron.core.datasets.indexed_dataset.DType
_COUNTS_AT = len(HEADER) + 8 + 1                  # sequence and document counts, after the dtype code
_CHUNK = 1 << 20                                  # index entries per read-back chunk
_QUEUED = 4                                       # row groups waiting for the writer threads, at most


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def check_prefix(out_prefix: str) -> str:
    """The local output prefix, after checks: not a URL, a file name after the folder, and a
    folder that exists (it is not created: a typo must not make a new tree)."""
    out_prefix = str(out_prefix)
    if "://" in out_prefix and not out_prefix.startswith("file://"):
        raise ExportError(f"OUT_PREFIX must be a local path, got {out_prefix}")
    out_prefix = _local(out_prefix)
    folder, name = os.path.split(out_prefix)
    if not name:
        raise ExportError(f"OUT_PREFIX {out_prefix} ends with a separator: give a file prefix such as "
                          f"{os.path.join(out_prefix, 'corpus_text_document')}")
    if not os.path.isdir(folder or "."):
        raise ExportError(f"the folder of OUT_PREFIX {out_prefix} does not exist: {folder}")
    return out_prefix


def normalise(weights: Sequence[float]) -> list[float]:
    """Weights as Megatron reads them (`megatron.core.datasets.utils.normalize`): each over
    their sum, in float64; each must be a finite number > 0."""
    ws = [float(w) for w in weights]
    bad = [w for w in ws if not math.isfinite(w) or w <= 0]
    if not ws or bad:
        raise ExportError(f"--weights must be finite numbers > 0, got {list(weights)}")
    total = float(np.sum(np.array(ws, dtype=np.float64)))
    return [w / total for w in ws]


def data_path(prefixes: Sequence[str], weights: Sequence[float] | None = None) -> str:
    """The value of Megatron's `--data-path` for these prefixes (absolute): `W1 P1 W2 P2 ...`
    with normalised weights, or the prefixes alone without weights."""
    paths = [os.path.abspath(p) for p in prefixes]
    spaced = [p for p in paths if any(c.isspace() for c in p)]
    if spaced:
        raise ExportError(f"prefix {spaced[0]!r} holds whitespace, which Megatron's --data-path splits on")
    if weights is None:
        return " ".join(paths)
    if len(weights) != len(paths):
        raise ExportError(f"--weights gives {len(weights)} weights for {len(paths)} builds")
    return " ".join(f"{w!r} {p}" for w, p in zip(normalise(weights), paths))


def token_dtype(value_type: pa.DataType, append_eos: int | None) -> np.dtype:
    """uint16 for uint8/uint16 ids whose EOS (if any) fits uint16, int32 for other integers."""
    narrow = value_type in (pa.uint8(), pa.uint16())
    if narrow and (append_eos is None or append_eos <= np.iinfo(np.uint16).max):
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def _schema(m: Manifest) -> pa.Schema:
    """The shards' Arrow schema, from shard 0's Parquet footer (every shard has the schema)."""
    path = m.path_of(m.shards[0])
    try:
        with open_file(path) as fh:
            return pq.read_schema(fh)
    except FileNotFoundError:
        raise ExportError(f"shard 0 is missing: {path}") from None
    except (OSError, ValueError) as exc:
        raise ExportError(f"shard 0 ({path}) is not a readable Parquet file: {exc}", code=3) from None


def check_column(m: Manifest, column: str) -> pa.DataType:
    """The token column's value type; the column must be a list of integers."""
    schema = _schema(m)
    problem = token_column_problem(schema, column, m.root)
    if problem:
        raise ExportError(f"{problem}; run the tokenize stage, or pass --column")
    return schema.field(column).type.value_type


def _tokens(lists: pa.Array, dtype: np.dtype, eos: int | None, shard: int, row0: int) -> tuple[np.ndarray, np.ndarray]:
    """(int32 lengths, flat tokens in `dtype`) of one row group's token lists (its first row is
    row `row0` of `shard`), EOS appended."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks() if lists.num_chunks != 1 else lists.chunk(0)
    if lists.null_count:
        row = lists.is_null().to_numpy(zero_copy_only=False).argmax()
        raise ExportError(f"shard {shard} row {row0 + row}: the token list is null (a document with no "
                          "tokens is an empty list)")
    offsets = np.asarray(lists.offsets)
    values = lists.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if values.null_count:
        first = int(values.is_null().to_numpy(zero_copy_only=False).argmax()) + int(offsets[0])
        row = int(np.searchsorted(offsets, first, side="right")) - 1
        raise ExportError(f"shard {shard} row {row0 + row}: a null token id")
    flat = np.asarray(values)
    top = np.iinfo(dtype).max
    if len(flat) and (np.iinfo(flat.dtype).min < 0 or np.iinfo(flat.dtype).max > top):
        lo, hi = int(flat.min()), int(flat.max())     # a signed or wider column: ids in 0..top
        if lo < 0 or hi > top:
            raise ExportError(f"shard {shard} rows {row0}..{row0 + len(offsets) - 2}: token ids {lo}..{hi}; "
                              f"ids must be in 0..{top} ({dtype.name})")
    if flat.dtype != dtype:
        flat = flat.astype(dtype)
    lengths = np.diff(offsets).astype(np.int32)
    if eos is None:
        return lengths, flat
    rows = len(lengths)
    out = np.empty(len(flat) + rows, dtype=dtype)
    ends = np.cumsum(lengths.astype(np.int64) + 1) - 1          # where each document's EOS goes
    keep = np.ones(len(out), dtype=bool)
    keep[ends] = False
    out[keep] = flat
    out[ends] = eos
    return lengths + 1, out


class _Writer:
    """The two temporary files and their running counts; `publish` renames them into place."""

    def __init__(self, out_prefix: str, dtype: np.dtype, expected_tokens: int | None = None):
        folder, name = os.path.split(os.path.abspath(out_prefix))
        self.prefix, self.dtype = os.path.abspath(out_prefix), dtype
        self.tmp_bin = os.path.join(folder, f".{name}.bin.tmp")
        self.tmp_idx = os.path.join(folder, f".{name}.idx.tmp")
        self.bin = open(self.tmp_bin, "wb")
        if expected_tokens:          # one allocation up front; `finish` truncates to what was written
            try:
                os.posix_fallocate(self.bin.fileno(), 0, expected_tokens * dtype.itemsize)
            except OSError:          # a filesystem without fallocate: the writes allocate
                pass
        self.idx = open(self.tmp_idx, "w+b")
        self.idx.write(HEADER + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[dtype.name])
                       + struct.pack("<QQ", 0, 0))
        self.bin_sha = hashlib.sha256()
        self.rows = self.tokens = self.empty = 0
        # one thread writes, one hashes, while the main thread decodes the next row group
        self._io, self._hash = ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=1)
        self._pending: list[tuple[Future, Future]] = []

    def _write(self, lengths: np.ndarray, data: memoryview) -> None:
        self.bin.write(data)
        self.idx.write(memoryview(np.ascontiguousarray(lengths, dtype="<i4")).cast("B"))

    def add(self, lengths: np.ndarray, tokens: np.ndarray) -> None:
        """Queue one row group's documents; at most `_QUEUED` groups wait to be written."""
        self.rows += len(lengths)
        self.tokens += len(tokens)
        self.empty += int(np.count_nonzero(lengths == 0))
        data = memoryview(np.ascontiguousarray(tokens)).cast("B")
        self._pending.append((self._io.submit(self._write, lengths, data), self._hash.submit(self.bin_sha.update, data)))
        while len(self._pending) > _QUEUED:
            for f in self._pending.pop(0):
                f.result()

    def _drain(self) -> None:
        while self._pending:
            for f in self._pending.pop(0):
                f.result()
        self._io.shutdown()
        self._hash.shutdown()

    def finish(self) -> dict[str, Any]:
        """Write the pointers and document indices after the lengths, then the counts."""
        self._drain()
        self.bin.truncate()
        self.bin.close()
        n, size = self.rows, self.dtype.itemsize
        start, running = _COUNTS_AT + 16, 0
        for first in range(0, n, _CHUNK):
            count = min(_CHUNK, n - first)
            self.idx.seek(start + 4 * first)
            lengths = np.frombuffer(self.idx.read(4 * count), dtype="<i4").astype(np.int64)
            ends = np.cumsum(lengths)
            pointers = (running + ends - lengths) * size
            running += int(ends[-1])
            self.idx.seek(0, os.SEEK_END)
            self.idx.write(pointers.astype("<i8").tobytes())
        for first in range(0, n + 1, _CHUNK):
            self.idx.write(np.arange(first, min(n + 1, first + _CHUNK), dtype="<i8").tobytes())
        self.idx.seek(_COUNTS_AT)
        self.idx.write(struct.pack("<QQ", n, n + 1))
        self.idx.close()
        idx_sha, idx_bytes = sha256_file(self.tmp_idx)
        name = os.path.basename(self.prefix)
        return {"bin": {"file": name + ".bin", "bytes": os.path.getsize(self.tmp_bin),
                        "sha256": self.bin_sha.hexdigest()},
                "idx": {"file": name + ".idx", "bytes": idx_bytes, "sha256": idx_sha}}

    def publish(self, sidecar: dict[str, Any]) -> None:
        for old in (self.prefix + ".json", self.prefix + ".idx"):
            if os.path.exists(old):
                os.unlink(old)
        os.replace(self.tmp_bin, self.prefix + ".bin")
        os.replace(self.tmp_idx, self.prefix + ".idx")
        tmp = self.prefix + ".json.tmp"
        with open(tmp, "wb") as fh:
            fh.write(to_json(sidecar))
        os.replace(tmp, self.prefix + ".json")

    def discard(self) -> None:
        for pair in self._pending:
            for f in pair:
                f.cancel()
        self._io.shutdown(wait=True)
        self._hash.shutdown(wait=True)
        for fh in (self.bin, self.idx):
            fh.close()
        for p in (self.tmp_bin, self.tmp_idx):
            if os.path.exists(p):
                os.unlink(p)


def _check_shard(m: Manifest, index: int) -> str | None:
    """None when shard `index` has the manifest's size and sha256, else the problem (one line).
    A local shard is hashed through a memory map (no copy of its bytes), a remote one read."""
    shard, path = m.shards[index], m.path_of(m.shards[index])
    try:
        if "://" in path and not path.startswith("file://"):
            return shard_mismatch(m, index)
        with open(_local(path), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            with (mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else memoryview(b"")) as data:
                digest = hashlib.sha256(data).hexdigest()
    except FileNotFoundError:
        return f"shard {index} is missing: {path}"
    if size != shard.bytes or digest != shard.sha256:
        return (f"checksum mismatch for shard {index} ({path}): sha256 {digest} ({size} bytes) "
                f"!= manifest {shard.sha256} ({shard.bytes} bytes)")
    return None


def _export_shard(m: Manifest, index: int, column: str, dtype: np.dtype, eos: int | None,
                  writer: _Writer, check: Future) -> dict[str, Any]:
    """Append shard `index`'s documents; its entry for the sidecar. `check` is the shard's
    checksum check, running meanwhile: its answer comes first whenever the shard fails."""
    path, shard = m.path_of(m.shards[index]), m.shards[index]

    def failed(message: str) -> ExportError:
        problem = check.result()
        if problem:
            return ExportError(problem, code=2 if "is missing" in problem else 3)
        return ExportError(message, code=3)

    first, tokens = writer.rows, writer.tokens
    try:
        remote = "://" in path and not path.startswith("file://")
        pf = pq.ParquetFile(open_file(path) if remote else _local(path), memory_map=not remote)
    except FileNotFoundError:
        raise ExportError(f"shard {index} is missing: {path}") from None
    except (OSError, ValueError) as exc:
        raise failed(f"shard {index} ({path}) is not a readable Parquet file: {exc}") from None
    for g in range(pf.num_row_groups):
        try:
            lists = pf.read_row_group(g, columns=[column], use_threads=False).column(0)
        except (OSError, ValueError) as exc:      # bytes that match the manifest but do not decode
            raise failed(f"shard {index} row group {g} cannot be read: {exc}") from None
        writer.add(*_tokens(lists, dtype, eos, index, writer.rows - first))
    problem = check.result()
    if problem:
        raise ExportError(problem, code=2 if "is missing" in problem else 3)
    if writer.rows - first != shard.rows:
        raise ExportError(f"shard {index} has {writer.rows - first} rows; the manifest says {shard.rows}", code=3)
    return {"index": index, "rows": shard.rows, "first_document": first, "tokens": writer.tokens - tokens}


def export_megatron(build: str, out_prefix: str, *, column: str = "tokens", append_eos: int | None = None,
                    blend: dict[str, Any] | None = None) -> dict[str, Any]:
    """Export the build at `build` (folder, manifest.json or fsspec URL) as `out_prefix`.bin
    and .idx (local); returns the sidecar written to `out_prefix`.json. `blend` (the mixture
    this export belongs to) is recorded in the sidecar as given."""
    out_prefix = check_prefix(out_prefix)
    if append_eos is not None and not 0 <= int(append_eos) <= np.iinfo(np.int32).max:
        raise ExportError(f"--append-eos must be a token id in 0..{np.iinfo(np.int32).max}, got {append_eos}")
    try:
        m = read_manifest(build)
    except ManifestError as exc:
        raise ExportError(str(exc)) from None
    value_type = check_column(m, column)
    dtype = token_dtype(value_type, append_eos)
    recorded = [s.list_lengths.get(column, () if s.rows == 0 else None) for s in m.shards]
    expected = None if None in recorded else sum(map(sum, recorded)) + (m.total_rows if append_eos is not None else 0)
    writer = _Writer(out_prefix, dtype, expected)
    try:
        with ThreadPoolExecutor(max_workers=1) as checker:
            checks = [checker.submit(_check_shard, m, s.index) for s in m.shards]
            try:
                shards = [_export_shard(m, s.index, column, dtype, append_eos, writer, checks[s.index])
                          for s in m.shards]
            finally:
                for c in checks:
                    c.cancel()
        files = writer.finish()
        sidecar = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "build": str(build), "build_id": m.build_id,
            "build_fingerprint": m.fingerprint, "column": column, "column_type": str(value_type),
            "append_eos": append_eos, "dtype": dtype.name, "rows": writer.rows, "tokens": writer.tokens,
            "empty_documents": writer.empty, "order": ORDER, "files": files, "shards": shards,
            "data_path": data_path([out_prefix]) if blend is None else blend["data_path"],
        }
        if blend is not None:
            sidecar["blend"] = blend
        writer.publish(sidecar)
    except BaseException:
        writer.discard()
        raise
    return sidecar
