"""Serve aiohttp applications from a daemon thread with an event loop of its own.

Why a thread and a loop per server: what answers the kubelet's probes must never wait behind anything else. The
health probes get one ``ServerThread`` (``manager.endpoints``) and /metrics another (``manager.metrics.server``): a
blocked main loop is reported by /healthz instead of silencing it, and a flood of scrapes, a slow TokenReview or the
tens of milliseconds it takes to render 1000 WebServers' series never delay a probe, since each server has its own
loop.

``build`` runs inside the server's own loop, so whatever it creates there (an aiohttp client session, the metrics
server's API client) belongs to that loop; it is closed through the applications' ``on_cleanup`` hooks when the
server stops. Used by ``manager.endpoints`` and ``manager.metrics.server``; ``start`` hands back the bound ports.

``launch`` starts the thread without waiting, and ``started()`` (awaitable from any loop) hands back the ports or
raises what stopped the start, so a server that takes its time (the metrics server makes a certificate in a child
process first) can come up beside the controller instead of ahead of it. ``start`` is both, waiting on this thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ssl
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from webserver_operator.manager.metrics.connections import (
    ConnectionLimits,
    ConnectionTable,
    GatedSite,
    table_middleware,
)

__all__ = ["ServerThread", "Site"]


@dataclass(frozen=True)
class Site:
    """One application on one address.

    With ``tls`` it is served over TLS with the context ``tls()`` returns at each accept (so a reloaded certificate
    serves new connections). With ``limits`` its connections are bounded and timed out
    (``manager.metrics.connections``): the metrics port, which every pod can reach, has them.
    """

    app: web.Application
    bind: tuple[str, int]
    tls: Callable[[], ssl.SSLContext] | None = None
    limits: ConnectionLimits | None = None


class ServerThread:
    """Runs the sites ``build`` returns on a daemon thread; ``start`` returns their bound ports, in order."""

    def __init__(self, *, name: str, build: Callable[[], Awaitable[Sequence[Site]]]) -> None:
        self._name = name
        self._build = build
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runners: list[web.AppRunner] = []
        #: The bound ports once every site listens, or what stopped the start.
        self._started: concurrent.futures.Future[list[int]] = concurrent.futures.Future()
        self.ports: list[int] = []

    def start(self, timeout: float = 10.0) -> list[int]:
        """``launch``, then wait on this thread until the sites listen; raises what stopped them."""
        self.launch()
        try:
            return self._started.result(timeout)
        except concurrent.futures.TimeoutError:
            raise RuntimeError(f"the {self._name} did not start within {timeout:g}s") from None

    def launch(self) -> None:
        """Start the thread and return at once; ``started()`` tells when the sites listen."""
        # A running future cannot be cancelled: a ``started()`` given up on (the operator stopping first) leaves the
        # start to finish and report, so ``stop`` finds a loop to stop.
        self._started.set_running_or_notify_cancel()
        self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread.start()

    async def started(self) -> list[int]:
        """The bound ports, once the sites listen (awaitable from any loop); raises what stopped the start."""
        return await asyncio.wrap_future(self._started)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._start_sites())
        except BaseException as err:
            loop.run_until_complete(self._cleanup())
            loop.close()
            self._started.set_exception(err)
            return
        self._started.set_result(self.ports)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._cleanup())
            loop.close()

    async def _start_sites(self) -> None:
        for site in await self._build():
            self.ports.append(await self._start(site))

    async def _start(self, site: Site) -> int:
        table = ConnectionTable(site.limits) if site.limits is not None else None
        if table is not None:
            site.app.middlewares.insert(0, table_middleware(table))
        # handler_cancellation: a request whose caller hung up is cancelled, and with it the review it waits for.
        runner = web.AppRunner(site.app, access_log=None, handle_signals=False, handler_cancellation=True)
        await runner.setup()
        self._runners.append(runner)
        host, port = site.bind
        tcp: web.BaseSite
        if table is not None:
            tcp = GatedSite(runner, host, port, table=table, tls=site.tls)
        else:
            context = site.tls() if site.tls is not None else None
            tcp = web.TCPSite(runner, host=host, port=port, reuse_address=True, ssl_context=context)
        try:
            await tcp.start()
        except OSError as err:
            raise OSError(
                err.errno, f"cannot listen on {host}:{port} ({err.strerror}): pick another address/port"
            ) from err
        sockets = getattr(tcp._server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def _cleanup(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the start failed, nothing to stop
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
