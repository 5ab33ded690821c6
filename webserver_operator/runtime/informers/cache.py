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
from webserver_operator.kube.skim import Skim
from webserver_operator.runtime.informers.group import InformerGroup
from webserver_operator.runtime.informers.informer import Transform

__all__ = ["CacheGroup", "EvictionHandler", "InformerCache", "SharedCache", "ViewShape"]

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
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        transform: Transform | None = None,
        page_size: int | None = None,
        skim: Skim | None = None,
    ) -> CacheGroup: ...


class ViewShape:
    """A view's ``transform``, ``skim`` and list ``page_size``, declared once (``group()``), before its informers run.

    Several controllers may declare on one view; two different transforms for the same store would each strip
    what the other reads, so a second, different one is refused.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.transform: Transform | None = None
        self.page_size: int | None = None
        self.skim: Skim | None = None

    def declare(self, *, transform: Transform | None, page_size: int | None, skim: Skim | None = None) -> bool:
        """Record what was asked; True when something changed."""
        if transform is not None and self.transform is not None and transform is not self.transform:
            raise ValueError(f"{self.name}: a second, different transform declared on the same cache view")
        if skim is not None and self.skim is not None and skim is not self.skim:
            raise ValueError(f"{self.name}: a second, different skim declared on the same cache view")
        if page_size is not None and self.page_size is not None and page_size != self.page_size:
            raise ValueError(f"{self.name}: list pages of {self.page_size} and {page_size} declared on one view")
        changed = (
            (transform is not None and self.transform is None)
            or (page_size is not None and self.page_size is None)
            or (skim is not None and self.skim is None)
        )
        self.transform = transform or self.transform
        self.skim = skim or self.skim
        self.page_size = page_size or self.page_size
        return changed


class InformerCache:
    def __init__(self, api: WatchApi, settings: WatchSettings) -> None:
        self._api = api
        self._settings = settings
        self._groups: dict[tuple[Resource, str | None], InformerGroup] = {}
        self._shapes: dict[tuple[Resource, str | None], ViewShape] = {}

    def group(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        transform: Transform | None = None,
        page_size: int | None = None,
        skim: Skim | None = None,
    ) -> InformerGroup:
        """The group watching ``resource`` (restricted to ``label_selector``), created on first use.

        ``transform``, ``page_size`` and ``skim`` shape the group's informers (``InformerGroup.shape``); declare them
        before ``run``. None leaves what an earlier declaration set.
        """
        key = (resource, label_selector)
        if key not in self._groups:
            self._groups[key] = InformerGroup.for_namespaces(
                self._api, resource, settings=self._settings, label_selector=label_selector
            )
            self._shapes[key] = ViewShape(resource.plural)
        if self._shapes[key].declare(transform=transform, page_size=page_size, skim=skim):
            self._groups[key].shape(transform=transform, page_size=page_size, skim=skim)
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
