"""Pure per-file readers (no Spark): lines of JSONL (plain or compressed) and pages of WARC/WET
files, streamed record by record, so a task holds one record at a time (a JSONL line at most
`ingest.max_record_bytes`, a page at most `max_page_bytes`).

Every reader yields plain dicts and never raises for bad input: a file that cannot be
opened, is corrupt or ends early yields, after the rows read before the damage, one row
with `_reason` (`invalid:unreadable_file` / `invalid:truncated_record` ...) and `_detail`.
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import zlib
from typing import Iterator, Optional

from shardforge.ingest.readers.pages import PageLimits, page_row

OPENERS = {
    "jsonl.gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    "jsonl.bz2": lambda raw: bz2.BZ2File(raw, "rb"),
    "jsonl.zst": lambda raw: __import__("zstandard").ZstdDecompressor().stream_reader(raw, read_across_frames=True),
}
READ_ERRORS = (OSError, EOFError, ValueError, zlib.error)


def _errors() -> tuple:
    try:
        import zstandard

        return READ_ERRORS + (zstandard.ZstdError,)
    except ImportError:       # pragma: no cover - zstandard is a dependency
        return READ_ERRORS


def open_raw(path: str):
    """A binary stream of a local path, of an http(s):// URL (through fsspec), or of any URI
    pyarrow's filesystems open (hdfs://, s3://)."""
    if path.lower().startswith(("http://", "https://")):
        return HttpStream(path)
    if "://" in path and not path.startswith("file://"):
        from pyarrow import fs

        filesystem, inner = fs.FileSystem.from_uri(path)
        return filesystem.open_input_stream(inner)
    return open(path[len("file://"):] if path.startswith("file://") else path, "rb")


class HttpStream(io.RawIOBase):
    """A file served over HTTP(S), read front to back in one GET (requests, streamed): a non-2xx
    answer, a dropped connection or a body shorter than its Content-Length is an OSError."""

    def __init__(self, url: str, timeout: float = 60.0):
        import requests

        self.url = url
        try:
            self.resp = requests.get(url, stream=True, timeout=timeout)
        except requests.RequestException as exc:
            raise OSError(f"{url}: {type(exc).__name__}: {exc}") from None
        if not 200 <= self.resp.status_code < 300:
            self.resp.close()
            raise OSError(f"{url}: HTTP {self.resp.status_code}")

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self.resp.raw.read(len(b), decode_content=True)
        except Exception as exc:       # urllib3's protocol errors are not OSErrors
            raise OSError(f"{self.url}: {type(exc).__name__}: {exc}") from None
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.resp.close()
        super().close()


def _error_row(source: str, reason: str, exc: BaseException | str) -> dict:
    detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return {"_file": source, "_reason": reason, "_detail": detail[:500]}


MAX_RECORD_BYTES = 32 << 20   # ingest.max_record_bytes' default
_SKIP_CHUNK = 1 << 20


def _too_large(source: str, where: str, size: int, cap: int) -> dict:
    return _error_row(source, "invalid:record_too_large",
                      f"{source}: line at {where}: {size} bytes > ingest.max_record_bytes {cap}")


def _lines(stream, source: str, cap: int, start: int = 0, end: int | None = None) -> Iterator[dict]:
    """The lines of a binary stream positioned at byte `start`, each at most `cap` bytes held:
    a longer line is read through in chunks of 1 MiB (never held) and becomes one
    `invalid:record_too_large` row naming its file and byte offset. With `end`, the lines that
    start before `end` (the split's own lines; the caller placed `start` at a line start)."""
    pos = start
    while end is None or pos < end:
        line = stream.readline(cap + 1)
        if not line:
            return
        if len(line) > cap and not (len(line) == cap + 1 and line.endswith(b"\n")):
            size = len(line)
            while not line.endswith(b"\n"):
                line = stream.readline(_SKIP_CHUNK)
                if not line:
                    break
                size += len(line)
            yield _too_large(source, f"byte {pos}", size - (1 if line.endswith(b"\n") else 0), cap)
            pos += size
            continue
        pos += len(line)
        yield {"_line": line.rstrip(b"\n").rstrip(b"\r").decode("utf-8", "replace"), "_file": source}


def jsonl_lines(path: str, source: str, fmt: str, max_bytes: int = MAX_RECORD_BYTES,
                start: int = 0, end: int | None = None) -> Iterator[dict]:
    """{"_line", "_file"} per line of a JSONL file, plain or compressed (UTF-8, bad bytes as
    U+FFFD, line ends \\n or \\r\\n), holding at most `max_bytes` of a line (longer lines:
    one `invalid:record_too_large` row each); then, if the file is unreadable or ends early, one
    error row. A plain file is read from byte `start` to `end` (a split: its first line is the
    one after the first \\n at or after `start - 1`, its last the one that starts before `end`)."""
    errors = _errors()
    try:
        raw = open_raw(path)
    except errors as exc:
        yield _error_row(source, "invalid:unreadable_file", exc)
        return
    try:
        if fmt == "jsonl":
            with raw, io.BufferedReader(raw, 1 << 16) if not isinstance(raw, io.BufferedIOBase) else raw as stream:
                if start > 0:
                    stream.seek(start - 1)
                    skipped = 0
                    while True:                        # to the start of the split's first line
                        chunk = stream.readline(_SKIP_CHUNK)
                        skipped += len(chunk)
                        if not chunk or chunk.endswith(b"\n"):
                            break
                    start = start - 1 + skipped
                yield from _lines(stream, source, max_bytes, start, end)
            return
        with raw, OPENERS[fmt](raw) as stream:
            yield from _lines(io.BufferedReader(stream) if fmt == "jsonl.zst" else stream, source, max_bytes)
    except errors as exc:
        yield _error_row(source, "invalid:unreadable_file", exc)


