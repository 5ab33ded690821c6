"""Connections to the API server: a pool of keep-alive HTTP/1.1 connections, each an ``asyncio.Protocol``.

Why not aiohttp's client: see ``kube.transport.http1`` (its per-request objects were over a quarter of the operator's
CPU in a
bulk create). Here a request is one ``transport.write`` of prepared bytes and one future for the answer's head; the
body, when it came with the head (the usual case), is read without another await.

What the pool does, as aiohttp's ``TCPConnector`` did for the operator:

- Up to ``limit`` connections (0: no cap); a request that finds none free waits for one, and the wait plus a new
  connection's TCP and TLS handshake are bounded together by ``connect_timeout`` (``TimeoutError``).
- Idle connections are reused newest first, and closed once they were unused for ``KEEPALIVE_SECONDS``, found when
  a connection is taken or given back (the API server closes idle connections too; a connection it closed is
  noticed as soon as the close arrives and never reused).
- The read timeout is the time without a byte while an answer is awaited (aiohttp's ``sock_read``), kept by one
  ``kube.transport.idle.IdleTimer`` per connection, armed at most once per timeout period, not once per request.
- A connection goes back to the pool only after a complete answer that allows reuse and with no byte after it;
  anything else (an error, a timeout, a watch left before its end, a cancelled request) closes it. Bytes that
  arrive on an idle connection close it at once (Go: "Unsolicited response received on idle HTTP channel"): they
  are never parsed as the next request's answer.
- A body read whole (``read_body``: every answer but a watch's) is at most ``MAX_BODY``; a larger one fails the
  request with ``ProtocolError`` and closes the connection. A streamed body (a watch) is bounded per event by
  ``kube.stream``.
- Closing the pool returns once every socket is closed. A TLS close sends close_notify and lets the socket go only
  when the server's answer arrives; the pool waits ``CLOSE_GRACE_SECONDS`` for that, then aborts what is left. Left
  to the loop, a socket outlived a loop stopped right after the close (an operator that stops at once, a test).
- Through a proxy (``HTTPS_PROXY`` or the kubeconfig's ``proxy-url``), an ``https`` API server is reached with a
  ``CONNECT host:port`` tunnel (the port always named, RFC 9112 3.2.3) and TLS inside it, an ``http`` one with
  absolute-form requests to the proxy, the way Go's ``net/http`` (and so client-go) does; ``proxy_headers`` go to
  the proxy only. Proxies speaking TLS themselves (``https://`` proxy URLs) are refused with a clear error, as a
  SOCKS one.

The write gate (``kube.gate``) is the caller's: ``KubeClient`` asks it after ``acquire()``, just before ``send()``,
with no await in between.

Used by ``kube.client`` (one ``ConnectionPool`` per ``KubeClient``); hands on ``Connection`` objects whose
``send``/``read_body``/``read_chunk`` return the answer's head and bytes.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import unquote, urlsplit

from webserver_operator.kube.transport.http1 import ProtocolError, ResponseHead, ResponseParser, encode_request
from webserver_operator.kube.transport.idle import IdleTimer

__all__ = [
    "CLOSE_GRACE_SECONDS",
    "KEEPALIVE_SECONDS",
    "MAX_BODY",
    "Connection",
    "ConnectionPool",
    "Endpoint",
    "ProxyError",
    "ServerDisconnected",
]

#: How long an idle connection is kept for reuse (aiohttp's default keep-alive; the API server's is longer).
KEEPALIVE_SECONDS = 15.0
#: How long closing the pool waits for the servers to answer the TLS close before it aborts the connections left.
CLOSE_GRACE_SECONDS = 0.5
#: Body bytes a watch may have received and not yet read before the connection stops reading (back-pressure).
_STREAM_HIGH_WATER = 4 * 2**20
#: Largest body read whole (every answer but a watch's). The largest answer the operator asks for is a list page
#: (``runtime.informers.informer``: 500 objects, a few MiB for usual objects); a page this large would take the
# operator past : its memory limit once decoded, so it is refused rather than buffered (a watch's frames are bounded in
#: ``kube.stream``).
MAX_BODY = 128 * 2**20


class ServerDisconnected(ConnectionError):
    """The connection ended before the answer was complete."""


class ProxyError(ConnectionError):
    """The proxy refused the tunnel to the API server."""


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: the API server's host and port, its TLS settings (``None``: plain HTTP) and the proxy."""

    host: str
    port: int
    #: ``host[:port]`` as in the URL: the ``Host`` header of requests to the API server.
    authority: str
    tls: ssl.SSLContext | None
    server_hostname: str | None = None
    #: The proxy's host and port, if any.
    proxy: tuple[str, int] | None = None
    proxy_headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        tls: ssl.SSLContext,
        server_hostname: str | None = None,
        proxy: str | None = None,
        proxy_headers: dict[str, str] | None = None,
    ) -> Endpoint:
        """The endpoint of ``url`` (``https://host:port`` or ``http://...``); ``ValueError`` says what is wrong."""
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"the API server URL {url!r} is not http(s)://host[:port]: check the kubeconfig's server")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        headers = dict(proxy_headers or {})
        proxy_address: tuple[str, int] | None = None
        if proxy:
            proxy_parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            if proxy_parts.scheme != "http" or not proxy_parts.hostname:
                raise ValueError(
                    f"proxy {proxy!r} is not supported: use an http:// proxy URL (HTTPS_PROXY or the kubeconfig's "
                    "proxy-url); TLS and SOCKS proxies are not"
                )
            if proxy_parts.username is not None and "Proxy-Authorization" not in headers:
                credentials = f"{unquote(proxy_parts.username)}:{unquote(proxy_parts.password or '')}"
                headers["Proxy-Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
            proxy_address = (proxy_parts.hostname, proxy_parts.port or 80)
        return cls(
            host=parts.hostname,
            port=port,
            authority=parts.netloc.rpartition("@")[2],
            tls=tls if parts.scheme == "https" else None,
            server_hostname=server_hostname if parts.scheme == "https" else None,
            proxy=proxy_address,
            proxy_headers=tuple(headers.items()),
        )

    @property
    def connect_target(self) -> str:
        """``host:port`` of the API server, the port always given (RFC 9112 3.2.3): the ``CONNECT`` request target."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def target(self, path_and_query: str) -> str:
        """The request target: origin form, or absolute form for plain HTTP through a proxy."""
        if self.proxy and self.tls is None:
            return f"http://{self.authority}{path_and_query}"
        return path_and_query


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: ``send`` a request, then ``read_body`` (whole) or ``read_chunk`` (a watch).

    ``read_timeout`` (``None``: none) fails a request whose answer stops coming for that long; a streamed answer
    (a watch) is not timed here, its reader keeps its own timeout and calls ``interrupt``. ``on_done(connection,
    reusable)`` is called by ``release``.
    """

    def __init__(self, *, read_timeout: float | None, on_done: Callable[[Connection, bool], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser = ResponseParser(self._on_head, self._on_body, self._on_end)
        self._on_done = on_done
        self._head: asyncio.Future[ResponseHead] | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._reusable = False
        self._streaming = False
        self._paused = False
        self._error: BaseException | None = None
        self._closing = False
        self._lost: asyncio.Future[None] = self._loop.create_future()  # done once the socket is closed
        self._busy = False
        self._pooled = False  # given back to the pool as reusable, and not taken again since
        self.idle_since = 0.0
        self._timer = IdleTimer(read_timeout, self._timed_out) if read_timeout is not None else None

    # --- asyncio.Protocol ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._busy:
            # Bytes while no request is out: a misbehaving server or proxy. Never parsed as the next request's
            # answer; the connection is closed (Go: "Unsolicited response received on idle HTTP channel").
            if not self._closing:
                self._fail(ProtocolError(f"{len(data)} unsolicited bytes from the API server on an idle connection"))
                if self._pooled:
                    self._pooled = False
                    self._on_done(self, False)  # the pool forgets it now, not when it is next taken
            return
        if self._timer is not None and not self._streaming:
            self._timer.touch()
        try:
            self._parser.feed(data)
        except ProtocolError as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if not self._lost.done():
            self._lost.set_result(None)
        if self._timer is not None:
            self._timer.stop()
        cause = f": {exc}" if exc else ""
        try:
            self._parser.eof()
        except ProtocolError:
            self._fail(ServerDisconnected(f"the API server closed the connection before the answer ended{cause}"))
            return
        if self._busy and not self._ended:
            self._fail(ServerDisconnected(f"the API server closed the connection without an answer{cause}"))

    # --- parser callbacks ----------------------------------------------------------------------------------------

    def _on_head(self, head: ResponseHead) -> None:
        if self._head is None or self._head.done():
            raise ProtocolError("an answer arrived with no request waiting for it")
        self._head.set_result(head)

    def _on_body(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > MAX_BODY and not self._streaming:
            raise ProtocolError(
                f"the API server's answer is larger than {MAX_BODY // 2**20} MiB, more than this client reads "
                "whole: an object list this large means objects far larger than usual (find them with kubectl get)"
            )
        if self._streaming and self._buffered > _STREAM_HIGH_WATER and not self._paused and self._transport:
            self._paused = True
            self._transport.pause_reading()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_end(self, reusable: bool) -> None:
        self._ended, self._reusable = True, reusable
        if self._timer is not None:
            self._timer.pause()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    def _timed_out(self) -> None:
        self._fail(TimeoutError("no data from the API server within the read timeout"))

    # --- used by the client and the pool -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Closed or closing: never to be used again."""
        return self._closing

    def interrupt(self, error: BaseException) -> None:
        """End a pending or the next read with ``error`` and close the connection (a watch's own read timeout)."""
        self._fail(error)

    async def send(self, data: bytes, *, streaming: bool = False, bodiless: bool = False) -> ResponseHead:
        """Write the request ``data`` and wait for the answer's head.

        ``streaming``: the body is read as it comes (``read_chunk``), with back-pressure and without this
        connection's read timeout; otherwise with ``read_body``. ``bodiless``: the answer has no body (``CONNECT``).
        """
        if self._transport is None or self._closing:
            raise ServerDisconnected("the connection to the API server is closed")
        self._busy, self._streaming, self._pooled = True, streaming, False
        self._ended, self._reusable, self._paused, self._error = False, False, False, None
        self._chunks.clear()
        self._buffered = 0
        if bodiless:
            self._parser.next_without_body()
        head: asyncio.Future[ResponseHead] = self._loop.create_future()
        self._head = head
        if self._timer is not None and not streaming:
            self._timer.touch()
        self._transport.write(data)
        return await head

    async def read_body(self) -> bytes:
        """The whole body of the answer whose head ``send`` returned."""
        while not self._ended:
            await self._wait()
        chunks = self._chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        return body

    async def read_chunk(self) -> bytes:
        """The next piece of the body as received (waiting for one); ``b""`` at the end of the body."""
        chunks = self._chunks
        while not chunks:
            if self._ended:
                return b""
            await self._wait()
        data = chunks.popleft()  # one received piece at a time: no copy into a bigger buffer, which could keep RSS up
        self._buffered -= len(data)
        if self._paused and self._buffered <= _STREAM_HIGH_WATER // 2 and self._transport and not self._closing:
            self._paused = False
            self._transport.resume_reading()
        return data

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def tunnel_established(self) -> None:
        """The proxy's answer to ``CONNECT`` was read: what follows is TLS to the API server (``start_tls``).

        A new parser: the proxy's answer may have been HTTP/1.0, which would end the old one's reuse.
        """
        self._busy, self._head = False, None
        self._parser = ResponseParser(self._on_head, self._on_body, self._on_end)

    def release(self) -> None:
        """The exchange is over: back to the pool if the answer was read to its end and allows reuse, else close."""
        reusable = (
            self._ended
            and self._reusable
            and self._error is None
            and not self._closing
            and not self._chunks
            and self._parser.idle  # no byte of a next answer arrived: nothing unasked for is handed on
        )
        self._busy, self._head, self._pooled = False, None, reusable
        if self._timer is not None:
            self._timer.pause()
        if not reusable:
            self.close()
        self._on_done(self, reusable)

    def close(self) -> None:
        """Close the connection; a read still waiting ends with ``ServerDisconnected`` once the transport is gone."""
        if self._transport is not None and not self._closing:
            self._closing = True
            if self._timer is not None:
                self._timer.stop()
            self._transport.close()

    def abort(self) -> None:
        """Close the socket now, without the TLS goodbye; ``connection_lost`` follows on the next loop iterations."""
        self.close()
        if self._transport is not None and not self._lost.done():
            self._transport.abort()

    @property
    def lost(self) -> asyncio.Future[None]:
        """Done once the socket is closed (``connection_lost``)."""
        return self._lost


def _expired(connection: Connection, now: float) -> bool:
    """Whether an idle connection went unused for ``KEEPALIVE_SECONDS`` (closed rather than reused)."""
    return now - connection.idle_since >= KEEPALIVE_SECONDS


class ConnectionPool:
    """Keep-alive connections to one ``Endpoint``, at most ``limit`` at once (0: no cap)."""

    def __init__(self, endpoint: Endpoint, *, limit: int, connect_timeout: float, read_timeout: float | None) -> None:
        self._endpoint = endpoint
        self._limit = limit
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle: list[Connection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()
        self._all: set[Connection] = set()  # open, idle or in use: counted in ``_open``
        self._sockets: set[Connection] = set()  # every connection made whose socket is not closed yet
        self._closed = False

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    @property
    def limit(self) -> int:
        """Most connections open at once (0: no cap)."""
        return self._limit

    @property
    def open_connections(self) -> int:
        """Connections open now, idle or in use."""
        return self._open

    def acquire_idle(self) -> Connection | None:
        """A pooled connection ready for a request, without waiting; ``None`` when there is none."""
        if self._closed:
            raise RuntimeError("this KubeClient is closed: requests need a new one")
        idle = self._idle
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            if not connection.closed and not _expired(connection, now):
                return connection
            connection.close()
            self._forget(connection)
        return None

    async def acquire(self) -> Connection:
        """A connection for one exchange: a pooled one, a new one, or the next one freed.

        ``TimeoutError`` when the wait and the new connection's handshakes take longer than the connect timeout.
        """
        if self._closed:
            raise RuntimeError("this KubeClient is closed: requests need a new one")
        if (connection := self.acquire_idle()) is not None:
            return connection
        async with asyncio.timeout(self._connect_timeout):
            while True:
                if self._limit == 0 or self._open < self._limit:
                    self._open += 1
                    try:
                        return await self._connect()
                    except BaseException:
                        if not self._closed:  # close() has counted every connection out already
                            self._open -= 1
                            self._wake_one()
                        raise
                waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    handed = await waiter
                except BaseException:
                    if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                        # Handed a connection (or a free slot) just as the wait ended: pass it on.
                        if (connection := waiter.result()) is not None:
                            self._released(connection, True)
                        else:
                            self._wake_one()
                    elif waiter in self._waiters:
                        self._waiters.remove(waiter)
                    raise
                if handed is not None:
                    return handed

    async def _connect(self) -> Connection:
        endpoint = self._endpoint
        loop = asyncio.get_running_loop()

        def factory() -> Connection:
            return Connection(read_timeout=self._read_timeout, on_done=self._released)

        if endpoint.proxy is None:
            _, connection = await loop.create_connection(
                factory, endpoint.host, endpoint.port, ssl=endpoint.tls, server_hostname=endpoint.server_hostname
            )
        else:
            connection = await self._through_proxy(factory)
        sockets = self._sockets
        sockets.add(connection)
        connection.lost.add_done_callback(lambda _: sockets.discard(connection))
        if self._closed:  # closed while this connection was being opened: it is not handed out
            connection.abort()
            await asyncio.wait([connection.lost], timeout=CLOSE_GRACE_SECONDS)
            raise RuntimeError("this KubeClient is closed: requests need a new one")
        self._all.add(connection)
        return connection

    async def _through_proxy(self, factory: Callable[[], Connection]) -> Connection:
        endpoint = self._endpoint
        assert endpoint.proxy is not None
        loop = asyncio.get_running_loop()
        host, port = endpoint.proxy
        transport, connection = await loop.create_connection(factory, host, port)
        if endpoint.tls is None:
            return connection  # plain HTTP: absolute-form requests to the proxy, which carry its headers
        try:
            head = await connection.send(
                encode_request(
                    "CONNECT", endpoint.connect_target, endpoint.connect_target, endpoint.proxy_headers, None
                ),
                bodiless=True,
            )
            if not 200 <= head.status < 300:
                raise ProxyError(
                    f"the proxy {host}:{port} refused the tunnel to {endpoint.connect_target}: {head.status} "
                    f"{head.reason} (check HTTPS_PROXY/NO_PROXY or the kubeconfig's proxy-url)"
                )
            connection.tunnel_established()
            tls_transport = await loop.start_tls(
                transport, connection, endpoint.tls, server_hostname=endpoint.server_hostname or endpoint.host
            )
        except BaseException:
            transport.close()
            raise
        connection.connection_made(cast(asyncio.BaseTransport, tls_transport))
        return connection

    def _released(self, connection: Connection, reusable: bool) -> None:
        if not reusable or self._closed:
            connection.close()  # already closing when not reusable; a reusable one given back after close() too
            self._forget(connection)
            self._wake_one()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        now = asyncio.get_running_loop().time()
        connection.idle_since = now
        idle = self._idle
        idle.append(connection)
        while _expired(idle[0], now):  # the oldest first: close what a burst left unused
            stale = idle.pop(0)
            stale.close()
            self._forget(stale)

    def _forget(self, connection: Connection) -> None:
        if connection in self._all:
            self._all.discard(connection)
            self._open -= 1

    def _wake_one(self) -> None:
        """A connection slot came free: let the first waiter open a connection."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close every connection, idle or in use, and refuse further requests; return once their sockets are closed.

        Closed gracefully first (TLS close_notify), then, after ``CLOSE_GRACE_SECONDS`` without the server's answer,
        aborted. Connections that left the pool closing (a cancelled request, a watch left early) are waited for
        too; one still being opened is closed when its handshake ends (``_connect``).
        """
        self._closed = True
        self._all.clear()
        self._idle.clear()
        self._open = 0
        connections = list(self._sockets)
        for end in (Connection.close, Connection.abort):
            for connection in connections:
                end(connection)
            open_ = [connection.lost for connection in connections if not connection.lost.done()]
            if not open_:
                return
            await asyncio.wait(open_, timeout=CLOSE_GRACE_SECONDS)
