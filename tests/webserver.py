"""A real HTTP server on 127.0.0.1 for download tests and benchmarks: valid and
broken images, pages in two charsets, and every pathological response the
downloader must classify, with a request log (times, hosts, open connections) to
assert retries, backoff spacing and per-host concurrency from the server's side.

Paths (all GET):
  /img/<name>.(jpg|png|webp|gif)   small images; /img/exif6.jpg carries EXIF orientation 6
  /bench/<i>.jpg                   one of 16 640x480 JPEGs (benchmarks)
  /page/utf8.html, /page/latin1.html, /page/latin1-meta.html, /page/plain.txt
  /status/<code>                   that status, empty body
  /flaky/<key>                     500 twice, then a JPEG (per key)
  /rate/<key>                      429 with Retry-After: 1 once, then a JPEG (per key)
  /slow                            sleeps `slow_seconds` before the headers
  /reset                           promises 100000 bytes, sends 1000, resets the connection
  /big                             Content-Length above any test cap; /big-chunked streams without one
  /redirect/<n>                    n more redirects, then a JPEG
  /redirect-blocked                302 to http://169.254.169.254/latest/meta-data/
  /html-as-image.jpg               text/html body at an image URL
  /corrupt.jpg                     image/jpeg header and garbage
  /bomb.png                        a valid PNG header claiming 100000 x 100000 pixels
  /noai.jpg                        a JPEG with X-Robots-Tag: noai
  /private/<x>                     disallowed by /robots.txt
  /hold/<x>.jpg                    a JPEG after `hold_seconds` (concurrency tests)
Every response may be delayed by `latency=(lo, hi)` seconds, drawn per path from a
seeded generator (the same path gets the same delay in every run and for every client).
"""
from __future__ import annotations

import hashlib
import io
import random
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image


def _image(fmt: str, size=(320, 240), seed: int = 0, mode: str = "RGB", exif_orientation: int = 0) -> bytes:
    w, h = size
    rnd = random.Random(seed)
    small = Image.frombytes("RGB", (16, 12), rnd.randbytes(16 * 12 * 3))
    img = small.resize(size, Image.Resampling.BICUBIC)   # smooth, photo-like colour fields
    if mode == "RGBA":
        img.putalpha(200)
    out = io.BytesIO()
    kwargs = {}
    if exif_orientation:
        exif = Image.Exif()
        exif[0x0112] = exif_orientation
        kwargs["exif"] = exif.tobytes()
    if fmt == "gif":
        img.convert("P").save(out, "GIF")
    else:
        img.save(out, {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}[fmt], **kwargs)
    return out.getvalue()


def _bomb_png(w: int = 100_000, h: int = 100_000) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", w, h, 1, 0, 0, 0, 0)   # 1-bit grayscale
    idat = zlib.compress(b"\x00" * 4096)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


