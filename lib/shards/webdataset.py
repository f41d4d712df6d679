"""Exporting a shard build as WebDataset tars: one tar per shard, deterministic bytes, and a manifest.

Pure Python and pyarrow (no Spark, no Java, no webdataset package). Promises:

* `OUT/part-{shard:05d}-of-{num:05d}.tar` for every shard of the build (empty shards give
  an empty tar, so the count is fixed), and `OUT/manifest.json`, written last, listing each
  tar's shard, rows, bytes and sha256.
* One sample per row, in the shard's row order, keyed `{shard:05d}-{row:09d}` (the row's
  position in its shard; the build's `id` is in the json). Members: `key.txt` (the `text`
  column, UTF-8), `key.jpg` / `.png` / `.webp` / `.gif` (the `image` column's bytes,
  named by their magic bytes), `key.json` (every other column, typed JSON: numbers,
  strings, bools, token-id lists as arrays, maps as objects, binary as base64 strings,
  dates and times as ISO strings, NaN and infinities as the strings "NaN", "Infinity",
  "-Infinity", null as null). A null text or image has no member.
* Same build, same bytes: members sorted by key then extension, USTAR headers with
  mtime 0, uid/gid 0, empty uname/gname, mode 0644, and JSON with sorted keys and no
  spaces; nothing depends on the clock, the user or the machine.
* Each shard's sha256 is checked against the build's manifest before it is exported.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import glob
import io
import json
import math
import os
import tarfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from shardforge.shards.manifest import Manifest, ManifestError, open_file, read_manifest, sha256_file, shard_mismatch, to_json

FORMAT = "shardforge.webdataset"
FORMAT_VERSION = 1
TEXT, IMAGE = "text", "image"
KEY_FORMAT = "{shard:05d}-{row:09d}"
_MAGIC = [(b"\xff\xd8\xff", "jpg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF87a", "gif"), (b"GIF89a", "gif")]


class ExportError(ValueError):
    """A build that cannot be exported; `code` is the command's exit code (2 bad input,
    3 a shard whose bytes differ from its manifest)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def image_ext(data: bytes) -> str | None:
    """The file extension of an encoded image by its magic bytes, or None."""
    for magic, ext in _MAGIC:
        if data.startswith(magic):
            return ext
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def to_jsonable(value: Any, typ: pa.DataType) -> Any:
    """A column value as plain JSON data, by its Arrow type (see the module docstring)."""
    if value is None:
        return None
    if pa.types.is_map(typ):
        items = [(k, to_jsonable(v, typ.item_type)) for k, v in value]
        if pa.types.is_string(typ.key_type) or pa.types.is_large_string(typ.key_type):
            return dict(items)
        return [[to_jsonable(k, typ.key_type), v] for k, v in items]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return [to_jsonable(v, typ.value_type) for v in value]
    if pa.types.is_struct(typ):
        return {f.name: to_jsonable(value.get(f.name), f.type) for f in typ}
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def dumps(obj: Any) -> bytes:
    """The one JSON serialisation of a sample's json member and nothing else."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uid, info.gid, info.uname, info.gname = 0, 0, "", ""
    info.type = tarfile.REGTYPE
    tar.addfile(info, io.BytesIO(data))


def _samples(table: pa.Table, shard: int, first_row: int):
    """(key, [(ext, bytes)] sorted by ext) for each row of a row group."""
    names = table.column_names
    others = [(c, table.schema.field(c).type) for c in names if c not in (TEXT, IMAGE)]
    cols = {c: table.column(c).to_pylist() for c in names}
    for r in range(table.num_rows):
        key = KEY_FORMAT.format(shard=shard, row=first_row + r)
        members = [("json", dumps({c: to_jsonable(cols[c][r], t) for c, t in others}))]
        if TEXT in cols and cols[TEXT][r] is not None:
            members.append(("txt", str(cols[TEXT][r]).encode("utf-8")))
        if IMAGE in cols and cols[IMAGE][r] is not None:
            data = bytes(cols[IMAGE][r])
            ext = image_ext(data)
            if ext is None:
                raise ExportError(f"shard {shard} row {first_row + r}: the image column holds bytes that are "
                                  f"not JPEG, PNG, WebP or GIF (starting {data[:8].hex()})")
            members.append((ext, data))
        yield key, sorted(members)


def _open_shard(m: Manifest, index: int) -> pq.ParquetFile:
    path = m.path_of(m.shards[index])
    try:
        problem = shard_mismatch(m, index)
    except FileNotFoundError:
        raise ExportError(f"shard {index} is missing: {path}") from None
    if problem:
        raise ExportError(problem, code=3)
    try:
        return pq.ParquetFile(open_file(path))
    except (OSError, ValueError) as exc:
        raise ExportError(f"shard {index} ({path}) is not a readable Parquet file: {exc}") from None


def tar_name(index: int, num: int) -> str:
    return f"part-{index:05d}-of-{num:05d}.tar"


def export_shard(m: Manifest, index: int, out: str) -> dict[str, Any]:
    """Write shard `index`'s tar into `out` (a temp name, then a rename); its manifest entry."""
    pf = _open_shard(m, index)
    name = tar_name(index, m.num_shards)
    final, tmp = os.path.join(out, name), os.path.join(out, f".{name}.tmp")
    rows = 0
    with open(tmp, "wb") as fh:
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for g in range(pf.num_row_groups):
                try:
                    table = pf.read_row_group(g)
                except (OSError, ValueError) as exc:      # bytes that match the manifest but do not decode
                    raise ExportError(f"shard {index} row group {g} cannot be read: {exc}", code=3) from None
                for key, members in _samples(table, index, rows):
                    for ext, data in members:
                        _add(tar, f"{key}.{ext}", data)
                rows += pf.metadata.row_group(g).num_rows
    if rows != m.shards[index].rows:
        os.unlink(tmp)
        raise ExportError(f"shard {index} has {rows} rows; the manifest says {m.shards[index].rows}", code=3)
    digest, size = sha256_file(tmp)
    os.replace(tmp, final)
    return {"index": index, "file": name, "rows": rows, "bytes": size, "sha256": digest}


