"""What runs inside one Spark task: fetch a partition's URLs with a bounded thread
pool and turn each response into one result row (page text or processed image).

`run_partition` is the mapInArrow body. It admits a URL to the pool only while its
host is under `per_host_connections` (rows of a busy host are parked, up to a
bound, so other hosts are not held up behind it), keeps at most 2 x `threads_per_task`
fetches queued, and, when a spool directory is given, has each fetch thread append
its finished row to an Arrow stream file there (flushed at once) before it starts
another URL, so a killed job loses at most one URL per fetch thread: the ones whose
fetch had started and not yet been recorded.
"""
from __future__ import annotations

import collections
import os
import datetime as dt
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Iterator, Optional

import pyarrow as pa

from shardforge.ingest.download.fetch import Fetched, Fetcher
from shardforge.ingest.download.guard import host_key
from shardforge.ingest.download.images import ImageFailure, process_image
from shardforge.ingest.download.text import page_text

PAGE_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*")

# Columns the worker produces, in order; the Spark schema mirrors it (schema.py).
ARROW = pa.schema([
    ("url", pa.string()), ("caption", pa.string()), ("meta", pa.string()), ("source", pa.string()),
    ("expect", pa.string()), ("kind", pa.string()), ("status", pa.string()), ("error", pa.string()),
    ("http_status", pa.int32()), ("attempts", pa.int32()), ("final_url", pa.string()),
    ("content_type", pa.string()), ("fetched_at", pa.timestamp("us", tz="UTC")),
    ("fetch_seconds", pa.float64()), ("bytes", pa.int64()), ("sha256", pa.string()),
    ("charset", pa.string()), ("title", pa.string()), ("text", pa.string()), ("image", pa.binary()),
    ("image_width", pa.int32()), ("image_height", pa.int32()), ("original_width", pa.int32()),
    ("original_height", pa.int32()), ("image_format", pa.string()),
])
INPUT = ("url", "caption", "meta", "source", "expect")     # the url-list columns every result row carries
DUPLICATE_ERROR = "the same url appears earlier in the list"


def _looks_like_image(body: bytes) -> bool:
    return body.startswith(IMAGE_MAGIC) or (body[:4] == b"RIFF" and body[8:12] == b"WEBP")


def classify(fetched: Fetched, expect: str) -> tuple[Optional[str], Optional[str]]:
    """(kind, None) for a usable response, or (None, failure status). An explicit
    image/* type or image magic bytes make an image; HTML/XHTML/plain text a page."""
    ctype = (fetched.content_type or "").split(";")[0].strip().lower()
    body = fetched.body or b""
    is_image = ctype.startswith("image/") or (ctype in ("", "application/octet-stream", "binary/octet-stream")
                                               and _looks_like_image(body))
    is_page = ctype in PAGE_TYPES or (ctype == "" and body.lstrip()[:1] == b"<")
    if expect == "image":
        return ("image", None) if is_image else (None, "not_image")
    if expect == "page":
        return ("page", None) if is_page else (None, "not_page")
    if is_image:
        return "image", None
    if is_page:
        return "page", None
    return None, "unsupported_type"


