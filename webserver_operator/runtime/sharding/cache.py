"""The informer cache of a sharded replica: one list+watch per view for all the held shards, read shard by shard.

Why a second cache next to ``runtime.informers.cache.InformerCache``: with ``--shards S`` a replica caches only the
shards whose
Leases it holds, and the set changes while the process runs (``runtime.sharding.shardset`` gains and hands back
shards). The
controller and the reconciler must not notice: they still ask ``cache.group(resource)`` for one reader per resource
and add their event handlers to it once, before anything runs, exactly as with the unsharded cache.

One list+watch per declared view (resource + label selector), whatever the number of held shards: its selector is
the union of the held shards' ranges (``runtime.sharding.ranges.ShardUnion``), and its client-side test keeps the
objects of any
held shard. One informer per held shard would cost nothing more where the API server filters, but where it does not
(no ``ShardedListAndWatch`` gate, or a server older than 1.36) each of them receives every event: a replica holding
k shards would decode every event k times.

``start(shard)`` adds the shard to the union: the first one builds each view's ``InformerGroup`` and runs it, a later
one makes its informers relist with the wider selector (``Informer.rescope``); the store's diff hands the handlers
only the new shard's objects, as ADDED events, and nothing for the objects already held. ``stop(shard)`` takes it
out: its objects leave the stores at once and each view's eviction handlers hear of them (they were not deleted:
another replica caches them now, so a handler can drop what it kept about them, such as metric series); the watch
goes on from its resume point with the narrower selector. The last shard stopped stops the informers.

``synced(shard)`` is set once every view has applied a list that includes that shard: the manager admits the
shard's keys only then, so no reconcile runs on a half-filled cache (a WebServer listed before its Deployments would
look as if its children were missing). Reads route by namespace as before: ``ShardedGroup`` answers ``get``/``list``
from the shared store, which holds the held shards' objects and nothing else (a shard not held reads as empty), and
``cached_per_shard()`` counts each shard's objects for ``webserver_operator_shard_cached_objects``.

The views' ``died``, ``has_synced`` and ``informers`` are what ``manager.probes`` reads on the probe thread: they
read one attribute that the main loop replaces whole on the first start and the last stop, never a dict being
changed.

Created by ``manager.shards``; ``reconcile.setup`` declares its handlers on the views as on ``InformerCache``'s groups.
Knows nothing of WebServers.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.core.vocabulary import EventHandler, KubeObject, KubeObjects, ObjectKey, WatchApi
from webserver_operator.runtime.informers.cache import EvictionHandler
from webserver_operator.runtime.informers.group import InformerGroup
from webserver_operator.runtime.informers.informer import CacheShape, Informer
from webserver_operator.runtime.sharding.filter import ShardFilter
from webserver_operator.runtime.sharding.ranges import ShardUnion, shard_index, shard_ranges

__all__ = ["ShardedGroup", "ShardedInformerCache"]

log = logging.getLogger(__name__)


class ShardedGroup:
    """One resource (and label selector) across the held shards: one shared group, reads by shard, the handlers.

    Satisfies ``core.vocabulary.ObjectReader`` and what ``manager.probes`` reads of an ``InformerGroup``.
    """

    def __init__(self, resource: Resource, label_selector: str | None, shards: int) -> None:
        self.resource = resource
        self.label_selector = label_selector
        self.name = resource.plural
        self._shards = shards
        self._handlers: list[EventHandler] = []
        self._evictions: list[EvictionHandler] = []
        self._group: InformerGroup | None = None  # read by the probe thread: replaced whole, never changed
        #: What the controllers declared the view keeps (``CacheShape``), given to the group when it is built.
        self.shape = CacheShape()

    # -- declaration ----------------------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Call ``handler`` for every change in every held shard (each new shard's list arrives as ADDED events)."""
        self._handlers.append(handler)

    def add_eviction_handler(self, handler: EvictionHandler) -> None:
        """Call ``handler(obj)`` for each object this view stops caching because its shard was handed over."""
        self._evictions.append(handler)

    # -- reads ----------------------------------------------------------------------------------------------------

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        group = self._group
        return group.get(key) if group is not None else None

    def list(self, namespace: str | None = None) -> KubeObjects:
        group = self._group
        return group.list(namespace) if group is not None else []

    def __len__(self) -> int:
        group = self._group
        return len(group) if group is not None else 0

    def cached_per_shard(self) -> dict[int, int]:
        """Objects cached per held shard with any, for the per-second metrics.

        Summed from the stores' per-namespace counts: one hash lookup per namespace, not one per object.
        """
        counts: Counter[int] = Counter()
        for informer in self.informers:
            for namespace, count in informer.store.namespace_counts().items():
                counts[shard_index(namespace, self._shards)] += count
        return dict(counts)

    # -- health (read from the probe thread) ----------------------------------------------------------------------

    @property
    def died(self) -> bool:
        group = self._group
        return group is not None and group.died

    @property
    def has_synced(self) -> bool:
        """Every held shard is listed into the cache (true while no shard is held: nothing to wait for)."""
        return all(informer.synced.is_set() and informer.scope_listed for informer in self.informers)

    @property
    def informers(self) -> tuple[Informer, ...]:
        group = self._group
        return group.informers if group is not None else ()

    # -- shards come and go (called by ShardedInformerCache) ------------------------------------------------------

    def _attach(self, group: InformerGroup) -> None:
        for handler in self._handlers:
            group.add_handler(handler)
        self._group = group

    def _rescope(self, scope: ShardUnion) -> None:
        """Keep ``scope`` from now on; the objects of shards let go go to the eviction handlers."""
        self._evict([obj for informer in self.informers for obj in informer.rescope(scope)])

    def _detach(self) -> None:
        """Drop the group (its informers are stopped) and evict everything it held."""
        group, self._group = self._group, None
        if group is not None:
            self._evict(group.list())

    def _evict(self, objects: KubeObjects) -> None:
        for obj in objects:
            for handler in self._evictions:
                try:
                    handler(obj)
                except Exception:
                    log.exception("eviction handler of %s failed", self.name)


