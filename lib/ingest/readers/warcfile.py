"""Writing WARC files as Common Crawl ships them (one gzip member per record), with fastwarc:
a small crawler for the demo and the tests (`crawl`), and single records (`write_record`).

Deterministic record ids: `WARC-Record-ID` is a UUID5 of (target URI, record type, ordinal),
so the same crawl gives the same page ids. The HTTP response is stored as received (status
line, headers and body as urllib saw them; transfer and content encodings already undone,
so `Content-Encoding`/`Transfer-Encoding` headers are dropped).
"""
from __future__ import annotations

import gzip
import io
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone
from typing import BinaryIO, Optional

_NS = uuid.UUID("6c1f6f7e-58a4-4bd2-9a53-4d1c0f0e2b61")
_DROP = ("content-encoding", "transfer-encoding", "content-length", "connection")


def write_record(out: BinaryIO, rtype: str, payload: bytes, *, uri: str = "", ordinal: int = 0,
                 content_type: Optional[str] = None, date: Optional[str] = None) -> None:
    """One record of type `rtype` ("warcinfo", "request", "response", "metadata", "conversion"...)
    as its own gzip member."""
    from fastwarc.warc import WarcRecord, WarcRecordType

    rec = WarcRecord()
    rid = uuid.uuid5(_NS, f"{uri}\t{rtype}\t{ordinal}")
    rec.init_headers(getattr(WarcRecordType, rtype), f"uuid:{rid}".encode())   # fastwarc adds "<urn:" and ">"
    if uri:
        rec.headers["WARC-Target-URI"] = uri
    rec.headers["WARC-Date"] = date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if content_type:
        rec.headers["Content-Type"] = content_type
    rec.set_bytes_content(payload)
    buf = io.BytesIO()
    rec.write(buf, checksum_data=True)
    out.write(gzip.compress(buf.getvalue(), mtime=0))


def http_response_bytes(status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    head = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers if k.lower() not in _DROP]
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def crawl(urls: list[str], path: str, *, timeout: float = 10.0, date: Optional[str] = None) -> dict:
    """Fetch every URL (GET, no redirects followed beyond urllib's) and write a gzip WARC:
    a warcinfo record, then a request and a response record per URL (error statuses too; a
    URL that gives no HTTP answer at all gets a metadata record saying why).
    Returns counts by record type."""
    counts: dict[str, int] = {}

    def put(out, rtype, payload, **kw):
        write_record(out, rtype, payload, date=date, **kw)
        counts[rtype] = counts.get(rtype, 0) + 1

    with open(path, "wb") as out:
        put(out, "warcinfo", b"software: shardforge.readers.warcfile\r\nformat: WARC File Format 1.1\r\n",
            content_type="application/warc-fields")
        for i, url in enumerate(urls):
            host = urllib.parse.urlsplit(url).netloc
            req = f"GET {urllib.parse.urlsplit(url).path or '/'} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            put(out, "request", req, uri=url, ordinal=i, content_type="application/http; msgtype=request")
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    status, reason, headers, body = resp.status, resp.reason, resp.getheaders(), resp.read()
            except urllib.error.HTTPError as err:
                status, reason, headers, body = err.code, err.reason, list(err.headers.items()), err.read()
            except OSError as err:
                put(out, "metadata", f"fetch-error: {type(err).__name__}: {err}\r\n".encode(), uri=url, ordinal=i,
                    content_type="application/warc-fields")
                continue
            put(out, "response", http_response_bytes(status, str(reason), headers, body), uri=url, ordinal=i,
                content_type="application/http; msgtype=response")
    return counts
