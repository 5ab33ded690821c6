"""The health endpoints (/healthz, /livez, /readyz), served from a thread and an event loop of their own.

Why a separate thread with its own event loop: the probes must tell the truth about the operator's main loop. If
they ran on that loop, a blocked loop would just make the probe time out, with no message; from a separate thread,
/healthz answers 500 "event loop blocked for 12.3s" while the main loop is stuck. The main loop only has to tick a
heartbeat. /metrics has a thread and loop of its own too (``manager.metrics.server``): rendering thousands of
series, or waiting for the API server to review a scraper's token, never delays a probe.

What the probes check is ``manager.probes``; this module only serves them. Started first by ``manager.operator``.

Checks are plain callables returning ``(ok, detail)``. They run on the server thread, so they must only read
simple attributes (floats, bools) that the main loop writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from webserver_operator.manager.metrics.serving import ServerThread, Site
from webserver_operator.manager.probes import Check, Probes, run_checks

__all__ = ["ProbeServer"]


def _probe_handler(checks: dict[str, Check]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(_: web.Request) -> web.StreamResponse:
        ok, text = run_checks(checks)
        return web.Response(status=200 if ok else 500, text=text)

    return handler


class ProbeServer:
    """Serves the probes on a daemon thread; ``start`` binds ``health_bind`` and sets ``health_port``."""

    def __init__(self, probes: Probes, *, health_bind: tuple[str, int]) -> None:
        self._probes = probes
        self._health_bind = health_bind
        self._thread = ServerThread(name="probe-server", build=self._sites)
        self.health_port: int = 0

    async def _sites(self) -> list[Site]:
        app = web.Application()
        app.router.add_get("/healthz", _probe_handler(self._probes.liveness))
        app.router.add_get("/livez", _probe_handler(self._probes.liveness))
        app.router.add_get("/readyz", _probe_handler(self._probes.readiness))
        return [Site(app=app, bind=self._health_bind)]

    def start(self, timeout: float = 10.0) -> None:
        (self.health_port,) = self._thread.start(timeout)

    def stop(self) -> None:
        self._thread.stop()
