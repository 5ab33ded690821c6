"""Declaring a controller, after controller-runtime's builder: For, Owns, Watches, then ``complete(reconciler)``.

For the primary resource, Owns its children, Watches anything else with a mapping to keys; each may take a
``when`` filter (controller-runtime's ``WithPredicates``) that drops the events which cannot change what the reconciler
does before they reach the queue.

Why a declaration: what wakes a reconciler is part of what the reconciler means, so it is written next to it
(``reconcile.setup``), not spread through the process wiring. The builder turns the declaration into event handlers
on the shared informer groups of the process's cache (``runtime.informers.cache.SharedCache``), each handler mapping an
event
to work-queue keys (``runtime.controller.enqueue``), and hands back a ``runtime.controller.loop.Controller`` that the
manager runs while it leads (with sharding: from the start, fed the held shards' keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import ControllerSettings
from webserver_operator.core.vocabulary import EventHandler, EventType, KubeObject, ObjectKey
from webserver_operator.runtime.controller.enqueue import (
    Deferral,
    EventFilter,
    KeyMapper,
    OrphanRule,
    Urgency,
    keys_for_object,
    keys_for_owner,
)
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.controller.result import Reconciler
from webserver_operator.runtime.controller.workqueue import WorkQueue
from webserver_operator.runtime.informers.cache import CacheGroup, SharedCache
from webserver_operator.runtime.informers.informer import CacheShape

__all__ = ["ControllerBuilder"]


@dataclass(frozen=True)
class _Watch:
    resource: Resource
    label_selector: str | None
    keys: KeyMapper
    when: EventFilter | None = None
    urgent: Urgency | None = None
    defer: Deferral | None = None
    shape: CacheShape | None = None


class ControllerBuilder:
    """``ControllerBuilder(name, cache, settings).for_(...).owns(...).watches(...).complete(reconciler)``."""

    def __init__(self, name: str, cache: SharedCache, settings: ControllerSettings) -> None:
        self._name = name
        self._cache = cache
        self._settings = settings
        self._primary: Resource | None = None
        self._primary_selector: str | None = None
        self._watches: list[_Watch] = []

    def for_(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        when: EventFilter | None = None,
        shape: CacheShape | None = None,
    ) -> Self:
        """The reconciled resource: each of its events asks for its own key (``EnqueueRequestForObject``).

        ``when``: only the events it passes (None: all). ``shape``: what the cache keeps of each object and how it
        reads them (``runtime.informers.informer.CacheShape``: the transform, as controller-runtime's
        ``ByObject.Transform``, the skim and the list page size; None: everything but ``managedFields`` and kubectl's
        last-applied copy, decoded whole, the informer's pages).
        """
        if self._primary is not None:
            raise ValueError(f"controller {self._name} already reconciles {self._primary.kind}")
        self._primary, self._primary_selector = resource, label_selector
        self._watches.append(_Watch(resource, label_selector, keys_for_object, when, shape=shape))
        return self

    def owns(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        orphans: OrphanRule | None = None,
        when: EventFilter | None = None,
        urgent: Urgency | None = None,
        defer: Deferral | None = None,
        shape: CacheShape | None = None,
    ) -> Self:
        """Children: each event asks for the key of the primary object that controls it (``EnqueueRequestForOwner``).

        ``orphans`` names the owner of a child without a controller reference (to adopt it); None: nobody.
        ``when``: only the events it passes (None: all).
        ``urgent``: which changes of a child go to the queue at urgent priority (None: none).
        ``defer``: how long the other changes of a child may wait before they are looked at (None: none waits).
        ``shape``: what the cache keeps of each child (as in ``for_``).
        """
        if self._primary is None:
            raise ValueError("declare the reconciled resource with for_() before owns()")
        mapper = keys_for_owner(
            owner_kind=self._primary.kind, owner_api_version=self._primary.api_version, orphans=orphans
        )
        self._watches.append(_Watch(resource, label_selector, mapper, when, urgent, defer, shape))
        return self

    def watches(
        self, resource: Resource, keys: KeyMapper, *, label_selector: str | None = None, when: EventFilter | None = None
    ) -> Self:
        """Anything else: ``keys(type, obj, old)`` names the primary keys an event concerns; ``when`` as in ``owns``."""
        self._watches.append(_Watch(resource, label_selector, keys, when))
        return self

    def complete(self, reconciler: Reconciler) -> Controller:
        """Add the event handlers to the shared informers and return the (not yet running) controller."""
        if self._primary is None:
            raise ValueError(f"controller {self._name} needs for_() before complete()")
        queue: WorkQueue[ObjectKey] = WorkQueue(name=self._name)
        for watch in self._watches:  # shape the views before anything reads them
            self._cache.group(watch.resource, label_selector=watch.label_selector, shape=watch.shape)
        primary: CacheGroup = self._cache.group(self._primary, label_selector=self._primary_selector)
        controller = Controller(
            self._name,
            reconciler,
            queue,
            workers=self._settings.workers,
            resync_period=self._settings.resync_period,
            primary=primary,
        )
        for watch in self._watches:
            group = self._cache.group(watch.resource, label_selector=watch.label_selector)
            group.add_handler(_enqueue(controller, watch))
        return controller


def _enqueue(controller: Controller, watch: _Watch) -> EventHandler:
    """Queue the keys of each event ``watch.when`` passes, ADDED at low priority, ``urgent`` first, ``defer`` later.

    An ADDED event is a new object (its first reconcile can wait behind changes to objects that exist), our own create
    seen by a child informer (the reconcile that made it already wrote the status), or the list after a start or a
    relist. MODIFIED and DELETED are changes to something that exists: a Deployment becoming available, a deleted or
    edited child, a spec change. Those are what users wait for, at normal priority; of those, a change ``urgent``
    says a user is watching for (a Deployment's availability) goes ahead of the others, which during a bulk create
    are mostly echoes of the operator's own writes and rollout progress. A change ``defer`` gives a delay (rollout
    progress, which the status shows at most every few seconds) is queued once the delay has passed, so the several
    steps of one rollout make one reconcile, or none when the key runs earlier for another reason.
    """
    keys, when, urgent, defer = watch.keys, watch.when, watch.urgent, watch.defer

    def handle(event_type: EventType, obj: KubeObject, old: KubeObject | None) -> None:
        if when is not None and not when(event_type, obj, old):
            return
        low = event_type == "ADDED"
        changed = old if event_type == "MODIFIED" else None
        first = urgent is not None and changed is not None and urgent(obj, changed)
        after = defer(obj, changed) if defer is not None and changed is not None and not first else None
        for key in keys(event_type, obj, old):
            controller.enqueue(key, low_priority=low, urgent=first, after=after or 0.0)

    return handle
