"""One replica of a sharded operator (``--shards S`` > 1): what it does when it gains and loses a shard, and its life.

Why a module of its own: without sharding one Lease decides everything (``manager.operator``: lead or wait); with it
every replica reconciles at once, each for the shards whose Leases it holds (``runtime.sharding.shardset``), and the
pieces must move together shard by shard:

- **Gained** (the shard's Lease is held): add the shard to the informers' union of held shards
(``runtime.sharding.cache``:
  one list+watch per resource for all of them, server-side shard selector where the API server has the
  ``ShardedListAndWatch`` gate, the client-side test where it has not); once every view has listed the shard's
  objects, admit the shard's keys to the work queue and enqueue its WebServers. Keys are never
  admitted earlier, so no reconcile sees a WebServer without its children's cache. ``on_gained`` returns at once: the
  Lease's renewals start after it.
- **Lost or handed back**: stop admitting the shard's keys, drop them from the queue, wait (up to the drain timeout)
  for its reconciles in flight, take the shard out of the informers' union (its objects leave the cache and its
  WebServers the metrics: another replica publishes them now). When the Lease was handed back,
  ``runtime.sharding.shardset``
  releases it after this; when it was lost, its fence had closed already, so nothing of the shard's could be written
  meanwhile.
- **Writes**: the client's write gate is ``ShardSet.why_not``: the namespace of each write names its shard, and that
  shard's Lease fence decides, checked just before the request goes on the wire (``kube.gate``).
- **Metrics**: ``webserver_operator_shards``, ``webserver_operator_shard_held{shard}`` (one series per shard on every
  replica), ``webserver_operator_shard_queue_depth{shard}`` and ``webserver_operator_shard_cached_objects{shard,
  resource}`` for the held shards, refreshed every second. Without sharding the same series describe one shard, 0,
  held by the replica that reconciles (``publish_one_shard``), so one dashboard serves both.
- **Life**: the controller, the member Lease and the shard rounds run together; on SIGTERM the rounds stop, the
  in-flight reconciles drain, every shard is handed back (released, so the others take it within a retry period),
  the member Lease is deleted, exit 0. A part that ends on its own is a bug: exit 2.

Built by ``manager.operator`` when ``settings.leader_election.shards`` > 1; ``run`` returns the process exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sized
from typing import Any

from webserver_operator import metrics
from webserver_operator.core.vocabulary import ObjectKey
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.sharding.cache import ShardedInformerCache
from webserver_operator.runtime.sharding.membership import Membership
from webserver_operator.runtime.sharding.ranges import shard_index
from webserver_operator.runtime.sharding.shardset import ShardSet

__all__ = ["ShardWork", "publish_one_shard", "publish_shard", "run_sharded"]

log = logging.getLogger(__name__)

_EXIT_OK = 0
_EXIT_FAILED = 2
_METRICS_TICK_SECONDS = 1.0


class ShardWork:
    """The shards' work on one replica: ``gained`` and ``lost`` are the ``ShardSet``'s callbacks."""

    def __init__(self, cache: ShardedInformerCache, *, drain_timeout: float) -> None:
        self.cache = cache
        self._controller: Controller | None = None
        self._shards = cache.shards
        self._drain_timeout = drain_timeout
        self._admitted: set[int] = set()
        self._syncing: dict[int, asyncio.Task[None]] = {}
        metrics.SHARDS.set(self._shards)
        for shard in range(self._shards):
            metrics.SHARD_HELD.labels(shard=str(shard)).set(0)

    def serve(self, controller: Controller) -> None:
        """Feed ``controller`` the held shards' keys only.

        Separate from ``__init__`` because the controller's client is gated by the ``ShardSet`` whose callbacks are
        this object's ``gained`` and ``lost``.
        """
        controller.queue.admit(self.admits)
        self._controller = controller

    @property
    def controller(self) -> Controller:
        if self._controller is None:
            raise RuntimeError("ShardWork.serve(controller) must be called before shards are gained")
        return self._controller

    @property
    def admitted(self) -> frozenset[int]:
        """The shards whose keys this replica reconciles now (held, and their caches synced)."""
        return frozenset(self._admitted)

    def shard_of(self, key: ObjectKey) -> int:
        return shard_index(key[0], self._shards)

    def admits(self, key: ObjectKey) -> bool:
        return self.shard_of(key) in self._admitted

    def _of(self, shard: int) -> Callable[[ObjectKey], bool]:
        return lambda key: self.shard_of(key) == shard

    async def gained(self, shard: int) -> None:
        metrics.SHARD_HELD.labels(shard=str(shard)).set(1)
        self.cache.start(shard)
        self._syncing[shard] = asyncio.create_task(self._admit_when_synced(shard), name=f"shard-{shard}-sync")

    async def _admit_when_synced(self, shard: int) -> None:
        await self.cache.synced(shard)
        self._admitted.add(shard)
        count = self.controller.resync(self._of(shard))
        log.info("shard %d: reconciling its %d WebServer(s)", shard, count, extra={"shard": shard})
        self._syncing.pop(shard, None)

    async def lost(self, shard: int) -> None:
        self._admitted.discard(shard)
        syncing = self._syncing.pop(shard, None)
        if syncing is not None:
            syncing.cancel()
            await asyncio.gather(syncing, return_exceptions=True)
        drained = await self.controller.release(self._of(shard), drain_timeout=self._drain_timeout)
        if not drained:
            log.warning(
                "shard %d: reconciles still running after the %.0fs drain; its fence stops their writes",
                shard,
                self._drain_timeout,
                extra={"shard": shard},
            )
        await self.cache.stop(shard)
        label = str(shard)
        metrics.SHARD_HELD.labels(shard=label).set(0)
        with contextlib.suppress(KeyError):
            metrics.SHARD_QUEUE_DEPTH.remove(label)
        for name in self.cache.groups:
            with contextlib.suppress(KeyError):
                metrics.SHARD_CACHED_OBJECTS.remove(label, name)
        log.info("shard %d: handed over (informers stopped, keys dropped)", shard, extra={"shard": shard})

    def publish(self) -> None:
        """Refresh the per-shard queue depth and cache sizes of the held shards."""
        depth = dict.fromkeys(self.cache.started, 0)
        for key in self.controller.queue.queued():
            shard = self.shard_of(key)
            if shard in depth:
                depth[shard] += 1
        cached = {name: view.cached_per_shard() for name, view in self.cache.groups.items()}
        for shard, count in depth.items():
            publish_shard(shard, queued=count, cached={name: counts.get(shard, 0) for name, counts in cached.items()})

    async def publish_forever(self) -> None:
        while True:
            self.publish()
            await asyncio.sleep(_METRICS_TICK_SECONDS)


def publish_shard(shard: int, *, queued: int, cached: Mapping[str, int], held: bool | None = None) -> None:
    """Set one shard's series: queue depth, cached objects per resource, and (when given) whether it is held."""
    label = str(shard)
    if held is not None:
        metrics.SHARD_HELD.labels(shard=label).set(1 if held else 0)
    metrics.SHARD_QUEUE_DEPTH.labels(shard=label).set(queued)
    for name, count in cached.items():
        metrics.SHARD_CACHED_OBJECTS.labels(shard=label, resource=name).set(count)