def warc_rows(path: str, source: str, limits: PageLimits, sandbox) -> Iterator[dict]:
    """One row per WARC record: `_rtype` is the record type. Response records (HTTP) and
    conversion records (WET text) become page rows (or rejects with a reason); other types
    (warcinfo, request, metadata, revisit, resource...) become rows with only `_rtype` and
    `_file`, which the caller counts and skips. A record that ends before its Content-Length
    is `invalid:truncated_record`; a file that cannot be read on is one more row,
    `invalid:unreadable_file`, after the records read before the damage."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    errors = _errors()
    try:
        raw = open_raw(path)
    except errors as exc:
        yield {**_error_row(source, "invalid:unreadable_file", exc), "_rtype": None}
        return
    made = 0
    last_truncated = False
    with raw:
        try:
            for record in ArchiveIterator(raw, record_types=WarcRecordType.any_type, parse_http=True):
                row = _record_row(record, source, limits, sandbox)
                made += 1
                last_truncated = row.get("_reason") == "invalid:truncated_record"
                yield row
        except errors as exc:
            yield {**_error_row(source, "invalid:unreadable_file", exc), "_rtype": None}
            return
    # fastwarc ends its iteration quietly at a damaged record; a second, header-only walk
    # tells a clean end from a truncated one, so the damaged record is never lost silently
    complete, damage = walk_warc(path)
    if damage and not (last_truncated and made == complete + 1):
        yield {**_error_row(source, "invalid:truncated_record", f"after {complete} complete records: {damage}"),
               "_rtype": None}


def walk_warc(path: str) -> tuple[int, Optional[str]]:
    """(complete records, None) for a whole WARC file, or (complete records before the
    damage, what is wrong) for one that ends early or is not WARC. Reads WARC headers and
    skips contents by their Content-Length; gzip members are decompressed as a stream."""
    errors = _errors()
    n = 0
    try:
        raw = open_raw(path)
        with raw, (gzip.GzipFile(fileobj=raw, mode="rb") if _is_gzip(path) else raw) as stream:
            while True:
                line = stream.readline(1 << 16)
                if not line:
                    return n, None
                if line.strip() == b"":
                    continue
                if not line.startswith(b"WARC/"):
                    return n, f"record {n + 1} does not start with a WARC version line"
                length = None
                while True:
                    h = stream.readline(1 << 16)
                    if not h:
                        return n, f"record {n + 1} ends inside its WARC headers"
                    if h.strip() == b"":
                        break
                    if h[:15].lower() == b"content-length:":
                        length = int(h.split(b":", 1)[1].strip() or b"-1")
                if length is None or length < 0:
                    return n, f"record {n + 1} has no valid Content-Length"
                left = length
                while left:
                    got = len(stream.read(min(left, 1 << 20)))
                    if not got:
                        return n, f"record {n + 1} has {length - left} of {length} content bytes"
                    left -= got
                n += 1
    except errors as exc:
        return n, f"record {n + 1}: {type(exc).__name__}: {exc}"


def _is_gzip(path: str) -> bool:
    with open_raw(path) as f:
        return f.read(2) == b"\x1f\x8b"


def _record_row(record, source: str, limits: PageLimits, sandbox) -> dict:
    from fastwarc.warc import WarcRecordType

    rtype = str(record.record_type)
    headers = record.headers
    base = {"_rtype": rtype, "_file": source}
    if record.record_type not in (WarcRecordType.response, WarcRecordType.conversion):
        return base
    rid = (headers.get("WARC-Record-ID") or "").strip("<>")
    row = {**base, "id": rid.removeprefix("urn:uuid:") or None, "url": headers.get("WARC-Target-URI"),
           "_date": headers.get("WARC-Date")}
    if headers.get("Content-Length") is None:
        return {**row, "_reason": "invalid:truncated_record", "_detail": "record ends inside its WARC headers"}
    if record.record_type == WarcRecordType.response and not record.is_http:
        declared = int(headers.get("Content-Length") or 0)
        got = len(record.reader.read(declared + 1))
        if got < declared:               # the HTTP head itself was cut off
            return {**row, "_reason": "invalid:truncated_record", "_detail": f"{got} of {declared} bytes"}
        return {**row, "_reason": "invalid:not_http", "_detail": headers.get("Content-Type")}
    expected = record.content_length
    if expected > limits.max_page_bytes:
        return {**row, "_reason": "invalid:page_too_large",
                "_detail": f"{expected} bytes > ingest.max_page_bytes = {limits.max_page_bytes}"}
    body = record.reader.read(expected + 1)
    if len(body) < expected:
        return {**row, "_reason": "invalid:truncated_record",
                "_detail": f"{len(body)} of {expected} bytes"}
    if record.record_type == WarcRecordType.conversion:       # WET: text already extracted
        return {**row, **page_row(body, headers.get("Content-Type") or "text/plain", None, limits, sandbox)}
    http = record.http_headers
    return {**row, **page_row(body, http.get("Content-Type"), http.status_code, limits, sandbox)}


def title_meta(title: Optional[str], date: Optional[str]) -> Optional[str]:
    """The page's `meta`: its title and WARC date as JSON (None when both are empty)."""
    d = {k: v for k, v in (("title", title), ("warc_date", date)) if v}
    return json.dumps(d, ensure_ascii=False, sort_keys=True) if d else None
