"""The informer's in-memory store: the last listed/watched state of one resource, keyed by ``(namespace, name)``.

Why: reconcilers read from here instead of the API server (client-go ``Indexer`` / controller-runtime cache), which is
what keeps steady state free of polling reads. No secondary index: children are found by their deterministic name
(the WebServer's), so nothing asks "which children does this owner have". The one summary kept as items change is
the number of objects per namespace, which a sharded replica's per-shard metrics read every second.

Not thread-safe by design: it is only touched from the event loop, and every mutation is a synchronous call, so no
reader ever sees a half-applied change.

Objects are stored as received and handed out *without copying*: they are shared, read-only dicts. Callers must
``copy.deepcopy`` an object before mutating it (the same contract as client-go listers).

Owned by ``runtime.informers.informer`` (one per informer); read by reconcilers through ``runtime.informers.group``.
"""

import builtins
from collections import Counter
from collections.abc import Iterable, Mapping

from webserver_operator.core.vocabulary import EventType, KubeObject, KubeObjects, ObjectKey, object_key

__all__ = ["Store", "StoreEvent"]

#: ``(type, new_or_deleted_object, old_object_or_None)``: what changed in the store, as informer handlers receive it.
StoreEvent = tuple[EventType, KubeObject, KubeObject | None]


def _resource_version_of(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Store:
    """``(namespace, name) -> object``; a ``core.vocabulary.ObjectReader``."""

    def __init__(self) -> None:
        self._items: dict[ObjectKey, KubeObject] = {}
        #: Objects per namespace, kept as the items change: per-shard counts read it once a second
        #: (``runtime.sharding.cache``) without walking every object.
        self._per_namespace: Counter[str] = Counter()
        #: resourceVersion of the last full list applied with ``replace`` ("" before the first list).
        self.resource_version = ""

    # -- reads --------------------------------------------------------------------------------------------------------

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        return self._items.get(key)

    def list(self, namespace: str | None = None) -> KubeObjects:
        if namespace is None:
            return list(self._items.values())
        return [obj for (ns, _), obj in self._items.items() if ns == namespace]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def namespace_counts(self) -> Mapping[str, int]:
        """How many objects each namespace has here (only namespaces with at least one); a live read-only view."""
        return self._per_namespace

    # -- writes -------------------------------------------------------------------------------------------------------

    def upsert(self, obj: KubeObject) -> KubeObject | None:
        """Insert or replace ``obj``; returns the previous object with that key, if any."""
        key = object_key(obj)
        old = self._items.get(key)
        self._items[key] = obj
        if old is None:
            self._per_namespace[key[0]] += 1
        return old

    def delete(self, key: ObjectKey, /) -> KubeObject | None:
        """Remove ``key``; returns the removed object, or ``None`` if it was not there."""
        old = self._items.pop(key, None)
        if old is not None:
            left = self._per_namespace[key[0]] - 1
            if left:
                self._per_namespace[key[0]] = left
            else:
                del self._per_namespace[key[0]]
        return old

    def replace(self, objects: Iterable[KubeObject], resource_version: str) -> builtins.list[StoreEvent]:
        """Make the store hold exactly ``objects`` (a full list) and return what changed.

        A relist is reported like any other change so handlers need no special path: ``DELETED`` for keys that
        vanished, ``ADDED`` for new keys, ``MODIFIED`` for keys whose resourceVersion differs. Unchanged objects
        produce nothing (resourceVersions are opaque, but equal ones denote the same object version).
        """
        fresh: dict[ObjectKey, KubeObject] = {object_key(obj): obj for obj in objects}
        changes: builtins.list[StoreEvent] = []
        for key in [key for key in self._items if key not in fresh]:
            old = self.delete(key)
            if old is not None:
                changes.append(("DELETED", old, None))
        for obj in fresh.values():
            old = self.upsert(obj)
            if old is None:
                changes.append(("ADDED", obj, None))
            elif _resource_version_of(old) != _resource_version_of(obj) or not _resource_version_of(obj):
                changes.append(("MODIFIED", obj, old))
        self.resource_version = resource_version
        return changes
