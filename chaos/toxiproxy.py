"""An asyncio client of toxiproxy's HTTP API: latency, resets and half-open connections between a replica and the API.

Why toxiproxy: it is the well-kept tool made for exactly this (TCP-level toxics added at run time over an HTTP API),
it passes TLS through untouched so the operator still verifies the API server's certificate, and one proxy per
replica lets a fault hit the leader alone. The server process is ``toxiserver``'s concern; this module only talks to
it.

The toxics used and what the operator sees:
- ``latency`` (each direction, optional jitter): slow API responses.
- ``reset_peer`` (timeout 0): every open connection, and every new one while the toxic stays, is reset (RST).
- ``timeout`` (timeout 0, both directions): data stops with no FIN, the half-open connection of a dead NAT or a
  cut cable.
- a disabled proxy: open connections are closed and new ones refused (the API is unreachable).

Why asyncio: the faults run on the harness's event loop next to the churn, the recovery observers and the leader
lookups. The first version of this client used urllib and ``time.sleep`` (polling up to three minutes for a toxic to
go away) and froze all of them while it waited, so the run measured its own stall and then died with the churn's
session closed under it (issue 21). Every call here is bounded by ``call_timeout``.

Why a heal recreates the proxy instead of removing its toxics (read in toxiproxy v2.12.0's ``toxic_collection.go``,
``link.go`` and ``proxy.go``): ``DELETE /proxies/{p}/toxics/{t}`` runs ``ToxicCollection.RemoveToxic`` under the
collection's lock, and for every link ``ToxicLink.RemoveToxic`` first interrupts the toxic's goroutine, which only
listens between two chunks. A latency toxic holding a chunk for a client that does not read (a process draining
after SIGTERM, a frozen one, a full socket buffer) sits in ``stub.Output <- c`` until that client reads, and the
removal waits with it. When that client's connection then dies, the link's writer goroutine leaves its copy loop
and calls ``RemoveLink``, which needs the lock the removal holds: the two wait for each other for good, the toxic
is "still present" forever (toxiproxy's own 25 s handler timeout answers 503 meanwhile), and so is every later call
that needs the lock, including ``StartLink`` for each new connection, which then also blocks the accept loop that
``DELETE /proxies/{p}`` waits for. No wait is long enough, and nothing fixes it once it happened: the harness must
never remove a toxic from live links. ``DELETE /proxies/{p}`` (``ProxyCollection.Remove`` -> ``Proxy.stop``) closes
the listener and every connection without touching the toxic collection, and a proxy created again with the same
name and listen address starts with an empty chain. The operator sees a network recovery that resets its
connections, which it must survive anyway. Adding a toxic also interrupts every live link (``chainAddToxic``); on
live, reading clients that is quick, and the call timeout turns a rare hang into a reported harness failure instead
of a stuck run. ``tests/unit/chaos/test_toxiproxy_server.py`` shows both on the real server.

Used by ``harness`` (one proxy per replica) and the faults.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import dataclass
from typing import Any

import aiohttp


class ToxiproxyError(RuntimeError):
    """The toxiproxy server could not be built, started or told something; the message says what and what to do."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class ProxySpec:
    """What a proxy is made of, kept so that a heal can create it again exactly (same name, same port)."""

    name: str
    listen: str
    upstream: str