def export_webdataset(build: str, out: str) -> dict[str, Any]:
    """Export the build at `build` (folder, manifest.json or fsspec URL) into the local
    folder `out`; returns the written manifest. Tars of an earlier export that the new
    manifest does not list are removed."""
    if "://" in str(out) and not str(out).startswith("file://"):
        raise ExportError(f"OUT must be a local folder, got {out}")
    out = str(out)[len("file://"):] if str(out).startswith("file://") else str(out)
    try:
        m = read_manifest(build)
    except ManifestError as exc:
        raise ExportError(str(exc)) from None
    if os.path.exists(out) and not os.path.isdir(out):
        raise ExportError(f"OUT {out} exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    tars = [export_shard(m, s.index, out) for s in m.shards]
    schema = {f["name"]: f["type"] for f in m.schema}
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "build_id": m.build_id,
        "build_fingerprint": m.fingerprint, "key_format": KEY_FORMAT, "num_shards": m.num_shards,
        "total_rows": sum(t["rows"] for t in tars), "tars": tars,
        "members": {"txt": TEXT if TEXT in schema else None,
                    "image": IMAGE if IMAGE in schema else None,
                    "json": [c for c in schema if c not in (TEXT, IMAGE)]},
    }
    listed = {t["file"] for t in tars}
    for old in glob.glob(os.path.join(out, "part-*-of-*.tar")):
        if os.path.basename(old) not in listed:
            os.unlink(old)
    tmp = os.path.join(out, ".manifest.json.tmp")
    with open(tmp, "wb") as fh:
        fh.write(to_json(manifest))
    os.replace(tmp, os.path.join(out, "manifest.json"))
    return manifest
