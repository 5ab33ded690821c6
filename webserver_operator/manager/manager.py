"""The operator process: settings, client, informers, probes, leader election and shutdown, run until told.

Only lifecycle lives here: what the controller watches and how events map to keys is declared next to the
reconciler (``reconcile.setup``). Called by ``cli`` (``run_operator``); returns the process exit code.

Order of events, after controller-runtime's manager:
1. probes start first, then /metrics, each on a thread of its own (the bound ports are logged), so kubelet sees a
   live process while caches fill;
2. informers (WebServers, and label-filtered Deployments and Services) start on EVERY replica: a standby keeps warm
   caches, is ready, and takes over without a relist;
3. with leader election on, reconciling starts only once the Lease is held. Writes are fenced by time: the reconcile
   path's client refuses every write from the renew deadline after the last successful renew was sent, checked
   just before each request goes on the wire (``kube.fence``, ``kube.gate``), even if the event loop was frozen and
   nothing else ran. Losing the Lease (a renew round failed, or someone else holds it) stops reconciling at once and
   the process exits non-zero, because a deposed leader must not write;
4. SIGTERM/SIGINT: stop taking work, let in-flight reconciles finish within the drain timeout, release the Lease so
   a standby takes over within about one retry period, close the client, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from collections.abc import Awaitable
from typing import Any

from webserver_operator import __version__
from webserver_operator.core.settings import parse_bind_address
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration
from webserver_operator.manager.endpoints import ProbeServer
from webserver_operator.manager.leader import LeaderElector
from webserver_operator.manager.metrics_server import MetricsServer
from webserver_operator.manager.probes import Heartbeat, Probes, cache_synced, watches_running
from webserver_operator.manager.settings import Settings
from webserver_operator.reconcile.setup import setup_webserver_controller
from webserver_operator.runtime.cache import InformerCache
from webserver_operator.runtime.controller import Controller

log = logging.getLogger(__name__)

#: The elector sends one request at a time; a second connection covers a release racing a renewal.
_LEASE_POOL_SIZE = 2

_EXIT_OK = 0
_EXIT_LEADERSHIP_LOST = 1
_EXIT_FAILED = 2
_SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _pod_namespace() -> str | None:
    with contextlib.suppress(OSError), open(_SA_NAMESPACE_FILE, encoding="utf-8") as fh:
        return fh.read().strip() or None
    return os.environ.get("POD_NAMESPACE") or None


def _identity() -> str:
    """Pod (or host) name plus a random suffix, as controller-runtime does.

    A restarted process must never take over a Lease its previous incarnation still appears to hold.
    """
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Operator:
    """One operator process. ``await Operator(settings).run()`` returns the exit code."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stop_requested = asyncio.Event()
        self.probe_server: ProbeServer | None = None
        self.metrics_server: MetricsServer | None = None
        self.api: KubeClient | None = None
        self.lease_api: KubeClient | None = None
        self._clients: list[KubeClient] = []
        self.cache: InformerCache | None = None
        self.controller: Controller | None = None
        self.elector: LeaderElector | None = None
        self._tasks: list[asyncio.Task[Any]] = []

    def request_stop(self) -> None:
        if not self.stop_requested.is_set():
            log.info("shutdown requested: finishing in-flight work")
        self.stop_requested.set()

    async def run(self) -> int:
        s = self.settings
        heartbeat = Heartbeat()
        self._tasks.append(asyncio.create_task(heartbeat.run(), name="heartbeat"))
        probes = Probes()
        probes.liveness["event-loop"] = lambda: heartbeat.check(max_lag=s.server.max_loop_lag)
        try:
            self._start_endpoints(probes)
            return await self._run_with_probes(probes)
        finally:
            await self._shutdown()

    def _start_endpoints(self, probes: Probes) -> None:
        """Probes, then /metrics, each on a thread of its own; the bound ports go into the first log line."""
        s = self.settings
        self.probe_server = ProbeServer(probes, health_bind=parse_bind_address(s.server.health_probe_bind_address))
        self.probe_server.start()
        metrics_port, metrics_scheme = None, None
        if s.server.metrics_enabled:
            self.metrics_server = MetricsServer(server=s.server, client=s.client)
            metrics_port, metrics_scheme = self.metrics_server.start(), self.metrics_server.scheme
        log.info(
            "webserver-operator %s: health probes on port %d, metrics on %s",
            __version__,
            self.probe_server.health_port,
            f"{metrics_scheme} port {metrics_port}" if metrics_port is not None else "(disabled)",
            extra={
                "health_port": self.probe_server.health_port,
                "metrics_port": metrics_port,
                "metrics_scheme": metrics_scheme,
            },
        )

    async def _run_with_probes(self, probes: Probes) -> int:
        await self._build(probes)
        return await self._sync_elect_and_run()

    async def _build(self, probes: Probes) -> None:
        """Client, informer cache and controller (declared by ``reconcile.setup``); informers start on every replica."""
        s = self.settings
        configuration = await load_configuration(kubeconfig=s.client.kubeconfig, context=s.client.context)
        # Three connection pools: requests (reconcile writes, Events), watches (each holds a connection for minutes;
        # uncapped) and the Lease (never queued behind anything). See KubeClient.create.
        self.api = api = await KubeClient.create(configuration, settings=s.client)
        self._clients.append(api)
        watch_api = await KubeClient.create(
            configuration, settings=s.client, watch_read_timeout=s.watch.read_timeout, pool_size=0
        )
        self._clients.append(watch_api)
        self.lease_api = await KubeClient.create(configuration, settings=s.client, pool_size=_LEASE_POOL_SIZE)
        self._clients.append(self.lease_api)
        log.info(
            "connected to %s; watching %s",
            api.host,
            ", ".join(s.watch.namespaces) if s.watch.namespaces else "all namespaces",
        )
        self.cache = cache = InformerCache(watch_api, s.watch)
        writer = api.without_retries()
        if s.leader_election.leader_elect:
            self.elector = self._elector(self.lease_api)
            writer = writer.gated(self.elector.fence.why_not)
        self.controller = setup_webserver_controller(cache, api=writer, settings=s.controller)
        for name, group in cache.groups.items():
            probes.liveness[f"watch-{name}"] = watches_running(group)
            probes.readiness[f"cache-{name}"] = cache_synced(group, name)
        self._tasks.append(asyncio.create_task(cache.run(), name="informers"))

    def _elector(self, lease_api: KubeClient) -> LeaderElector:
        election = self.settings.leader_election
        return LeaderElector(
            lease_api,
            lease_name=election.leader_election_id,
            lease_namespace=election.leader_election_namespace or _pod_namespace() or "default",
            identity=_identity(),
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        )

    async def _sync_elect_and_run(self) -> int:
        s = self.settings
        api, controller = self.api, self.controller
        assert api is not None and controller is not None  # noqa: PT018 - set by _build
        if not await self._until_stopped(self._all_synced()):
            return _EXIT_OK
        hold: asyncio.Task[None] | None = None
        if self.elector is not None:
            if not await self._until_stopped(self.elector.acquire()):
                return _EXIT_OK
            hold = asyncio.create_task(self.elector.hold(), name="leader-election-hold")

        return await lead(
            controller, hold=hold, stop_requested=self.stop_requested, drain_timeout=s.controller.drain_timeout
        )

    async def _all_synced(self) -> None:
        assert self.cache is not None
        log.info("waiting for caches to sync")
        await self.cache.synced()
        log.info("caches synced")

    async def _until_stopped(self, awaitable: Awaitable[None]) -> bool:
        """Await ``awaitable`` unless a stop is requested first; False when stopped."""
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.create_task(self.stop_requested.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task.done():
            task.result()
            return True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return False

    async def _shutdown(self) -> None:
        if self.elector is not None:
            await self.elector.release()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients:
            await client.close()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.probe_server is not None:
            self.probe_server.stop()
        log.info("stopped")


async def lead(
    controller: Controller,
    *,
    hold: asyncio.Task[None] | None,
    stop_requested: asyncio.Event,
    drain_timeout: float,
) -> int:
    """Run ``controller`` while leading (``hold`` renews the Lease) until a stop is requested; return the exit code.

    ``hold`` is watched the whole time, the shutdown drain included: if the Lease is lost (renewal failed for the renew
    deadline, or someone else holds it) in-flight reconciles are cancelled at once, whatever the drain timeout, so a
    deposed leader never writes after a standby may have taken over.
    """
    controller_task = asyncio.create_task(controller.run(), name="controller")
    stop_task = asyncio.create_task(stop_requested.wait(), name="stop-requested")
    watched: set[asyncio.Task[Any]] = {controller_task, stop_task}
    if hold is not None:
        watched.add(hold)
    done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    stop_task.cancel()
    if hold is not None and hold in done:
        return await _deposed(controller, controller_task, hold)
    if controller_task in done:
        controller_task.result()
        log.error("controller stopped unexpectedly")
        return _EXIT_FAILED
    drain = asyncio.create_task(controller.stop(drain_timeout), name="drain")
    if hold is not None:
        await asyncio.wait({drain, hold}, return_when=asyncio.FIRST_COMPLETED)
        if hold.done() and not drain.done():
            code = await _deposed(controller, controller_task, hold)
            await asyncio.gather(drain, return_exceptions=True)
            return code
    drained = await drain
    await asyncio.gather(controller_task, return_exceptions=True)
    if hold is not None:
        hold.cancel()
        await asyncio.gather(hold, return_exceptions=True)
    log.info("controller drained" if drained else "drain timeout reached; in-flight reconciles were cancelled")
    return _EXIT_OK


async def _deposed(controller: Controller, controller_task: asyncio.Task[None], hold: asyncio.Task[None]) -> int:
    """Deposed: no write may leave this process any more. Cancel in-flight reconciles immediately."""
    log.error("leader election lost: stopping at once so that only the new leader writes")
    await controller.stop(0.0)
    await asyncio.gather(controller_task, return_exceptions=True)
    with contextlib.suppress(BaseException):
        hold.result()
    return _EXIT_LEADERSHIP_LOST


async def run_operator(settings: Settings, *, install_signal_handlers: bool = True) -> int:
    """Run until SIGTERM/SIGINT (or leadership loss); return the process exit code."""
    operator = Operator(settings)
    loop = asyncio.get_running_loop()
    if install_signal_handlers:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, operator.request_stop)
    try:
        return await operator.run()
    finally:
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
