"""The admin client: kubeconfig endpoints (inline or file credentials, loopback only when asked) and errors."""

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from harness.kubeapi import ApiError, Endpoint, KubeApi
from tests.support.tls import issue_certificate


def kubeconfig(path: Path, server: str, **user: str) -> Path:
    config = {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": server, "certificate-authority-data": _b64("CA PEM")}}],
        "users": [{"name": "u", "user": user}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_inline_credentials_become_files_and_a_token_is_kept(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443/", token="t0k")
    endpoint = Endpoint.from_kubeconfig(path)
    assert endpoint.server == "https://127.0.0.1:6443"
    assert Path(endpoint.require_ca_file()).read_text() == "CA PEM"
    assert (endpoint.token, endpoint.cert_file, endpoint.key_file) == ("t0k", None, None)


def test_loopback_only_refuses_a_remote_server_with_the_reason(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", "https://10.1.2.3:6443", token="t")
    with pytest.raises(ValueError, match=r"points at https://10\.1\.2\.3:6443: local clusters only"):
        Endpoint.from_kubeconfig(path, loopback_only="local clusters only")


def test_a_kubeconfig_without_a_ca_says_which_one_to_use() -> None:
    with pytest.raises(ValueError, match="names no certificate-authority"):
        Endpoint(server="https://127.0.0.1:6443", ca_file=None).require_ca_file()


async def test_errors_carry_the_status_and_the_servers_message() -> None:
    async def forbidden(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "message": "webservers is forbidden"}, status=403)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text="# HELP x\nx 1\n")

    app = web.Application()
    app.router.add_get("/forbidden", forbidden)
    app.router.add_get("/metrics", metrics)
    async with TestServer(app, host="127.0.0.1") as server:
        endpoint = Endpoint(server=str(server.make_url("")).rstrip("/"), ca_file=None)
        async with KubeApi(endpoint) as api:
            with pytest.raises(ApiError, match="GET /forbidden: HTTP 403: webservers is forbidden") as err:
                await api.get("/forbidden")
            assert err.value.status == 403
            assert await api.text("/metrics") == "# HELP x\nx 1\n"
            assert await api.get_or_none("/missing") is None
        port = server.port
    async with KubeApi(Endpoint(server=f"http://127.0.0.1:{port}", ca_file=None), timeout=2) as api:
        with pytest.raises(ApiError) as err:
            await api.get("/anything")
        assert err.value.status == 0


async def test_leaving_the_client_closes_every_socket_also_of_watches_left_early(tmp_path: Path) -> None:
    """Watches cancelled mid-stream close their TLS connections, and the client's exit waits for those sockets too.

    aiohttp's session close waits only for the connections still in its pool, not for those a cancelled response
    closed (aio-libs/aiohttp#1925): the chaos run's loop ended before their TLS goodbye, and Python warned about
    unclosed transports in whichever later test collected them.
    """
    issue_certificate(tmp_path)

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(600):
            await response.write(b'{"type":"BOOKMARK","object":{}}\n')
            await asyncio.sleep(0.05)
        return response

    app = web.Application()
    app.router.add_get("/watch", stream)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=context)
    try:
        endpoint = Endpoint(server=f"https://127.0.0.1:{server.port}", ca_file=str(tmp_path / "ca.crt"))
        async with KubeApi(endpoint) as api:
            watches = [asyncio.create_task(_drain(api.watch("/watch", resource_version="1"))) for _ in range(3)]
            for _ in range(200):  # until every watch has its connection, and each its socket
                acquired = list(api.session.connector._acquired)  # type: ignore[union-attr]
                if len(acquired) == 3 and all(proto.transport is not None for proto in acquired):
                    break
                await asyncio.sleep(0.01)
            sockets = [proto.transport.get_extra_info("socket") for proto in acquired]
            assert len(sockets) == 3
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
        assert [sock.fileno() for sock in sockets] == [-1, -1, -1], "every socket is closed once the client is left"
    finally:
        await server.close()


async def _drain(events: AsyncIterator[object]) -> None:
    async for _ in events:
        pass
