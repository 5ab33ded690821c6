"""The operator process: wire settings, client, caches, controller, probes and leader election, then run until told.

Order of events, after controller-runtime's manager:
1. probes start first (the bound ports are logged), so kubelet sees a live process while caches fill;
2. informers (WebServers, and label-filtered Deployments and Services) start on EVERY replica: a standby keeps warm
   caches, is ready, and takes over without a relist;
3. with leader election on, reconciling starts only once the Lease is held; losing it (renewal failed for the renew
   deadline) stops reconciling at once and the process exits non-zero, because a deposed leader must not write;
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
from collections.abc import Awaitable, Callable
from typing import Any

from webserver_operator import __version__, metrics
from webserver_operator.api.models import API_VERSION, KIND
from webserver_operator.builders import CHILD_LABEL_SELECTOR
from webserver_operator.controller import handlers
from webserver_operator.controller.controller import Controller
from webserver_operator.controller.group import InformerGroup
from webserver_operator.controller.workqueue import WorkQueue
from webserver_operator.kube.client import Kube
from webserver_operator.kube.config import load_configuration
from webserver_operator.kube.resources import DEPLOYMENTS, SERVICES, WEBSERVERS
from webserver_operator.kube.settings import ClientSettings
from webserver_operator.manager.health import Heartbeat, Probes, ProbeServer
from webserver_operator.manager.leader import LeaderElector
from webserver_operator.manager.settings import Settings, parse_bind_address
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler

log = logging.getLogger(__name__)

CONTROLLER_NAME = "webserver"
EXIT_OK = 0
EXIT_LEADERSHIP_LOST = 1
EXIT_FAILED = 2
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
        self.kube: Kube | None = None
        self.groups: dict[str, InformerGroup] = {}
        self.controller: Controller | None = None
        self.reconciler: WebServerReconciler | None = None
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
        probes.liveness["event-loop"] = lambda: heartbeat.check(max_lag=s.max_loop_lag)
        self.probe_server = ProbeServer(
            probes,
            health_bind=parse_bind_address(s.health_probe_bind_address),
            metrics_bind=None if s.metrics_bind_address == "0" else parse_bind_address(s.metrics_bind_address),
        )
        self.probe_server.start()
        log.info(
            "webserver-operator %s: health probes on port %d, metrics on port %s",
            __version__,
            self.probe_server.health_port,
            self.probe_server.metrics_port if self.probe_server.metrics_port is not None else "(disabled)",
            extra={"health_port": self.probe_server.health_port, "metrics_port": self.probe_server.metrics_port},
        )
        try:
            return await self._run_with_probes(probes)
        finally:
            await self._shutdown()

    async def _run_with_probes(self, probes: Probes) -> int:
        await self._build(probes)
        return await self._sync_elect_and_run()

    async def _build(self, probes: Probes) -> None:
        """Client, informers (started at once, on every replica), reconciler and controller (not started yet)."""
        s = self.settings
        configuration = await load_configuration(kubeconfig=s.kubeconfig, context=s.context)
        self.kube = kube = await Kube.create(
            configuration,
            settings=ClientSettings(
                connect_timeout=s.connect_timeout,
                read_timeout=s.read_timeout,
                watch_read_timeout=s.watch_timeout + 30.0,
                qps=s.qps,
                burst=s.burst,
            ),
        )
        log.info(
            "connected to %s; watching %s",
            kube.host,
            ", ".join(s.namespaces) if s.namespaces else "all namespaces",
        )
        queue: WorkQueue[tuple[str, str]] = WorkQueue(name=CONTROLLER_NAME)
        recorder = EventRecorder(kube)
        owner = handlers.owner_handler(queue.add, owner_kind=KIND, owner_api_version=API_VERSION)
        on_webserver = handlers.object_handler(queue.add)

        def webserver_event(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            on_webserver(kind, obj, old)
            if kind == "DELETED":
                recorder.forget(str((obj.get("metadata") or {}).get("uid", "")))
            metrics.MANAGED_WEBSERVERS.set(len(self.groups["webservers"]))

        def service_event(kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            owner(kind, obj, old)
            if kind == "DELETED" and self.reconciler is not None:
                for key in self.reconciler.keys_with_problems():
                    queue.add(key)

        options: dict[str, Any] = {"watch_timeout_seconds": s.watch_timeout}
        if s.watch_stall_timeout is not None:
            options["stall_timeout"] = s.watch_stall_timeout
        self.groups = {
            "webservers": InformerGroup.for_namespaces(
                kube, WEBSERVERS, namespaces=s.namespaces, on_event=webserver_event, **options
            ),
            "deployments": InformerGroup.for_namespaces(
                kube,
                DEPLOYMENTS,
                namespaces=s.namespaces,
                on_event=owner,
                label_selector=CHILD_LABEL_SELECTOR,
                **options,
            ),
            "services": InformerGroup.for_namespaces(
                kube,
                SERVICES,
                namespaces=s.namespaces,
                on_event=service_event,
                label_selector=CHILD_LABEL_SELECTOR,
                **options,
            ),
        }
        for name, group in self.groups.items():
            probes.liveness[f"watch-{name}"] = _watch_check(group)
            probes.readiness[f"cache-{name}"] = _synced_check(group, name)
            self._tasks.append(asyncio.create_task(group.run(), name=f"informers-{name}"))

        self.reconciler = WebServerReconciler(
            kube=kube,
            caches=Caches(
                webservers=self.groups["webservers"],
                deployments=self.groups["deployments"],
                services=self.groups["services"],
            ),
            recorder=recorder,
        )
        self.controller = Controller(
            CONTROLLER_NAME,
            self.reconciler,
            queue,
            workers=s.workers,
            resync_period=s.resync_period,
            primary=self.groups["webservers"],
        )

    async def _sync_elect_and_run(self) -> int:
        s = self.settings
        kube, controller = self.kube, self.controller
        assert kube is not None and controller is not None  # noqa: PT018 - set by _build
        if not await self._until_stopped(self._all_synced()):
            return EXIT_OK
        hold: asyncio.Task[None] | None = None
        if s.leader_elect:
            self.elector = LeaderElector(
                kube,
                lease_name=s.leader_election_id,
                lease_namespace=s.leader_election_namespace or _pod_namespace() or "default",
                identity=_identity(),
                lease_duration=s.lease_duration,
                renew_deadline=s.renew_deadline,
                retry_period=s.retry_period,
            )
            if not await self._until_stopped(self.elector.acquire()):
                return EXIT_OK
            hold = asyncio.create_task(self.elector.hold(), name="leader-election-hold")

        controller_task = asyncio.create_task(controller.run(), name="controller")
        stop_task = asyncio.create_task(self.stop_requested.wait(), name="stop-requested")
        watched: set[asyncio.Task[Any]] = {controller_task, stop_task}
        if hold is not None:
            watched.add(hold)
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        stop_task.cancel()
        if hold is not None and hold in done:
            # Deposed: no write may leave this process any more. Cancel in-flight reconciles immediately.
            log.error("leader election lost: stopping at once so that only the new leader writes")
            await controller.stop(0.0)
            await asyncio.gather(controller_task, return_exceptions=True)
            with contextlib.suppress(BaseException):
                hold.result()
            return EXIT_LEADERSHIP_LOST
        if controller_task in done:
            controller_task.result()
            log.error("controller stopped unexpectedly")
            return EXIT_FAILED
        drained = await controller.stop(s.drain_timeout)
        await asyncio.gather(controller_task, return_exceptions=True)
        if hold is not None:
            hold.cancel()
            await asyncio.gather(hold, return_exceptions=True)
        log.info("controller drained" if drained else "drain timeout reached; in-flight reconciles were cancelled")
        return EXIT_OK

    async def _all_synced(self) -> None:
        log.info("waiting for caches to sync")
        await asyncio.gather(*(group.synced.wait() for group in self.groups.values()))
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
        if self.kube is not None:
            await self.kube.close()
        if self.probe_server is not None:
            self.probe_server.stop()
        log.info("stopped")


def _watch_check(group: InformerGroup) -> Callable[[], tuple[bool, str]]:
    """Liveness of a group's watches: fails when a watch task died or made no progress for twice its stall timeout.

    The informer's watchdog restarts a silent watch after one stall timeout, so silence beyond two means the
    restarts themselves stopped.
    """

    def check() -> tuple[bool, str]:
        if not group.alive:
            return False, "a watch task has died"
        for informer in group.informers:
            silent, limit = informer.seconds_since_activity(), 2.0 * informer.stall_timeout
            if silent > limit:
                return False, f"{informer.name}: no watch progress for {silent:.0f}s (limit {limit:.0f}s)"
        return True, "watching"

    return check


def _synced_check(group: InformerGroup, name: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        if group.has_synced:
            return True, f"{name} cache synced"
        return False, f"{name} cache not synced yet (is the CRD installed and the operator allowed to list {name}?)"

    return check


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
