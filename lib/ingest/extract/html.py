"""Main-text extraction of one HTML page with resiliparse (the library chosen by measurement,
bench/extract.py and BENCHMARKS.md), and the charset decision before it.

Promises: deterministic for a given resiliparse version (pinned in setup.py and recorded in
run reports and manifests as `extractor_info()`); never raises on any bytes: markup
resiliparse cannot parse gives an empty text, which the clean stage then rejects by rule.
Charset: the declared one (HTTP header, else <meta>) when the bytes decode with it; a
declared charset the bytes contradict (a "lying" charset) is ignored and the content
decides (BOM, valid UTF-8, charset-normalizer's guess, cp1252), as `download.text` does.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from shardforge.ingest.download.text import _HEADER_CHARSET, _META_CHARSET, _known, detect_charset

EXTRACTOR = "resiliparse"
_BLANK_RUNS = re.compile(r"\n{3,}")
_TRAILING_WS = re.compile(r"[ \t]+\n")


@dataclass(frozen=True)
class Page:
    charset: str
    title: str
    text: str


def extractor_info() -> dict:
    """{"name", "version"} of the HTML extractor; goes into run reports and manifests."""
    from importlib.metadata import version

    return {"name": EXTRACTOR, "version": version("resiliparse")}


def _declared(body: bytes, content_type: Optional[str]) -> Optional[str]:
    m = _HEADER_CHARSET.search(content_type or "")
    enc = _known(m.group(1)) if m else None
    if enc:
        return enc
    m = _META_CHARSET.search(body[:4096])
    return _known(m.group(1).decode("ascii", "ignore")) if m else None


def decode(body: bytes, content_type: Optional[str]) -> tuple[str, str]:
    """(charset, text) of the body: the declared charset when the bytes obey it, else the
    content's own evidence (see the module docstring). Never raises."""
    declared = _declared(body, content_type)
    if declared and not (_single_byte(declared) and _utf8_non_ascii(body)):
        try:
            enc = "cp1252" if declared in ("latin-1", "iso8859-1") else declared
            return declared, _strip_bom(body.decode(enc))
        except (UnicodeDecodeError, LookupError):
            pass
    enc = _from_content(body)
    dec = "cp1252" if enc in ("latin-1", "iso8859-1") else enc
    return enc, _strip_bom(body.decode(dec, "replace"))


def _single_byte(enc: str) -> bool:
    """A codec that decodes any bytes (so bytes never contradict it by failing)."""
    try:
        return len(bytes(range(128, 256)).decode(enc, "strict")) == 128
    except (UnicodeDecodeError, LookupError):
        return False


def _utf8_non_ascii(body: bytes) -> bool:
    """Valid UTF-8 with multi-byte sequences: a page declared single-byte that is really UTF-8."""
    if body.isascii():
        return False
    try:
        body.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _from_content(body: bytes) -> str:
    """The charset the bytes themselves show, ignoring every declaration (which lied): a BOM,
    valid UTF-8, else charset-normalizer's best guess, where windows-1252 (the WHATWG fallback)
    wins a tie (short Western text scores the same in cp1250 and cp1252), else cp1252."""
    sample = _META_CHARSET.sub(b"<meta>", body[:65536])
    enc = detect_charset(sample, None)
    if enc == "utf-8" or sample.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return enc
    try:
        from charset_normalizer import from_bytes

        matches = list(from_bytes(sample))
    except Exception:        # a guess that fails is no guess
        return enc
    if matches:
        best = matches[0]
        tied = [m.encoding for m in matches if m.chaos <= best.chaos and m.coherence >= best.coherence]
        if "cp1252" in tied:
            return "cp1252"
    return enc


def _strip_bom(text: str) -> str:
    return text[1:] if text.startswith("\ufeff") else text


def html_to_text(html: str) -> tuple[str, str]:
    """(title, main text): resiliparse's main-content extraction with block structure kept
    as lines, runs of blank lines collapsed to one."""
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    title = " ".join((tree.title or "").split())
    text = extract_plain_text(tree, main_content=True, preserve_formatting=True, alt_texts=False)
    text = _BLANK_RUNS.sub("\n\n", _TRAILING_WS.sub("\n", text)).strip()
    return title, text


def extract_page(body: bytes, content_type: Optional[str]) -> Page:
    """The page's charset, title and main text. text/plain bodies are returned decoded, as
    they are; everything else is parsed as HTML."""
    charset, decoded = decode(body, content_type)
    if (content_type or "").split(";")[0].strip().lower() == "text/plain":
        return Page(charset, "", decoded.strip())
    title, text = html_to_text(decoded)
    return Page(charset, title, text)


__all__ = ["EXTRACTOR", "Page", "decode", "extract_page", "extractor_info", "html_to_text"]
