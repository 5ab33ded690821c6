"""The connections ``KubeClient`` makes itself: TLS and pool size as kubernetes_asyncio's ``RESTClientObject``.

``kube.client`` goes through neither ``ApiClient`` (issue 19, idle RSS) nor aiohttp's client session (issue 19, CPU
per request) and builds its TLS context the way the library's ``rest.py`` does. Checked two ways: the settings
against the library's own ``RESTClientObject`` for the same ``Configuration`` (so a library upgrade that changes them
fails here), and real handshakes against a local HTTPS server that wants a client certificate (CA, client
certificate and key, ``verify_ssl``, ``tls_server_name``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client.rest import RESTClientObject

from tests.support.tls import issue_certificate
from webserver_operator.core.settings import ClientSettings
from webserver_operator.kube.client import KubeClient, _endpoint, _tls_context
from webserver_operator.kube.errors import TransportError
from webserver_operator.kube.library import Configuration
from webserver_operator.kube.retry import RetryPolicy
from webserver_operator.kube.transport import connection as connection_module

SETTINGS = ClientSettings(connect_timeout=2.0, read_timeout=2.0)
NO_RETRY = RetryPolicy(max_retries=0)


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """``ca.crt``, and ``tls.crt``/``tls.key`` for 127.0.0.1 signed by it (used as server and client certificate)."""
    issue_certificate(tmp_path)
    return tmp_path


def configurations(pki: Path) -> dict[str, Configuration]:
    def make(**fields: object) -> Configuration:
        configuration = Configuration(host="https://127.0.0.1:6443")
        for name, value in fields.items():
            setattr(configuration, name, value)
        return configuration

    return {
        "defaults": make(),
        "ca": make(ssl_ca_cert=str(pki / "ca.crt")),
        "client certificate": make(
            ssl_ca_cert=str(pki / "ca.crt"), cert_file=str(pki / "tls.crt"), key_file=str(pki / "tls.key")
        ),
        "no verification": make(verify_ssl=False),
        "not strict": make(ssl_ca_cert=str(pki / "ca.crt"), disable_strict_ssl_verification=True),
        "server name": make(ssl_ca_cert=str(pki / "ca.crt"), tls_server_name="api.example"),
    }


def settings_of(context: ssl.SSLContext) -> tuple[object, ...]:
    ca_names = sorted(str(cert.get("subject")) for cert in context.get_ca_certs())
    return context.verify_mode, context.check_hostname, context.verify_flags, context.protocol, ca_names


async def test_the_tls_context_is_the_librarys(pki: Path) -> None:
    for name, configuration in configurations(pki).items():
        library = RESTClientObject(configuration)
        try:
            library_connector = library.pool_manager.connector
            assert library_connector is not None
            assert settings_of(_tls_context(configuration)) == settings_of(library_connector._ssl), name  # type: ignore[attr-defined]
            endpoint = _endpoint(configuration)
            assert endpoint.tls is not None
            assert settings_of(endpoint.tls) == settings_of(library_connector._ssl), name  # type: ignore[attr-defined]
            assert endpoint.server_hostname == (configuration.tls_server_name or None), name
        finally:
            await library.close()


async def test_each_client_gets_its_pool_size() -> None:
    configuration = Configuration(host="https://127.0.0.1:6443")
    for pool_size in (0, 1, 100):
        client = await KubeClient.create(configuration, settings=SETTINGS, pool_size=pool_size)
        try:
            assert client._pool.limit == pool_size
        finally:
            await client.close()


@pytest.fixture
async def mutual_tls_server(pki: Path) -> AsyncIterator[int]:
    """An HTTPS server on 127.0.0.1 that only answers clients presenting a certificate signed by the test CA."""

    async def handle(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        return web.json_response({"kind": "Status", "client": bool(peer)})

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "tls.crt"), str(pki / "tls.key"))
    context.verify_mode = ssl.CERT_REQUIRED

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(1.0)
        return await handle(request)

    app = web.Application()
    app.router.add_get("/version", handle)
    app.router.add_get("/slow", slow)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=context)
    try:
        assert server.port is not None
        yield server.port
    finally:
        await server.close()


async def get_version(configuration: Configuration) -> dict[str, object]:
    client = await KubeClient.create(configuration, settings=SETTINGS, retry=NO_RETRY)
    try:
        return await client.request("GET", "/version")
    finally:
        await client.close()


def client_configuration(pki: Path, port: int, *, host: str = "127.0.0.1", **fields: object) -> Configuration:
    configuration = Configuration(host=f"https://{host}:{port}")
    configuration.ssl_ca_cert = str(pki / "ca.crt")
    configuration.cert_file = str(pki / "tls.crt")
    configuration.key_file = str(pki / "tls.key")
    for name, value in fields.items():
        setattr(configuration, name, value)
    return configuration


async def test_ca_and_client_certificate_from_the_configuration(pki: Path, mutual_tls_server: int) -> None:
    assert await get_version(client_configuration(pki, mutual_tls_server)) == {"kind": "Status", "client": True}


async def test_without_the_client_certificate_the_server_refuses(pki: Path, mutual_tls_server: int) -> None:
    configuration = client_configuration(pki, mutual_tls_server, cert_file=None, key_file=None)
    with pytest.raises(TransportError):
        await get_version(configuration)


async def test_without_the_ca_the_server_is_not_trusted(pki: Path, mutual_tls_server: int) -> None:
    configuration = client_configuration(pki, mutual_tls_server, ssl_ca_cert=None)
    with pytest.raises(TransportError, match="certificate verification failed") as raised:
        await get_version(configuration)
    assert not raised.value.retriable


async def test_verify_ssl_false_skips_the_server_check(pki: Path, mutual_tls_server: int) -> None:
    configuration = client_configuration(pki, mutual_tls_server, ssl_ca_cert=None, verify_ssl=False)
    assert await get_version(configuration) == {"kind": "Status", "client": True}


async def test_tls_server_name_is_the_name_checked(pki: Path, mutual_tls_server: int) -> None:
    """The certificate names 127.0.0.1 only: reached as localhost it passes when tls-server-name says 127.0.0.1."""
    wrong = client_configuration(pki, mutual_tls_server, tls_server_name="api.example")
    with pytest.raises(TransportError, match="certificate verification failed"):
        await get_version(wrong)
    as_localhost = client_configuration(pki, mutual_tls_server, host="localhost", tls_server_name="127.0.0.1")
    assert await get_version(as_localhost) == {"kind": "Status", "client": True}


async def test_closing_the_client_closes_its_connections(pki: Path, mutual_tls_server: int) -> None:
    client = await KubeClient.create(client_configuration(pki, mutual_tls_server), settings=SETTINGS, retry=NO_RETRY)
    assert await client.request("GET", "/version") == {"kind": "Status", "client": True}
    assert client._pool.open_connections == 1, "the connection is kept for the next request"
    await client.close()
    assert client._pool.open_connections == 0
    with pytest.raises(RuntimeError, match="KubeClient is closed"):
        await client.request("GET", "/version")


@pytest.mark.parametrize("grace", ["answered", "aborted"])
async def test_closing_the_client_closes_the_sockets_of_its_tls_connections(
    pki: Path, mutual_tls_server: int, grace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closed means the socket is closed when ``close`` returns, not a TLS goodbye still waiting for the server's.

    A TLS close sends close_notify and closes the socket only once the server answered: a loop stopped right after
    ``close`` (an operator stopping at once, a test's loop) left the socket open, and Python warned about an unclosed
    transport when it was collected, in whichever test ran then. "aborted": no time is left for the server's answer,
    so every connection is aborted.
    """
    if grace == "aborted":
        monkeypatch.setattr(connection_module, "CLOSE_GRACE_SECONDS", 0.0)
    client = await KubeClient.create(client_configuration(pki, mutual_tls_server), settings=SETTINGS, retry=NO_RETRY)
    await asyncio.gather(*(client.request("GET", "/version") for _ in range(3)))
    sockets = [connection._transport.get_extra_info("socket") for connection in client._pool._all]  # type: ignore[union-attr]
    assert len(sockets) == 3 and all(sock.fileno() >= 0 for sock in sockets)
    await client.close()
    assert [sock.fileno() for sock in sockets] == [-1, -1, -1], "every socket is closed once close() returns"


