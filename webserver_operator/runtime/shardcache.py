"""The informer cache of a sharded replica: one informer set per held shard, behind one read view per resource.

Why a second cache next to ``runtime.cache.InformerCache``: with ``--shards S`` a replica caches only the shards whose
Leases it holds, and the set changes while the process runs (``runtime.shardset`` gains and hands back shards). The
controller and the reconciler must not notice: they still ask ``cache.group(resource)`` for one reader per resource
and add their event handlers to it once, before anything runs, exactly as with the unsharded cache.

So ``group()`` returns a ``ShardedGroup``: a view that records the handlers and routes every read by namespace to
the ``InformerGroup`` of the shard that namespace hashes into (``core.shards.shard_index``; a shard not held here
reads as empty). ``start(shard)`` builds one ``InformerGroup`` per declared view for that shard's range (server-side
``shardSelector``, client-side fallback: ``runtime.informer``), gives it the recorded handlers and runs it;
``stop(shard)`` cancels them and tells each view's eviction handlers about the objects it no longer caches (they
were not deleted: another replica caches them now, so a handler can drop what it kept about them, such as metric
series).

``synced(shard)`` is set once every view's informers of that shard have listed: the manager admits the shard's keys
only then, so no reconcile runs on a half-filled cache (a WebServer listed before its Deployments would look as if
its children were missing).

The views' ``died``, ``has_synced`` and ``informers`` are what ``manager.probes`` reads on the probe thread: they
read a tuple that the main loop replaces whole on every start and stop, never a dict being changed.

Created by ``manager.shards``; ``reconcile.setup`` declares its handlers on the views as on ``InformerCache``'s groups.
Knows nothing of WebServers.
"""

from __future__ import annotations

import asyncio
import logging

from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.core.shards import shard_index, shard_ranges
from webserver_operator.core.vocabulary import EventHandler, KubeObject, KubeObjects, ObjectKey, WatchApi
from webserver_operator.runtime.cache import EvictionHandler
from webserver_operator.runtime.group import InformerGroup
from webserver_operator.runtime.informer import Informer

__all__ = ["ShardedGroup", "ShardedInformerCache"]

log = logging.getLogger(__name__)


class ShardedGroup:
    """One resource (and label selector) across the held shards: routes reads by namespace, keeps the handlers.

    Satisfies ``core.vocabulary.ObjectReader`` and what ``manager.probes`` reads of an ``InformerGroup``.
    """

    def __init__(self, resource: Resource, label_selector: str | None, shards: int) -> None:
        self.resource = resource
        self.label_selector = label_selector
        self.name = resource.plural
        self._shards = shards
        self._handlers: list[EventHandler] = []
        self._evictions: list[EvictionHandler] = []
        self._by_shard: dict[int, InformerGroup] = {}
        self._held: tuple[InformerGroup, ...] = ()  # read by the probe thread: replaced whole, never changed

    # -- declaration ----------------------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Call ``handler`` for every change in every held shard (each new shard's list arrives as ADDED events)."""
        self._handlers.append(handler)

    def add_eviction_handler(self, handler: EvictionHandler) -> None:
        """Call ``handler(obj)`` for each object this view stops caching because its shard was handed over."""
        self._evictions.append(handler)

    # -- reads ----------------------------------------------------------------------------------------------------

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        group = self._by_shard.get(shard_index(key[0], self._shards))
        return group.get(key) if group is not None else None

    def list(self, namespace: str | None = None) -> KubeObjects:
        if namespace is not None:
            group = self._by_shard.get(shard_index(namespace, self._shards))
            return group.list(namespace) if group is not None else []
        return [obj for group in self._held for obj in group.list()]

    def __len__(self) -> int:
        return sum(len(group) for group in self._held)

    def cached(self, shard: int) -> int:
        """Objects cached for ``shard`` (0 when it is not held here)."""
        group = self._by_shard.get(shard)
        return len(group) if group is not None else 0

    # -- health (read from the probe thread) ----------------------------------------------------------------------

    @property
    def died(self) -> bool:
        return any(group.died for group in self._held)

    @property
    def has_synced(self) -> bool:
        """Every held shard's informers have listed (true while no shard is held: nothing to wait for)."""
        return all(group.has_synced for group in self._held)

    @property
    def informers(self) -> tuple[Informer, ...]:
        return tuple(informer for group in self._held for informer in group.informers)

    # -- shards come and go (called by ShardedInformerCache) ------------------------------------------------------

    def _add(self, shard: int, group: InformerGroup) -> None:
        for handler in self._handlers:
            group.add_handler(handler)
        self._by_shard[shard] = group
        self._held = tuple(self._by_shard.values())

    def _remove(self, shard: int) -> None:
        group = self._by_shard.pop(shard, None)
        self._held = tuple(self._by_shard.values())
        if group is None:
            return
        for obj in group.list():
            for handler in self._evictions:
                try:
                    handler(obj)
                except Exception:
                    log.exception("eviction handler of %s failed", self.name)


