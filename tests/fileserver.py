"""A real HTTP file server on 127.0.0.1 for a test: serves one folder (GET with single
byte ranges, HEAD; optionally one truncated response per named file), logs every request, and calls `on_request(method, path, range)` before
answering (the test's own check, run in the server thread)."""
from __future__ import annotations

import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class FileServer:
    """`with FileServer(folder) as srv:` serves `folder` at `srv.url`; `srv.log` is a list of
    (method, path, range header) for every request, in arrival order."""

    def __init__(self, folder: str, on_request=None, truncate=()):
        self.folder = os.path.abspath(folder)
        self.truncate = set(truncate)    # file names whose next whole GET stops halfway
        self.on_request = on_request
        self.log: list[tuple[str, str, str | None]] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def requests(self, suffix: str = "", method: str = "GET") -> list[str]:
        with self._lock:
            return [p for m, p, _r in self.log if m == method and p.endswith(suffix)]

    def __enter__(self) -> "FileServer":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):   # quiet
                pass

            def _serve(self, body: bool) -> None:
                with outer._lock:
                    outer.log.append((self.command, self.path, self.headers.get("Range")))
                if outer.on_request is not None:
                    try:
                        outer.on_request(self.command, self.path, self.headers.get("Range"))
                    except BaseException as exc:    # surfaced by the test, not lost in the thread
                        outer.errors.append(exc)
                local = os.path.normpath(os.path.join(outer.folder, self.path.lstrip("/").split("?")[0]))
                if not local.startswith(outer.folder + os.sep) or not os.path.isfile(local):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with open(local, "rb") as fh:
                    data = fh.read()
                start, stop, status = 0, len(data), 200
                m = _RANGE.match(self.headers.get("Range") or "")
                if m and (m.group(1) or m.group(2)):
                    if m.group(1):
                        start = int(m.group(1))
                        stop = min(len(data), int(m.group(2)) + 1) if m.group(2) else len(data)
                    else:                                 # the last n bytes
                        start = max(0, len(data) - int(m.group(2)))
                    status = 206
                self.send_response(status)
                self.send_header("Content-Length", str(stop - start))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
                self.end_headers()
                if body and status == 200 and os.path.basename(local) in outer.truncate:
                    outer.truncate.discard(os.path.basename(local))
                    self.wfile.write(data[:len(data) // 2])     # promised all, sent half
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if body:
                    self.wfile.write(data[start:stop])

            def do_GET(self):
                self._serve(True)

            def do_HEAD(self):
                self._serve(False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()
