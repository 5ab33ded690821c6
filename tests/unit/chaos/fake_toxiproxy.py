"""An in-process fake of toxiproxy's HTTP API that wedges the way toxiproxy v2.12.0 does when a toxic is removed.

Why a fake: the real failure (issue 21) needs a latency toxic on a link whose client stops reading and then goes
away; toxiproxy's removal then holds the proxy's toxic-collection lock for good (see chaos/toxiproxy.py). The fake
reproduces what the harness sees from outside: ``DELETE /proxies/{p}/toxics/{t}`` never answers (``slow_removal``
seconds, forever by default), and while a removal is pending every call that needs that proxy's toxic list (show,
update, list toxics, add toxic) waits with it. Deleting and creating proxies does not touch that lock, as in the real
server. Every request is logged as ``(method, path)`` so tests can assert what the client did.

Used by the chaos unit tests.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FakeProxy:
    name: str
    listen: str
    upstream: str
    enabled: bool = True
    toxics: list[dict[str, Any]] = field(default_factory=list)
    wedged: asyncio.Event = field(default_factory=asyncio.Event)  # set while a toxic removal holds the lock


class FakeToxiproxy:
    """``async with FakeToxiproxy() as fake``: ``fake.url`` serves the API until the block ends."""

    def __init__(self, *, slow_removal: float | None = None, hang_add: bool = False, proxy_stop: float = 0.0) -> None:
        self.slow_removal = slow_removal  # None: a removal never ends
        self.hang_add = hang_add
        self.proxy_stop = proxy_stop  # seconds a proxy deletion takes (closing its connections)
        self.proxies: dict[str, FakeProxy] = {}
        self.created: list[FakeProxy] = []
        self.calls: list[tuple[str, str]] = []
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> FakeToxiproxy:
        app = web.Application(middlewares=[self._log])
        app.router.add_get("/version", self._version)
        app.router.add_post("/proxies", self._create)
        app.router.add_get("/proxies/{name}", self._show)
        app.router.add_post("/proxies/{name}", self._update)
        app.router.add_delete("/proxies/{name}", self._delete)
        app.router.add_get("/proxies/{name}/toxics", self._toxics)
        app.router.add_post("/proxies/{name}/toxics", self._add_toxic)
        app.router.add_delete("/proxies/{name}/toxics/{toxic}", self._remove_toxic)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_: object) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _log(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.calls.append((request.method, request.path))
        response: web.StreamResponse = await handler(request)
        return response

    def _proxy(self, request: web.Request) -> FakeProxy:
        proxy = self.proxies.get(request.match_info["name"])
        if proxy is None:
            raise web.HTTPNotFound(text='{"error":"proxy not found","status":404}')
        return proxy

    async def _behind_the_lock(self, proxy: FakeProxy) -> None:
        """Wait while a removal holds this proxy's toxic collection (until the fake shuts down)."""
        if proxy.wedged.is_set():
            await self._release.wait()

    @staticmethod
    def _view(proxy: FakeProxy) -> dict[str, Any]:
        return {
            "name": proxy.name,
            "listen": proxy.listen,
            "upstream": proxy.upstream,
            "enabled": proxy.enabled,
            "toxics": proxy.toxics,
        }

    async def _version(self, _: web.Request) -> web.Response:
        return web.json_response({"version": "fake"})

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body["name"] in self.proxies:
            return web.json_response({"error": "proxy already exists", "status": 409}, status=409)
        proxy = FakeProxy(body["name"], body["listen"], body["upstream"], enabled=body.get("enabled", True))
        self.proxies[proxy.name] = proxy
        self.created.append(proxy)
        return web.json_response(self._view(proxy), status=201)

    async def _show(self, request: web.Request) -> web.Response:
        proxy = self._proxy(request)
        await self._behind_the_lock(proxy)
        return web.json_response(self._view(proxy))

    async def _update(self, request: web.Request) -> web.Response:
        proxy = self._proxy(request)
        proxy.enabled = bool((await request.json()).get("enabled", proxy.enabled))
        await self._behind_the_lock(proxy)
        return web.json_response(self._view(proxy))

    async def _delete(self, request: web.Request) -> web.Response:
        self._proxy(request)
        await asyncio.sleep(self.proxy_stop)
        del self.proxies[request.match_info["name"]]
        return web.Response(status=204)

    async def _toxics(self, request: web.Request) -> web.Response:
        proxy = self._proxy(request)
        await self._behind_the_lock(proxy)
        return web.json_response(proxy.toxics)

    async def _add_toxic(self, request: web.Request) -> web.Response:
        proxy = self._proxy(request)
        await self._behind_the_lock(proxy)
        if self.hang_add:
            await self._release.wait()
        toxic = await request.json()
        proxy.toxics.append(toxic)
        return web.json_response(toxic)

    async def _remove_toxic(self, request: web.Request) -> web.Response:
        proxy = self._proxy(request)
        proxy.wedged.set()
        if self.slow_removal is None:
            await self._release.wait()
        else:
            await asyncio.sleep(self.slow_removal)
            proxy.wedged.clear()
        proxy.toxics = [t for t in proxy.toxics if t["name"] != request.match_info["toxic"]]
        return web.Response(status=204)
