"""Downloader kernels without Spark: address guard, image processing, page text,
robots rules, and the fetcher against the real test server (statuses, retries and
backoff read from the server's request log)."""
from __future__ import annotations

import io

import pytest
from PIL import Image

from shardforge.config import DownloadSection
from shardforge.ingest.download.fetch import Fetcher, parse_retry_after
from shardforge.ingest.download.guard import AddressPolicy, BlockedAddress, InvalidURL, check_url, host_key
from shardforge.ingest.download.images import ImageFailure, process_image
from shardforge.ingest.download.robots import agent_token, x_robots_denied
from shardforge.ingest.download.text import decode_page, detect_charset, extract_text
from shardforge.ingest.download.worker import handle
from webserver import TestServer, _bomb_png, _image, http_server  # noqa: F401  (fixture)

# Timeouts well above any legitimate fetch on a loaded machine; /slow holds its headers
# for the server's slow_seconds (20 s), far beyond read_timeout, so it still times out.
CFG = DownloadSection(connect_timeout=5.0, read_timeout=5.0, max_retries=2, backoff_base=0.2, backoff_max=2.0,
                      allowed_networks=("127.0.0.1/32", "::1/128"), max_bytes=1_000_000, max_redirects=3,
                      total_timeout=20.0, respect_robots=True, threads_per_task=8)


# --- guard -------------------------------------------------------------------------

@pytest.mark.parametrize("ip,ok", [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("224.0.0.1", False), ("0.0.0.0", False), ("::1", False),
    ("fe80::1", False), ("fc00::1", False), ("ff02::1", False), ("::ffff:127.0.0.1", False),
    ("100.64.0.1", False), ("240.0.0.1", False),
])
def test_policy_refuses_non_public_addresses(ip, ok):
    assert AddressPolicy().ip_allowed(ip) is ok
    assert AddressPolicy(allow_private=True).ip_allowed(ip) is True


def test_allowed_networks_open_only_what_they_name():
    p = AddressPolicy.from_config(False, ("127.0.0.1/32",))
    assert p.ip_allowed("127.0.0.1") and p.ip_allowed("::ffff:127.0.0.1")
    assert not p.ip_allowed("127.0.0.2") and not p.ip_allowed("10.0.0.1")
    with pytest.raises(ValueError, match="allowed_networks"):
        AddressPolicy.from_config(False, ("not-a-net",))


def test_check_url_schemes_and_literals():
    p = AddressPolicy()
    for bad in ("ftp://example.com/x", "file:///etc/passwd", "javascript:alert(1)", "", "http://", "http://[::1"):
        with pytest.raises(InvalidURL):
            check_url(bad, p)
    with pytest.raises(BlockedAddress):
        check_url("http://127.0.0.1:8080/x", p)
    with pytest.raises(BlockedAddress):
        check_url("http://[::1]/x", p)
    with pytest.raises(BlockedAddress):
        check_url("http://localhost/x", p)
    assert host_key("http://Example.COM:80/a") == "example.com"
    assert host_key("https://example.com:8443/a") == "example.com:8443"


def test_guard_checks_the_connected_peer_too(http_server):
    """Past the name check (as after a DNS rebinding), the socket's peer is checked."""
    http_server.reset_log()
    f = Fetcher(DownloadSection())      # nothing private allowed
    with pytest.raises(BlockedAddress):
        f.get(http_server.url("/img/a.jpg"))
    assert http_server.hits() == []     # refused before any request was sent


# --- images ------------------------------------------------------------------------

def _proc(body, **kw):
    args = dict(max_pixels=10_000_000, resize_mode="keep_ratio", size=256, fmt="jpeg", quality=90)
    args.update(kw)
    return process_image(body, **args)


@pytest.mark.parametrize("mode,size", [("keep_ratio", (256, 192)), ("center_crop", (256, 256)),
                                       ("border", (256, 256)), ("none", (320, 240))])
def test_resize_modes(mode, size):
    out = _proc(_image("png"), resize_mode=mode)
    assert (out.width, out.height) == size
    assert Image.open(io.BytesIO(out.data)).size == size
    assert (out.original_width, out.original_height, out.original_format) == (320, 240, "png")