async def publish_one_shard(groups: Mapping[str, Sized], controller: Controller, holding: Callable[[], bool]) -> None:
    """Without sharding (``--shards 1``): the whole fleet is shard 0, held by the replica that reconciles.

    So dashboards and alerts read one set of series whatever the shard count: ``webserver_operator_shards`` 1, and
    shard 0 held (``holding()``: the leader, or the only replica without election), with the work queue's depth and
    the caches' sizes. Refreshed every second until cancelled.
    """
    metrics.SHARDS.set(1)
    while True:
        publish_shard(
            0,
            held=controller.running and holding(),
            queued=len(controller.queue),
            cached={name: len(group) for name, group in groups.items()},
        )
        await asyncio.sleep(_METRICS_TICK_SECONDS)


async def run_sharded(
    work: ShardWork,
    shardset: ShardSet,
    membership: Membership,
    *,
    stop_requested: asyncio.Event,
    drain_timeout: float,
) -> int:
    """Reconcile the held shards until a stop is requested; see the module docstring. Returns the exit code."""
    parts: dict[asyncio.Task[None], str] = {
        asyncio.create_task(work.controller.run(), name="controller"): "the controller",
        asyncio.create_task(membership.run(), name="shard-membership"): "the member Lease",
        asyncio.create_task(shardset.run(), name="shard-rounds"): "the shard rounds",
        asyncio.create_task(work.publish_forever(), name="shard-metrics"): "the shard metrics",
    }
    stop: asyncio.Task[Any] = asyncio.create_task(stop_requested.wait(), name="stop-requested")
    done, _ = await asyncio.wait({*parts, stop}, return_when=asyncio.FIRST_COMPLETED)
    code = _EXIT_OK
    for task in done - {stop}:
        code = _EXIT_FAILED
        error = None if task.cancelled() else task.exception()
        log.error("%s stopped unexpectedly: %r", parts[task], error, exc_info=error)
    stop.cancel()
    await shardset.stop_rounds()
    drained = await work.controller.stop(drain_timeout)
    log.info("controller drained" if drained else "drain timeout reached; in-flight reconciles were cancelled")
    await shardset.stop()
    await work.cache.close()
    for task in parts:
        task.cancel()
    await asyncio.gather(*parts, return_exceptions=True)
    await membership.leave()
    return code
