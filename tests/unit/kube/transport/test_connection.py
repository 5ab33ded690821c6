"""``kube.transport.connection`` through ``KubeClient``: reuse, limits, servers that close, proxies and slow watch
readers.

Real sockets on 127.0.0.1: an aiohttp server answering as the API server does (plain and TLS), and a small HTTP
proxy (``CONNECT`` tunnels and absolute-form requests), so what is checked is what the server and the proxy saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.tls import issue_certificate
from tests.support.waiting import eventually
from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.errors import ConfigurationError, TransportError
from webserver_operator.kube.library import Configuration
from webserver_operator.kube.retry import RetryPolicy
from webserver_operator.kube.transport import connection as connection_module
from webserver_operator.kube.transport.connection import Endpoint

SETTINGS = ClientSettings(connect_timeout=2.0, read_timeout=2.0)
NO_RETRY = RetryPolicy(max_retries=0)
WATCH_QUERY = {"timeoutSeconds": 30}


class Server:
    """An aiohttp server that counts the connections it accepted and remembers the requests' paths."""

    def __init__(self) -> None:
        self.peers: set[object] = set()
        self.paths: list[str] = []
        self.close_after_answer = False
        self.stream_bytes = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        self.paths.append(request.path_qs)
        if request.query.get("watch") == "true":
            response = web.StreamResponse()
            await response.prepare(request)
            line = b'{"type":"ADDED","object":{"data":"' + b"x" * 60000 + b'"}}\n'
            for _ in range(self.stream_bytes // len(line)):
                await response.write(line)
            await response.write_eof()
            return response
        headers = {"Connection": "close"} if self.close_after_answer else None
        return web.json_response({"path": request.path}, headers=headers)


@contextlib.asynccontextmanager
async def serving(server: Server, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server(ssl=tls)
    try:
        assert test_server.port is not None
        yield test_server.port
    finally:
        await test_server.close()


async def client_for(url: str, **options: object) -> KubeClient:
    return await KubeClient.create(Configuration(host=url), settings=SETTINGS, retry=NO_RETRY, **options)  # type: ignore[arg-type]


async def test_connections_are_reused_and_a_closed_one_is_replaced() -> None:
    server = Server()
    async with serving(server) as port:
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            for name in ("a", "b", "c"):
                assert await client.request("GET", f"/api/v1/namespaces/d/services/{name}") == {
                    "path": f"/api/v1/namespaces/d/services/{name}"
                }
            assert len(server.peers) == 1, "one keep-alive connection carried all three"
            server.close_after_answer = True
            await client.request("GET", "/api/v1/namespaces/d/services/d")
            await client.request("GET", "/api/v1/namespaces/d/services/e")
            assert len(server.peers) == 2, "an answer with Connection: close is its connection's last"
            assert client._pool.open_connections == 0


async def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    server = Server()
    async with serving(server) as port:
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            await client.request("GET", "/version")
            (idle,) = client._pool._idle
            assert idle._transport is not None
            idle._transport.abort()  # as if the server had gone away: the close arrives before the next request
            await asyncio.sleep(0.05)
            assert await client.request("GET", "/version") == {"path": "/version"}


async def test_a_request_cancelled_while_waiting_for_a_connection_gives_up_nothing() -> None:
    server = Server()
    async with serving(server) as port:
        client = await client_for(f"http://127.0.0.1:{port}", pool_size=1)
        async with client:
            pool = client._pool
            held = await pool.acquire()
            waiting = asyncio.create_task(pool.acquire())
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            held.release()  # not read to an end: closed, and its slot is free again
            assert await client.request("GET", "/version") == {"path": "/version"}
            assert pool.open_connections == 1


def test_paths_are_percent_encoded_and_the_query_kept() -> None:
    endpoint = Endpoint.from_url("https://10.0.0.1:6443", tls=ssl.create_default_context())
    assert endpoint.target("/api?x=1") == "/api?x=1"
    assert (endpoint.host, endpoint.port, endpoint.authority) == ("10.0.0.1", 6443, "10.0.0.1:6443")
    assert Endpoint.from_url("https://api.example", tls=ssl.create_default_context()).port == 443


async def test_a_path_with_spaces_reaches_the_server_encoded() -> None:
    server = Server()
    async with serving(server) as port:
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            await client.request("GET", "/api/v1/namespaces/d/configmaps/a b", query={"labelSelector": "a=b,c"})
    assert server.paths == ["/api/v1/namespaces/d/configmaps/a%20b?labelSelector=a%3Db%2Cc"]


@pytest.mark.parametrize(
    ("url", "proxy", "error"),
    [
        ("ftp://api.example", None, "not http"),
        ("https://api.example", "https://proxy.example:3128", "use an http:// proxy URL"),
        ("https://api.example", "socks5://proxy.example:1080", "use an http:// proxy URL"),
    ],
)
async def test_unusable_urls_are_refused_with_what_to_change(url: str, proxy: str | None, error: str) -> None:
    configuration = Configuration(host=url)
    configuration.proxy = proxy
    with pytest.raises(ConfigurationError, match=error):
        await KubeClient.create(configuration, settings=SETTINGS)


async def test_a_slow_watch_reader_stops_the_connection_reading_and_loses_nothing() -> None:
    server = Server()
    server.stream_bytes = 24 * 2**20
    async with serving(server) as port:
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client, client.watch("/api/v1/services", query=WATCH_QUERY) as events:
            first = await anext(events)
            (connection,) = client._pool._all
            # The server keeps writing; the connection stops reading at the high-water mark. How soon depends on how
            # fast the server writes, which a busy machine slows down (a fixed half second failed there once).
            await eventually(lambda: connection._paused, within=20, what="the connection stops reading")
            assert connection._buffered < 8 * 2**20, "buffered at most the high-water mark and one read"
            count = 1 + sum([1 async for _ in events])
    assert first["type"] == "ADDED"
    assert count == server.stream_bytes // 60036


class Proxy:
    """An HTTP proxy: ``CONNECT host:port`` tunnels, absolute-form requests forwarded; remembers what it was asked."""

    def __init__(self, *, refuse: bool = False, version: str = "HTTP/1.1") -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.refuse = refuse
        self.version = version
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            fields = dict(line.split(": ", 1) for line in head[1:] if line)
            self.requests.append((head[0], fields))
            method, target, _ = head[0].split(" ")
            if self.refuse:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
            host, port = (target if method == "CONNECT" else target.split("/")[2]).rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            if method == "CONNECT":
                writer.write(f"{self.version} 200 Connection established\r\n\r\n".encode())
            else:
                up_writer.write("\r\n".join(head).encode("latin-1") + b"\r\n\r\n")
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


@pytest.fixture(params=["HTTP/1.1", "HTTP/1.0"])
async def proxy(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Proxy, int]]:
    """A proxy answering in HTTP/1.1, and one answering in HTTP/1.0 (tinyproxy's answer to ``CONNECT``)."""
    running = Proxy(version=request.param)
    port = await running.start()
    try:
        yield running, port
    finally:
        await running.close()


async def test_https_goes_through_a_connect_tunnel_with_the_proxy_credentials(
    proxy: tuple[Proxy, int], tmp_path: Path
) -> None:
    issue_certificate(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    server = Server()
    running, proxy_port = proxy
    async with serving(server, tls=tls) as port:
        configuration = Configuration(host=f"https://127.0.0.1:{port}")
        configuration.ssl_ca_cert = str(tmp_path / "ca.crt")
        configuration.proxy = f"http://user:p%40ss@127.0.0.1:{proxy_port}"
        client = await KubeClient.create(configuration, settings=SETTINGS, retry=NO_RETRY)
        async with client:
            assert await client.request("GET", "/version") == {"path": "/version"}
            assert await client.request("GET", "/api") == {"path": "/api"}
    ((line, fields),) = running.requests  # one tunnel carried both requests
    assert line == f"CONNECT 127.0.0.1:{port} HTTP/1.1"
    assert fields["Proxy-Authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss
    assert server.paths == ["/version", "/api"]


async def test_plain_http_goes_to_the_proxy_in_absolute_form(proxy: tuple[Proxy, int]) -> None:
    server = Server()
    running, proxy_port = proxy
    async with serving(server) as port:
        configuration = Configuration(host=f"http://127.0.0.1:{port}")
        configuration.proxy = f"http://127.0.0.1:{proxy_port}"
        configuration.proxy_headers = {"Proxy-Authorization": "Basic abc"}
        client = await KubeClient.create(configuration, settings=SETTINGS, retry=NO_RETRY)
        async with client:
            assert await client.request("GET", "/version", query={"a": "1"}) == {"path": "/version"}
    ((line, fields),) = running.requests
    assert line == f"GET http://127.0.0.1:{port}/version?a=1 HTTP/1.1"
    assert fields["Proxy-Authorization"] == "Basic abc"


async def test_a_proxy_that_refuses_the_tunnel_is_a_clear_error() -> None:
    refusing = Proxy(refuse=True)
    proxy_port = await refusing.start()
    try:
        configuration = Configuration(host="https://127.0.0.1:6443")
        configuration.proxy = f"http://127.0.0.1:{proxy_port}"
        client = await KubeClient.create(configuration, settings=SETTINGS, retry=RetryPolicy(max_retries=3))
        async with client:
            with pytest.raises(TransportError, match=r"refused the tunnel to 127\.0\.0\.1:6443: 407") as raised:
                await client.request("GET", "/version")
        assert not raised.value.retriable
        assert len(refusing.requests) == 1, "not retried"
    finally:
        await refusing.close()


async def test_connections_unused_for_the_keepalive_time_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst opens many connections; those the quiet traffic after it does not need are closed, oldest first."""
    server = Server()
    async with serving(server) as port:
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            await asyncio.gather(*(client.request("GET", f"/version/{i}") for i in range(5)))
            pool = client._pool
            assert pool.open_connections == 5
            monkeypatch.setattr(connection_module, "KEEPALIVE_SECONDS", 0.5)
            await asyncio.sleep(0.3)
            await client.request("GET", "/version")  # the newest connection, in use again
            assert pool.open_connections == 5
            await asyncio.sleep(0.3)
            await client.request("GET", "/version")  # given back, it finds the four others unused for too long
            assert pool.open_connections == 1
    assert len(server.peers) == 5, "the one kept was reused"


@contextlib.asynccontextmanager
async def unanswering(requests: int, *, how: str) -> AsyncIterator[int]:
    """A plain HTTP server that leaves its first ``requests`` requests without an answer, then answers ``{}``.

    ``how``: "closed" closes the connection after reading the request (an API server going away mid-request),
    "silent" keeps it open and says nothing (a frozen API server, until the client's read timeout).
    """
    left = requests
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal left
        writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while await reader.readuntil(b"\r\n\r\n"):
                if left > 0:
                    left -= 1
                    if how == "closed":
                        break
                    await reader.read()  # silent until the client gives up and closes
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()


@pytest.mark.parametrize("how", ["closed", "silent"])
async def test_a_request_left_without_an_answer_gives_its_connection_slot_back(how: str) -> None:
    """A request the server never answered (connection closed, or the read timeout) frees its place in the pool.

    Two of them with a pool of one: the next request must still get a connection, not wait for one that never comes
    back (which starved the two-connection Lease client after two renewals got no answer).
    """
    async with unanswering(2, how=how) as port:
        settings = ClientSettings(connect_timeout=1.0, read_timeout=0.3)
        configuration = Configuration(host=f"http://127.0.0.1:{port}")
        client = await KubeClient.create(configuration, settings=settings, retry=NO_RETRY, pool_size=1)
        async with client:
            for _ in range(2):
                with pytest.raises(TransportError, match=r"closed the connection|timed out"):
                    await client.request("GET", "/api/v1/namespaces")
            assert await client.request("GET", "/api/v1/namespaces") == {}, "the third request is answered"
            assert client._pool.open_connections == 1


async def test_no_free_connection_within_the_connect_timeout_says_so() -> None:
    server = Server()
    async with serving(server) as port:
        settings = ClientSettings(connect_timeout=0.2, read_timeout=2.0)
        configuration = Configuration(host=f"http://127.0.0.1:{port}")
        client = await KubeClient.create(configuration, settings=settings, retry=NO_RETRY, pool_size=1)
        async with client:
            held = await client._pool.acquire()
            with pytest.raises(TransportError) as raised:
                await client.request("GET", "/version")
            assert "timed out (no connection to the API server within the connect timeout; connect timeout 0.2s" in (
                str(raised.value)
            )
            held.release()


Respond = Callable[[int, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def scripted(respond: Respond) -> AsyncIterator[tuple[int, list[int]]]:
    """A plain HTTP server whose answers are written by ``respond(request number, writer)``, byte for byte.

    Yields its port and the number of requests read on each connection accepted so far.
    """
    served: list[int] = []
    writers: list[asyncio.StreamWriter] = []
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        writers.append(writer)
        served.append(0)
        index = len(served) - 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while await reader.readuntil(b"\r\n\r\n"):
                count += 1
                served[index] += 1
                await respond(count, writer)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], served
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()


def json_answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)


async def test_bytes_on_an_idle_connection_close_it_and_never_become_the_next_answer() -> None:
    """A server (or proxy) that sends bytes nobody asked for: Go closes such a connection, and so does the pool.

    The bytes here are the start of an answer whose ``X-Pad`` field would swallow the status line of the real one:
    kept in the parser, they made the next request's answer a head the server never sent for it.
    """

    async def respond(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(json_answer(b'{"answer":%d}' % number))
        if number == 1:
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 200 OK\r\nX-Evil: yes\r\nContent-Length: 3\r\nX-Pad:")

    async with scripted(respond) as (port, served):
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            assert await client.request("GET", "/version") == {"answer": 1}
            await asyncio.sleep(0.2)
            assert client._pool.open_connections == 0, "the connection that got unsolicited bytes was closed"
            assert await client.request("GET", "/version") == {"answer": 2}
    assert served == [1, 1], "the second request went on a new connection"


async def test_bytes_after_a_complete_answer_make_its_connection_unusable() -> None:
    """Bytes that arrived with the answer, after its end, are not a next answer either."""

    async def respond(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(json_answer(b'{"answer":%d}' % number) + (b"HTTP/1.1 200 OK\r\nX-Pad:" if number == 1 else b""))

    async with scripted(respond) as (port, served):
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            assert await client.request("GET", "/version") == {"answer": 1}
            assert await client.request("GET", "/version") == {"answer": 2}
    assert served == [1, 1]


@pytest.mark.parametrize("framing", ["length", "chunked", "until-close"])
async def test_a_body_larger_than_the_limit_fails_the_request(framing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bodies are read whole: one larger than ``MAX_BODY`` fails as a transport error instead of filling memory."""
    monkeypatch.setattr(connection_module, "MAX_BODY", 10_000)
    body = b"x" * 20_000

    async def respond(_: int, writer: asyncio.StreamWriter) -> None:
        if framing == "length":
            writer.write(json_answer(body))
        elif framing == "chunked":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(20):
                writer.write(b"3e8\r\n" + b"x" * 1000 + b"\r\n")
            writer.write(b"0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + body)
            writer.close()

    async with scripted(respond) as (port, _):
        client = await client_for(f"http://127.0.0.1:{port}")
        async with client:
            with pytest.raises(TransportError, match="larger than"):
                await client.request("GET", "/api/v1/pods")
            assert client._pool.open_connections == 0


async def test_an_answer_trickling_under_the_read_timeout_ends_at_the_request_timeout() -> None:
    """One byte every 0.1 s never trips a 0.5 s read timeout; the total bound of an attempt ends it."""

    async def respond(_: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(100):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.1)

    async with scripted(respond) as (port, _):
        settings = ClientSettings(connect_timeout=0.2, read_timeout=0.5)
        configuration = Configuration(host=f"http://127.0.0.1:{port}")
        client = await KubeClient.create(configuration, settings=settings, retry=NO_RETRY, request_timeout=0.3)
        async with client:
            started = asyncio.get_running_loop().time()
            with pytest.raises(TransportError, match=r"within the request timeout \(0\.7s\)"):
                await client.request("GET", "/api/v1/pods")
            elapsed = asyncio.get_running_loop().time() - started
            assert 0.6 < elapsed < 2.0, "at least connect + read timeout, and not the whole trickle"
            assert client._pool.open_connections == 0


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("https://api.example", "api.example:443"),
        ("https://api.example:6443", "api.example:6443"),
        ("https://[fd00::1]", "[fd00::1]:443"),
    ],
)
async def test_connect_names_host_and_port_even_when_the_url_has_no_port(url: str, target: str) -> None:
    """RFC 9112 3.2.3: the target of ``CONNECT`` is ``host:port``; a URL without a port means the scheme's."""
    refusing = Proxy(refuse=True)
    proxy_port = await refusing.start()
    try:
        configuration = Configuration(host=url)
        configuration.proxy = f"http://127.0.0.1:{proxy_port}"
        client = await KubeClient.create(configuration, settings=SETTINGS, retry=NO_RETRY)
        async with client:
            with pytest.raises(TransportError, match=f"refused the tunnel to {re.escape(target)}"):
                await client.request("GET", "/version")
    finally:
        await refusing.close()
    ((line, fields),) = refusing.requests
    assert line == f"CONNECT {target} HTTP/1.1"
    assert fields["Host"] == target