class ShardedInformerCache:
    """Informers per held shard for every declared resource; see the module docstring."""

    def __init__(self, api: WatchApi, settings: WatchSettings, *, shards: int) -> None:
        shard_ranges(shards)  # validates the count
        self._api = api
        self._settings = settings
        self._shards = shards
        self._views: dict[tuple[Resource, str | None], ShardedGroup] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._synced: dict[int, asyncio.Event] = {}

    @property
    def shards(self) -> int:
        return self._shards

    def group(self, resource: Resource, *, label_selector: str | None = None) -> ShardedGroup:
        """The view of ``resource`` (restricted to ``label_selector``), made on first use; declare before ``start``."""
        key = (resource, label_selector)
        if key not in self._views:
            if self._tasks:
                raise RuntimeError(f"{resource.plural} declared after shards started: declare every view first")
            self._views[key] = ShardedGroup(resource, label_selector, self._shards)
        return self._views[key]

    @property
    def groups(self) -> dict[str, ShardedGroup]:
        """Every view by resource plural (plus the selector when one resource is watched twice)."""
        named: dict[str, ShardedGroup] = {}
        for (resource, selector), view in self._views.items():
            named[resource.plural if resource.plural not in named else f"{resource.plural}[{selector}]"] = view
        return named

    @property
    def started(self) -> frozenset[int]:
        """The shards whose informers run here (synced or not)."""
        return frozenset(self._tasks)

    def is_synced(self, shard: int) -> bool:
        event = self._synced.get(shard)
        return event is not None and event.is_set()

    async def synced(self, shard: int) -> None:
        """Return once every view's informers of ``shard`` have listed (``KeyError`` if it was not started)."""
        await self._synced[shard].wait()

    def start(self, shard: int) -> None:
        """Start the informers of ``shard`` for every view; their lists reach the handlers as ADDED events."""
        if shard in self._tasks:
            return
        shard_range = shard_ranges(self._shards)[shard]
        groups = []
        for view in self._views.values():
            group = InformerGroup.for_namespaces(
                self._api,
                view.resource,
                settings=self._settings,
                label_selector=view.label_selector,
                shard=shard_range,
            )
            view._add(shard, group)
            groups.append(group)
        self._synced[shard] = synced = asyncio.Event()
        self._tasks[shard] = asyncio.create_task(self._run(shard, groups, synced), name=f"informers-shard-{shard}")

    async def stop(self, shard: int) -> None:
        """Stop the informers of ``shard`` and drop its objects from every view (eviction handlers are told)."""
        task = self._tasks.pop(shard, None)
        self._synced.pop(shard, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for view in self._views.values():
            view._remove(shard)

    async def close(self) -> None:
        """Stop every shard's informers (on shutdown)."""
        for shard in sorted(self._tasks):
            await self.stop(shard)

    async def _run(self, shard: int, groups: list[InformerGroup], synced: asyncio.Event) -> None:
        async def mark_synced() -> None:
            await asyncio.gather(*(group.synced.wait() for group in groups))
            synced.set()
            log.info("shard %d: caches synced", shard)

        async with asyncio.TaskGroup() as tasks:
            for group in groups:
                tasks.create_task(group.run(), name=f"informers-shard-{shard}-{group.name}")
            tasks.create_task(mark_synced(), name=f"informers-shard-{shard}-synced")
