"""The shared vocabulary: what an object, a key, a cache, an event handler and the API look like to every layer.

Why one module at the bottom: the reconciler, the controller runtime, the Leases and the Event recorder all
read objects, key them, read caches and send requests. Declaring those shapes once, below every layer that uses
them, means each has one definition to read and one place to change, and no layer needs to import a higher one to
name a type. The Protocols are structural: ``kube.client.KubeClient`` satisfies ``ApiRequests`` and ``WatchApi``,
``runtime.informers.store.Store`` and ``runtime.informers.group.InformerGroup`` satisfy ``ObjectReader``, and so do the
in-process fakes in ``tests/support``.

Objects are decoded JSON, exactly as the API server serves them. Objects handed out by a cache are shared,
read-only dicts: ``copy.deepcopy`` before mutating (the same contract as client-go listers).

Imported by ``runtime``, ``reconcile``, ``kube`` and ``manager``; declares types only, hands nothing on.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, Protocol, TypedDict, Unpack

__all__ = [
    "MERGE_PATCH",
    "ApiRequests",
    "Decode",
    "EventHandler",
    "EventType",
    "KubeObject",
    "KubeObjects",
    "ObjectKey",
    "ObjectReader",
    "QueryValue",
    "RequestOptions",
    "WatchApi",
    "api_group",
    "controller_of",
    "object_key",
]

#: An object as the API server serves it (decoded JSON).
KubeObject = dict[str, Any]

#: A list of objects (a module-level alias: inside classes that define ``list``, the builtin name is shadowed).
KubeObjects = list[KubeObject]

#: ``(namespace, name)``; namespace is ``""`` for cluster-scoped objects. Hashable, so it is also the work-queue key.
ObjectKey = tuple[str, str]

#: A query parameter value; bools are sent as ``true``/``false``.
QueryValue = str | int | bool

#: What happened to a cached object (a relist is reported with the same three types).
EventType = Literal["ADDED", "MODIFIED", "DELETED"]

#: Informer event handler: ``(type, new_or_deleted_object, previous_object_or_None)``. Handlers must not block.
EventHandler = Callable[[EventType, KubeObject, KubeObject | None], None]

#: Content type of an RFC 7386 JSON merge patch, the one patch format the operator writes.
MERGE_PATCH = "application/merge-patch+json"


def object_key(obj: KubeObject) -> ObjectKey:
    """The ``(namespace, name)`` key of an object (namespace ``""`` when cluster-scoped)."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def api_group(api_version: str) -> str:
    """The API group of an ``apiVersion``: ``apps/v1`` -> ``apps``; the core group's ``v1`` -> ``""``."""
    return api_version.rpartition("/")[0]


def controller_of(obj: KubeObject) -> dict[str, Any] | None:
    """The ownerReference of ``obj`` with ``controller: true``, or None (Kubernetes allows at most one)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


class ObjectReader(Protocol):
    """Read-only view over an informer cache (``runtime.informers.store.Store``) or a merged group of them."""

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        """The cached object with this key, or ``None``. Shared dict: do not mutate."""
        ...

    def list(self, namespace: str | None = None) -> KubeObjects:
        """All cached objects, or those of one namespace. Shared dicts: do not mutate."""
        ...


#: A decoder of an answer's JSON body (``kube.jsoncodec.decode`` or one of ``kube.skim.Skim``'s).
Decode = Callable[[bytes], Any]


class RequestOptions(TypedDict, total=False):
    """The optional parts of one API request, declared once for the Protocol, the client and the fakes."""

    query: Mapping[str, QueryValue] | None
    body: object | None
    content_type: str | None
    #: Decodes the answer's body instead of ``kube.jsoncodec.decode`` (``kube.skim.Skim.object``: a tenant-written
    #: object decoded without the fields no reader reads).
    decode: Decode | None


class ApiRequests(Protocol):
    """One request to the API server (implemented by ``kube.client.KubeClient.request``).

    Returns the decoded JSON body (``{}`` when empty). Raises ``kube.errors.ApiError`` subclasses for HTTP errors
    (``NotFound``, ``Conflict``, ``Gone``, ...) and ``kube.errors.TransportError`` when no answer came.
    """

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]: ...


class WatchApi(ApiRequests, Protocol):
    """Requests plus watches: what an informer needs (implemented by ``kube.client.KubeClient``)."""

    def watch(
        self, path: str, *, query: Mapping[str, QueryValue], decode: Decode | None = None
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]:
        """Open a watch: ``async with api.watch(...) as events: async for event in events``.

        ``decode`` decodes each event line instead of ``kube.jsoncodec.decode`` (``kube.skim.Skim.event``).

        Opening raises ``ApiError`` (e.g. ``Gone``, ``Forbidden``) or ``TransportError``; iterating raises
        ``TransportError`` and ends normally when the server closes the stream at ``timeoutSeconds``.
        """
        ...
