"""One informer per watched namespace (or one cluster-wide), behind a single merged read view.

Why: an operator restricted to a few namespaces (RBAC via Roles, not a ClusterRole) cannot list cluster-wide, so it
needs one list+watch per namespace, like controller-runtime's multi-namespace cache. Reconcilers should not care: the
group answers ``get``/``list`` (the ``core.vocabulary.ObjectReader`` shape) by routing a key to the
informer of its namespace, and ``synced`` is set only once every member has listed, so readiness waits for the whole
view.

Built by ``runtime.informers.cache.InformerCache`` for each watched resource (and label selector); the reconciler reads
the group as its cache and the manager's probes read ``died``/``has_synced``.
"""

import asyncio
import logging
from collections.abc import Callable, Sequence

from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.core.vocabulary import (
    EventHandler,
    EventType,
    KubeObject,
    KubeObjects,
    ObjectKey,
    WatchApi,
    object_key,
)
from webserver_operator.runtime.informers.informer import CacheShape, Informer, noop_handler
from webserver_operator.runtime.informers.scope import ScopeFactory

__all__ = ["InformerGroup"]

logger = logging.getLogger(__name__)


class InformerGroup:
    """Runs its informers together and merges their stores; satisfies ``core.vocabulary.ObjectReader``."""

    def __init__(self, informers: Sequence[Informer]) -> None:
        if not informers:
            raise ValueError("an informer group needs at least one informer")
        self.informers: tuple[Informer, ...] = tuple(informers)
        self._handlers: list[EventHandler] = []
        for informer in self.informers:
            if informer.on_event is not noop_handler:
                self._handlers.append(informer.on_event)
            informer.on_event = self._on_event
        self._cluster_wide = next((i for i in self.informers if i.namespace is None), None)
        self._by_namespace = {i.namespace: i for i in self.informers if i.namespace is not None}
        #: Set once every informer of the group has completed its first list.
        self.synced = asyncio.Event()
        self._died = False

    @classmethod
    def for_namespaces(
        cls,
        api: WatchApi,
        resource: Resource,
        *,
        settings: WatchSettings,
        on_event: EventHandler | None = None,
        label_selector: str | None = None,
        scope: ScopeFactory | None = None,
        shape: CacheShape | None = None,
    ) -> "InformerGroup":
        """One informer per namespace in ``settings.namespaces``; one cluster-wide when the list is empty.

        A cluster-scoped resource always gets one cluster-wide informer. ``scope``: what every member keeps
        (``runtime.informers.scope``; a sharded cache passes its shards' filter), everything without one.
        ``shape``: what every member keeps and how it reads (``runtime.informers.informer.CacheShape``).
        """
        unique = list(dict.fromkeys(ns for ns in settings.namespaces if ns))
        targets: list[str | None] = list(unique) if unique and resource.namespaced else [None]
        informers = [
            Informer(
                api,
                resource,
                namespace=ns,
                label_selector=label_selector,
                scope=scope,
                name=resource.plural,
                on_event=on_event,
                watch_timeout_seconds=settings.watch_timeout,
                stall_timeout=settings.stall_timeout,
                shape=shape,
            )
            for ns in targets
        ]
        return cls(informers)

    def reshape(self, shape: CacheShape) -> None:
        """Give every member ``shape`` (``runtime.informers.informer.CacheShape``), before ``run``."""
        for informer in self.informers:
            informer.shape = shape

    # -- event handlers -----------------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Call ``handler`` for every change of every member's store (client-go's ``AddEventHandler``).

        Handlers added before ``run`` see the initial list as ADDED events; each runs even if another one raised.
        """
        self._handlers.append(handler)

    def add_eviction_handler(self, handler: Callable[[KubeObject], None]) -> None:
        """Accepted so that controllers declare alike on every cache; never called.

        A group keeps its objects until they are deleted: only a sharded cache hands objects over
        (``runtime.sharding.cache``).
        """

    def _on_event(self, event_type: EventType, obj: KubeObject, old: KubeObject | None) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, obj, old)
            except Exception:
                logger.exception(
                    "informer group %s: event handler failed for %s %s/%s", self.name, event_type, *object_key(obj)
                )

    @property
    def name(self) -> str:
        return self.informers[0].name

    # -- read view ------------------------------------------------------------------------------------------------

    def _for(self, namespace: str) -> Informer | None:
        return self._cluster_wide or self._by_namespace.get(namespace)

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        informer = self._for(key[0])
        return informer.store.get(key) if informer is not None else None

    def __len__(self) -> int:
        """Number of cached objects across the group's informers (cheap: no list is built)."""
        return sum(len(informer.store) for informer in self.informers)

    def list(self, namespace: str | None = None) -> KubeObjects:
        if namespace is not None:
            informer = self._for(namespace)
            return informer.store.list(namespace) if informer is not None else []
        return [obj for informer in self.informers for obj in informer.store.list()]

    # -- lifecycle and health -------------------------------------------------------------------------------------

    @property
    def died(self) -> bool:
        """True once an informer ended other than by cancellation (a bug, or a return): a restart would help.

        A shutdown cancels the informers while the probes still answer; that is a process stopping, not a dead one.
        """
        return self._died

    @property
    def has_synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    async def run(self) -> None:
        """Run every informer until cancelled; if one of them ever returns or raises, the others are cancelled."""
        async with asyncio.TaskGroup() as group:
            for informer in self.informers:
                group.create_task(self._run(informer), name=f"informer-{informer.name}-{informer.namespace or '*'}")
            group.create_task(self._mark_synced(), name="informer-group-synced")

    async def _run(self, informer: Informer) -> None:
        try:
            await informer.run()
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._died = True
            raise
        self._died = True  # run returns only by cancellation: a return is a death too

    async def _mark_synced(self) -> None:
        for informer in self.informers:
            await informer.synced.wait()
        self.synced.set()
        logger.info("informer group %s synced (%d informer(s))", self.name, len(self.informers))