def handle(fetcher: Fetcher, cfg, row: dict) -> dict:
    """Fetch and process one input row into one result row. Never raises."""
    started = time.time()
    t0 = time.monotonic()
    out = {k: row.get(k) for k in INPUT}
    expect = (row.get("expect") or cfg.expect or "auto").lower()
    if expect not in ("auto", "image", "page"):     # refused, not guessed: nothing is fetched
        out.update(status="invalid_kind", error=f"kind {expect!r} is not image, page or auto", attempts=0,
                   fetched_at=dt.datetime.fromtimestamp(started, dt.timezone.utc), fetch_seconds=0.0)
        return out
    f = fetcher.fetch(row.get("url"))
    out.update(status=f.status, error=f.error, http_status=f.http_status, attempts=f.attempts,
               final_url=f.final_url, content_type=f.content_type)
    if f.body is not None:
        import hashlib

        out["bytes"] = len(f.body)
        out["sha256"] = hashlib.sha256(f.body).hexdigest()
    if f.status == "ok":
        kind, failure = classify(f, expect)
        if failure:
            out.update(status=failure, error=f"content type {f.content_type!r} for expected {expect}")
        elif kind == "image":
            try:
                img = process_image(f.body, max_pixels=cfg.image_max_pixels, resize_mode=cfg.image_resize_mode,
                                    size=cfg.image_size, fmt=cfg.image_format, quality=cfg.image_quality)
                out.update(kind="image", image=img.data, image_width=img.width, image_height=img.height,
                           original_width=img.original_width, original_height=img.original_height,
                           image_format=img.original_format)
            except ImageFailure as exc:
                out.update(status=exc.status, error=exc.error)
            except Exception as exc:   # pillow bug on hostile input: a row, not a crash
                out.update(status="decode_error", error=f"{type(exc).__name__}: {exc}")
        else:
            try:
                charset, title, text = page_text(f.body, f.content_type)
                out.update(kind="page", charset=charset, title=title, text=text)
            except Exception as exc:
                out.update(status="decode_error", error=f"{type(exc).__name__}: {exc}")
    out["fetched_at"] = dt.datetime.fromtimestamp(started, dt.timezone.utc)
    out["fetch_seconds"] = round(time.monotonic() - t0, 6)
    return out


def to_batch(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=ARROW)


class Spool:
    """An Arrow stream file per task attempt in `directory`; each write is flushed."""

    def __init__(self, directory: str, name: str):
        import os

        from pyarrow import fs as pafs

        uri = directory if "://" in directory else os.path.abspath(directory)
        self.fs, base = pafs.FileSystem.from_uri(uri)
        self.fs.create_dir(base, recursive=True)
        self.path = f"{base.rstrip('/')}/{name}.arrows"
        self._sink = None
        self._writer = None
        self._lock = threading.Lock()     # the fetch threads write their own rows
        self._closed = False

    def write(self, batch: pa.RecordBatch) -> None:
        with self._lock:
            if self._closed:    # a fetch still running when its task failed: lost like one in flight at a kill
                return
            if self._writer is None:
                self._sink = self.fs.open_output_stream(self.path)
                self._writer = pa.ipc.new_stream(self._sink, ARROW)
            self._writer.write_batch(batch)
            self._sink.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._writer is not None:
                self._writer.close()
                self._sink.close()


def _fs(directory: str):
    from pyarrow import fs as pafs

    uri = directory if "://" in directory else os.path.abspath(directory)
    return pafs.FileSystem.from_uri(uri)


def spool_files(directory: str) -> list[str]:
    """Spool files (full URIs) in `directory`, sorted; [] when it does not exist."""
    from pyarrow import fs as pafs

    if not directory:
        return []
    fs, base = _fs(directory)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        return []
    sel = pafs.FileSelector(base, recursive=False)
    prefix = directory if "://" in directory else os.path.abspath(directory)
    return sorted(f"{prefix.rstrip('/')}/{i.base_name}" for i in fs.get_file_info(sel)
                  if i.base_name.endswith(".arrows"))


def read_spool_file(path: str):
    """Yield the complete record batches of one spool file; a torn tail is ignored."""
    fs, p = _fs(path)
    try:
        with fs.open_input_stream(p) as src:
            reader = pa.ipc.open_stream(src)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                yield batch.cast(ARROW) if batch.schema != ARROW else batch
    except (pa.ArrowInvalid, OSError, EOFError):
        return


