"""Which proxy the API server is reached through, from the environment, as Go's ``httpproxy`` decides (client-go).

Why not ``urllib.request.getproxies``/``proxy_bypass``: Python's ``NO_PROXY`` knows host names and domain suffixes
only. ``NO_PROXY=10.0.0.0/8`` (what OLM and most cluster installers inject) did not bypass the proxy for the
in-cluster API server at ``10.96.0.1``, so the operator sent its ServiceAccount token through a proxy every Go
client in the same pod bypasses. This module follows ``golang.org/x/net/http/httpproxy`` (``FromEnvironment``,
``ProxyFunc``, ``useProxy``), read rather than guessed:

- ``HTTPS_PROXY``/``https_proxy`` for an ``https`` server, ``HTTP_PROXY``/``http_proxy`` for ``http`` (the upper-case
  name first, the first non-empty one wins); ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set (CGI).
- ``localhost`` and loopback addresses never go through a proxy.
- ``NO_PROXY``/``no_proxy``, comma-separated, case-insensitive: ``*`` bypasses for every host; a CIDR
  (``10.0.0.0/8``, ``fd00::/8``) for IP addresses in it; an IP address (``10.96.0.1``, ``[::1]:443``) for that
  address; ``example.com`` for it and its subdomains, ``.example.com`` and ``*.example.com`` for subdomains only.
  Any entry but a CIDR may carry a port (``example.com:6443``), which must then be the server's port (its default
  by scheme when the URL has none). Host names are compared as written (no DNS); internationalised names are not
  converted to punycode, unlike Go.

Pure: no I/O but reading the mapping it is given. Called by ``kube.client`` (once, when the client is made); hands
on the proxy URL, or ``None``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["proxy_for", "uses_proxy"]

_DEFAULT_PORTS = {"http": "80", "https": "443"}
_PREFIX_LENGTH = re.compile(r"[0-9]{1,3}")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def proxy_for(url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy URL for requests to ``url`` according to ``environ``, or ``None`` for a direct connection."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        proxy = _first(environ, "HTTPS_PROXY", "https_proxy")
    elif parts.scheme == "http" and not environ.get("REQUEST_METHOD"):
        proxy = _first(environ, "HTTP_PROXY", "http_proxy")
    else:
        proxy = ""
    if not proxy:
        return None
    port = str(parts.port) if parts.port is not None else _DEFAULT_PORTS.get(parts.scheme, "")
    return proxy if uses_proxy(parts.hostname or "", port, _first(environ, "NO_PROXY", "no_proxy")) else None


def uses_proxy(host: str, port: str, no_proxy: str) -> bool:
    """Whether a request to ``host`` (no brackets) on ``port`` goes through the proxy (Go's ``useProxy``)."""
    if not host:
        return True
    if host == "localhost":
        return False
    ip = _parse_ip(host)
    if ip is not None and ip.is_loopback:
        return False
    host = host.strip().lower()
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return False
        rule = _rule(entry)
        if rule is not None and rule.matches(host, port, ip):
            return False
    return True


@dataclass(frozen=True, slots=True)
class _Rule:
    """One ``NO_PROXY`` entry: a network, an address or a domain suffix, with an optional port."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    ip: IPAddress | None = None
    #: A domain with a leading dot; ``match_host``: the domain itself matches too (written without the dot).
    suffix: str = ""
    match_host: bool = False
    port: str = ""

    def matches(self, host: str, port: str, ip: IPAddress | None) -> bool:
        if self.network is not None:
            return ip is not None and ip.version == self.network.version and ip in self.network
        if self.ip is not None:
            return ip is not None and ip == self.ip and self.port in ("", port)
        named = host.endswith(self.suffix) or (self.match_host and host == self.suffix[1:])
        return named and self.port in ("", port)


def _rule(entry: str) -> _Rule | None:
    """The rule of a lower-cased, non-empty ``NO_PROXY`` entry (Go's ``config.init``); ``None`` when malformed."""
    address, slash, bits = entry.partition("/")
    if slash:
        if _PREFIX_LENGTH.fullmatch(bits) is None or (ip := _parse_ip(address)) is None:
            return None  # Go's ParseCIDR fails; the entry is then taken as a host name that matches nothing real
        try:
            return _Rule(network=ipaddress.ip_network(f"{ip}/{bits}", strict=False))
        except ValueError:
            return None
    host, port = _split_host_port(entry)
    if host is None:
        return None  # "host:" parts without a host: Go ignores the entry
    if (ip := _parse_ip(host)) is not None:
        return _Rule(ip=ip, port=port)
    if host.startswith("*."):
        host = host[1:]
    if host.startswith("."):
        return _Rule(suffix=host, port=port)
    return _Rule(suffix="." + host, match_host=True, port=port)


def _split_host_port(entry: str) -> tuple[str | None, str]:
    """``(host, port)`` as Go's ``net.SplitHostPort``, ``(entry, "")`` without a port; host ``None`` when empty."""
    if entry.startswith("["):
        end = entry.find("]")
        if end > 0 and entry[end + 1 : end + 2] == ":":
            return entry[1:end] or None, entry[end + 2 :]
        return entry, ""
    host, colon, port = entry.rpartition(":")
    if not colon or ":" in host:
        return entry, ""  # no port, or a bare IPv6 address
    return host or None, port


def _parse_ip(text: str) -> IPAddress | None:
    """An IP address as Go's ``net.ParseIP`` reads it; an IPv4-mapped IPv6 address is its IPv4 address."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:
            return None
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
    return ip


def _first(environ: Mapping[str, str], *names: str) -> str:
    for name in names:
        if value := environ.get(name, ""):
            return value
    return ""
