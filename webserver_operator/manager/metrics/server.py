"""/metrics: HTTPS behind TokenReview and SubjectAccessReview by default, on a thread and an event loop of its own.

Why it is guarded: ``webserver_operator_webserver_ready_status{namespace,name}`` lists every tenant's WebServers.
In a shared cluster only identities the cluster's RBAC allows to ``get /metrics`` may read them, as with
kubebuilder v4 (controller-runtime's secure metrics server and its authentication/authorization filter):

- secure (default): TLS (``manager.metrics.certs``: a mounted certificate, reloaded when it changes, or a self-signed
one,
  renewed before it expires, both by ``manager.metrics.certreload``) and every ``GET /metrics`` checked by
  ``manager.metrics.auth`` (401 without a valid token, 403 without the right, 429 when reviews are at their limit,
  500 when a review fails); anything else is 404 before any review;
- ``--no-metrics-secure``: plain HTTP and no checks, for a local run on 127.0.0.1 or a cluster where the network
  alone decides; binding it anywhere else is logged as a warning.

Why its own thread and loop (``manager.metrics.serving``): rendering 1000 WebServers' series takes tens of milliseconds
of CPU and a review waits for the API server; neither may delay the health probes, which are served by another thread.
The reviews go through an API client created on this loop from the same client settings as the operator's.

Every pod can reach this port, so its connections are bounded and timed out (``manager.metrics.connections``, at most
``--metrics-max-connections``) in both modes, and a request whose caller hung up is cancelled with its review.

Renders are coalesced: scrapes that arrive while a render runs (in this loop's executor) share its result, so a flood
of scrapes costs one render at a time, not one per scrape.

Launched by ``manager.operator`` after the probes, without waiting (``launch``, then ``await started()``): making the
self-signed certificate runs a child Python process (``manager.metrics.certs``), and the controller's first reconcile
has no reason to wait for it. /readyz waits for it instead, and a server that cannot start still stops the operator.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from webserver_operator import metrics
from webserver_operator.core.backoff import BackoffPolicy
from webserver_operator.core.settings import ClientSettings, ServerSettings, parse_bind_address
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration
from webserver_operator.kube.retry import RetryPolicy
from webserver_operator.manager.metrics.auth import METRICS_PATH, MetricsAuth
from webserver_operator.manager.metrics.certreload import CertificateReloader, SelfSignedRenewer
from webserver_operator.manager.metrics.certs import (
    SelfSigned,
    ServingCertificate,
    self_signed_pem,
    server_ssl_context,
    serving_hosts,
)
from webserver_operator.manager.metrics.connections import ConnectionLimits
from webserver_operator.manager.metrics.serving import ServerThread, Site

__all__ = ["MetricsServer", "SharedRender"]

log = logging.getLogger(__name__)

#: controller-runtime: 10 s per review, retried with backoff 0.5 s x 1.5 (5 steps); a scrape times out after 10 s.
_REVIEW_TIMEOUT = 10.0
_REVIEW_RETRY = RetryPolicy(max_retries=3, backoff=BackoffPolicy(base=0.5, cap=2.0, factor=1.5, jitter=0.2))
_REVIEW_POOL_SIZE = 4


class SharedRender:
    """``await render()``: the exposition, rendered off the loop; concurrent callers share one render."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self._render = render
        self._flight: asyncio.Future[bytes] | None = None

    async def __call__(self) -> bytes:
        if self._flight is None:
            self._flight = asyncio.get_running_loop().run_in_executor(None, self._render)
            self._flight.add_done_callback(self._landed)
        return await asyncio.shield(self._flight)

    def _landed(self, _: asyncio.Future[bytes]) -> None:
        self._flight = None


def _metrics_handler(render: SharedRender) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(body=await render(), headers={"Content-Type": metrics.CONTENT_TYPE})

    return handler


