"""The Lease's own client: a renewal refused with a long Retry-After is tried again within its round.

API Priority and Fairness doubles its ``Retry-After`` (up to 32 s) while it rejects many requests. In ``make chaos``'s
apf-starvation fault a renewal refused with ``Retry-After: 16`` slept inside the client's retry past the 7 s renew
deadline, and the leader lost its Lease although the next renewal would have gone through. Here a real ``KubeClient``
talks HTTP to a small Lease server that refuses one renewal that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from webserver_operator.core.settings import ClientSettings, LeaseSettings
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.library import Configuration
from webserver_operator.kube.retry import RetryPolicy
from webserver_operator.runtime.leases.lease import LEASE_CALLS, Lease, LeaseLost

pytestmark = pytest.mark.timeout(20)

NS = "leases"
NAME = "leader"


class LeaseServer:
    """One Lease over HTTP: GET, POST and PUT as the API server answers them; ``refuse`` PUTs get 429 first."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.refuse = 0
        self.renewed = 0

    async def handle(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            if self.lease is None:
                status = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
                return web.json_response(status, status=404)
            return web.json_response(self.lease)
        if request.method == "PUT" and self.refuse > 0:
            self.refuse -= 1
            status = {"kind": "Status", "status": "Failure", "reason": "TooManyRequests", "code": 429}
            return web.json_response(status, status=429, headers={"Retry-After": "16"})
        body = json.loads(await request.read())
        self.version += 1
        body.setdefault("metadata", {}).update(name=NAME, namespace=NS, resourceVersion=str(self.version))
        self.renewed += request.method == "PUT"
        self.lease = body
        return web.json_response(body, status=201 if request.method == "POST" else 200)


@contextlib.asynccontextmanager
async def serving(server: LeaseServer) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield f"http://127.0.0.1:{test_server.port}"
    finally:
        await test_server.close()


async def holds_through_one_refusal(retry: RetryPolicy) -> bool:
    """Whether a Lease whose client has ``retry`` still holds after one renewal is refused with Retry-After: 16."""
    server = LeaseServer()
    async with serving(server) as url:
        client = await KubeClient.create(
            Configuration(host=url), settings=ClientSettings(connect_timeout=2.0, read_timeout=2.0), retry=retry
        )
        async with client:
            settings = LeaseSettings(lease_duration=3.0, renew_deadline=2.0, retry_period=0.2)
            lease = Lease(client, name=NAME, namespace=NS, identity="me", settings=settings)
            await lease.acquire()
            holding = asyncio.create_task(lease.hold())
            try:
                while server.renewed < 2:  # noqa: ASYNC110 - the server's count is the state to wait for
                    await asyncio.sleep(0.02)
                server.refuse = 1
                await asyncio.sleep(3.0)  # longer than the renew deadline
                if holding.done():
                    with contextlib.suppress(LeaseLost):
                        holding.result()
                    return False
                return lease.is_held and server.renewed >= 4
            finally:
                holding.cancel()
                with contextlib.suppress(asyncio.CancelledError, LeaseLost):
                    await holding


async def test_the_lease_client_tries_each_call_once_so_a_long_retry_after_cannot_outlast_the_round() -> None:
    assert await holds_through_one_refusal(LEASE_CALLS)


async def test_a_client_that_honours_the_retry_after_loses_the_lease_on_one_refusal() -> None:
    """Why the Lease client must not retry by itself: this is what the apf-starvation fault found."""
    assert not await holds_through_one_refusal(RetryPolicy())
