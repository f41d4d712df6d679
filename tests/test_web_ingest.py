"""Web inputs for real: a gzip WARC crawled from this test's local web server (HTML pages it
writes, and the pathological pages: a lying charset, a 50 MB page, a million nested <div>s,
binary data served as text/html), with a truncated record at the end, run through ingest and
clean; compressed JSONL (.gz, .zst, .bz2) and a mixed folder with corrupt files. Every record
and line is accounted for: a document, a reject with its path and reason, or (non-response
WARC records) a count by type in the report. The extraction sandbox's two ways out are
forced: a page that hangs the real extractor, and one whose extraction kills the worker."""
from __future__ import annotations

import bz2
import gzip
import http.server
import json
import re
import threading
import zlib
from dataclasses import replace

import pytest

from shardforge.config import Config, IngestSection

EN = ("The river runs past the old mill, and the people of the town walk along it in the evening. "
      "They talk about the harvest, the weather and the news from the city. Children play on the "
      "bridge while their parents watch them from the benches. It is a quiet place, and most of "
      "the families have lived there for many generations. ")
DE = ("Der Fluss fliesst an der alten Muehle vorbei, und die Leute der Stadt gehen am Abend an ihm "
      "entlang. Sie sprechen ueber die Ernte, das Wetter und die Nachrichten aus der Stadt. Die Kinder "
      "spielen auf der Bruecke, waehrend die Eltern sie von den Baenken aus beobachten. ")
FR = ("La rivière passe devant le vieux moulin, et les habitants de la ville s'y promènent le soir. "
      "Ils parlent de la récolte, du temps qu'il fait et des nouvelles de la capitale. Les enfants "
      "jouent sur le pont pendant que leurs parents les regardent depuis les bancs. ")


def _page(title: str, body: str, charset: str = "utf-8") -> str:
    paras = "".join(f"<p>{body}</p>" for _ in range(3))
    return (f"<!doctype html><html><head><meta charset=\"{charset}\"><title>{title}</title></head><body>"
            f"<nav><a href=\"/\">Home</a> | <a href=\"/about\">About</a></nav><main><h1>{title}</h1>{paras}"
            f"</main><footer>Copyright 2026</footer></body></html>")