async def test_a_connection_closed_before_the_client_is_closed_has_its_socket_closed_too(
    pki: Path, mutual_tls_server: int
) -> None:
    """A request cancelled mid-answer closes its connection at once; the client's close still waits for its socket.

    That connection has left the pool (it can never be reused), yet its TLS goodbye may still be under way when the
    operator stops (a watch or a request cancelled on the way out).
    """
    client = await KubeClient.create(client_configuration(pki, mutual_tls_server), settings=SETTINGS, retry=NO_RETRY)
    request = asyncio.create_task(client.request("GET", "/slow"))
    for _ in range(200):  # until the request has its connection (TCP and TLS handshakes done)
        if client._pool._all:
            break
        await asyncio.sleep(0.01)
    (connection,) = client._pool._all
    sock = connection._transport.get_extra_info("socket")  # type: ignore[union-attr]
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    await client.close()
    assert sock.fileno() == -1, "the socket is closed once close() returns"


async def test_a_connection_opened_while_the_client_closes_is_closed_too(
    pki: Path, mutual_tls_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that was still opening its connection when ``close`` was called gets no connection left open."""
    made: list[connection_module.Connection] = []

    class Recorded(connection_module.Connection):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            made.append(self)
            super().connection_made(transport)

    monkeypatch.setattr(connection_module, "Connection", Recorded)
    client = await KubeClient.create(client_configuration(pki, mutual_tls_server), settings=SETTINGS, retry=NO_RETRY)
    request = asyncio.create_task(client.request("GET", "/version"))
    await asyncio.sleep(0)  # the request is opening its connection (TCP, then TLS)
    await client.close()
    with pytest.raises(RuntimeError, match="KubeClient is closed"):
        await request
    assert len(made) == 1, "the TLS handshake ended after close()"
    assert made[0].lost.done(), "the connection that came after close() is closed, its socket too"
    assert client._pool.open_connections == 0