def _earlier_attempts(spool_dir: str, prefix: str) -> dict:
    """url -> row finished by earlier attempts of this task (from their spool files)."""
    from shardforge.ingest.download.fetch import TRANSIENT

    rows: dict = {}
    for path in spool_files(spool_dir):
        if path.rsplit("/", 1)[-1].startswith(prefix):
            for batch in read_spool_file(path):
                for r in batch.to_pylist():
                    if r["url"] is not None and (r["status"] == "ok" or r["status"] not in TRANSIENT):
                        if r["url"] not in rows or r["status"] == "ok":
                            rows[r["url"]] = r
    return rows


def run_partition(batches: Iterator[pa.RecordBatch], cfg, *, rate_share: float = 0.0,
                  spool_dir: str = "", run_id: str = "run", out_rows: int = 64) -> Iterator[pa.RecordBatch]:
    """Fetch every input row of the partition; yield exactly one result row per input row.
    Rows must arrive sorted so that copies of a url are adjacent: the first is fetched,
    the others become `duplicate_url` rows."""
    spool = None
    earlier: dict = {}
    if spool_dir:
        try:
            from pyspark import TaskContext

            tc = TaskContext.get()
            part, attempt = (tc.partitionId(), tc.attemptNumber()) if tc else (None, 0)
        except Exception:
            part, attempt = None, 0
        tag = f"p{part:05d}-a{attempt}" if part is not None else "local"
        if attempt > 0:     # a retried task: what earlier attempts finished is not fetched again
            earlier = _earlier_attempts(spool_dir, f"{run_id}-p{part:05d}-a")
        spool = Spool(spool_dir, f"{run_id}-{tag}-{uuid.uuid4().hex[:8]}")
    fetcher = Fetcher(cfg, rate_share=rate_share)
    threads = max(1, cfg.threads_per_task)
    cap = cfg.per_host_connections
    wait_limit = max(1024, threads * 64)   # rows parked behind a busy host (small: url + meta)
    waiting: dict[str, collections.deque] = collections.defaultdict(collections.deque)
    active: collections.Counter = collections.Counter()
    futures: dict = {}
    done_rows: list[dict] = []
    parked = 0

    def fetch_and_record(row: dict) -> dict:
        out = handle(fetcher, cfg, row)
        if spool is not None:       # recorded before this thread starts another URL
            spool.write(to_batch([out]))
        return out

    def admit(row: dict, host: str) -> None:
        active[host] += 1
        futures[pool.submit(fetch_and_record, row)] = host

    def settle(block: bool) -> None:
        nonlocal parked
        if not futures:
            return
        done, _ = wait(list(futures), timeout=None if block else 0, return_when=FIRST_COMPLETED)
        finished = []
        for fut in done:
            host = futures.pop(fut)
            finished.append(fut.result())
            active[host] -= 1
            if waiting[host]:
                admit(waiting[host].popleft(), host)
                parked -= 1
        done_rows.extend(finished)

    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="shardforge-fetch")
    try:
        last_url = None
        for batch in batches:
            for row in batch.to_pylist():
                url = row.get("url")
                if url is not None and url == last_url:      # input is sorted: copies are adjacent
                    done_rows.append({**{k: row.get(k) for k in INPUT}, "status": "duplicate_url",
                                      "error": DUPLICATE_ERROR})
                    continue
                last_url = url
                if url in earlier:
                    done_rows.append({**earlier.pop(url), **{k: row.get(k) for k in INPUT}})
                    continue
                host = host_key(url or "")
                if cap > 0 and active[host] >= cap:
                    waiting[host].append(row)       # other hosts go on meanwhile
                    parked += 1
                else:
                    admit(row, host)
                while parked >= wait_limit or len(futures) >= threads * 2:
                    settle(block=True)
                settle(block=False)
                if len(done_rows) >= out_rows:
                    yield to_batch(done_rows)
                    done_rows = []
        while futures:
            settle(block=True)
            if len(done_rows) >= out_rows:
                yield to_batch(done_rows)
                done_rows = []
        if done_rows:
            yield to_batch(done_rows)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        fetcher.close()
        if spool is not None:
            spool.close()
