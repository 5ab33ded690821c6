"""The HTTP endpoints (/healthz, /readyz and /metrics), served from a thread of their own.

Why a separate thread with its own event loop: the probes must tell the truth about the operator's main loop. If
they ran on that loop, a blocked loop would just make the probe time out, with no message; from a separate thread,
/healthz answers 500 "event loop blocked for 12.3s" while the main loop is stuck, and /metrics keeps being scraped
(prometheus-client is thread-safe). The main loop only has to tick a heartbeat.

What the probes check is ``manager.probes``; this module only serves them. Started first by ``manager.manager``.

Checks are plain callables returning ``(ok, detail)``. They run on the server thread, so they must only read
simple attributes (floats, bools) that the main loop writes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

from aiohttp import web

from webserver_operator import metrics
from webserver_operator.manager.probes import Check, Probes, run_checks

log = logging.getLogger(__name__)


def _probe_handler(checks: dict[str, Check]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(_: web.Request) -> web.StreamResponse:
        ok, text = run_checks(checks)
        return web.Response(status=200 if ok else 500, text=text)

    return handler


async def _metrics(_: web.Request) -> web.Response:
    body = metrics.render()
    return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})


class ProbeServer:
    """Runs the health and metrics HTTP servers on a daemon thread; ``start`` returns the bound ports."""

    def __init__(
        self,
        probes: Probes,
        *,
        health_bind: tuple[str, int],
        metrics_bind: tuple[str, int] | None,
    ) -> None:
        self._probes = probes
        self._health_bind = health_bind
        self._metrics_bind = metrics_bind
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runners: list[web.AppRunner] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.health_port: int = 0
        self.metrics_port: int | None = None

    def start(self, timeout: float = 10.0) -> None:
        self._thread = threading.Thread(target=self._serve, name="probe-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the health/metrics server did not start within 10s")
        if self._error is not None:
            raise self._error

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._start_sites())
        except BaseException as err:
            self._error = err
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._cleanup())
            loop.close()

    async def _start_sites(self) -> None:
        health = web.Application()
        health.router.add_get("/healthz", _probe_handler(self._probes.liveness))
        health.router.add_get("/livez", _probe_handler(self._probes.liveness))
        health.router.add_get("/readyz", _probe_handler(self._probes.readiness))
        self.health_port = await self._start(health, self._health_bind)
        if self._metrics_bind is not None:
            app = web.Application()
            app.router.add_get("/metrics", _metrics)
            self.metrics_port = await self._start(app, self._metrics_bind)

    async def _start(self, app: web.Application, bind: tuple[str, int]) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, host=bind[0], port=bind[1], reuse_address=True)
        try:
            await site.start()
        except OSError as err:
            raise OSError(
                err.errno, f"cannot listen on {bind[0]}:{bind[1]} ({err.strerror}): pick another address/port"
            ) from err
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else bind[1]

    async def _cleanup(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
