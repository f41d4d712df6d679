"""The address guard: which URLs and which IP addresses the downloader may contact.

Only http and https. A host is resolved and every address it resolves to must be
public (not private, loopback, link-local, multicast, reserved or unspecified),
unless the policy allows private addresses or the address lies in an allowed
network. The check runs before each hop of a redirect chain and again on the
socket's actual peer right after it connects, so a DNS answer that changes
between the check and the connection (rebinding) is caught too.
"""
from __future__ import annotations

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

SCHEMES = ("http", "https")


class BlockedAddress(Exception):
    """A target the policy refuses. Deliberately not an OSError, so the HTTP stack
    does not wrap or retry it: it reaches the fetcher as itself."""


class InvalidURL(ValueError):
    """A URL that cannot be fetched at all: bad scheme, no host, malformed."""


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False
    allowed_networks: tuple = ()

    @classmethod
    def from_config(cls, allow_private: bool, networks) -> "AddressPolicy":
        try:
            nets = tuple(ipaddress.ip_network(n, strict=False) for n in networks)
        except ValueError as exc:
            raise ValueError(f"download.allowed_networks: {exc}") from None
        return cls(bool(allow_private), nets)

    def ip_allowed(self, ip: str) -> bool:
        """True when a connection to `ip` is permitted."""
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if self.allow_private:
            return True
        if any(addr in net for net in self.allowed_networks if net.version == addr.version):
            return True
        return addr.is_global and not (addr.is_multicast or addr.is_reserved or addr.is_unspecified)


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a fetchable URL; raises InvalidURL otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidURL("empty url")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"malformed url: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidURL(f"scheme {scheme or '(none)'!r} is not http or https")
    host = parts.hostname
    if not host:
        raise InvalidURL("url has no host")
    return scheme, host, port or (443 if scheme == "https" else 80)


def host_key(url: str) -> str:
    """The politeness key of a URL: its lower-cased host (and port when not default)."""
    try:
        scheme, host, port = split_url(url)
    except InvalidURL:
        return ""
    default = 443 if scheme == "https" else 80
    return host if port == default else f"{host}:{port}"


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (a literal IP resolves to itself)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return sorted({info[4][0] for info in infos})


class CachedResolver:
    """`resolve` with a per-task cache of `ttl` seconds. Safe for the guard because the
    connected peer is checked again anyway; it only saves lookups."""

    def __init__(self, ttl: float = 300.0):
        self.ttl = ttl
        self._cache: dict = {}
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int) -> list[str]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get((host, port))
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        addresses = resolve(host, port)
        with self._lock:
            self._cache[(host, port)] = (now, addresses)
        return addresses


def check_url(url: str, policy: AddressPolicy, resolver=resolve) -> None:
    """Raise InvalidURL or BlockedAddress unless every address of the URL's host is allowed.
    DNS failures pass through as socket.gaierror (a connection error)."""
    _, host, port = split_url(url)
    addresses = resolver(host, port)
    for ip in addresses:
        if not policy.ip_allowed(ip):
            raise BlockedAddress(f"{host} resolves to {ip}, which is not a public address")