def test_keep_ratio_never_enlarges_and_border_pads_white():
    assert (_proc(_image("jpg", size=(40, 30))).width, _proc(_image("jpg", size=(40, 30))).height) == (40, 30)
    img = Image.open(io.BytesIO(_proc(_image("png"), resize_mode="border", fmt="png").data)).convert("RGB")
    assert img.getpixel((128, 2)) == (255, 255, 255)     # top band is padding


@pytest.mark.parametrize("fmt,pil", [("jpeg", "JPEG"), ("png", "PNG"), ("webp", "WEBP")])
def test_reencode_formats_are_deterministic(fmt, pil):
    a, b = _proc(_image("webp"), fmt=fmt), _proc(_image("webp"), fmt=fmt)
    assert a.data == b.data and Image.open(io.BytesIO(a.data)).format == pil


def test_exif_orientation_applied_and_alpha_flattened_for_jpeg():
    out = _proc(_image("jpg", exif_orientation=6))
    assert (out.width, out.height) == (192, 256) and (out.original_width, out.original_height) == (320, 240)
    rgba = _image("png", mode="RGBA")
    assert Image.open(io.BytesIO(_proc(rgba).data)).mode == "RGB"
    assert Image.open(io.BytesIO(_proc(rgba, fmt="png").data)).mode == "RGBA"


def test_bombs_and_garbage_are_statuses():
    with pytest.raises(ImageFailure) as e:
        _proc(_bomb_png(5000, 5000))       # under pillow's own limit, over ours
    assert e.value.status == "too_many_pixels"
    with pytest.raises(ImageFailure) as e:
        _proc(_bomb_png())
    assert e.value.status == "too_many_pixels"
    with pytest.raises(ImageFailure) as e:
        _proc(b"\xff\xd8\xff\xe0" + bytes(range(256)))
    assert e.value.status == "decode_error"
    with pytest.raises(ImageFailure) as e:
        _proc(_image("jpg")[:600])         # truncated
    assert e.value.status == "decode_error"


# --- pages -------------------------------------------------------------------------

def test_charset_order():
    latin = "café".encode("latin-1")
    assert detect_charset(latin, "text/html; charset=ISO-8859-1") == "iso8859-1"
    assert detect_charset(b'<meta charset="windows-1252">' + latin, "text/html") == "cp1252"
    assert detect_charset("café".encode(), None) == "utf-8"
    assert decode_page(b"\xef\xbb\xbfhi", None) == "hi"
    assert decode_page(b"<p>\x93quoted\x94</p>", "text/html; charset=iso-8859-1") == "<p>\u201cquoted\u201d</p>"
    assert detect_charset(latin, "text/html; charset=bogus-charset") != "bogus-charset"


def test_extract_main_text_drops_boilerplate():
    from webserver import UTF8_PAGE

    title, text = extract_text(UTF8_PAGE)
    assert title == "Grüße aus Köln"
    assert text.splitlines()[0] == "Über die Straße"
    assert "東京" in text and "🙂" in text and "& an entity" in text
    for junk in ("tracking", "Home", "banner", "cookies", "Footer", "color: red"):
        assert junk not in text


def test_extract_without_main_and_on_broken_markup():
    _, text = extract_text("<html><body><div>One</div><div>Two <b>bold</div><p>Three<script>x()</script>")
    assert text.split("\n") == ["One", "Two bold", "Three"]
    assert extract_text("")[1] == ""
    assert extract_text("<<<>>><p>&#xZZ; &bogus; tail")[1].endswith("tail")


# --- robots and headers ---------------------------------------------------------------

def test_x_robots_tag():
    ua = "shardforge/0.1 (+https://example.invalid)"
    assert agent_token(ua) == "shardforge"
    assert x_robots_denied("noai", ua) == "noai"
    assert x_robots_denied("noindex, nofollow", ua) == "noindex"
    assert x_robots_denied("otherbot: noindex", ua) is None
    assert x_robots_denied("shardforge: none", ua) == "none"
    assert x_robots_denied("nofollow, noarchive", ua) is None
    assert x_robots_denied(None, ua) is None