UTF8_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Grüße aus Köln</title>
<style>body { color: red }</style><script>var tracking = "do not extract";</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<header class="site-header">Site banner text</header>
<main><article><h1>Über die Straße</h1>
<p>Schöne Grüße aus Köln: naïve café, 東京, emoji 🙂 and a long enough paragraph to be the main text.</p>
<p>Second paragraph &amp; an entity.</p></article></main>
<div class="cookie-banner">We use cookies</div><footer>Footer © 2026</footer></body></html>"""
LATIN1_PAGE = ("<html><head><title>Caf\u00e9</title></head><body><p>Cr\u00e8me br\u00fbl\u00e9e \u00e0 la "
               "fran\u00e7aise, \u00a3 and \u00bd portion.</p></body></html>")
LATIN1_META_PAGE = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">'
                    "</head><body><p>Gar\u00e7on, un caf\u00e9 cr\u00e8me.</p></body></html>")


@dataclass
class Hit:
    path: str
    host: str
    start: float
    end: float = 0.0
    status: int = 0
    conn: int = 0


@dataclass
class Stats:
    hits: list = field(default_factory=list)
    active: dict = field(default_factory=dict)        # host -> requests in progress
    max_active: dict = field(default_factory=dict)
    open_conns: dict = field(default_factory=dict)    # host -> connections open
    max_open_conns: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "shardforge-test"

    def log_message(self, *args):   # quiet
        pass

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._host = None
        self._conn_id = id(self)

    def finish(self):
        srv = self.server.app
        if self._host is not None:
            with srv.lock:
                srv.stats.open_conns[self._host] -= 1
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self):
        srv = self.server.app
        host = (self.headers.get("Host") or "").lower()
        hit = Hit(self.path, host, time.monotonic(), conn=self._conn_id)
        with srv.lock:
            if self._host is None:
                self._host = host
                st = srv.stats
                st.open_conns[host] = st.open_conns.get(host, 0) + 1
                st.max_open_conns[host] = max(st.max_open_conns.get(host, 0), st.open_conns[host])
            st = srv.stats
            st.active[host] = st.active.get(host, 0) + 1
            st.max_active[host] = max(st.max_active.get(host, 0), st.active[host])
            st.hits.append(hit)
        try:
            hit.status = srv.route(self)
        except (BrokenPipeError, ConnectionResetError):
            hit.status = -1
        finally:
            hit.end = time.monotonic()
            with srv.lock:
                srv.stats.active[host] -= 1

    def send(self, code: int, body: bytes = b"", ctype: str = "application/octet-stream", headers=None) -> int:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        return code


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):   # clients that hang up are part of the tests
        pass


class TestServer:
    """Start with `with TestServer() as srv:`; `srv.url(path)` gives a full URL."""
    __test__ = False   # not a pytest test class

    def __init__(self, *, latency=(0.0, 0.0), slow_seconds: float = 3.0, hold_seconds: float = 0.2,
                 big_bytes: int = 5_000_000, host: str = "127.0.0.1"):
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.hold_seconds = hold_seconds
        self.big_bytes = big_bytes
        self.lock = threading.Lock()
        self.stats = Stats()
        self.images = {f"{n}.{ext}": _image(ext, seed=i) for i, (n, ext) in enumerate(
            [("a", "jpg"), ("b", "png"), ("c", "webp"), ("d", "gif")])}
        self.images["alpha.png"] = _image("png", mode="RGBA", seed=7)
        self.images["exif6.jpg"] = _image("jpg", seed=8, exif_orientation=6)
        self.images["tiny.jpg"] = _image("jpg", size=(40, 30), seed=9)
        self.bench = [_image("jpg", size=(640, 480), seed=100 + i) for i in range(16)]
        self.bomb = _bomb_png()
        self.httpd = _Server((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 256
        self.httpd.app = self
        self.port = self.httpd.server_address[1]
        self._thread = None

    # lifecycle
    def __enter__(self):
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def reset_log(self) -> None:
        with self.lock:
            self.stats = Stats()

    def hits(self, path: str | None = None) -> list[Hit]:
        with self.lock:
            return [h for h in self.stats.hits if path is None or h.path == path]

    def _count(self, key: str) -> int:
        with self.lock:
            n = self.stats.counters.get(key, 0) + 1
            self.stats.counters[key] = n
            return n

    def _delay(self, path: str) -> None:
        lo, hi = self.latency
        if hi > 0:
            rnd = random.Random(hashlib.sha256(path.encode()).digest())
            time.sleep(rnd.uniform(lo, hi))

    # routing
    def route(self, h: Handler) -> int:
        path = h.path.split("?", 1)[0]
        self._delay(path)
        jpeg = self.images["a.jpg"]
        if path == "/robots.txt":
            return h.send(200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
        if path.startswith("/img/"):
            name = path[5:]
            if name not in self.images:
                return h.send(404, b"no such image", "text/plain")
            ext = name.rsplit(".", 1)[1]
            ctype = {"jpg": "image/jpeg", "png": "image/png", "webp": "image/webp", "gif": "image/gif"}[ext]
            return h.send(200, self.images[name], ctype)
        if path.startswith("/bench/"):
            i = int(path[7:].split(".")[0])
            return h.send(200, self.bench[i % len(self.bench)], "image/jpeg")
        if path == "/page/utf8.html":
            return h.send(200, UTF8_PAGE.encode("utf-8"), "text/html; charset=utf-8")
        if path == "/page/latin1.html":
            return h.send(200, LATIN1_PAGE.encode("latin-1"), "text/html; charset=ISO-8859-1")
        if path == "/page/latin1-meta.html":
            return h.send(200, LATIN1_META_PAGE.encode("latin-1"), "text/html")
        if path == "/page/plain.txt":
            return h.send(200, "plain text\n\nsecond line".encode(), "text/plain; charset=utf-8")
        if path.startswith("/status/"):
            code = int(path[8:])
            return h.send(code, b"", "text/plain")
        if path.startswith("/flaky/"):
            if self._count(path) <= 2:
                return h.send(500, b"try again", "text/plain")
            return h.send(200, jpeg, "image/jpeg")
        if path.startswith("/rate/"):
            if self._count(path) <= 1:
                return h.send(429, b"slow down", "text/plain", {"Retry-After": "1"})
            return h.send(200, jpeg, "image/jpeg")
        if path == "/slow":
            time.sleep(self.slow_seconds)
            return h.send(200, jpeg, "image/jpeg")
        if path == "/reset":
            h.send_response(200)
            h.send_header("Content-Type", "image/jpeg")
            h.send_header("Content-Length", "100000")
            h.end_headers()
            h.wfile.write(jpeg[:1000])
            h.wfile.flush()
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            h.connection.close()
            return 200
        if path == "/big":
            h.send_response(200)
            h.send_header("Content-Type", "image/jpeg")
            h.send_header("Content-Length", str(self.big_bytes))
            h.end_headers()
            h.close_connection = True
            try:
                h.wfile.write(b"\0" * 65536)
            except OSError:
                pass
            return 200
        if path == "/big-chunked":
            h.send_response(200)
            h.send_header("Content-Type", "image/jpeg")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            h.close_connection = True
            block = b"\0" * 65536
            try:
                for _ in range(self.big_bytes // len(block) + 1):
                    h.wfile.write(b"%x\r\n" % len(block) + block + b"\r\n")
                h.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            return 200
        if path.startswith("/redirect/"):
            n = int(path[10:])
            if n <= 0:
                return h.send(200, jpeg, "image/jpeg")
            return h.send(302, b"", "text/plain", {"Location": f"/redirect/{n - 1}"})
        if path == "/redirect-blocked":
            return h.send(302, b"", "text/plain", {"Location": "http://169.254.169.254/latest/meta-data/"})
        if path == "/html-as-image.jpg":
            return h.send(200, b"<html><body>not an image</body></html>", "text/html; charset=utf-8")
        if path == "/corrupt.jpg":
            return h.send(200, b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8, "image/jpeg")
        if path == "/bomb.png":
            return h.send(200, self.bomb, "image/png")
        if path == "/noai.jpg":
            return h.send(200, jpeg, "image/jpeg", {"X-Robots-Tag": "noai, noimageai"})
        if path.startswith("/private/"):
            return h.send(200, jpeg, "image/jpeg")
        if path.startswith("/hold/"):
            time.sleep(self.hold_seconds)
            return h.send(200, jpeg, "image/jpeg")
        return h.send(404, b"not found", "text/plain")


def comparable_results(df) -> list[tuple]:
    """A download results table as sorted tuples without its timing columns (for
    comparing a resumed run with an uninterrupted one); nulls sort first."""
    from shardforge.ingest.download import RESULT, TIMING_COLS

    cols = [c for c in RESULT.fieldNames() if c not in TIMING_COLS and c in df.columns]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=nulls_first)


def nulls_first(row: tuple) -> tuple:
    """Sort key for rows with nulls: a null sorts before any value."""
    return tuple((True, 0) if v is None else (False, v) for v in row)


def serve_forever(port_file: str | None = None, **kwargs) -> None:  # pragma: no cover - manual use
    """Run a server until interrupted (prints its base URL)."""
    with TestServer(**kwargs) as srv:
        print(srv.url(""), flush=True)
        if port_file:
            open(port_file, "w").write(str(srv.port))
        while True:
            time.sleep(3600)


try:
    import pytest

    @pytest.fixture(scope="module")
    def http_server():
        """A TestServer for the module; tests that read its log call `reset_log()` first."""
        with TestServer(slow_seconds=20.0) as srv:
            yield srv
except ImportError:  # pragma: no cover - benchmarks import this module without pytest
    pass
