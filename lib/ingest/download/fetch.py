"""HTTP fetching with manners: one requests.Session per task, retries with
exponential backoff and jitter, Retry-After, per-host concurrency and pacing, a
global rate limit, timeouts, a byte cap, a redirect cap, robots rules and the
address guard on every hop. Returns a `Fetched` record; never raises for a URL.
"""
from __future__ import annotations

import email.utils
import random
import socket
import threading
import time
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urljoin

import requests
import urllib3
from requests.adapters import HTTPAdapter

from shardforge.ingest.download.guard import AddressPolicy, BlockedAddress, CachedResolver, InvalidURL, check_url, host_key
from shardforge.ingest.download.robots import RobotsCache, x_robots_denied

TRANSIENT = ("timeout", "connection_error", "http_5xx", "rate_limited")
REDIRECTS = (301, 302, 303, 307, 308)


@dataclass
class Fetched:
    """What one URL's fetch came to. `status` is 'ok' or a failure class."""
    status: str
    error: Optional[str] = None
    http_status: Optional[int] = None
    attempts: int = 0
    final_url: Optional[str] = None
    content_type: Optional[str] = None
    body: Optional[bytes] = None


class _Retry(Exception):
    """An attempt that may be retried: carries the would-be final status."""

    def __init__(self, status: str, error: str, http_status: Optional[int] = None,
                 retry_after: Optional[float] = None):
        super().__init__(error)
        self.status, self.error, self.http_status, self.retry_after = status, error, http_status, retry_after


class _Final(Exception):
    def __init__(self, status: str, error: str, http_status: Optional[int] = None):
        super().__init__(error)
        self.status, self.error, self.http_status = status, error, http_status


class Pacer:
    """Spaces events at least 1/rate seconds apart (rate <= 0: no limit). Thread-safe.
    `pause_until` pushes every later event past a point in time (a host's Retry-After)."""

    def __init__(self, rate: float):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)

    def pause_until(self, t: float) -> None:
        with self._lock:
            self._next = max(self._next, t)


class _Host:
    def __init__(self, connections: int, rate: float):
        self.slots = threading.BoundedSemaphore(connections) if connections > 0 else None
        self.pacer = Pacer(rate)


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None if absent/invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _guarded_adapter(policy: AddressPolicy, pool_size: int) -> HTTPAdapter:
    """An adapter whose sockets are checked against the policy right after connecting."""

    def checked(sock):
        peer = sock.getpeername()[0]
        if not policy.ip_allowed(peer):
            sock.close()
            raise BlockedAddress(f"connected peer {peer} is not a public address")
        return sock

    class Conn(urllib3.connection.HTTPConnection):
        def _new_conn(self):
            return checked(super()._new_conn())

    class SConn(urllib3.connection.HTTPSConnection):
        def _new_conn(self):
            return checked(super()._new_conn())

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Conn

    class SPool(urllib3.HTTPSConnectionPool):
        ConnectionCls = SConn

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": SPool}

    return Adapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)


