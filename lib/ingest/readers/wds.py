"""The pure per-file reader of WebDataset tars (no Spark, nothing written to disk): members
streamed in order, grouped into samples by key, each sample one row.

WebDataset's convention (the `webdataset` package's `base_plus_ext`): a member `dir/0001.jpg`
has key `dir/0001` (the path up to the first `.` of the base name) and extension `jpg` (the
rest, lower-cased); consecutive members with one key are one sample. A sample's `jpg`/`jpeg`/
`png`/`webp`/`gif` member is its image, `txt` or `caption` its text, `json` its metadata.

Promises:
- Every tar member ends in exactly one row: a sample row (kept or rejected) counts its members
  in `_members`; a member that cannot belong to a sample is a reject row of its own; a
  directory is a `skipped` row (counted, not an input row); a damaged tar adds one reject row
  that counts the members of the sample it cut.
- The tar is read as a stream (`tarfile` mode `r|` over the decompressed bytes), one member's
  bytes (at most `max_member_bytes`) and one sample in memory at a time; nothing is extracted,
  so a member's name never reaches the filesystem.
- Never raises for bad input. Rows carry `_reason` / `_detail` when rejected:
  `invalid:unsafe_member_name` (absolute, or a `..` component), `invalid:link_member`
  (symlink, hard link), `invalid:special_member` (device, FIFO), `invalid:no_key_group` (no
  extension, an empty key, or a key whose sample ended earlier in the file),
  `invalid:duplicate_member` (a second image, text or json in one sample),
  `invalid:unsupported_member` (an extension that is none of the above),
  `invalid:member_too_large`, `invalid:undecodable_image`, `invalid:too_many_pixels`,
  `invalid:unsupported_image_format`, `invalid:malformed_json`, `invalid:not_an_object`,
  `invalid:empty_sample` (no image and no text), `invalid:truncated_tar` (the file ends inside
  a member or header, or without the end-of-archive block), `invalid:corrupt_tar` (a header
  that is not a tar header, or data after the end of the archive), `invalid:unreadable_file`.
- Deterministic: rows and ids depend only on the file's bytes and its `source` name.
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import tarfile
import warnings
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Iterator, Optional

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "gif")
TEXT_EXTS = ("txt", "caption")
JSON_EXTS = ("json",)
IMAGE_FORMATS = ("JPEG", "PNG", "WEBP", "GIF")       # pillow's names: what loaders and export take
BLOCK = tarfile.BLOCKSIZE


@dataclass(frozen=True)
class TarLimits:
    max_member_bytes: int = 20_000_000   # a larger member is invalid:member_too_large, its bytes skipped
    image_max_pixels: int = 89_478_485   # width x height above this: invalid:too_many_pixels
    id_column: str = "id"                # a json member's field taken as the sample's id when present
    columns: tuple[str, ...] = ()       # json fields `[ingest] columns` makes typed columns: not in `meta`


def split_name(name: str) -> tuple[Optional[str], Optional[str]]:
    """(key, extension lower-cased) of a member name, or (None, None) when it has no key
    group: no `.` in the base name, or nothing before it."""
    head, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    if not dot or not stem or not ext:
        return None, None
    return (f"{head}/{stem}" if head else stem), ext.lower()


def unsafe_name(name: str) -> bool:
    """An absolute name or one with a `..` component: extracting it would leave the target folder."""
    return name.startswith("/") or name.startswith("\\") or ".." in name.replace("\\", "/").split("/") \
        or (len(name) > 1 and name[1] == ":")


class _Tail(io.RawIOBase):
    """A read-only stream that remembers the last bytes it gave out (with their offsets), so the
    reader can look at the block where tarfile stopped: tarfile's stream mode ends quietly at
    end of file, at a torn header and at garbage, and only an all-zero block is a real end."""

    KEEP = 1 << 16

    def __init__(self, inner):
        self.inner, self.pos = inner, 0
        self.chunks: deque[tuple[int, bytes]] = deque()
        self.kept = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.inner.read(len(b))
        n = len(data)
        b[:n] = data
        if n:
            self.chunks.append((self.pos, bytes(data)))
            self.kept += n
            while self.kept - len(self.chunks[0][1]) >= self.KEEP:
                self.kept -= len(self.chunks.popleft()[1])
            self.pos += n
        return n

    def block_at(self, offset: int) -> bytes:
        """Up to 512 bytes from `offset` (reading on when tarfile has not reached them)."""
        while self.pos < offset + BLOCK:
            more = self.read(max(BLOCK, offset + BLOCK - self.pos))
            if not more:
                break
        out = b"".join(c for _, c in self.chunks)
        start = offset - (self.chunks[0][0] if self.chunks else self.pos)
        return out[max(0, start):max(0, start) + BLOCK] if start >= 0 else b""

    def rest_is_zero(self, offset: int) -> bool:
        """Whether every byte after `offset` (to the end of the stream) is zero."""
        out = b"".join(c for _, c in self.chunks)
        start = offset - (self.chunks[0][0] if self.chunks else self.pos)
        if out[max(0, start):].strip(b"\0"):
            return False
        while True:
            more = self.read(1 << 16)
            if not more:
                return True
            if more.strip(b"\0"):
                return False


class _Prefixed:
    """`head` (bytes already read from `inner`) followed by the rest of `inner`."""

    def __init__(self, head: bytes, inner):
        self.head, self.inner = head, inner

    def read(self, n: int = -1) -> bytes:
        if not self.head:
            return self.inner.read() if n is None or n < 0 else self.inner.read(n)
        if n is None or n < 0:
            out, self.head = self.head + self.inner.read(), b""
            return out
        out, self.head = self.head[:n], self.head[n:]
        return out if len(out) == n or self.head else out + self.inner.read(n - len(out))


def _decompressed(raw):
    """The tar's bytes: gzip, bzip2 and xz are recognised by their magic bytes (as `r|*` does)."""
    head = b""
    while len(head) < 6:
        more = raw.read(6 - len(head))
        if not more:
            break
        head += more
    raw = _Prefixed(head, raw)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(raw, "rb")
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw, "rb")
    return raw


