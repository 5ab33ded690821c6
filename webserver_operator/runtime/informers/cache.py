"""The process's informer cache: one shared ``InformerGroup`` per watched resource and label selector.

Why shared (controller-runtime's ``cache.Cache``, client-go's shared informer factory): a controller that reads
Services and one that is woken by Services must see the same store, fed by one list+watch, or the API server pays
twice and the two views drift. ``group()`` creates a group on first use; controllers add their event handlers to it
(``runtime.controller.builder``); the manager starts everything with ``run()`` once all handlers are in place, waits for
``synced()``, and reads ``groups`` for its liveness and readiness probes.

Created by ``manager.operator``; ``reconcile.setup`` reads its groups as caches and declares handlers on them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.core.vocabulary import EventHandler, KubeObject, KubeObjects, ObjectKey, WatchApi
from webserver_operator.runtime.informers.group import InformerGroup
from webserver_operator.runtime.informers.informer import CacheShape

__all__ = ["CacheGroup", "EvictionHandler", "InformerCache", "SharedCache"]

#: Called for each object a cache stops holding although it was not deleted (with sharding: its shard was handed
#: over and another replica caches it now).
EvictionHandler = Callable[[KubeObject], None]


class CacheGroup(Protocol):
    """What controllers declare on and read from, for one resource.

    An ``InformerGroup``, or with sharding the ``runtime.sharding.cache.ShardedGroup`` view over the held shards'
    groups.
    """

    def add_handler(self, handler: EventHandler) -> None: ...

    def add_eviction_handler(self, handler: EvictionHandler) -> None: ...

    def get(self, key: ObjectKey, /) -> KubeObject | None: ...

    def list(self, namespace: str | None = None) -> KubeObjects: ...

    def __len__(self) -> int: ...


class SharedCache(Protocol):
    """The process's cache as controllers see it (``InformerCache``, or ``ShardedInformerCache`` with sharding)."""

    def group(
        self, resource: Resource, *, label_selector: str | None = None, shape: CacheShape | None = None
    ) -> CacheGroup: ...


class InformerCache:
    def __init__(self, api: WatchApi, settings: WatchSettings) -> None:
        self._api = api
        self._settings = settings
        self._groups: dict[tuple[Resource, str | None], InformerGroup] = {}
        self._shapes: dict[tuple[Resource, str | None], CacheShape] = {}

    def group(
        self, resource: Resource, *, label_selector: str | None = None, shape: CacheShape | None = None
    ) -> InformerGroup:
        """The group watching ``resource`` (restricted to ``label_selector``), created on first use.

        ``shape`` shapes the group's informers (``runtime.informers.informer.CacheShape``), joined with what earlier
        declarations on the view set (a second, different part is refused); declare it before ``run``.
        """
        key = (resource, label_selector)
        if key not in self._groups:
            self._groups[key] = InformerGroup.for_namespaces(
                self._api, resource, settings=self._settings, label_selector=label_selector
            )
            self._shapes[key] = CacheShape()
        if shape is not None:
            joined = self._shapes[key].joined(shape, view=resource.plural)
            if joined != self._shapes[key]:
                self._shapes[key] = joined
                self._groups[key].reshape(joined)
        return self._groups[key]

    @property
    def groups(self) -> dict[str, InformerGroup]:
        """Every group by resource plural (plus the selector when one resource is watched twice)."""
        named: dict[str, InformerGroup] = {}
        for (resource, selector), group in self._groups.items():
            name = resource.plural if resource.plural not in named else f"{resource.plural}[{selector}]"
            named[name] = group
        return named

    async def run(self) -> None:
        """Run every group until cancelled (a group that fails cancels the others)."""
        async with asyncio.TaskGroup() as tasks:
            for name, group in self.groups.items():
                tasks.create_task(group.run(), name=f"informers-{name}")

    async def synced(self) -> None:
        """Return once every group has completed its first list."""
        await asyncio.gather(*(group.synced.wait() for group in self._groups.values()))
