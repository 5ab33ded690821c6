"""Event-to-key mappings: which work-queue keys a watch event asks to look at again.

Why: in a level-triggered controller an event only says "look at this key again"; the reconciler reads the current
state from the cache. These mirror controller-runtime's handlers: ``keys_for_object`` is ``EnqueueRequestForObject``
(the primary object itself); ``keys_for_owner`` is ``EnqueueRequestForOwner(OnlyControllerOwner)``: a child event
wakes its controller owner, and on an update both the old and new owner are woken (an ownerReference can change).
The owner is matched by kind and API *group* only, never version, so children written under ``v1`` still find an
owner served as ``v1beta1`` later.

Unlike controller-runtime, a child with no controller reference at all can still wake a would-be owner: the
controller passes its orphan rule (``orphans``: which owner name an orphan belongs to; this project's is
``desired.orphan_of``), so an orphan left by ``kubectl delete --cascade=orphan`` reaches the owner that will
adopt it. A child controlled by someone else never wakes us that way. Nothing here knows a label of its own.

An ``Urgency`` says whether an event is one a user is waiting to see the result of (an owned Deployment became
available): its keys go to the queue at urgent priority, ahead of the rest. It is asked only for MODIFIED events.
A ``Deferral`` says how long a change may wait before it is looked at (a rollout's progress, which the status shows at
most every few seconds anyway): its keys are added after that delay, so several such changes make one reconcile, and
any other event for the key (or an urgent one) runs it at once and voids the delay (``WorkQueue.get``). It is asked
only for MODIFIED events that are not urgent.

An ``EventFilter`` (controller-runtime's predicate) says whether an event is worth a reconcile at all: the reconciler
declares which events cannot change what it would do (the echo of its own write, a change to fields it never reads)
and the builder drops them before any key is queued. Filters see every event type; they should never drop a DELETED.

Used by ``runtime.controller.builder`` (For, Owns, Watches); what they return goes to ``WorkQueue.add``.
"""

from collections.abc import Callable, Iterable

from webserver_operator.core.vocabulary import EventType, KubeObject, ObjectKey, api_group, controller_of, object_key

__all__ = [
    "Deferral",
    "EventFilter",
    "KeyMapper",
    "OrphanRule",
    "Urgency",
    "keys_for_object",
    "keys_for_owner",
    "keys_on_delete",
    "owner_key",
]

#: ``(type, obj, old) -> keys to reconcile``; must not block (it runs inside the informer's event dispatch).
KeyMapper = Callable[[EventType, KubeObject, KubeObject | None], Iterable[ObjectKey]]
#: ``(obj, old) -> whether a change from ``old`` to ``obj`` is one a user waits for``; must not block either.
Urgency = Callable[[KubeObject, KubeObject], bool]
#: ``(obj, old) -> seconds a change from ``old`` to ``obj`` may wait, or None to queue it now``; must not block.
Deferral = Callable[[KubeObject, KubeObject], float | None]
#: ``(type, obj, old) -> whether the event may change what the reconciler does``; must not block either.
EventFilter = Callable[[EventType, KubeObject, KubeObject | None], bool]
#: ``obj -> name of the owner an object without a controller reference belongs to``, or None.
OrphanRule = Callable[[KubeObject], str | None]


def owner_key(
    obj: KubeObject, *, owner_kind: str, owner_api_version: str, orphans: OrphanRule | None = None
) -> ObjectKey | None:
    """Key of the owner that ``obj`` should wake, or ``None``.

    The controller ownerReference wins when it points at ``owner_kind`` in the owner's API group; with no controller
    reference at all, ``orphans`` (if given) names the would-be owner in the same namespace.
    """
    namespace, _ = object_key(obj)
    ref = controller_of(obj)
    if ref is not None:
        same_group = api_group(str(ref.get("apiVersion") or "")) == api_group(owner_api_version)
        if ref.get("kind") != owner_kind or not same_group:
            return None
        name = ref.get("name")
        return (namespace, name) if isinstance(name, str) and name else None
    owner = orphans(obj) if orphans is not None else None
    return (namespace, owner) if owner else None


def keys_for_object(_type: EventType, obj: KubeObject, _old: KubeObject | None) -> list[ObjectKey]:
    """For the primary resource: every event asks for the object's own key."""
    return [object_key(obj)]


def keys_for_owner(*, owner_kind: str, owner_api_version: str, orphans: OrphanRule | None = None) -> KeyMapper:
    """For owned children: the owner of the new object and, if different, of the old one."""

    def keys(_type: EventType, obj: KubeObject, old: KubeObject | None) -> set[ObjectKey]:
        found = {
            owner_key(each, owner_kind=owner_kind, owner_api_version=owner_api_version, orphans=orphans)
            for each in (obj, old)
            if each is not None
        }
        return {key for key in found if key is not None}

    return keys


def keys_on_delete(waiting: Callable[[], Iterable[ObjectKey]]) -> KeyMapper:
    """When an object is deleted, the keys ``waiting()`` names (e.g. those waiting on a resource it held)."""

    def keys(type_: EventType, _obj: KubeObject, _old: KubeObject | None) -> Iterable[ObjectKey]:
        return waiting() if type_ == "DELETED" else ()

    return keys
