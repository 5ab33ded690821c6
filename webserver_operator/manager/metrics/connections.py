"""Bounded, cheap connections for a port every pod can reach: a connection limit, timeouts, small TLS buffers.

Why: any pod in the cluster may connect to /metrics, with or without a token. CPython's asyncio serves TLS through
``asyncio.sslproto.SSLProtocol``, which allocates (and zero-fills, so it is resident) a 256 KiB read buffer for
every accepted connection, before the handshake; aiohttp closes no connection that never sends a request. Measured
before this module (the issue that asked for it, issue 32): 1000 idle TLS connections added 275 MiB to the operator
and 1000 bare TCP connects 303 MiB, none closed after 90 s; a few hundred kill a pod limited to 256Mi.

What this module does instead, as Go's ``net/http`` server (which controller-runtime's metrics server uses) does
with its per-connection buffers and its ``ReadHeaderTimeout``/``IdleTimeout``:

- **No TLS state before the first byte.** ``GatedSite`` listens on plain TCP; an accepted connection gets
  ``_BeforeTLS``, which holds nothing but aiohttp's request handler until the client sends its first bytes (the
  ClientHello), so a connect that never starts a handshake costs a few KiB, not an SSL object and its buffers.
- **TLS terminated with a 16 KiB buffer.** The first bytes hand the connection to ``_LeanTLS``, a ``SSLProtocol``
  whose ``max_size`` (the size of the read buffer it allocates, and of the plaintext it reads at once) is 16 KiB,
  one TLS record, instead of 256 KiB. That is what asyncio itself does for ``create_server(ssl=...)``
  (``_make_ssl_transport``), with a smaller buffer, and what ``loop.start_tls`` does with a connection already
  open; the class attribute is read in ``__init__`` and in ``get_buffer``/``_do_read__copied`` on CPython 3.11 to
  3.13, and a unit test checks that an instance really holds the small buffer, so a change in asyncio fails a test
  instead of costing memory silently. The certificate is asked for at each handshake (``tls()``), so a reload
  swaps the pair for new connections only (``manager.metrics.certreload``).
- **At most ``max_connections`` at once.** At the limit, a new connection evicts the connection that has been idle
  (handshaking, waiting for its first request, or between requests) the longest; when every connection is in a
  request, the new one is closed at once. Refusing new connections instead would let a pod that holds the limit's
  worth of idle connections lock Prometheus out; evicting the oldest idle one means a flood of idle connections can
  only push out other idle connections, never a scrape in progress.
- **Timeouts**: the TLS handshake (``handshake_timeout``, asyncio's ``ssl_handshake_timeout``), the first request's
  head (``header_timeout``, counted from the accept, handshake included, as Go's ``ReadHeaderTimeout``) and the
  time between requests on a kept-alive connection (``idle_timeout``, which also ends a slow head after the first
  request). A sweep every second closes what outlived them. A request being handled is never timed out here (the
  reviews and the render have their own).

Measured (tests/support/connflood.py from another process against tests/support/metrics_process.py, the metrics
server in a process of its own, ``--max-connections 10000`` so none is evicted; RSS from /proc/PID/status; the
commands are in docs/monitoring.md), 500 connections each on 2 shared cores:

==============================================  ===================  ==========
connection                                      before (256 KiB)     now
==============================================  ===================  ==========
idle after the TLS handshake                    232 KiB              46 KiB
connected, handshake never started              300 KiB              3.7 KiB
==============================================  ===================  ==========

What remains for a TLS connection is OpenSSL's per-connection state, the 16 KiB buffer and aiohttp's request
handler; at the default limit of 512, at most 23 MiB. A handshake in progress holds OpenSSL's handshake buffers
for a moment more.

``ConnectionTable`` is the pure bookkeeping (clock injected, tested alone); ``GatedSite`` is the aiohttp site that
applies it. Used by ``manager.metrics.serving`` for every site given ``limits``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from asyncio import sslproto
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_runner import BaseRunner, BaseSite

__all__ = ["TLS_READ_BUFFER", "ConnectionLimits", "ConnectionTable", "GatedSite", "table_middleware"]

log = logging.getLogger(__name__)

#: The read buffer of a TLS connection: one TLS record's plaintext (asyncio's default is 256 KiB).
TLS_READ_BUFFER = 16 * 1024
_SWEEP_INTERVAL = 1.0


@dataclass(frozen=True)
class ConnectionLimits:
    """How many connections a site keeps and how long an idle one may live (seconds)."""

    max_connections: int = 512
    handshake_timeout: float = 10.0
    header_timeout: float = 10.0
    idle_timeout: float = 90.0


@dataclass
class _Entry:
    since: float  # when it last became idle: accepted, or a request finished
    served: int = 0  # requests finished on it
    busy: int = 0  # requests being handled on it


@dataclass
class ConnectionTable:
    """Which connections are open, which is idle since when, whom to evict and whom to time out (pure)."""

    limits: ConnectionLimits
    clock: Callable[[], float] = time.monotonic
    _entries: dict[Hashable, _Entry] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._entries)

    def admit(self, key: Hashable) -> tuple[bool, Hashable | None]:
        """Room for ``key``? Returns (admitted, the idle connection to close to make room, if any)."""
        victim: Hashable | None = None
        if len(self._entries) >= self.limits.max_connections:
            idle = [(entry.since, k) for k, entry in self._entries.items() if entry.busy == 0]
            if not idle:
                return False, None
            victim = min(idle, key=lambda pair: pair[0])[1]
            del self._entries[victim]
        self._entries[key] = _Entry(since=self.clock())
        return True, victim

    def request_started(self, key: Hashable) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.busy += 1

    def request_finished(self, key: Hashable) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.busy -= 1
            entry.served += 1
            entry.since = self.clock()

    def forget(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def expired(self) -> list[Hashable]:
        """Connections idle longer than their timeout allows (removed from the table; the caller closes them)."""
        now = self.clock()
        limits = self.limits
        gone = []
        for key, entry in self._entries.items():
            if entry.busy:
                continue
            allowed = limits.header_timeout if entry.served == 0 else limits.idle_timeout
            if now - entry.since >= allowed:
                gone.append(key)
        for key in gone:
            del self._entries[key]
        return gone


class _LeanTLS(sslproto.SSLProtocol):
    """asyncio's server-side TLS protocol with a 16 KiB read buffer, telling the site when the connection ends."""

    max_size = TLS_READ_BUFFER

    def __init__(self, site: GatedSite, handler: asyncio.BaseProtocol, context: ssl.SSLContext) -> None:
        self._site = site
        self._handler = handler
        # No waiter (None, as asyncio's own server passes): nothing awaits the handshake; the typeshed stubs want a
        # Future and an int timeout where asyncio takes None and seconds as a float.
        super().__init__(
            site.loop,
            handler,
            context,
            None,  # type: ignore[arg-type]
            server_side=True,
            ssl_handshake_timeout=site.limits.handshake_timeout,  # type: ignore[arg-type]
        )

    def connection_lost(self, exc: BaseException | None) -> None:
        self._site.closed(self._handler)
        super().connection_lost(exc)