def test_retry_after_and_backoff_bounds():
    assert parse_retry_after("3") == 3.0 and parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 0 <= parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") < 1
    f = Fetcher(DownloadSection(backoff_base=0.5, backoff_max=3.0))
    for retry, full in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)):
        d = [f.backoff(retry) for _ in range(50)]
        assert all(full / 2 <= x <= full for x in d)


# --- the fetcher against the server ------------------------------------------------------

EXPECTED = [  # path, expect, status, attempts
    ("/img/a.jpg", "image", "ok", 1), ("/img/b.png", "image", "ok", 1), ("/img/c.webp", "image", "ok", 1),
    ("/img/d.gif", "image", "ok", 1), ("/page/utf8.html", "page", "ok", 1), ("/page/latin1.html", "auto", "ok", 1),
    ("/status/404", "auto", "http_4xx", 1), ("/status/503", "auto", "http_5xx", 3),
    ("/slow", "image", "timeout", 1), ("/reset", "image", "connection_error", 3),
    ("/big", "image", "too_large", 1), ("/big-chunked", "image", "too_large", 1),
    ("/redirect/10", "image", "too_many_redirects", 1), ("/redirect/3", "image", "ok", 1),
    ("/redirect-blocked", "image", "blocked_address", 1), ("/html-as-image.jpg", "image", "not_image", 1),
    ("/img/a.jpg", "page", "not_page", 1), ("/corrupt.jpg", "image", "decode_error", 1),
    ("/bomb.png", "image", "too_many_pixels", 1), ("/noai.jpg", "image", "robots_denied", 1),
    ("/private/x.jpg", "image", "robots_denied", 1),
]


@pytest.mark.parametrize("path,expect,status,attempts", EXPECTED)
def test_fetch_statuses(http_server, path, expect, status, attempts):
    http_server.reset_log()
    row = handle(Fetcher(CFG), CFG, {"url": http_server.url(path), "expect": expect})
    assert (row["status"], row["attempts"]) == (status, attempts), row["error"]
    hits = [h for h in http_server.hits() if h.path != "/robots.txt"]
    if status in ("robots_denied",) and path.startswith("/private"):
        assert hits == []                    # robots.txt said no: the URL is never requested
    elif path.startswith("/redirect/"):
        assert len(hits) == min(int(path.rsplit("/", 1)[1]), CFG.max_redirects) + 1
    else:
        assert len(hits) == attempts         # the server saw exactly the attempts we report


def test_retries_back_off_exponentially_per_the_server_log(http_server):
    http_server.reset_log()
    row = handle(Fetcher(CFG), CFG, {"url": http_server.url("/flaky/backoff"), "expect": "image"})
    assert (row["status"], row["attempts"], row["http_status"]) == ("ok", 3, 200)
    starts = [h.start for h in http_server.hits("/flaky/backoff")]
    ends = [h.end for h in http_server.hits("/flaky/backoff")]
    assert len(starts) == 3
    gap1, gap2 = starts[1] - ends[0], starts[2] - ends[1]
    # equal jitter: retry k waits at least base*2^(k-1)/2. Only lower bounds here: they hold on a
    # loaded machine too (load can only delay a retry, never advance it). The upper end of the
    # jitter is checked below on the schedule itself, without a clock.
    assert gap1 >= 0.1 - 0.01 and gap2 >= 0.2 - 0.01


def test_backoff_schedule_is_exponential_with_equal_jitter():
    import random

    f = Fetcher(CFG, rng=random.Random(7))
    for retry, full in ((1, 0.2), (2, 0.4), (3, 0.8), (6, CFG.backoff_max), (12, CFG.backoff_max)):
        delays = [f.backoff(retry) for _ in range(200)]
        assert all(full / 2 <= d <= full for d in delays), (retry, min(delays), max(delays))
        assert max(delays) - min(delays) > full / 4          # jittered, not constant


def test_429_honours_retry_after_and_4xx_is_not_retried(http_server):
    http_server.reset_log()
    f = Fetcher(CFG)
    row = handle(f, CFG, {"url": http_server.url("/rate/ra"), "expect": "image"})
    assert (row["status"], row["attempts"]) == ("ok", 2)
    a, b = http_server.hits("/rate/ra")
    assert b.start - a.end >= 1.0 - 0.01          # Retry-After: 1 (a lower bound: load only lengthens it)
    assert handle(f, CFG, {"url": http_server.url("/status/403"), "expect": "auto"})["attempts"] == 1
    assert len(http_server.hits("/status/403")) == 1


