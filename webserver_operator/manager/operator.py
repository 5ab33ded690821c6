"""``Operator``: one operator process: endpoints, clients, informers, the leader Lease and the controller, in order.

Only lifecycle lives here: what the controller watches and how events map to keys is declared next to the
reconciler (``reconcile.setup``), how a Lease is held in ``runtime.leases.lease``. Called by ``cli`` (``run_operator``);
returns the process exit code.

Order of events, after controller-runtime's manager:
1. probes start first, each server on a thread of its own (the bound ports are logged), so kubelet sees a live
   process while caches fill; /metrics is launched next and comes up beside the rest (its self-signed certificate
   is made by a child process, which the first reconcile must not wait for): /readyz waits for it, its port is
   logged when it listens, and if it cannot start the operator stops with exit code 2 and the reason;
2. informers (WebServers, and label-filtered Deployments and Services) start on EVERY replica: a standby keeps warm
   caches, is ready, and takes over without a relist;
3. with leader election on, reconciling starts only once the Lease is held. Writes are fenced by time: the reconcile
   path's client refuses every write from the renew deadline after the last successful renew was sent, checked
   just before each request goes on the wire (``runtime.leases.fence``, ``kube.gate``), even if the event loop was
   frozen and
   nothing else ran. Losing the Lease (a renew round failed, or someone else holds it) stops reconciling at once and
   the process exits non-zero, because a deposed leader must not write;
4. SIGTERM/SIGINT: stop taking work, let in-flight reconciles finish within the drain timeout, release the Lease so
   a standby takes over within about one retry period, cancel the informers, close the clients, stop the endpoints,
   exit 0. Every part is registered on one ``AsyncExitStack`` as it starts, so shutdown is the start in reverse and
   a part that failed to start leaves nothing of the parts before it running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from webserver_operator import __version__
from webserver_operator.core.settings import parse_bind_address
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration
from webserver_operator.kube.gate import WriteCheck
from webserver_operator.manager import collector
from webserver_operator.manager.configuration import Settings
from webserver_operator.manager.endpoints import ProbeServer
from webserver_operator.manager.metrics.server import MetricsServer
from webserver_operator.manager.probes import Heartbeat, Probes, Starting, Watching, cache_synced, watches_running
from webserver_operator.manager.shards import ShardWork, publish_one_shard, run_sharded
from webserver_operator.reconcile.setup import setup_webserver_controller
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.informers.cache import InformerCache, SharedCache
from webserver_operator.runtime.leases.lease import LEASE_CALLS, Lease
from webserver_operator.runtime.sharding.cache import ShardedInformerCache
from webserver_operator.runtime.sharding.membership import LeaseGroup, Membership
from webserver_operator.runtime.sharding.shardset import ShardSet, no_shard_leases_live

__all__ = ["Operator", "lead", "run_operator"]

log = logging.getLogger(__name__)

#: A Lease sends one request at a time; a second connection covers a release racing a renewal.
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


@dataclass(frozen=True)
class _Parts:
    """What ``_build`` made, sharded or not: the cache, the controller, and how this replica leads with them.

    One record for both paths, so a part added to the operator is added once: ``_build`` decides between one leader
    Lease and shard Leases in one place, and ``run`` only awaits ``lead``.
    """

    cache: SharedCache
    controller: Controller
    #: Wait for the caches, take the Lease(s), run the controller until a stop is requested or a Lease is lost;
    #: returns the exit code.
    lead: Callable[[], Awaitable[int]]


class Operator:
    """One operator process. ``await Operator(settings).run()`` returns the exit code."""

    def __init__(self, settings: Settings, *, owns_process: bool = False) -> None:
        self.settings = settings
        #: The process runs this operator alone (``run_operator``, the CLI): it may set process-wide things such as
        #: the garbage collector (``manager.collector``). An operator embedded in another process (a test) leaves
        #: them to that process.
        self._owns_process = owns_process
        self.stop_requested = asyncio.Event()
        self._health_port: int | None = None
        #: Set when a part started beside the controller (the metrics server) failed: the exit code is then 2.
        self._failed = False

    @property
    def health_port(self) -> int | None:
        """The port the health probes are served on, once they are (``None`` before)."""
        return self._health_port

    def request_stop(self) -> None:
        if not self.stop_requested.is_set():
            log.info("shutdown requested: finishing in-flight work")
        self.stop_requested.set()

    async def run(self) -> int:
        if self._owns_process:
            collector.tune()
        try:
            async with contextlib.AsyncExitStack() as stack:
                probes = self._start_endpoints(stack)
                parts = await self._build(stack, probes)
                code = await parts.lead()
                return _EXIT_FAILED if self._failed else code
        finally:
            log.info("stopped")

    def _start_endpoints(self, stack: contextlib.AsyncExitStack) -> Probes:
        """The loop heartbeat and probes, then /metrics launched beside them; the ports go into the log."""
        s = self.settings
        heartbeat = Heartbeat()
        _background(stack, heartbeat.run(), name="heartbeat")
        probes = Probes()
        probes.liveness["event-loop"] = lambda: heartbeat.check(max_lag=s.server.max_loop_lag)
        probe_server = ProbeServer(probes, health_bind=parse_bind_address(s.server.health_probe_bind_address))
        probe_server.start()
        stack.callback(probe_server.stop)
        self._health_port = probe_server.health_port
        if not s.server.metrics_enabled:
            log.info(
                "webserver-operator %s: health probes on port %d, metrics (disabled)",
                __version__,
                probe_server.health_port,
                extra={"health_port": probe_server.health_port, "metrics_port": None, "metrics_scheme": None},
            )
            return probes
        metrics_server = MetricsServer(server=s.server, client=s.client)
        metrics_server.launch()
        stack.callback(metrics_server.stop)
        starting = Starting("metrics server")
        probes.readiness["metrics"] = starting.check
        log.info(
            "webserver-operator %s: health probes on port %d, metrics starting on %s",
            __version__,
            probe_server.health_port,
            s.server.metrics_bind_address,
            extra={"health_port": probe_server.health_port},
        )
        _background(stack, self._announce(metrics_server, starting), name="metrics-start")
        return probes

    async def _announce(self, metrics_server: MetricsServer, starting: Starting) -> None:
        """Log the metrics port once it listens; if it cannot start, say why and stop the operator (exit code 2)."""
        try:
            port = await metrics_server.started()
        except Exception as err:
            starting.failed(str(err))
            log.error("cannot serve /metrics, stopping: %s", err, exc_info=err)
            self._failed = True
            self.request_stop()
            return
        starting.listening()
        log.info(
            "metrics on %s port %d",
            metrics_server.scheme,
            port,
            extra={"metrics_port": port, "metrics_scheme": metrics_server.scheme},
        )

    async def _build(self, stack: contextlib.AsyncExitStack, probes: Probes) -> _Parts:
        """Clients, informer cache, the leader Lease and the controller (declared by ``reconcile.setup``).

        Informers start on every replica. Three connection pools: requests (reconcile writes, Events), watches (each
        holds a connection for minutes; uncapped) and the Lease (never queued behind anything). See
        ``KubeClient.create``.
        """
        s = self.settings
        configuration = await load_configuration(kubeconfig=s.client.kubeconfig, context=s.client.context)

        async def client(**options: Any) -> KubeClient:
            created = await KubeClient.create(configuration, settings=s.client, **options)
            stack.push_async_callback(created.close)
            return created

        api = await client()
        watch_api = await client(watch_read_timeout=s.watch.read_timeout, pool_size=0)
        lease_api = await client(pool_size=_LEASE_POOL_SIZE, retry=LEASE_CALLS)
        log.info(
            "connected to %s; watching %s",
            api.host,
            ", ".join(s.watch.namespaces) if s.watch.namespaces else "all namespaces",
        )
        writer = api.without_retries()
        if s.leader_election.shards > 1:
            sharded_cache = ShardedInformerCache(watch_api, s.watch, shards=s.leader_election.shards)
            sharded = self._shard_leases(sharded_cache, lease_api)
            cache: SharedCache = sharded_cache
            controller = setup_webserver_controller(cache, api=writer.gated(sharded.why_not), settings=s.controller)
            controller.gate_writes(sharded.why_not)  # a write refused by a late renewal waits for it, not a backoff
            # Read once the controller declared its groups: the property lists the groups there are now.
            watched: Mapping[str, Watching] = sharded_cache.groups
            lead = sharded.lead_with(controller)
        else:
            single_cache = InformerCache(watch_api, s.watch)
            cache = single_cache
            lease = self._leader_lease(lease_api) if s.leader_election.leader_elect else None
            gate = _fence_check(lease) if lease is not None else None
            if gate is not None:
                writer = writer.gated(gate)
            controller = setup_webserver_controller(cache, api=writer, settings=s.controller)
            if gate is not None:
                controller.gate_writes(gate)  # a write refused by a late renewal waits for it, not a backoff
            watched = single_cache.groups
            lead = self._single_leader(stack, single_cache, controller, lease, lease_api)
        _probe_caches(probes, watched)
        return _Parts(cache=cache, controller=controller, lead=lead)

    def _single_leader(
        self,
        stack: contextlib.AsyncExitStack,
        cache: InformerCache,
        controller: Controller,
        lease: Lease | None,
        lease_api: KubeClient,
    ) -> Callable[[], Awaitable[int]]:
        """One shard: the informers run now, on every replica; ``lead`` syncs, takes the leader Lease, runs."""
        _background(stack, cache.run(), name="informers")
        holding = (lambda: True) if lease is None else (lambda: lease.is_held)
        _background(stack, publish_one_shard(cache.groups, controller, holding), name="shard-metrics")
        may_lead = None
        if lease is not None:
            stack.push_async_callback(lease.release)  # first thing on the way out: the drain has ended by then
            may_lead = no_shard_leases_live(
                lease_api,
                namespace=lease.namespace,
                leader=lease.name,
                lease_duration=self.settings.lease.lease_duration,
                clock=time.monotonic,
            )

        async def lead_alone() -> int:
            log.info("waiting for caches to sync")
            if not await self._until_stopped(cache.synced()):
                return _EXIT_OK
            log.info("caches synced")
            if self._owns_process:
                collector.settle()
            hold: asyncio.Task[None] | None = None
            if lease is not None:
                if not await self._until_stopped(lease.acquire(may_try=may_lead)):
                    return _EXIT_OK
                hold = asyncio.create_task(lease.hold(), name="leader-election-hold")
            return await lead(
                controller,
                hold=hold,
                stop_requested=self.stop_requested,
                drain_timeout=self.settings.controller.drain_timeout,
            )

        return lead_alone

    def _shard_leases(self, cache: ShardedInformerCache, lease_api: KubeClient) -> _ShardLeases:
        """The member and shard Leases, and the work of each shard held (informers, then its keys).

        Nothing runs yet: ``manager.shards.run_sharded`` starts the rounds and the controller together, and stops
        them (shards handed back, member Lease deleted) before the exit stack closes the clients.
        """
        s = self.settings
        election = s.leader_election
        membership = Membership(
            LeaseGroup(
                api=lease_api,
                name=election.leader_election_id,
                namespace=election.leader_election_namespace or _pod_namespace() or "default",
                identity=_identity(),
                settings=s.lease,
            ),
            shards=election.shards,
        )
        work = ShardWork(cache, drain_timeout=s.controller.drain_timeout)
        shardset = ShardSet(membership, shards=election.shards, on_gained=work.gained, on_lost=work.lost)
        log.info(
            "sharded: %d shards, Leases %s-shard-<i> held as %s",
            election.shards,
            election.leader_election_id,
            membership.group.identity,
            extra={"shards": election.shards, "identity": membership.group.identity},
        )
        return _ShardLeases(self, work, shardset, membership)

    def _leader_lease(self, lease_api: KubeClient) -> Lease:
        election = self.settings.leader_election
        return Lease(
            lease_api,
            name=election.leader_election_id,
            namespace=election.leader_election_namespace or _pod_namespace() or "default",
            identity=_identity(),
            settings=self.settings.lease,
        )

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


@dataclass(frozen=True)
class _ShardLeases:
    """With ``--shards`` > 1: the shards' work, their Leases and this replica's membership (``manager.shards``)."""

    operator: Operator
    work: ShardWork
    shardset: ShardSet
    membership: Membership

    def why_not(self, path: str) -> str | None:
        """The write gate: a write for a namespace leaves only while its shard's Lease is held (``ShardSet``)."""
        return self.shardset.why_not(path)

    def lead_with(self, controller: Controller) -> Callable[[], Awaitable[int]]:
        """Serve ``controller`` on the shards held; ``lead`` runs the Lease rounds until stopped."""
        self.work.serve(controller)

        async def lead_shards() -> int:
            return await run_sharded(
                self.work,
                self.shardset,
                self.membership,
                stop_requested=self.operator.stop_requested,
                drain_timeout=self.operator.settings.controller.drain_timeout,
            )

        return lead_shards


def _probe_caches(probes: Probes, groups: Mapping[str, Watching]) -> None:
    """Liveness of every resource's watches, readiness once its cache has synced (with sharding: the held shards')."""
    for name, group in groups.items():
        probes.liveness[f"watch-{name}"] = watches_running(group)
        probes.readiness[f"cache-{name}"] = cache_synced(group, name)


def _fence_check(lease: Lease) -> WriteCheck:
    """The leader Lease's fence as the write gate of the reconcile path (every path is under the one Lease)."""
    fence = lease.fence

    def check(_path: str) -> str | None:
        return fence.why_not()

    return check


def _background(stack: contextlib.AsyncExitStack, coro: Coroutine[Any, Any, None], *, name: str) -> None:
    """Run ``coro`` as a task that the exit stack cancels (and awaits) on the way out."""
    task = asyncio.create_task(coro, name=name)

    async def cancel() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    stack.push_async_callback(cancel)


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
    operator = Operator(settings, owns_process=True)
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