class Toxiproxy:
    """``async with Toxiproxy(url) as toxi``: the proxies of one toxiproxy server and the toxics on them."""

    def __init__(self, url: str, *, call_timeout: float = 30.0, heal_timeout: float = 15.0, log_hint: str = "") -> None:
        self.url = url.rstrip("/")
        self.call_timeout = call_timeout
        self.heal_timeout = heal_timeout
        self.proxies: dict[str, ProxySpec] = {}
        self._hint = log_hint or "the toxiproxy-server log in the run's work directory"
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Toxiproxy:
        self._session = aiohttp.ClientSession(self.url, timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def _call(self, method: str, path: str, body: Any = None, *, limit: float | None = None) -> Any:
        """The decoded answer; ``ToxiproxyError`` (with ``status``, 0 when none came) for anything else."""
        assert self._session is not None, "use Toxiproxy as an async context manager"
        limit = self.call_timeout if limit is None else limit
        try:
            async with asyncio.timeout(limit), self._session.request(method, path, json=body) as resp:
                text = await resp.text()
                status = resp.status
        except TimeoutError:
            raise ToxiproxyError(
                f"toxiproxy {method} {path}: no answer within {limit:g}s; the server is overloaded or wedged "
                f"(see {self._hint})"
            ) from None
        except (aiohttp.ClientError, OSError) as err:
            raise ToxiproxyError(
                f"toxiproxy {method} {path}: {type(err).__name__}: {err}; is toxiproxy-server still running? "
                f"(see {self._hint})"
            ) from err
        if status >= 400:
            raise ToxiproxyError(f"toxiproxy {method} {path}: HTTP {status}: {text.strip()}", status=status)
        return _decode(text)

    async def version(self) -> str:
        return str(await self._call("GET", "/version", limit=2.0))

    async def _create(self, spec: ProxySpec) -> None:
        await self._call("POST", "/proxies", {"name": spec.name, "listen": spec.listen, "upstream": spec.upstream})

    async def _delete(self, name: str) -> None:
        try:
            await self._call("DELETE", f"/proxies/{name}")
        except ToxiproxyError as err:
            if err.status != 404:
                raise

    async def add_proxy(self, name: str, upstream: str) -> int:
        """A proxy ``name`` on a free loopback port relaying to ``upstream`` (host:port); returns the port."""
        port = free_port()
        spec = ProxySpec(name, f"127.0.0.1:{port}", upstream)
        await self._create(spec)
        self.proxies[name] = spec
        return port

    async def add_toxic(
        self, proxy: str, toxic: str, kind: str, *, stream: str = "downstream", **attributes: int
    ) -> None:
        body = {"name": toxic, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes}
        await self._call("POST", f"/proxies/{proxy}/toxics", body)

    async def latency(self, proxy: str, *, ms: int, jitter: int = 0) -> None:
        """``ms`` ± ``jitter`` milliseconds on every chunk, each way: a request's round trip gains twice that."""
        for stream in ("upstream", "downstream"):
            await self.add_toxic(proxy, f"latency-{stream}", "latency", stream=stream, latency=ms, jitter=jitter)

    async def half_open(self, proxy: str) -> None:
        for stream in ("upstream", "downstream"):
            await self.add_toxic(proxy, f"half-open-{stream}", "timeout", stream=stream, timeout=0)

    async def reset(self, proxy: str) -> None:
        await self.add_toxic(proxy, "reset", "reset_peer", stream="upstream", timeout=0)

    async def set_enabled(self, proxy: str, enabled: bool) -> None:
        await self._call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    async def heal(self, proxy: str) -> None:
        """The proxy as it was created: deleted (every connection through it closed) and created again, no toxics.

        Never removes a toxic from live links (see the module docstring for why that can hang forever). A create
        that finds the name still taken deletes again; one that finds the port not yet free retries, both until
        ``heal_timeout``.
        """
        spec = self.proxies[proxy]
        deadline = time.monotonic() + self.heal_timeout
        await self._delete(proxy)
        while True:
            try:
                await self._create(spec)
                return
            except ToxiproxyError as err:
                if time.monotonic() > deadline or err.status not in (409, 500):
                    raise ToxiproxyError(
                        f"toxiproxy: proxy {proxy} could not be created again on {spec.listen} after its deletion "
                        f"({err}); the replica behind it stays cut off: see {self._hint}",
                        status=err.status,
                    ) from err
                if err.status == 409:
                    await self._delete(proxy)
                await asyncio.sleep(0.2)

    async def heal_all(self) -> None:
        await asyncio.gather(*(self.heal(name) for name in self.proxies))


def _decode(text: str) -> Any:
    return json.loads(text) if text.strip().startswith(("{", "[")) else text