class _Sample:
    def __init__(self, key: str):
        self.key = key
        self.parts: dict[str, tuple[str, bytes]] = {}     # role -> (member name, bytes)
        self.names: list[str] = []


def _error(source: str, reason: str, detail: str, members: int = 0, unit: str = "damage") -> dict:
    return {"_file": source, "_unit": unit, "_members": members, "_reason": reason, "_detail": detail[:500]}


def _member_reject(source: str, name: str, reason: str, detail: str) -> dict:
    return {"_file": source, "_unit": "member", "_members": 1, "_key": name, "_reason": reason,
            "_detail": f"{name}: {detail}"[:500]}


def _role(ext: str) -> Optional[str]:
    if ext in IMAGE_EXTS:
        return "image"
    if ext in TEXT_EXTS:
        return "text"
    if ext in JSON_EXTS:
        return "json"
    return None


def _decode_image(data: bytes, max_pixels: int) -> tuple[Optional[tuple[int, int, str]], Optional[tuple[str, str]]]:
    """((width, height, format), None) for an image pillow decodes fully, else (None, (reason, detail))."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            w, h = img.size
            if max_pixels and w * h > max_pixels:
                return None, ("invalid:too_many_pixels", f"{w}x{h} = {w * h} pixels > ingest.image_max_pixels "
                                                         f"{max_pixels}")
            img.load()
            fmt = img.format or ""
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return None, ("invalid:too_many_pixels", str(exc))
    except Image.UnidentifiedImageError:    # its message names an object address: not deterministic
        return None, ("invalid:undecodable_image", "pillow cannot identify the image format")
    except Exception as exc:          # pillow raises many types for bad bytes
        return None, ("invalid:undecodable_image", f"{type(exc).__name__}: {exc}")
    if fmt not in IMAGE_FORMATS:
        return None, ("invalid:unsupported_image_format", f"{fmt or 'unknown'} (kept formats: JPEG, PNG, WebP, GIF)")
    return (w, h, fmt.lower()), None


def sample_row(s: _Sample, source: str, limits: TarLimits) -> dict:
    """The row of one complete sample: kept columns, or `_reason` / `_detail` naming what is wrong."""
    from shardforge.keys import sample_id

    row = {"_file": source, "_unit": "sample", "_members": len(s.names), "_key": s.key,
           "id": sample_id(source, s.key), "kind": "image" if "image" in s.parts else "document"}
    detail = f"sample {s.key} ({', '.join(s.names)})"
    obj: dict = {}
    if "json" in s.parts:
        raw = s.parts["json"][1].decode("utf-8", "replace")
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            return {**row, "_reason": "invalid:malformed_json", "_detail": f"{detail}: {exc}"[:500]}
        if not isinstance(obj, dict):
            return {**row, "_reason": "invalid:not_an_object", "_detail": f"{detail}: {type(obj).__name__}"[:500]}
        row["_json"] = raw
        own = obj.get(limits.id_column)
        if isinstance(own, (str, int)) and not isinstance(own, bool) and str(own):
            row["id"] = str(own)
        if isinstance(obj.get("url"), str):
            row["url"] = obj["url"]
    if "text" not in s.parts and "image" not in s.parts:
        return {**row, "_reason": "invalid:empty_sample", "_detail": f"{detail}: no image and no text member"}
    text = s.parts["text"][1].decode("utf-8", "replace") if "text" in s.parts else None
    row["text"] = text if text is not None else ""
    facts = {"wds_key": s.key}
    if "image" in s.parts:
        data = s.parts["image"][1]
        got, bad = _decode_image(data, limits.image_max_pixels)
        if bad:
            return {**row, "_reason": bad[0], "_detail": f"{detail}: {bad[1]}"[:500]}
        w, h, fmt = got
        row.update(image=data, image_width=w, image_height=h)
        facts["image_format"] = fmt
    meta = {k: v for k, v in obj.items() if k not in (limits.id_column, "url", *limits.columns)}
    meta.update(facts)
    row["meta"] = json.dumps(meta, ensure_ascii=False, sort_keys=True)
    return row


def tar_rows(raw, source: str, limits: TarLimits) -> Iterator[dict]:
    """Rows of one tar (a binary stream, compressed or not); see the module docstring."""
    from shardforge.ingest.readers.streams import _errors

    errors = _errors() + (tarfile.TarError, lzma.LZMAError, zlib.error)
    try:
        tail = _Tail(_decompressed(raw))
        tar = tarfile.open(fileobj=tail, mode="r|")
    except errors as exc:
        yield _error(source, _damage(exc), f"{type(exc).__name__}: {exc}")
        return
    cur: Optional[_Sample] = None
    closed: set[str] = set()
    samples = 0
    reading = None

    def close():
        nonlocal cur, samples
        if cur is None:
            return None
        done, cur = cur, None
        closed.add(done.key)
        samples += 1
        return sample_row(done, source, limits)

    try:
        for info in tar:
            name = info.name
            if unsafe_name(name):
                yield _member_reject(source, name, "invalid:unsafe_member_name", "absolute or with a '..' part")
                continue
            if info.isdir():
                yield {"_file": source, "_unit": "skipped", "_members": 1, "_key": name}
                continue
            if info.issym() or info.islnk():
                yield _member_reject(source, name, "invalid:link_member",
                                     f"{'symlink' if info.issym() else 'hard link'} to {info.linkname!r}")
                continue
            if not info.isreg():
                yield _member_reject(source, name, "invalid:special_member", f"tar member type {info.type!r}")
                continue
            key, ext = split_name(name)
            if key is None:
                yield _member_reject(source, name, "invalid:no_key_group", "no extension or an empty key")
                continue
            if cur is not None and key != cur.key:
                yield close()
            if cur is None and key in closed:
                yield _member_reject(source, name, "invalid:no_key_group",
                                     f"its sample {key} ended earlier in the file (members of a sample must be "
                                     f"consecutive)")
                continue
            role = _role(ext)
            if role is None:
                yield _member_reject(source, name, "invalid:unsupported_member", f"extension {ext!r} is not an "
                                     f"image ({'/'.join(IMAGE_EXTS)}), text (txt/caption) or json")
                continue
            if info.size > limits.max_member_bytes:
                yield _member_reject(source, name, "invalid:member_too_large",
                                     f"{info.size} bytes > ingest.max_member_bytes {limits.max_member_bytes}")
                continue
            if cur is None:
                cur = _Sample(key)
            if role in cur.parts:
                yield _member_reject(source, name, "invalid:duplicate_member",
                                     f"sample {key} already has {cur.parts[role][0]} as its {role}")
                continue
            reading = name
            data = tar.extractfile(info).read()
            if len(data) < info.size:
                raise tarfile.ReadError(f"unexpected end of data: {len(data)} of {info.size} bytes")
            reading = None
            cur.parts[role] = (name, data)
            cur.names.append(name)
        end = tail.block_at(tar.offset)
        if len(end) < BLOCK:
            problem = ("invalid:truncated_tar", f"ends at byte {tail.pos} without the end-of-archive block")
        elif end.strip(b"\0"):
            problem = ("invalid:corrupt_tar", f"the block at byte {tar.offset} is not a tar header")
        else:                          # a real end: the last sample is whole
            last = close()
            if last is not None:
                yield last
            if not tail.rest_is_zero(tar.offset):
                yield _error(source, "invalid:corrupt_tar", f"after {samples} complete samples: data after the "
                             f"end-of-archive block at byte {tar.offset}")
            return
    except errors as exc:
        problem = (_damage(exc), f"{type(exc).__name__}: {exc}")
    # the sample being read when the damage came may be incomplete: its members go with the damage row
    lost = (cur.names if cur is not None else []) + ([reading] if reading else [])
    what = f"; lost: {', '.join(lost)}" if lost else ""
    yield _error(source, problem[0], f"after {samples} complete samples: {problem[1]}{what}", members=len(lost))


def _damage(exc: BaseException) -> str:
    """The reason for an error met while reading: the file ends early, is not a tar, or cannot be read."""
    text = str(exc).lower()
    if isinstance(exc, EOFError) or any(s in text for s in ("end of data", "truncated", "empty file", "ended before")):
        return "invalid:truncated_tar"
    if isinstance(exc, tarfile.TarError):
        return "invalid:corrupt_tar"
    return "invalid:unreadable_file"


def webdataset_rows(path: str, source: str, limits: TarLimits) -> Iterator[dict]:
    """`tar_rows` of the file at `path` (local, or a URL `streams.open_raw` opens)."""
    from shardforge.ingest.readers.streams import _errors, open_raw

    try:
        raw = open_raw(path)
    except _errors() as exc:
        yield _error(source, "invalid:unreadable_file", f"{type(exc).__name__}: {exc}")
        return
    with raw:
        yield from tar_rows(raw, source, limits)