def test_retry_after_beyond_backoff_max_gives_up_politely(http_server):
    http_server.reset_log()
    cfg = DownloadSection(**{**CFG.__dict__, "backoff_max": 0.5})
    row = handle(Fetcher(cfg), cfg, {"url": http_server.url("/rate/giveup"), "expect": "image"})
    assert row["status"] == "rate_limited" and row["attempts"] == 1 and "Retry-After" in row["error"]
    assert len(http_server.hits("/rate/giveup")) == 1


def test_private_target_blocked_unless_allowed(http_server):
    http_server.reset_log()
    cfg = DownloadSection(connect_timeout=5.0, read_timeout=5.0)
    row = handle(Fetcher(cfg), cfg, {"url": http_server.url("/img/a.jpg"), "expect": "image"})
    assert row["status"] == "blocked_address" and http_server.hits() == []
    cfg = DownloadSection(connect_timeout=5.0, read_timeout=5.0, allow_private_addresses=True)
    assert handle(Fetcher(cfg), cfg, {"url": http_server.url("/img/a.jpg"), "expect": "image"})["status"] == "ok"


def test_user_agent_and_invalid_urls(http_server):
    cfg = DownloadSection(**{**CFG.__dict__, "user_agent": "probe/9 (+contact)"})
    f = Fetcher(cfg)
    resp = f.get(http_server.url("/img/a.jpg"))
    assert resp.request.headers["User-Agent"] == "probe/9 (+contact)"
    resp.close()
    for url in ("ftp://example.com/a", "not a url", None, "http:///nohost"):
        assert handle(f, cfg, {"url": url})["status"] == "invalid_url"
    http_server.reset_log()
    row = handle(f, cfg, {"url": http_server.url("/img/a.jpg"), "expect": "video"})
    assert row["status"] == "invalid_kind" and http_server.hits() == []


# --- spool (write-ahead log) ---------------------------------------------------------------

def test_spool_survives_a_torn_tail_and_feeds_retried_attempts(tmp_path):
    from shardforge.ingest.download.worker import read_spool_file, spool_files
    from shardforge.ingest.download.worker import Spool, _earlier_attempts, to_batch

    sp = Spool(str(tmp_path), "run1-p00003-a0-x")
    rows = [{"url": f"http://h/{i}", "status": s, "attempts": 1} for i, s in
            enumerate(["ok", "http_4xx", "timeout", "ok"])]
    for r in rows:
        sp.write(to_batch([r]))
    path = spool_files(str(tmp_path))[0]
    whole = open(path, "rb").read()       # not closed: as a killed task leaves it
    open(path, "wb").write(whole[:-40])   # and torn in the middle of the last batch
    got = [r["url"] for b in read_spool_file(path) for r in b.to_pylist()]
    assert got == [r["url"] for r in rows[:3]]
    earlier = _earlier_attempts(str(tmp_path), "run1-p00003-a")
    assert set(earlier) == {"http://h/0", "http://h/1"}     # transient failures are fetched again
    assert _earlier_attempts(str(tmp_path), "run1-p00004-a") == {}


def test_bad_settings_are_named_when_the_config_is_loaded():
    """[download] is checked by load_config whether or not a URL list is given (the stage may
    not run), and check_config still names a bad network for a section built in code."""
    from shardforge.config import ConfigError, load_config
    from shardforge.ingest.download.stage import check_config

    check_config(CFG)
    load_config(None, ["download.threads_per_task=1"])
    for key, bad in (("image_quality", "0"), ("threads_per_task", "0"), ("expect", '"video"'),
                     ("read_timeout", "0"), ("allowed_networks", '["10.0.0.0/33"]')):
        with pytest.raises(ConfigError, match=f"download.{key}"):
            load_config(None, [f"download.{key}={bad}"])
    with pytest.raises(ValueError, match="allowed_networks"):
        check_config(DownloadSection(**{**CFG.__dict__, "allowed_networks": ("10.0.0.0/33",)}))