class _BeforeTLS(asyncio.Protocol):
    """A TLS connection until its first byte: no TLS state yet, so a connect that sends nothing costs little.

    The first bytes (the ClientHello) hand the connection to a ``_LeanTLS``, which starts the handshake with them.
    """

    def __init__(self, site: GatedSite, handler: asyncio.BaseProtocol) -> None:
        self._site = site
        self._handler = handler
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._site.opened(self._handler, transport)

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        tls = self._site.tls_protocol(self._handler)
        transport.set_protocol(tls)
        tls.connection_made(transport)
        view = memoryview(data)
        while view:
            buffer = tls.get_buffer(len(view))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            tls.buffer_updated(size)
            view = view[size:]

    def connection_lost(self, exc: Exception | None) -> None:
        self._site.closed(self._handler)


class _Plain(asyncio.Protocol):
    """A plain-HTTP connection: hands everything to aiohttp's handler, tells the site when it ends."""

    def __init__(self, site: GatedSite, handler: asyncio.Protocol) -> None:
        self._site = site
        self._handler = handler

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._site.opened(self._handler, transport)
        self._handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received()

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._site.closed(self._handler)
        self._handler.connection_lost(exc)


def table_middleware(table: ConnectionTable) -> Middleware:
    """Marks each request on its connection, so that a connection in a request is neither evicted nor timed out.

    The application's outermost middleware (``manager.metrics.serving`` puts it first, before the application freezes).
    """

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        key = request.protocol
        table.request_started(key)
        try:
            return await handler(request)
        finally:
            table.request_finished(key)

    return middleware


class GatedSite(BaseSite):
    """An aiohttp site on ``host:port`` bounded by ``table``; TLS with ``tls()``'s context per connection, if given.

    The application must carry ``table_middleware(table)`` (``manager.metrics.serving`` adds it) so that requests being
    handled are known: they are never evicted or timed out.
    """

    __slots__ = ("_host", "_port", "_sweeper", "_tls", "_transports", "limits", "loop", "refused", "table")

    def __init__(
        self,
        runner: BaseRunner,
        host: str,
        port: int,
        *,
        table: ConnectionTable,
        tls: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        super().__init__(runner)
        self._host = host
        self._port = port
        self._tls = tls
        self._sweeper: asyncio.Task[None] | None = None
        self.limits = table.limits
        self.table = table
        self.loop = asyncio.get_running_loop()
        self._transports: dict[Hashable, asyncio.BaseTransport] = {}
        self.refused = 0

    @property
    def name(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        sockets = getattr(self._server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        await super().start()
        self._server = await self.loop.create_server(
            self._accept, self._host, self._port, backlog=self._backlog, reuse_address=True
        )
        self._sweeper = asyncio.create_task(self._sweep())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        await super().stop()
        # aiohttp's runner closes the connections it knows; those still in their TLS handshake it never saw.
        for transport in list(self._transports.values()):
            self._close(transport)

    def _accept(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None
        handler: Any = server()
        if self._tls is not None:
            return _BeforeTLS(self, handler)
        return _Plain(self, handler)

    def tls_protocol(self, handler: asyncio.BaseProtocol) -> _LeanTLS:
        """The TLS layer of ``handler``'s connection, with the certificate served now."""
        assert self._tls is not None
        return _LeanTLS(self, handler, self._tls())

    def opened(self, key: Hashable, transport: asyncio.BaseTransport) -> None:
        admitted, victim = self.table.admit(key)
        if victim is not None:
            self._close(self._transports.pop(victim, None))
        if not admitted:
            self.refused += 1
            log.debug("%s: %d connections, all in a request: a new one is closed", self.name, len(self.table))
            transport.abort()  # type: ignore[attr-defined]
            return
        self._transports[key] = transport

    def closed(self, key: Hashable) -> None:
        self.table.forget(key)
        self._transports.pop(key, None)

    @staticmethod
    def _close(transport: asyncio.BaseTransport | None) -> None:
        if transport is not None and not transport.is_closing():
            transport.abort()  # type: ignore[attr-defined]

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL)
            for key in self.table.expired():
                self._close(self._transports.pop(key, None))
