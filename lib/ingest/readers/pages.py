"""One fetched page (status, headers, body bytes) to a page row: the decision to extract or
to reject it, and the extraction under the per-document time bound (`shardforge.ingest.extract`).

Reasons: `invalid:http_status` (not 2xx), `invalid:content_type` (not HTML or plain text),
`invalid:binary_content` (NUL bytes in the first 4 KiB: no HTML or text page has them),
`invalid:extract_timeout` / `invalid:extract_crashed` (see `shardforge.ingest.extract.Sandbox`),
`invalid:no_text` (the page has no main text).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml", "text/xml")
TEXT_TYPES = ("text/plain",)


@dataclass(frozen=True)
class PageLimits:
    max_page_bytes: int = 10_000_000     # larger bodies are invalid:page_too_large, unread
    extract_timeout: float = 20.0        # CPU seconds of extraction per page (see Sandbox)


def page_row(body: bytes, content_type: Optional[str], status: Optional[int], limits: PageLimits,
             sandbox) -> dict:
    """Columns of one page: http_status, content_type, charset, text, _title, and `_reason` /
    `_detail` when the page is rejected. `sandbox` is a `shardforge.ingest.extract.Sandbox`."""
    mime = (content_type or "").split(";")[0].strip().lower()
    row = {"http_status": status, "content_type": content_type}
    if status is not None and not 200 <= status < 300:
        return {**row, "_reason": "invalid:http_status", "_detail": str(status)}
    if mime and mime not in HTML_TYPES + TEXT_TYPES:
        return {**row, "_reason": "invalid:content_type", "_detail": mime}
    head = body[:4096]
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return {**row, "_reason": "invalid:binary_content", "_detail": f"NUL bytes in a {mime or 'page'} body"}
    page, reason, detail = sandbox.extract(body, content_type or "text/html")
    if page is None:
        return {**row, "_reason": reason, "_detail": detail}
    row.update(charset=page.charset, text=page.text, _title=page.title or None)
    if not page.text.strip():
        row.update(_reason="invalid:no_text", _detail="the page has no main text")
    return row