PAGES = {   # path -> (content type, body)
    "/en.html": ("text/html; charset=utf-8", _page("The river", EN).encode()),
    "/de.html": ("text/html; charset=utf-8", _page("Der Fluss", DE).encode()),
    # the header and the <meta> say UTF-8; the bytes are Latin-1
    "/fr-lying.html": ("text/html; charset=utf-8", _page("La rivière", FR).encode("latin-1")),
    "/binary.html": ("text/html", bytes(range(256)) * 64),
    "/huge.html": ("text/html", b"<html><body><p>" + b"Plain words in a very long page. " * 1_600_000 + b"</p></body></html>"),
    "/nested.html": ("text/html", b"<html><body>" + b"<div>" * 1_000_000 + b"deep" + b"</div>" * 1_000_000
                     + b"</body></html>"),
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path not in PAGES:
            self.send_error(404)
            return
        ctype, body = PAGES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def crawl_file(tmp_path_factory):
    """A gzip WARC of the pages, a 404, and a metadata record, fetched over real HTTP, then
    one more response record cut off in the middle (the file ends inside it)."""
    from shardforge.ingest.readers.warcfile import crawl, http_response_bytes, write_record

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    folder = tmp_path_factory.mktemp("crawl")
    path = folder / "crawl.warc.gz"
    try:
        counts = crawl([base + p for p in PAGES] + [base + "/missing.html"], str(path), date="2026-01-01T00:00:00Z")
    finally:
        server.shutdown()
    with open(path, "ab") as out:
        tail = folder / "tail"
        with open(tail, "wb") as t:
            write_record(t, "response", http_response_bytes(200, "OK", [("Content-Type", "text/html")],
                                                            _page("Cut", EN).encode()),
                         uri=base + "/cut.html", content_type="application/http; msgtype=response")
        data = tail.read_bytes()
        out.write(data[: len(data) // 2])
    return path, counts


def test_warc_kernel_accounts_for_every_record(crawl_file):
    """No Spark: the per-file reader yields one row per record, and the cut record as a reject."""
    from shardforge.ingest.extract import Sandbox
    from shardforge.ingest.readers.pages import PageLimits
    from shardforge.ingest.readers.streams import warc_rows

    path, counts = crawl_file
    assert counts == {"warcinfo": 1, "request": 7, "response": 7}
    with Sandbox(3.0) as sandbox:
        rows = list(warc_rows(str(path), "crawl.warc.gz", PageLimits(20_000_000, 3.0), sandbox))
    by_type = {}
    for r in rows:
        by_type[r["_rtype"]] = by_type.get(r["_rtype"], 0) + 1
    assert by_type == {"warcinfo": 1, "request": 7, "response": 8}     # the cut one is a response too
    reasons = {r["url"].rsplit("/", 1)[-1]: r.get("_reason") for r in rows if r["_rtype"] == "response"}
    # a million nested <div>s keep the extractor busy for minutes: stopped by the 3 s bound
    assert reasons == {"en.html": None, "de.html": None, "fr-lying.html": None,
                       "binary.html": "invalid:binary_content", "huge.html": "invalid:page_too_large",
                       "nested.html": "invalid:extract_timeout", "missing.html": "invalid:http_status",
                       "cut.html": "invalid:truncated_record"}
    fr = next(r for r in rows if (r.get("url") or "").endswith("fr-lying.html"))
    assert "La rivière passe devant le vieux moulin" in fr["text"] and "\ufffd" not in fr["text"]
    assert fr["charset"] != "utf-8"


CRASH_MARK = b"<!-- the extractor crashes on this page -->"


def _crash_on_marked_pages(monkeypatch) -> None:
    """Make extraction die in native code (a real SIGSEGV of the worker process) on pages
    that carry CRASH_MARK, as a parser bug would; other pages go to the real extractor.
    The sandbox forks its worker when it first extracts, so the worker inherits this; the
    sandbox itself runs as it is."""
    import ctypes

    import shardforge.ingest.extract.sandbox as sandbox_module

    real = sandbox_module.extract_page

    def extract_or_crash(body, content_type):
        if CRASH_MARK in body:
            ctypes.string_at(0)                      # reads address 0: SIGSEGV
        return real(body, content_type)

    monkeypatch.setattr(sandbox_module, "extract_page", extract_or_crash)


def test_a_hanging_and_a_crashing_page_are_answered_and_the_next_page_extracts(monkeypatch):
    """The sandbox's two ways out, forced: a page the real extractor works on for minutes
    (a million nested <div>s) is `invalid:extract_timeout` after the bound; a page whose
    extraction kills the worker is `invalid:extract_crashed`; after each, the next page
    is extracted in full by a fresh worker."""
    from shardforge.ingest.extract import Sandbox

    _crash_on_marked_pages(monkeypatch)
    nested = PAGES["/nested.html"][1]
    crash = _page("Crash", EN).encode().replace(b"<main>", b"<main>" + CRASH_MARK)
    en, de = _page("The river", EN).encode(), _page("Der Fluss", DE).encode()
    with Sandbox(3.0) as sandbox:
        got = [sandbox.extract(body, "text/html; charset=utf-8") for body in (en, nested, de, crash, en)]
    assert [reason for _, reason, _ in got] == [None, "invalid:extract_timeout", None, "invalid:extract_crashed", None]
    assert got[1][2] == "no text after 3 s"
    assert got[3][2].startswith("extractor process died")
    assert [page.title if page else None for page, _, _ in got] == ["The river", None, "Der Fluss", None, "The river"]
    assert [(page.text.count(EN.split(". ")[0]), page.text.count(DE.split(". ")[0])) if page else None
            for page, _, _ in got] == [(3, 0), None, (0, 3), None, (3, 0)]


def test_a_worker_that_never_reads_a_large_page_is_answered_within_the_bound(monkeypatch):
    """A worker stuck before it reads (as a fork that inherited a held lock is): a page larger
    than the pipe's buffer is still answered `invalid:extract_timeout` (after the wall-clock cap), and the
    next page is extracted by a fresh worker. (Sent from the calling thread, the page's bytes
    would block the send for ever: the sandbox's bound starts only after the send.)"""
    import multiprocessing
    import threading

    import shardforge.ingest.extract.sandbox as sandbox_module
    from shardforge.ingest.extract import Sandbox

    real_serve = sandbox_module._serve
    first = multiprocessing.get_context("fork").Value("i", 1)      # shared by the forked workers

    def serve_or_hang(conn):
        with first.get_lock():
            stuck, first.value = first.value, 0
        if stuck:                                  # the first worker forked never reads
            threading.Event().wait()
        real_serve(conn)

    monkeypatch.setattr(sandbox_module, "_serve", serve_or_hang)
    big = _page("The river", EN * 1500).encode()
    assert len(big) > 1024 * 1024               # several times the pipe's buffer
    got = []
    with Sandbox(2.0) as sandbox:
        caller = threading.Thread(target=lambda: got.extend(
            sandbox.extract(body, "text/html; charset=utf-8") for body in (big, _page("Der Fluss", DE).encode())),
            daemon=True)
        caller.start()
        caller.join(120)
        assert not caller.is_alive(), "extract() blocked on a worker that does not read"
    assert [reason for _, reason, _ in got] == ["invalid:extract_timeout", None]
    assert got[1][0].title == "Der Fluss"


def test_the_bound_is_the_workers_cpu_time_not_the_clock(monkeypatch):
    """A worker that waits without using CPU (as one starved by a loaded machine does) is not
    timed out at the bound: the page is answered, so the answer does not depend on the load.
    A worker that never answers is still stopped, after _WALL_FACTOR times the bound, and
    one that spins is stopped by the CPU it used, long before that."""
    import time

    import shardforge.ingest.extract.sandbox as sandbox_module
    from shardforge.ingest.extract import Sandbox

    real = sandbox_module.extract_page

    def slow_without_cpu(body, content_type):
        if b"slow" in body:
            time.sleep(2.5)                  # 2.5 s of the clock, almost no CPU
        if b"never" in body:
            time.sleep(3600)
        if b"spin" in body:
            while True:
                pass
        return real(body, content_type)

    monkeypatch.setattr(sandbox_module, "extract_page", slow_without_cpu)
    monkeypatch.setattr(sandbox_module, "_WALL_FACTOR", 4.0)          # a stuck worker: 4 s
    slow = _page("The river", EN).encode().replace(b"<main>", b"<main><!-- slow -->")
    never = _page("Der Fluss", DE).encode().replace(b"<main>", b"<main><!-- never -->")
    spin = _page("Der Fluss", DE).encode().replace(b"<main>", b"<main><!-- spin -->")
    with Sandbox(1.0) as sandbox:
        got = [sandbox.extract(body, "text/html; charset=utf-8") for body in (slow, never, spin, slow)]
    assert [reason for _, reason, _ in got] == [None, "invalid:extract_timeout", "invalid:extract_timeout", None]
    assert got[0][0].title == "The river" == got[3][0].title
    assert got[1][2].startswith("no answer after 4 s of the clock")
    assert got[2][2] == "no text after 1 s"


def test_warc_pages_after_a_hang_and_a_crash_extract(monkeypatch, tmp_path):
    """The same through the WARC reader: each page after the hanging and the crashing one
    is a document; the two are rejects with their reasons."""
    from shardforge.ingest.extract import Sandbox
    from shardforge.ingest.readers.pages import PageLimits
    from shardforge.ingest.readers.streams import warc_rows
    from shardforge.ingest.readers.warcfile import http_response_bytes, write_record

    _crash_on_marked_pages(monkeypatch)
    bodies = [("en", _page("The river", EN).encode()), ("nested", PAGES["/nested.html"][1]),
              ("de", _page("Der Fluss", DE).encode()),
              ("crash", _page("Crash", EN).encode().replace(b"<main>", b"<main>" + CRASH_MARK)),
              ("fr", _page("La rivière", FR).encode())]
    path = tmp_path / "hang-crash.warc.gz"
    with open(path, "wb") as out:
        for i, (name, body) in enumerate(bodies):
            write_record(out, "response", http_response_bytes(200, "OK", [("Content-Type", "text/html; charset=utf-8")],
                                                              body),
                         uri=f"http://example.test/{name}.html", ordinal=i,
                         content_type="application/http; msgtype=response")
    with Sandbox(3.0) as sandbox:
        rows = list(warc_rows(str(path), "hang-crash.warc.gz", PageLimits(20_000_000, 3.0), sandbox))
    assert [(r["url"].rsplit("/", 1)[-1], r.get("_reason")) for r in rows] == [
        ("en.html", None), ("nested.html", "invalid:extract_timeout"), ("de.html", None),
        ("crash.html", "invalid:extract_crashed"), ("fr.html", None)]
    texts = {r["url"].rsplit("/", 1)[-1]: r["text"] for r in rows if not r.get("_reason")}
    assert EN.split(". ")[0] in texts["en.html"] and DE.split(". ")[0] in texts["de.html"]
    assert FR.split(". ")[0] in texts["fr.html"]


@pytest.mark.slow
def test_warc_through_ingest_and_clean(spark, crawl_file, tmp_path):
    from shardforge.jobs.pipeline import run_pipeline

    path, _ = crawl_file
    cfg = Config()
    cfg = cfg.replace(pipeline=replace(cfg.pipeline, input=(str(path),), output=str(tmp_path / "out"),
                                       stages=("ingest", "clean"), write_raw=False),
                      ingest=replace(cfg.ingest, extract_timeout=3.0, max_page_bytes=20_000_000),
                      clean=replace(cfg.clean, min_words=5))
    report = run_pipeline(spark, cfg)
    ingest, clean = report["stages"]
    assert ingest["rows_in"] == 8 == ingest["kept"] + ingest["rejected"]     # 7 responses + the cut record
    assert ingest["rejects_by_reason"]["invalid:truncated_record"] == 1
    assert ingest["rejects_by_reason"]["invalid:http_status"] == 1
    assert ingest["rejects_by_reason"]["invalid:page_too_large"] == 1
    assert ingest["rejects_by_reason"]["invalid:binary_content"] == 1
    warc = _section(report, "warc")
    assert warc["records_by_type"] == {"request": 7, "response": 8, "warcinfo": 1}
    assert warc["rows"] == 8 and warc["skipped_records"] == 8
    assert _section(report, "extractor")["name"] == "resiliparse"
    assert _section(report, "html_extractor").startswith("resiliparse ")     # the recorded config
    out = tmp_path / "out"
    kept = {r["url"].rsplit("/", 1)[-1]: r.asDict()
            for r in spark.read.format("delta").load(str(out / "clean")).collect()}
    assert {"en.html", "de.html", "fr-lying.html"} <= set(kept)
    assert kept["en.html"]["language"] == "en" and kept["de.html"]["language"] == "de"
    assert kept["fr-lying.html"]["language"] == "fr" and kept["en.html"]["language_score"] > 0.9
    assert kept["en.html"]["text"].startswith("The river") and "Home | About" not in kept["en.html"]["text"]
    assert kept["en.html"]["kind"] == "page" and kept["en.html"]["source"] == "crawl.warc.gz"
    assert clean["rows_in"] == ingest["kept"] == clean["kept"] + clean["rejected"]
    rejects = spark.read.format("delta").load(str(out / "rejects")).collect()
    assert len(rejects) == ingest["rejected"] + clean["rejected"]
    assert all(r["source"] == "crawl.warc.gz" for r in rejects if r["stage"] == "ingest")


def _section(report: dict, key: str):
    """A section the ingest stage's finish step added (wherever the report keeps it)."""
    def find(obj):
        if isinstance(obj, dict):
            if key in obj:
                return obj[key]
            for v in obj.values():
                got = find(v)
                if got is not None:
                    return got
        elif isinstance(obj, list):
            for v in obj:
                got = find(v)
                if got is not None:
                    return got
        return None
    got = find(report)
    assert got is not None, f"no {key!r} in the report"
    return got


def _lines(prefix: str, n: int) -> bytes:
    return "".join(json.dumps({"id": f"{prefix}{i}", "text": f"document {prefix}{i} with some words"}) + "\n"
                   for i in range(n)).encode()


def test_compressed_and_mixed_folder(spark, tmp_path):
    import zstandard

    from shardforge.ingest.stage import read_documents

    folder = tmp_path / "mixed"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(_lines("a", 3))
    (folder / "b.jsonl.gz").write_bytes(gzip.compress(_lines("g", 4)))
    (folder / "sub" / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(_lines("z", 5)))
    (folder / "d.jsonl.bz2").write_bytes(bz2.compress(_lines("b", 2)))
    (folder / "e.txt").write_text("a plain text document")
    good = gzip.compress(_lines("t", 50))
    (folder / "truncated.jsonl.gz").write_bytes(good[: len(good) // 2])
    (folder / "corrupt.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"not a zstd frame at all" * 10)
    res = read_documents(spark, str(folder), IngestSection())
    kept = {r["id"]: r["source"] for r in res.kept.collect()}
    assert {k for k in kept if not k.startswith("t")} - {k for k in kept if kept[k] == "e.txt"} == \
        {f"a{i}" for i in range(3)} | {f"g{i}" for i in range(4)} | {f"z{i}" for i in range(5)} | {"b0", "b1"}
    assert kept["z0"] == "sub/c.jsonl.zst" and kept["g0"] == "b.jsonl.gz"
    rejected = {r["source"]: r["reason"] for r in res.rejected.collect()}
    assert rejected == {"truncated.jsonl.gz": "invalid:unreadable_file", "corrupt.jsonl.zst": "invalid:unreadable_file"}
    # the lines before the damage are read: every whole line that zlib's streaming decoder
    # gets out of the cut bytes (a prefix of the file's documents, at least one)
    before = zlib.decompressobj(wbits=31).decompress(good[: len(good) // 2]).count(b"\n")
    assert 0 < before < 50
    got_t = sorted(int(k[1:]) for k in kept if k.startswith("t"))
    assert got_t == list(range(before))


def test_single_compressed_files_by_extension(spark, tmp_path):
    import zstandard

    from shardforge.ingest.stage import detect_format, read_documents

    zst = tmp_path / "docs.jsonl.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(_lines("z", 3)))
    gz = tmp_path / "docs.jsonl.gz"
    gz.write_bytes(gzip.compress(_lines("g", 2)))
    assert detect_format(str(zst)) == detect_format(str(gz)) == "jsonl"
    res = read_documents(spark, [str(zst), str(gz)], IngestSection())
    assert sorted(r["id"] for r in res.kept.collect()) == ["g0", "g1", "z0", "z1", "z2"]
    assert res.rejected.count() == 0


def test_a_warc_cut_anywhere_leaves_one_reject(tmp_path):
    """Cut a gzip WARC at many points (inside headers, payloads, gzip trailers of every
    record type): the reader never drops the damage silently; exactly one row says where."""
    from shardforge.ingest.extract import Sandbox
    from shardforge.ingest.readers.pages import PageLimits
    from shardforge.ingest.readers.streams import warc_rows
    from shardforge.ingest.readers.warcfile import http_response_bytes, write_record

    whole = tmp_path / "whole.warc.gz"
    date = "2026-01-01T00:00:00Z"             # the same bytes, so the same cut points, on every run
    with open(whole, "wb") as out:
        write_record(out, "warcinfo", b"software: test\r\n", content_type="application/warc-fields", date=date)
        ends = [out.tell()]                    # where each record's gzip member ends
        for i, (name, body) in enumerate((("en", EN), ("de", DE))):
            uri = f"http://example.test/{name}.html"
            write_record(out, "request", b"GET / HTTP/1.1\r\n\r\n", uri=uri, ordinal=i,
                         content_type="application/http; msgtype=request", date=date)
            ends.append(out.tell())
            write_record(out, "response", http_response_bytes(200, "OK", [("Content-Type", "text/html")],
                                                              _page(name, body).encode()),
                         uri=uri, ordinal=i, content_type="application/http; msgtype=response", date=date)
            ends.append(out.tell())
    data = whole.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    with Sandbox(5.0) as sandbox:
        full = list(warc_rows(str(whole), "w", PageLimits(), sandbox))
        assert [r.get("_reason") for r in full] == [None] * 5
        for at in sorted(set(range(7, len(data) - 1, max(1, len(data) // 23))) | set(ends[:-1])):
            cut.write_bytes(data[:at])
            rows = list(warc_rows(str(cut), "c", PageLimits(), sandbox))
            damaged = [r for r in rows if r.get("_reason") in ("invalid:truncated_record", "invalid:unreadable_file")]
            # a cut at a record's end leaves a whole, shorter WARC: nothing is damaged there
            assert len(damaged) == (0 if at in ends else 1), (at, rows)
            assert len(rows) <= len(full) + 1     # a cut gzip trailer: every record, and the damage


def test_written_record_ids_are_plain_uuids(tmp_path):
    from fastwarc.warc import ArchiveIterator

    from shardforge.ingest.readers.warcfile import write_record

    path = tmp_path / "one.warc.gz"
    with open(path, "wb") as out:
        write_record(out, "metadata", b"k: v\r\n", uri="http://example.test/", date="2026-01-01T00:00:00Z")
    (rec,) = list(ArchiveIterator(open(path, "rb")))
    assert re.fullmatch(r"<urn:uuid:[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}>", rec.headers["WARC-Record-ID"])


def test_two_demo_crawls_give_the_same_rows(tmp_path):
    """The demo's WARC input is crawled afresh in every new output folder; its rows (the
    record date included, which rows keep as meta.warc_date) must not depend on when."""
    import time

    from shardforge.ingest.extract import Sandbox
    from shardforge.jobs.demo import SAMPLE, serve, write_crawl
    from shardforge.ingest.readers.pages import PageLimits
    from shardforge.ingest.readers.streams import warc_rows

    def crawl_rows(out, port):
        server, base = serve(SAMPLE / "web", port)
        try:
            path = write_crawl(base, out)
        finally:
            server.shutdown()
            server.server_close()
        with Sandbox(5.0) as sandbox:
            return base, [{k: v for k, v in r.items() if k != "_file"}
                          for r in warc_rows(str(path), "crawl", PageLimits(), sandbox)]

    base, first = crawl_rows(tmp_path / "a", 0)
    time.sleep(1.1)                                  # the dates a crawler stamps have 1 s steps
    _, second = crawl_rows(tmp_path / "b", int(base.rsplit(":", 1)[1]))
    pages = [r for r in first if r["_rtype"] == "response" and not r.get("_reason")]
    assert len(pages) == len(list((SAMPLE / "web" / "pages").glob("*.html")))
    assert {r["_date"] for r in pages} == {"2026-01-15T00:00:00Z"}
    assert second == first