class Fetcher:
    """Fetches URLs for one Spark task. Thread-safe; create one per task and `close()` it.

    `rate_share` is this task's share of the global request rate (the stage divides
    `max_requests_per_second` by the number of partitions, so the sum over tasks never
    exceeds it). Per-host limits are exact when all of a host's URLs are in this task
    (the stage partitions by host when a per-host limit is set).
    """

    def __init__(self, cfg, *, rate_share: float = 0.0, rng: Optional[random.Random] = None):
        self.cfg = cfg
        self.policy = AddressPolicy.from_config(cfg.allow_private_addresses, cfg.allowed_networks)
        self.session = requests.Session()
        self.session.trust_env = False      # no environment proxies: the guard checks real peers
        self.session.headers["User-Agent"] = cfg.user_agent
        adapter = _guarded_adapter(self.policy, max(cfg.threads_per_task, 1))
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.pacer = Pacer(rate_share)
        self.resolver = CachedResolver()
        self._hosts: dict[str, _Host] = {}
        self._hosts_lock = threading.Lock()
        self._rng = rng or random.Random()
        self.robots = RobotsCache(self) if cfg.respect_robots else None

    def close(self) -> None:
        self.session.close()

    def host(self, url: str) -> _Host:
        key = host_key(url)
        with self._hosts_lock:
            h = self._hosts.get(key)
            if h is None:
                h = self._hosts[key] = _Host(self.cfg.per_host_connections, self.cfg.per_host_requests_per_second)
            return h

    def backoff(self, retry: int) -> float:
        """Delay before retry number `retry` (1-based): base * 2**(retry-1), capped, with
        'equal jitter' (between half and all of it)."""
        d = min(self.cfg.backoff_max, self.cfg.backoff_base * (2 ** (retry - 1)))
        return d / 2 + self._rng.uniform(0, d / 2)

    def fetch(self, url: str) -> Fetched:
        """Fetch `url` with retries. Never raises: every outcome is a status."""
        attempts = 0
        while True:
            attempts += 1
            try:
                out = self._attempt(url)
                out.attempts = attempts
                return out
            except _Final as f:
                return Fetched(f.status, f.error, f.http_status, attempts)
            except _Retry as r:
                if attempts > self.cfg.max_retries:
                    return Fetched(r.status, f"{r.error} (after {attempts} attempts)", r.http_status, attempts)
                delay = self.backoff(attempts)
                if r.retry_after is not None:
                    if r.retry_after > self.cfg.backoff_max:
                        return Fetched(r.status, f"{r.error}; Retry-After {r.retry_after:.0f}s exceeds "
                                       f"backoff_max", r.http_status, attempts)
                    delay = r.retry_after
                    self.host(url).pacer.pause_until(time.monotonic() + delay)
                time.sleep(delay)
            except Exception as exc:  # a bug or an unforeseen library error: still a row
                return Fetched("error", f"{type(exc).__name__}: {exc}", None, attempts)

    def get(self, url: str, *, redirects: bool = False):
        """One guarded GET (stream=True) under the host and global limits, with the
        configured timeouts. The caller closes the response. Used for robots.txt too."""
        return self.session.get(url, stream=True, allow_redirects=redirects,
                                timeout=(self.cfg.connect_timeout, self.cfg.read_timeout))

    def _attempt(self, url: str) -> Fetched:
        cfg = self.cfg
        current = url
        for _hop in range(cfg.max_redirects + 1):
            try:
                check_url(current, self.policy, self.resolver)
            except InvalidURL as exc:
                raise _Final("invalid_url", str(exc))
            except BlockedAddress as exc:
                raise _Final("blocked_address", str(exc))
            except (socket.gaierror, UnicodeError) as exc:
                raise _Retry("connection_error", f"cannot resolve host: {exc}")
            if self.robots is not None:
                denied = self.robots.denied(current)
                if denied:
                    raise _Final("robots_denied", denied)
            host = self.host(current)
            if host.slots is not None:
                host.slots.acquire()
            try:
                host.pacer.wait()
                self.pacer.wait()
                nxt = self._request(current)
            finally:
                if host.slots is not None:
                    host.slots.release()
            if isinstance(nxt, Fetched):
                return nxt
            current = nxt
        raise _Final("too_many_redirects", f"more than {cfg.max_redirects} redirects")

    def _request(self, url: str):
        """One HTTP exchange: a Fetched, or the next URL of a redirect."""
        cfg = self.cfg
        started = time.monotonic()
        try:
            resp = self.get(url)
        except BlockedAddress as exc:
            raise _Final("blocked_address", str(exc))
        except requests.exceptions.ConnectTimeout as exc:
            raise _Retry("timeout", f"connect timeout: {_short(exc)}")
        except requests.exceptions.ReadTimeout as exc:
            raise _Final("timeout", f"read timeout after {cfg.read_timeout}s: {_short(exc)}")
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise _Retry("connection_error", _short(exc))
        except requests.exceptions.InvalidURL as exc:
            raise _Final("invalid_url", _short(exc))
        except requests.exceptions.RequestException as exc:
            raise _Final("connection_error", _short(exc))
        with resp:
            code = resp.status_code
            if code in REDIRECTS:
                loc = resp.headers.get("Location")
                if not loc:
                    raise _Final("http_3xx", f"HTTP {code} without Location", code)
                return urljoin(url, loc)
            if code == 429:
                raise _Retry("rate_limited", "HTTP 429", code, parse_retry_after(resp.headers.get("Retry-After")))
            if code >= 500:
                raise _Retry("http_5xx", f"HTTP {code}", code, parse_retry_after(resp.headers.get("Retry-After"))
                             if code == 503 else None)
            if code >= 400:
                raise _Final("http_4xx", f"HTTP {code}", code)
            if code != 200:
                raise _Final(f"http_{code // 100}xx", f"HTTP {code}", code)
            if cfg.respect_x_robots_tag:
                denied = x_robots_denied(resp.headers.get("X-Robots-Tag"), cfg.user_agent)
                if denied:
                    raise _Final("robots_denied", f"X-Robots-Tag: {denied}", code)
            length = resp.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > cfg.max_bytes:
                raise _Final("too_large", f"Content-Length {length} > max_bytes {cfg.max_bytes}", code)
            chunks, size = [], 0
            try:
                for chunk in resp.iter_content(64 * 1024):
                    size += len(chunk)
                    if size > cfg.max_bytes:
                        raise _Final("too_large", f"body exceeds max_bytes {cfg.max_bytes}", code)
                    if cfg.total_timeout and time.monotonic() - started > cfg.total_timeout:
                        raise _Final("timeout", f"body not received within total_timeout {cfg.total_timeout}s",
                                     code)
                    chunks.append(chunk)
            except requests.exceptions.ConnectionError as exc:
                if "timed out" in str(exc).lower():
                    raise _Final("timeout", f"read timeout in body: {_short(exc)}", code)
                raise _Retry("connection_error", f"connection broken in body: {_short(exc)}", code)
            except requests.exceptions.ChunkedEncodingError as exc:
                raise _Retry("connection_error", f"connection broken in body: {_short(exc)}", code)
            except requests.exceptions.ContentDecodingError as exc:
                raise _Final("decode_error", f"content-encoding: {_short(exc)}", code)
            return Fetched("ok", None, code, 0, url, resp.headers.get("Content-Type"), b"".join(chunks))


def _short(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."