class ShardedInformerCache:
    """One list+watch per declared view for the union of the held shards; see the module docstring."""

    def __init__(self, api: WatchApi, settings: WatchSettings, *, shards: int) -> None:
        shard_ranges(shards)  # validates the count
        self._api = api
        self._settings = settings
        self._shards = shards
        self._views: dict[tuple[Resource, str | None], ShardedGroup] = {}
        self._held: frozenset[int] = frozenset()
        self._task: asyncio.Task[None] | None = None
        self._synced: dict[int, asyncio.Event] = {}
        self._syncing: dict[int, asyncio.Task[None]] = {}

    @property
    def shards(self) -> int:
        return self._shards

    def group(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        shape: CacheShape | None = None,
    ) -> ShardedGroup:
        """The view of ``resource`` (restricted to ``label_selector``), made on first use; declare before ``start``.

        ``shape``: as ``InformerCache.group``, given to the informers when the first shard starts.
        """
        key = (resource, label_selector)
        if key not in self._views:
            if self._held:
                raise RuntimeError(f"{resource.plural} declared after shards started: declare every view first")
            self._views[key] = ShardedGroup(resource, label_selector, self._shards)
        view = self._views[key]
        joined = view.shape.joined(shape, view=resource.plural) if shape is not None else view.shape
        if joined != view.shape:
            if self._held:
                raise RuntimeError(f"{resource.plural} shaped after shards started: declare every view first")
            view.shape = joined
        return view

    @property
    def groups(self) -> dict[str, ShardedGroup]:
        """Every view by resource plural (plus the selector when one resource is watched twice)."""
        named: dict[str, ShardedGroup] = {}
        for (resource, selector), view in self._views.items():
            named[resource.plural if resource.plural not in named else f"{resource.plural}[{selector}]"] = view
        return named

    @property
    def started(self) -> frozenset[int]:
        """The shards whose objects are cached here (synced or not)."""
        return self._held

    def is_synced(self, shard: int) -> bool:
        event = self._synced.get(shard)
        return event is not None and event.is_set()

    async def synced(self, shard: int) -> None:
        """Return once every view has listed ``shard``'s objects (``KeyError`` if it was not started)."""
        await self._synced[shard].wait()

    def start(self, shard: int) -> None:
        """Cache ``shard`` too; its objects reach the handlers as ADDED events, those of the other shards nothing."""
        if shard in self._held:
            return
        self._held |= {shard}
        scope = ShardUnion(self._shards, self._held)
        if self._task is None:
            groups = []
            for view in self._views.values():
                group = InformerGroup.for_namespaces(
                    self._api,
                    view.resource,
                    settings=self._settings,
                    label_selector=view.label_selector,
                    scope=ShardFilter.factory(scope),
                    shape=view.shape,
                )
                view._attach(group)
                groups.append(group)
            self._task = asyncio.create_task(self._run(groups), name="informers-shards")
        else:
            for view in self._views.values():
                view._rescope(scope)
        marks = [(informer, informer.scope_version) for view in self._views.values() for informer in view.informers]
        self._synced[shard] = synced = asyncio.Event()
        self._syncing[shard] = asyncio.create_task(self._mark_synced(shard, marks, synced), name=f"shard-{shard}-list")

    async def stop(self, shard: int) -> None:
        """Stop caching ``shard``: its objects leave every view (eviction handlers are told), the others stay."""
        if shard not in self._held:
            return
        syncing = self._syncing.pop(shard, None)
        self._synced.pop(shard, None)
        if syncing is not None:
            syncing.cancel()
            await asyncio.gather(syncing, return_exceptions=True)
        self._held -= {shard}
        if not self._held:
            await self._stop_informers()
            return
        scope = ShardUnion(self._shards, self._held)
        for view in self._views.values():
            view._rescope(scope)

    async def close(self) -> None:
        """Stop caching every shard at once (on shutdown): no narrower watch is opened on the way."""
        syncing = list(self._syncing.values())
        self._syncing.clear()
        self._synced.clear()
        for task in syncing:
            task.cancel()
        await asyncio.gather(*syncing, return_exceptions=True)
        self._held = frozenset()
        await self._stop_informers()

    async def _stop_informers(self) -> None:
        """Stop the informers and evict everything they held (no shard is held any more)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for view in self._views.values():
            view._detach()

    async def _mark_synced(self, shard: int, marks: list[tuple[Informer, int]], synced: asyncio.Event) -> None:
        await asyncio.gather(*(informer.wait_listed(version) for informer, version in marks))
        synced.set()
        log.info("shard %d: caches synced", shard)

    async def _run(self, groups: list[InformerGroup]) -> None:
        async with asyncio.TaskGroup() as tasks:
            for group in groups:
                tasks.create_task(group.run(), name=f"informers-shards-{group.name}")
