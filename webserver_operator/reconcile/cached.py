"""What the informer cache keeps of a WebServer and of its children: only what the reconciler reads.

Why: every WebServer is written by a tenant, and labels and annotations are free text up to the API server's object
size (about 1.5 MiB in etcd). Kept whole, 100 WebServers padded to 1.3 MB of labels and annotations, with
``replicas: 0`` (no pods, no quota spent), cost every replica of the operator more than its 256Mi limit at every
relist. So the cache, as controller-runtime's ``cache.Options.DefaultTransform`` and cert-manager's metadata-only
caches do, keeps of each object only the metadata the reconciler reads:

- WebServer: name, namespace, uid, resourceVersion, generation, creationTimestamp, deletionTimestamp, and of the
  annotations only ``webserver-operator.dev/template-upgrade`` (no labels, other annotations, finalizers or
  ownerReferences: none of them is read, ``api.models.WebServer`` reads the rest).
  ``spec`` and ``status`` are bounded by the CRD schema. Safe for writes: the only WebServer write is the status
  PUT, and the status subresource keeps the stored object's metadata whatever the body says.
- Deployment, Service: the same, plus ``ownerReferences`` whole (the adoption merge rebuilds that list from the
  cached one, and a merge patch replaces a list) and, of the labels, only this operator's keys
  (``desired.child_labels``: the merge and the orphan rule read them), and of the annotations only
  ``webserver-operator.dev/template-revision`` (the revision the Deployment was rendered at). ``spec`` and ``status``
  stay whole, the pod template's own metadata too (the adoption check reads its AppArmor annotations).
  Safe for writes: patches are merge patches of the fields that differ between the cached object and a copy of it with
  the owned fields set (``reconcile.owned``); a label or annotation absent from both is in no patch, and a merge patch
  leaves the keys it does not name alone, so others' labels and annotations on the live object are never removed or
  rewritten.

A WebServer is not even decoded whole: ``WEBSERVER_SKIM`` (``kube.skim``) decodes list pages, watch events and the
answers of the reconciler's WebServer reads and status writes without building the labels, ``managedFields`` or any
other metadata the cache drops. Trimming after a whole decode bounded what is kept, not what is built: a page of ten
1.6 MB WebServers still built about 58 MiB of Python objects, which on a busy machine took the operator past its
limit at a relist.

The transforms are pure; handed by ``reconcile.setup`` to ``runtime.controller.builder`` in a cache shape
(``for_``/``owns`` ``shape=``, ``runtime.informers.informer.CacheShape``, with ``WEBSERVER_SKIM`` and the WebServers'
page size), which gives them to the informers: they run on each listed or watched object
before the store and the event handlers see it.
"""

from __future__ import annotations

from typing import Final

from webserver_operator.core.vocabulary import KubeObject
from webserver_operator.desired import TEMPLATE_REVISION_ANNOTATION, UPGRADE_ANNOTATION, child_labels
from webserver_operator.kube.skim import Skim

__all__ = ["WEBSERVER_SKIM", "child_as_cached", "webserver_as_cached"]

#: The metadata the reconciler reads of any object it caches.
_METADATA_READ: Final = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"}
)
_CHILD_METADATA_READ: Final = _METADATA_READ | {"ownerReferences"}
#: The annotations the reconciler reads: a WebServer's request to move to the newest pod template revision, and
#: the revision a Deployment was rendered at (``reconcile.revisions``; dropped, every Deployment would read as
#: revision 1 and its recorded revision could never be compared).
_WEBSERVER_ANNOTATIONS_READ: Final = frozenset({UPGRADE_ANNOTATION})
_CHILD_ANNOTATIONS_READ: Final = frozenset({TEMPLATE_REVISION_ANNOTATION})
#: Decoders of WebServers that build only the metadata the reconciler reads (annotations whole: the API server
#: bounds them to 256 KiB; ``webserver_as_cached`` then keeps the one read).
WEBSERVER_SKIM: Final = Skim(_METADATA_READ | {"annotations"})
#: The label keys the operator sets on its children (the instance name does not change the keys).
_OUR_LABEL_KEYS: Final = frozenset(child_labels("x"))


def webserver_as_cached(obj: KubeObject) -> KubeObject:
    """``obj`` (a WebServer just decoded) with only the metadata the reconciler reads; changed in place."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept = {key: value for key, value in meta.items() if key in _METADATA_READ}
        _keep_annotations(meta, kept, _WEBSERVER_ANNOTATIONS_READ)
        obj["metadata"] = kept
    return obj


def child_as_cached(obj: KubeObject) -> KubeObject:
    """``obj`` (a Deployment or Service just decoded) with the metadata the reconciler reads; changed in place."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept = {key: value for key, value in meta.items() if key in _CHILD_METADATA_READ}
        labels = meta.get("labels")
        if isinstance(labels, dict):
            kept["labels"] = {key: value for key, value in labels.items() if key in _OUR_LABEL_KEYS}
        _keep_annotations(meta, kept, _CHILD_ANNOTATIONS_READ)
        obj["metadata"] = kept
    return obj


def _keep_annotations(meta: dict[str, object], kept: dict[str, object], keys: frozenset[str]) -> None:
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        read = {key: value for key, value in annotations.items() if key in keys}
        if read:
            kept["annotations"] = read
