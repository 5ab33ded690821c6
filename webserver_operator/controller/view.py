"""Object keys and the read-only cache view that reconcilers consume.

Why a separate module: the reconciler lives in a lower layer (``webserver_operator.reconcile``) and must not import
``controller``. It only needs a *shape* to read the informer caches, so the shape is a ``typing.Protocol`` that depends
on nothing but ``typing``; the lower layer mirrors it structurally and any ``Store`` or ``InformerGroup`` satisfies both
copies without inheritance. Reads are served from memory, which is what keeps steady state at zero polling reads.

Objects returned by a view are the cache's own dicts, shared with every other reader: treat them as read-only and
``copy.deepcopy`` before mutating (the same contract as client-go listers and controller-runtime's cache reader).
"""

from typing import Any, Protocol

#: An object as the API server serves it (decoded JSON).
KubeObject = dict[str, Any]

#: A list of objects (a module-level alias: inside classes that define ``list``, the builtin name is shadowed).
KubeObjects = list[KubeObject]

#: ``(namespace, name)``; namespace is ``""`` for cluster-scoped objects. Hashable, so it is also the work-queue key.
ObjectKey = tuple[str, str]


class ObjectReader(Protocol):
    """Read-only view over one informer cache (or a merged group of per-namespace caches)."""

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        """The cached object with this key, or ``None``. Shared dict: do not mutate."""
        ...

    def list(self, namespace: str | None = None) -> KubeObjects:
        """All cached objects, or those of one namespace. Shared dicts: do not mutate."""
        ...

    def by_owner(self, uid: str, /) -> KubeObjects:
        """Objects whose *controller* ownerReference points at ``uid``. Shared dicts: do not mutate."""
        ...


def object_key(obj: KubeObject) -> ObjectKey:
    """The ``(namespace, name)`` key of an object (namespace ``""`` when cluster-scoped)."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
