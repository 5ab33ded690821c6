"""Map watch events to work-queue keys: the primary object itself, or the owner a child belongs to.

Why: in a level-triggered controller an event only says "look at this key again"; the reconciler reads the current
state from the cache. This mirrors controller-runtime's ``EnqueueRequestForObject`` and ``EnqueueRequestForOwner
(OnlyControllerOwner)``: a child event wakes its controller owner, and on an update both the old and new owner are
woken (an ownerReference can change). The owner is matched by kind and API *group* only, never version, so children
written under ``v1`` still find an owner served as ``v1beta1`` later.

Unlike controller-runtime, a child with no controller reference at all still wakes the owner named by its
``app.kubernetes.io/instance`` label: an orphan left by ``kubectl delete --cascade=orphan`` must reach its would-be
owner so it can be adopted. A child controlled by someone else never wakes us through the label.
"""

from collections.abc import Callable

from webserver_operator.builders.ownership import controller_of
from webserver_operator.controller.view import KubeObject, ObjectKey, object_key

INSTANCE_LABEL = "app.kubernetes.io/instance"

#: Informer event handler: ``(type, obj, old_obj)``.
EventHandler = Callable[[str, KubeObject, KubeObject | None], None]


def api_group(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` (core) -> ``""``."""
    return api_version.rpartition("/")[0]


def owner_key(obj: KubeObject, *, owner_kind: str, owner_api_version: str) -> ObjectKey | None:
    """Key of the owner that ``obj`` should wake, or ``None``.

    The controller ownerReference wins when it points at ``owner_kind`` in the owner's API group; with no controller
    reference at all, the ``app.kubernetes.io/instance`` label names the would-be owner in the same namespace.
    """
    namespace, _ = object_key(obj)
    ref = controller_of(obj)
    if ref is not None:
        if ref.get("kind") != owner_kind or api_group(str(ref.get("apiVersion") or "")) != api_group(owner_api_version):
            return None
        name = ref.get("name")
        return (namespace, name) if isinstance(name, str) and name else None
    labels = (obj.get("metadata") or {}).get("labels") or {}
    instance = labels.get(INSTANCE_LABEL)
    return (namespace, instance) if isinstance(instance, str) and instance else None


def object_handler(enqueue: Callable[[ObjectKey], None]) -> EventHandler:
    """Handler for the primary resource: every event enqueues the object's own key."""

    def handle(_type: str, obj: KubeObject, _old: KubeObject | None) -> None:
        enqueue(object_key(obj))

    return handle


def owner_handler(enqueue: Callable[[ObjectKey], None], *, owner_kind: str, owner_api_version: str) -> EventHandler:
    """Handler for owned children: enqueue the owner of the new object and, if different, of the old one."""

    def handle(_type: str, obj: KubeObject, old: KubeObject | None) -> None:
        keys = {owner_key(obj, owner_kind=owner_kind, owner_api_version=owner_api_version)}
        if old is not None:
            keys.add(owner_key(old, owner_kind=owner_kind, owner_api_version=owner_api_version))
        for key in keys:
            if key is not None:
                enqueue(key)

    return handle
