"""Bounded connections (manager.metrics.connections): who is evicted at the limit, who times out, and what one costs.

The table is pure (an injected clock); the site is tested end to end on 127.0.0.1 with short timeouts. The flood
from another process, with the memory it costs, is tests/unit/manager/test_connection_flood.py.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.tls import issue_certificate
from webserver_operator.manager.metrics.certs import server_ssl_context
from webserver_operator.manager.metrics.connections import (
    TLS_READ_BUFFER,
    ConnectionLimits,
    ConnectionTable,
    GatedSite,
    _LeanTLS,
    table_middleware,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_at_the_limit_the_connection_idle_longest_makes_room() -> None:
    clock = Clock()
    table = ConnectionTable(ConnectionLimits(max_connections=3), clock=clock)
    for key in ("a", "b", "c"):
        assert table.admit(key) == (True, None)
        clock.now += 1
    table.request_started("a")  # a is in a request: never evicted
    assert table.admit("d") == (True, "b")
    table.request_started("c")
    table.request_started("d")
    assert table.admit("e") == (False, None)  # everyone is in a request: the newcomer is refused
    assert len(table) == 3


def test_a_finished_request_makes_a_connection_idle_again_from_then() -> None:
    clock = Clock()
    table = ConnectionTable(ConnectionLimits(max_connections=2), clock=clock)
    table.admit("old")
    clock.now += 1
    table.admit("new")
    table.request_started("old")
    clock.now += 1
    table.request_finished("old")  # old was just used: new is now the one idle the longest
    assert table.admit("third") == (True, "new")


def test_connections_time_out_waiting_for_their_first_request_and_between_requests() -> None:
    clock = Clock()
    limits = ConnectionLimits(header_timeout=10, idle_timeout=90)
    table = ConnectionTable(limits, clock=clock)
    table.admit("silent")
    table.admit("scraper")
    table.admit("busy")
    table.request_started("scraper")
    table.request_finished("scraper")
    table.request_started("busy")
    clock.now = 9.9
    assert table.expired() == []
    clock.now = 10
    assert table.expired() == ["silent"]  # no request within the header timeout
    clock.now = 89.9
    assert table.expired() == []  # kept alive between scrapes
    clock.now = 1000
    assert table.expired() == ["scraper"]  # a request in progress is never timed out here
    assert len(table) == 1


async def test_the_tls_protocol_holds_a_16_kib_buffer_not_asyncios_256_kib(tmp_path: Path) -> None:
    """The per-connection cost rests on a class attribute of asyncio's SSLProtocol: a change there fails here."""
    issue_certificate(tmp_path)

    class FakeSite:
        loop = asyncio.get_running_loop()
        limits = ConnectionLimits()

        def __init__(self) -> None:
            self.forgotten: list[object] = []

        def closed(self, key: object) -> None:
            self.forgotten.append(key)

    site, handler = FakeSite(), asyncio.Protocol()
    protocol = _LeanTLS(site, handler, server_ssl_context(str(tmp_path)))  # type: ignore[arg-type]
    assert len(protocol._ssl_buffer) == TLS_READ_BUFFER == 16 * 1024  # type: ignore[attr-defined]
    assert len(protocol.get_buffer(-1)) == TLS_READ_BUFFER
    protocol.connection_lost(None)
    assert site.forgotten == [handler]


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[tuple[GatedSite, Path]]:
    ca = issue_certificate(tmp_path / "certs")
    context = server_ssl_context(str(tmp_path / "certs"))
    table = ConnectionTable(ConnectionLimits(max_connections=4, header_timeout=1.5, idle_timeout=1.5))
    app = web.Application(middlewares=[table_middleware(table)])

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(3)
        return web.Response(text="done")

    async def fast(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/slow", slow)
    app.router.add_get("/fast", fast)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = GatedSite(runner, "127.0.0.1", 0, table=table, tls=lambda: context)
    await site.start()
    yield site, ca
    await runner.cleanup()


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), seconds) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> bytes:
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head.split(b"\r\n")[0] + b" " + await reader.readexactly(length)


async def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(
    gated: tuple[GatedSite, Path],
) -> None:
    """Issue 32 major 1: neither a bare TCP connect nor an idle TLS connection was ever closed."""
    site, ca = gated
    bare_reader, bare_writer = await asyncio.open_connection("127.0.0.1", site.port)
    tls_reader, tls_writer = await asyncio.open_connection(
        "127.0.0.1", site.port, ssl=ssl.create_default_context(cafile=str(ca))
    )
    assert not await _closed_within(tls_reader, 0.5)
    assert await _closed_within(bare_reader, 3) and await _closed_within(tls_reader, 3)
    assert len(site.table) == 0
    bare_writer.close()
    tls_writer.close()


async def test_a_kept_alive_connection_is_closed_after_the_idle_timeout(gated: tuple[GatedSite, Path]) -> None:
    site, ca = gated
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", site.port, ssl=ssl.create_default_context(cafile=str(ca))
    )
    assert await _get(reader, writer, "/fast") == b"HTTP/1.1 200 OK ok"
    await asyncio.sleep(1)
    assert await _get(reader, writer, "/fast") == b"HTTP/1.1 200 OK ok"  # reused within the idle timeout
    assert await _closed_within(reader, 3)
    writer.close()


async def test_a_request_in_progress_outlives_the_timeouts_and_new_connections_evict_idle_ones(
    gated: tuple[GatedSite, Path],
) -> None:
    site, ca = gated
    context = ssl.create_default_context(cafile=str(ca))
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port, ssl=context)
    slow = asyncio.create_task(_get(reader, writer, "/slow"))  # 3 s, twice the timeouts
    await asyncio.sleep(0.2)
    idle = [await asyncio.open_connection("127.0.0.1", site.port, ssl=context) for _ in range(6)]
    assert len(site.table) == 4  # the limit: the slow request and the three newest idle ones
    evicted = [await _closed_within(r, 0.5) for r, _ in idle]
    assert evicted == [True, True, True, False, False, False]
    assert await slow == b"HTTP/1.1 200 OK done"
    writer.close()
    for _, w in idle:
        w.close()
