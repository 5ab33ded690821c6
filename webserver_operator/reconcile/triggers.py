"""Which watch events can change what the WebServer reconciler does: the others never reach the work queue.

Why: every event on a WebServer or a child used to queue a reconcile, and most of a bulk create's events cannot
change anything. Per WebServer the operator sees the echo of each of its own writes (the Deployment and Service it
created, one to three status writes, each repair) and Deployment updates that touch only fields the reconciler never
reads (the Deployment controller's ``deployment.kubernetes.io/revision`` annotation, a condition's
``lastUpdateTime``). A reconcile for such an event reads the same inputs as the one before it and ends with no
write, yet costs a validation, two desired objects and two owned-field comparisons. Two rules drop them:

- ``OwnWrites``: an ADDED or MODIFIED event whose object has the resourceVersion that one of this replica's own
  writes (create, patch, status update) got back is the echo of that write. The reconcile that wrote it already
  decided from exactly that object (the reconciler goes on from the API server's answer, not from the cache), no
  later reconcile decides from an older WebServer than its own last status write (``reconciler._latest``), and a
  reconcile that ended in an error is requeued by the work queue anyway. A resourceVersion names one stored state of
  one object, so the echo of our write can be told from anyone else's write by equality alone (never ordered).
- ``child_change_matters``: a child MODIFIED event that leaves everything the reconciler reads of the child as it
  was (identity, generation, labels, ownerReferences, deletionTimestamp, the template revision annotation, the whole
  spec, and the status fields
  ``reconcile.status.child_status_reads`` names) cannot change a comparison or the status. A spec drift, a label or
  owner change, or anything the status reads always passes.

DELETED events always pass: a deleted child is recreated at once. So does anything at start or relist that is not an
echo. Controller-runtime's kubebuilder scaffold has no such predicates; its reconciles are cheaper, and slower
reconciles let its queue merge more events, so it pays less for the same events.

Called by ``reconcile.setup`` (the filters given to the builder) and ``reconcile.reconciler`` (which records its
writes in ``OwnWrites``); pure apart from the memory of resourceVersions.
"""

from __future__ import annotations

from typing import Any

from webserver_operator.core.vocabulary import EventType, KubeObject, object_key
from webserver_operator.desired import TEMPLATE_REVISION_ANNOTATION
from webserver_operator.reconcile.status import child_status_reads

__all__ = ["OwnWrites", "child_change_matters", "identity_and_spec"]


class OwnWrites:
    """The resourceVersion each of this replica's latest writes got back, by (kind, namespace, name).

    One entry per object written (a later write replaces it), dropped with the WebServer (``forget``): three short
    strings per WebServer at most.
    """

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str, str], str] = {}
        #: The kinds ever written: at most the WebServer and its child kinds.
        self._kinds: set[str] = set()

    def record(self, kind: str, written: KubeObject) -> None:
        """Remember ``written``, the object the API server returned for our write of a ``kind``."""
        version = (written.get("metadata") or {}).get("resourceVersion")
        if version:
            self._versions[(kind, *object_key(written))] = str(version)
            self._kinds.add(kind)

    def is_echo(self, kind: str, event_type: EventType, obj: KubeObject) -> bool:
        """Whether this event only brings our own latest write of ``obj`` back (never a DELETED)."""
        if event_type == "DELETED":
            return False
        version = (obj.get("metadata") or {}).get("resourceVersion")
        return bool(version) and self._versions.get((kind, *object_key(obj))) == version

    def forget(self, key: tuple[str, str], /) -> None:
        """Drop the memory of every object named ``key`` (namespace, name): a WebServer and its children.

        The children are named like their WebServer (``desired.child_name``), so one key names them all.
        """
        for kind in self._kinds:
            self._versions.pop((kind, *key), None)

    def __len__(self) -> int:
        return len(self._versions)

    def keys(self) -> set[tuple[str, str]]:
        """The (namespace, name) of every object remembered."""
        return {(namespace, name) for _, namespace, name in self._versions}


def child_change_matters(event_type: EventType, obj: KubeObject, old: KubeObject | None) -> bool:
    """Whether a child event may change what the reconciler does: all but a MODIFIED that leaves its reads alone."""
    if event_type != "MODIFIED" or old is None:
        return True
    return _reads(old) != _reads(obj)


def _reads(child: KubeObject) -> tuple[Any, ...]:
    return (*identity_and_spec(child), child_status_reads(child))


def identity_and_spec(child: KubeObject) -> tuple[Any, ...]:
    """What the reconciler reads of a child apart from its status: a change here is a drift, an owner or a deletion."""
    meta = child.get("metadata") or {}
    return (
        meta.get("uid"),
        meta.get("generation"),
        meta.get("labels"),
        meta.get("ownerReferences"),
        meta.get("deletionTimestamp"),
        (meta.get("annotations") or {}).get(TEMPLATE_REVISION_ANNOTATION),
        child.get("spec"),
    )
