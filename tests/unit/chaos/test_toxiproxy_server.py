"""Issue 21 on the real toxiproxy-server (v2.12.0, built by chaos/tools.sh): why a heal must never remove a toxic.

A watch stream is a server that never stops sending. When its client stops reading (a replica draining after
SIGTERM, or frozen), toxiproxy's latency toxic holds a chunk it cannot deliver, and removing the toxic waits for it
under the proxy's toxic-collection lock; once the client's connection is gone, the link's writer needs that lock to
leave, and the two wait for each other for good. The harness's heal (delete the proxy, create it again) never takes
that lock: it finishes at once and the next connection flows without the latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chaos.toxiproxy import Toxiproxy, ToxiproxyError
from chaos.toxiserver import ToxiproxyServer

pytestmark = [pytest.mark.tools, pytest.mark.timeout(120)]

CHUNK = b"x" * 65536


async def _flood(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An endless watch stream: write until the connection breaks."""
    with contextlib.suppress(OSError):
        while True:
            writer.write(CHUNK)
            await writer.drain()
    writer.close()


@pytest.fixture
async def stalled(tmp_path: Path) -> AsyncIterator[tuple[Toxiproxy, list[asyncio.StreamWriter], int]]:
    """A proxy with 500 ms latency in front of an endless stream, and four clients that stopped reading.

    The toxic goes on before the clients connect: adding it to links whose client does not read hangs as well
    (``chainAddToxic`` interrupts every link), which the harness avoids by only adding toxics to live replicas.
    """
    upstream = await asyncio.start_server(_flood, "127.0.0.1", 0)
    server = await ToxiproxyServer.start(log_path=tmp_path / "toxiproxy.log")
    clients: list[asyncio.StreamWriter] = []
    try:
        toxi = server.client
        toxi.call_timeout = 5
        port = await toxi.add_proxy("op-b", f"127.0.0.1:{upstream.sockets[0].getsockname()[1]}")
        await toxi.latency("op-b", ms=500)
        for _ in range(4):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            clients.append(writer)
            await reader.readexactly(len(CHUNK))  # the stream flows, late
        await asyncio.sleep(3)  # the clients read nothing more: socket buffers and the toxic's buffer fill up
        yield toxi, clients, port
    finally:
        for writer in clients:
            writer.transport.abort()
        await server.close()
        upstream.close()
        await upstream.wait_closed()


async def _drop(clients: list[asyncio.StreamWriter]) -> None:
    for writer in clients:
        writer.transport.abort()
    await asyncio.sleep(0.5)


async def test_removing_the_latency_toxic_hangs_for_good_once_its_stalled_clients_are_gone(
    stalled: tuple[Toxiproxy, list[asyncio.StreamWriter], int],
) -> None:
    toxi, clients, _ = stalled
    removal = asyncio.create_task(toxi._call("DELETE", "/proxies/op-b/toxics/latency-downstream", limit=60))
    await asyncio.sleep(1)
    await _drop(clients)  # the replica that stopped reading exits
    with pytest.raises(ToxiproxyError, match=r"no answer within 5s|HTTP 503"):
        await toxi._call("GET", "/proxies/op-b/toxics")  # needs the lock the removal holds
    with pytest.raises(ToxiproxyError, match=r"no answer within 60s|HTTP 503"):
        await removal  # toxiproxy's own handler gives up after 25s; the removal goes on inside, for good
    with pytest.raises(ToxiproxyError, match=r"no answer within 5s|HTTP 503"):
        await toxi._call("GET", "/proxies/op-b/toxics")


async def test_a_heal_recreates_the_proxy_at_once_and_the_next_connection_has_no_latency(
    stalled: tuple[Toxiproxy, list[asyncio.StreamWriter], int],
) -> None:
    toxi, clients, port = stalled
    await _drop(clients)
    started = time.monotonic()
    await toxi.heal("op-b")
    assert time.monotonic() - started < 3
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    await reader.readexactly(len(CHUNK))
    assert time.monotonic() - started < 0.4, "the new connection still goes through a 500 ms latency"
    writer.close()