def _auth_middleware(auth: MetricsAuth) -> Middleware:
    """Reviews ``GET /metrics`` only: anything else is 404 before any TokenReview or SubjectAccessReview."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method != "GET" or request.path != METRICS_PATH:
            return web.Response(status=404, text=f"Not found: this port serves GET {METRICS_PATH} only\n")
        verdict = await auth.check(authorization=request.headers.get("Authorization"))
        if verdict.allowed:
            return await handler(request)
        headers = {}
        if verdict.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="webserver-operator metrics"'
        if verdict.retry_after is not None:
            headers["Retry-After"] = str(math.ceil(verdict.retry_after))
        return web.Response(status=verdict.status, text=verdict.message + "\n", headers=headers)

    return middleware


def _background(run: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[web.Application], AsyncIterator[None]]:
    """An aiohttp cleanup context running ``run()`` while the application serves."""

    async def context(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(run())
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    return context


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class MetricsServer:
    """Serves /metrics per ``server`` (address, HTTPS and auth or plain HTTP); ``start`` returns the bound port."""

    def __init__(
        self,
        *,
        server: ServerSettings,
        client: ClientSettings,
        render: Callable[[], bytes] = metrics.render,
    ) -> None:
        self._settings = server
        self._client = client
        self._render = SharedRender(render)
        self._bind = parse_bind_address(server.metrics_bind_address)
        self._thread = ServerThread(name="metrics-server", build=self._sites)
        self.port: int = 0

    @property
    def scheme(self) -> str:
        return "https" if self._settings.metrics_secure else "http"

    def start(self, timeout: float = 15.0) -> int:
        """Serve, and wait on this thread until the port listens; returns it (raises what stopped the start)."""
        self._warn_if_open()
        (self.port,) = self._thread.start(timeout)
        return self.port

    def launch(self) -> None:
        """Start serving and return at once; ``await started()`` for the port."""
        self._warn_if_open()
        self._thread.launch()

    async def started(self) -> int:
        """The bound port once it listens; raises what stopped the start (a bad certificate path, a taken port)."""
        (self.port,) = await self._thread.started()
        return self.port

    def _warn_if_open(self) -> None:
        if not self._settings.metrics_secure and not _loopback(self._bind[0]):
            log.warning(
                "metrics are served over plain HTTP without authentication on %s:%d: anyone who reaches this port "
                "reads every WebServer's name and namespace; drop --no-metrics-secure to require a token",
                *self._bind,
            )

    def stop(self) -> None:
        self._thread.stop()

    async def _sites(self) -> list[Site]:
        app = web.Application()
        app.router.add_get(METRICS_PATH, _metrics_handler(self._render), allow_head=False)
        limits = ConnectionLimits(max_connections=self._settings.metrics_max_connections)
        if not self._settings.metrics_secure:
            return [Site(app=app, bind=self._bind, limits=limits)]
        cert_path = self._settings.metrics_cert_path
        if cert_path is not None:
            serving = ServingCertificate(server_ssl_context(cert_path))
            app.cleanup_ctx.append(_background(CertificateReloader(serving, cert_path).run))
        else:
            renewer = SelfSignedRenewer(make=self._self_signed)
            serving = renewer.first()
            app.cleanup_ctx.append(_background(renewer.run))
        api = await self._review_client()

        async def close_client(_: web.Application) -> None:
            await api.close()

        app.on_cleanup.append(close_client)
        app.middlewares.append(_auth_middleware(MetricsAuth(api)))
        return [Site(app=app, bind=self._bind, tls=serving, limits=limits)]

    @staticmethod
    def _self_signed() -> SelfSigned:
        return self_signed_pem(serving_hosts())

    async def _review_client(self) -> KubeClient:
        """An API client on this thread's loop, for the reviews: the operator's credentials, shorter timeouts."""
        configuration = await load_configuration(kubeconfig=self._client.kubeconfig, context=self._client.context)
        settings = self._client.model_copy(update={"read_timeout": _REVIEW_TIMEOUT, "qps": None})
        return await KubeClient.create(
            configuration, settings=settings, retry=_REVIEW_RETRY, pool_size=_REVIEW_POOL_SIZE
        )
