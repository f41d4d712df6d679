"""Page decoding and main-text extraction with the standard library only.

Charset: the HTTP header's, else a <meta charset> / http-equiv in the first 4 KiB,
else a BOM, else UTF-8 if the bytes are valid UTF-8, else charset-normalizer's
guess (it ships with requests), else cp1252. Text: `html.parser` walks the page,
drops script/style/nav/header/footer/aside/form/template/noscript/svg subtrees and
elements whose class or id looks like boilerplate, keeps block structure as
paragraphs, and when the page has <main> or <article> keeps only that content.
Deterministic and dependency-free; see README.md for why no extraction library.
"""
from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from typing import Optional

SKIP = {"script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside",
        "form", "button", "select", "iframe", "object", "canvas", "head"}
BLOCK = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table",
         "section", "article", "main", "blockquote", "pre", "dd", "dt", "dl", "figcaption",
         "hr", "title", "td", "th"}
VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source",
        "track", "wbr", "param"}
BOILER = re.compile(r"(^|[\s_-])(nav|menu|footer|header|sidebar|cookie|banner|advert|ads?|share|"
                    r"social|comments?|breadcrumbs?|related|subscribe|newsletter|popup|modal)($|[\s_-])",
                    re.I)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.I)


def _known(name: Optional[str]) -> Optional[str]:
    if not name:
        return None
    try:
        return codecs.lookup(name.strip()).name
    except LookupError:
        return None


def detect_charset(body: bytes, content_type: Optional[str]) -> str:
    """The charset to decode `body` with (see the module docstring for the order)."""
    m = _HEADER_CHARSET.search(content_type or "")
    enc = _known(m.group(1)) if m else None
    if enc:
        return enc
    m = _META_CHARSET.search(body[:4096])
    enc = _known(m.group(1).decode("ascii", "ignore")) if m else None
    if enc:
        return enc
    for bom, name in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if body.startswith(bom):
            return name
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(body[:65536]).best()
        if best is not None and _known(best.encoding):
            return _known(best.encoding)
    except Exception:
        pass
    return "cp1252"


def decode_page(body: bytes, content_type: Optional[str]) -> str:
    """Body bytes to str with the detected charset; undecodable bytes become U+FFFD."""
    enc = detect_charset(body, content_type)
    if enc in ("latin-1", "iso8859-1"):      # browsers read ISO-8859-1 as windows-1252
        enc = "cp1252"
    text = body.decode(enc, "replace")
    return text[1:] if text.startswith("\ufeff") else text


class _Extractor(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []   # (tag, skipping, in_main)
        self.skip_depth = 0
        self.parts: list[str] = []
        self.main_parts: list[str] = []
        self.main_depth = 0
        self.title: list[str] = []
        self.in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag in BLOCK:
                self._sep()
            return
        if tag == "title":
            self.in_title = True
        a = dict(attrs)
        marker = " ".join(filter(None, (a.get("class"), a.get("id"), a.get("role"))))
        skip = tag in SKIP or bool(marker and BOILER.search(marker)) or a.get("aria-hidden") == "true" \
            or "hidden" in a
        if tag in ("main", "article") or a.get("role") == "main":
            self.main_depth += 1
            opened_main = True
        else:
            opened_main = False
        self.stack.append((tag, skip, opened_main))
        if skip:
            self.skip_depth += 1
        if tag in BLOCK:
            self._sep()

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if tag in VOID or not any(t == tag for t, _, _ in self.stack):
            return
        while self.stack:
            t, skip, opened_main = self.stack.pop()
            if skip:
                self.skip_depth -= 1
            if opened_main:
                self.main_depth -= 1
            if t == tag:
                break
        if tag in BLOCK:
            self._sep()

    def handle_data(self, data):
        if self.in_title:
            self.title.append(data)
            return
        if self.skip_depth:
            return
        self.parts.append(data)
        if self.main_depth:
            self.main_parts.append(data)

    def _sep(self):
        self.parts.append("\n")
        if self.main_depth:
            self.main_parts.append("\n")


def _tidy(parts: list[str]) -> str:
    paras = []
    for block in "".join(parts).split("\n"):
        line = " ".join(block.split())
        if line:
            paras.append(line)
    return "\n".join(paras)


def extract_text(page: str) -> tuple[str, str]:
    """(title, main text) of an HTML page: paragraphs separated by newlines, whitespace
    collapsed. Malformed markup never raises; the worst case is more text, not less."""
    p = _Extractor()
    try:
        p.feed(page)
        p.close()
    except Exception:   # html.parser is lenient; this guards against pathological input
        pass
    main = _tidy(p.main_parts)
    body = main if len(main) >= 100 or (main and len(main) * 2 >= len(_tidy(p.parts))) else _tidy(p.parts)
    return " ".join("".join(p.title).split()), body


def page_text(body: bytes, content_type: Optional[str]) -> tuple[str, str, str]:
    """(charset, title, text) of a downloaded page; text/plain bodies are returned as is."""
    enc = detect_charset(body, content_type)
    decoded = decode_page(body, content_type)
    if (content_type or "").split(";")[0].strip().lower() == "text/plain":
        return enc, "", _tidy([decoded])
    title, text = extract_text(decoded)
    return enc, title, text