def test_busy_host_does_not_hold_up_other_hosts():
    """run_partition (the task body, no Spark): 24 URLs of host A then 8 of host B, cap 1
    per host: B's URLs run beside A's instead of queueing behind them."""
    import pyarrow as pa

    from shardforge.ingest.download.worker import ARROW, run_partition

    with TestServer(hold_seconds=0.05) as srv:
        urls = [srv.url(f"/hold/a{i}.jpg") for i in range(24)] + \
               [srv.url(f"/hold/b{i}.jpg", "localhost") for i in range(8)]
        batch = pa.RecordBatch.from_pylist([{"url": u, "expect": "image"} for u in urls],
                                           schema=pa.schema([("url", pa.string()), ("expect", pa.string())]))
        cfg = DownloadSection(**{**CFG.__dict__, "per_host_connections": 1, "threads_per_task": 4,
                                 "respect_robots": False})
        out = pa.Table.from_batches(list(run_partition(iter([batch]), cfg)), schema=ARROW)
        assert out.num_rows == 32 and set(out.column("status").to_pylist()) == {"ok"}
        a_host, b_host = f"127.0.0.1:{srv.port}", f"localhost:{srv.port}"
        a = [h for h in srv.hits() if h.host == a_host]
        b = [h for h in srv.hits() if h.host == b_host]
        assert srv.stats.max_active[a_host] == 1 and srv.stats.max_active[b_host] == 1
        # B's URLs ran beside A's, not queued behind them: by the order of the server's events
        # (no clock bound), B's last request ended while more than half of A's were still to come
        a_ends = sorted(h.end for h in a)
        assert sum(1 for t in a_ends if t > max(h.end for h in b)) > len(a) // 2


def test_each_fetch_is_spooled_before_its_thread_takes_another_url(tmp_path):
    """A resumed job fetches again only the URLs whose fetch had started and was not yet
    recorded: at most one per fetch thread. So a fetch is spooled by its own thread, not
    when the task's main loop gets to it. Here the task's consumer (Spark, in a job)
    takes the first batch and then pulls no more, leaving the main loop parked at its
    yield while the queued fetches run: every URL the server has served must still
    reach the spool, and no more than the queue's 2 x threads were started."""
    import time

    import pyarrow as pa

    from shardforge.ingest.download.worker import read_spool_file, spool_files
    from shardforge.ingest.download.worker import run_partition

    threads = 2
    with TestServer(hold_seconds=0.05) as srv:
        urls = [srv.url(f"/hold/{i}.jpg") for i in range(40)]
        batch = pa.RecordBatch.from_pylist([{"url": u, "expect": "image"} for u in urls],
                                           schema=pa.schema([("url", pa.string()), ("expect", pa.string())]))
        cfg = DownloadSection(**{**CFG.__dict__, "threads_per_task": threads, "respect_robots": False})
        gen = run_partition(iter([batch]), cfg, spool_dir=str(tmp_path / "spool"), out_rows=1)
        first = next(gen)                   # the main loop is now parked at its yield
        assert first.num_rows >= 1

        def spooled() -> set:
            return {r["url"] for f in spool_files(str(tmp_path / "spool"))
                    for b in read_spool_file(f) for r in b.to_pylist()}

        def ended() -> set:
            return {srv.url(h.path) for h in srv.hits() if h.end}

        # events, not times: wait for a fetch to end beyond the first batch's rows (the
        # queue holds at least one more), then for every fetch ended by then to be spooled;
        # the deadlines only keep a broken build from hanging the suite
        deadline = time.monotonic() + 60
        while len(ended()) <= first.num_rows and time.monotonic() < deadline:
            time.sleep(0.02)
        served = ended()
        assert len(served) > first.num_rows, "no queued fetch ran while the main loop was parked"
        while not served <= spooled() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert served <= spooled(), f"{len(served - spooled())} served URLs never reached the spool"
        # nothing beyond the queue (2 x threads) is started while the main loop is parked
        assert len(srv.hits()) <= first.num_rows + 2 * threads
        gen.close()
        # the task ended early: whatever it did not finish is fetched by the next run
        rest = list(run_partition(iter([batch]), cfg))
        assert len(rest) and sum(b.num_rows for b in rest) == len(urls)
