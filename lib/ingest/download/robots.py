"""robots.txt and X-Robots-Tag rules for the downloader.

robots.txt is fetched once per host and task through the same guarded session and
parsed with the standard library's `urllib.robotparser`. Following RFC 9309: a
4xx robots.txt allows everything; a 5xx or an unreachable one disallows the host
(the server could not say, so we do not assume consent). X-Robots-Tag values
`noai`, `noimageai`, `noindex` and `none`, for every agent or for ours, deny a
response before its body is read.
"""
from __future__ import annotations

import threading
from typing import Optional
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

DENY_DIRECTIVES = ("noai", "noimageai", "noindex", "none")
ROBOTS_MAX_BYTES = 512 * 1024


def agent_token(user_agent: str) -> str:
    """The product token robots rules match: 'shardforge' from 'shardforge/0.1 (+...)'."""
    return (user_agent.split("/", 1)[0].split() or ["*"])[0].lower()


def x_robots_denied(header: Optional[str], user_agent: str) -> Optional[str]:
    """The denying directive of an X-Robots-Tag header, or None. A value may name an
    agent ('otherbot: noindex'), which then applies to that agent only."""
    if not header:
        return None
    ours = agent_token(user_agent)
    for part in header.split(","):
        part = part.strip().lower()
        agent = None
        if ":" in part:
            head, rest = part.split(":", 1)
            if head.strip() not in DENY_DIRECTIVES and " " not in head.strip():
                agent, part = head.strip(), rest.strip()
        if agent is not None and agent != ours:
            continue
        for word in part.replace(";", " ").split():
            if word in DENY_DIRECTIVES:
                return word
    return None


class RobotsCache:
    """Per-task cache of robots.txt decisions, keyed by scheme://host:port."""

    def __init__(self, fetcher):
        self.fetcher = fetcher
        self.agent = agent_token(fetcher.cfg.user_agent)
        self._rules: dict[str, object] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def denied(self, url: str) -> Optional[str]:
        """Why robots.txt forbids `url` to our agent, or None when it is allowed."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        with self._lock:
            lock = self._locks.setdefault(origin, threading.Lock())
        with lock:
            if origin not in self._rules:
                self._rules[origin] = self._load(origin)
        rules = self._rules[origin]
        if isinstance(rules, str):
            return rules
        if not rules.can_fetch(self.agent, url):
            return f"robots.txt of {origin} disallows {parts.path or '/'}"
        return None

    def _load(self, origin: str):
        """A parser, or a string saying why the whole origin is off limits."""
        import requests

        parser = RobotFileParser()
        try:
            host = self.fetcher.host(origin + "/")
            if host.slots is not None:
                host.slots.acquire()
            try:
                host.pacer.wait()
                self.fetcher.pacer.wait()
                resp = self.fetcher.get(origin + "/robots.txt", redirects=True)
            finally:
                if host.slots is not None:
                    host.slots.release()
            with resp:
                code = resp.status_code
                if code >= 500:
                    return f"robots.txt of {origin} answered HTTP {code}"
                if code >= 400:
                    parser.parse([])
                    return parser
                body = resp.raw.read(ROBOTS_MAX_BYTES, decode_content=True) or b""
        except Exception as exc:  # unreachable robots.txt: the host is not fetched (RFC 9309)
            if isinstance(exc, requests.exceptions.RequestException) or isinstance(exc, OSError):
                return f"robots.txt of {origin} unreachable: {type(exc).__name__}"
            return f"robots.txt of {origin} unreadable: {type(exc).__name__}: {exc}"
        parser.parse(body.decode("utf-8", "replace").splitlines())
        return parser
