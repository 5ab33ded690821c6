"""What the cache keeps of WebServers and children, and that writes from that slimmer cache keep others' metadata.

The reconciler reads the cache and patches the difference between a cached child and a copy of it with the owned
fields set; these tests run it on caches that hold what ``reconcile.cached`` keeps and assert the objects left on
the (fake) API server: a tenant's or another tool's labels and annotations survive every write.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from functools import partial

from tests.support import factories
from tests.support.fake_api import FakeApi
from webserver_operator.api.models import WEBSERVERS
from webserver_operator.core.resources import DEPLOYMENTS, SERVICES
from webserver_operator.core.vocabulary import KubeObject, KubeObjects, ObjectKey
from webserver_operator.desired import TEMPLATE_REVISION, TEMPLATE_REVISION_ANNOTATION, UPGRADE_ANNOTATION, child_labels
from webserver_operator.reconcile.cached import child_as_cached, webserver_as_cached
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler
from webserver_operator.runtime.informers.informer import Transform

NS, NAME = "default", "web"
KEY = (NS, NAME)
WS_PATH = WEBSERVERS.path(namespace=NS, name=NAME)
DEP_PATH = DEPLOYMENTS.path(namespace=NS, name=NAME)
SVC_PATH = SERVICES.path(namespace=NS, name=NAME)
PADDING = {f"tenant.example/k{i}": "x" * 63 for i in range(50)}
webserver = partial(factories.webserver, namespace=NS, port=80)


class TransformedCache:
    """A synced informer over one fake collection, keeping each object as the operator's transform leaves it."""

    def __init__(self, api: FakeApi, collection: str, transform: Transform) -> None:
        self.api, self.collection, self.transform = api, collection, transform

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        obj = self.api.collections.get(self.collection, {}).get(key[1])
        return None if obj is None else self.transform(copy.deepcopy(obj))

    def list(self, namespace: str | None = None) -> KubeObjects:
        return [self.transform(copy.deepcopy(o)) for o in self.api.collections.get(self.collection, {}).values()]


def reconciler(api: FakeApi) -> WebServerReconciler:
    return WebServerReconciler(
        api=api,
        caches=Caches(
            webservers=TransformedCache(api, WEBSERVERS.path(namespace=NS), webserver_as_cached),
            deployments=TransformedCache(api, DEPLOYMENTS.path(namespace=NS), child_as_cached),
            services=TransformedCache(api, SERVICES.path(namespace=NS), child_as_cached),
        ),
        recorder=EventRecorder(api, instance="test"),
        clock=lambda: datetime(2026, 11, 23, tzinfo=UTC),
    )


def test_a_webserver_is_cached_without_a_tenants_labels_annotations_finalizers_or_owners() -> None:
    ws = webserver(name=NAME)
    ws["metadata"].update(
        uid="u1",
        resourceVersion="7",
        generation=3,
        labels=PADDING,
        annotations=PADDING,
        finalizers=["tenant.example/f"] * 10,
        ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c"}],
        managedFields=[{"manager": "kubectl"}],
    )
    cached = webserver_as_cached(copy.deepcopy(ws))
    assert cached["metadata"] == {"name": NAME, "namespace": NS, "uid": "u1", "resourceVersion": "7", "generation": 3}
    assert cached["spec"] == ws["spec"]


def test_a_child_is_cached_with_our_labels_and_every_owner_reference_only() -> None:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c"}]
    child = {
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "labels": {**PADDING, **child_labels(NAME)},
            "annotations": {"deployment.kubernetes.io/revision": "2", **PADDING},
            "ownerReferences": refs,
            "finalizers": ["x"],
        },
        "spec": {"template": {"metadata": {"annotations": {"a": "b"}}}},
    }
    cached = child_as_cached(copy.deepcopy(child))
    assert cached["metadata"] == {"name": NAME, "namespace": NS, "labels": child_labels(NAME), "ownerReferences": refs}
    assert cached["spec"] == child["spec"], "the pod template's metadata is read by the adoption check"


async def test_writes_from_the_slim_cache_leave_others_labels_and_annotations_on_every_object() -> None:
    api = FakeApi()
    ws = webserver(name=NAME)
    ws["metadata"].update(labels=dict(PADDING), annotations=dict(PADDING))
    api.put(WEBSERVERS.path(namespace=NS), ws)
    operator = reconciler(api)
    await operator.reconcile(KEY)  # creates both children, writes the status
    stored = api.get(WS_PATH)
    assert stored is not None and stored["status"]["observedGeneration"] == 1

    # Someone else labels and annotates the children; then a drift (replicas) and an adoption (the Service orphaned).
    deployment, service = api.get(DEP_PATH), api.get(SVC_PATH)
    assert deployment is not None and service is not None
    for child in (deployment, service):
        child["metadata"]["labels"]["team"] = "blue"
        child["metadata"]["annotations"] = {"owner.example/contact": "ops"}
    deployment["spec"]["replicas"] = 9
    del service["metadata"]["ownerReferences"]
    api.put(DEPLOYMENTS.path(namespace=NS), deployment)
    api.put(SERVICES.path(namespace=NS), service)
    await operator.reconcile(KEY)

    for path in (DEP_PATH, SVC_PATH):
        written = api.get(path)
        assert written is not None
        assert written["metadata"]["labels"] == {**child_labels(NAME), "team": "blue"}
        assert written["metadata"]["annotations"] == {"owner.example/contact": "ops"}
        assert written["metadata"]["ownerReferences"][0]["kind"] == "WebServer"
    assert api.get(DEP_PATH)["spec"]["replicas"] == ws["spec"]["replicas"]  # type: ignore[index]
    stored = api.get(WS_PATH)
    assert stored is not None
    assert (stored["metadata"]["labels"], stored["metadata"]["annotations"]) == (PADDING, PADDING)


def test_the_annotations_the_reconciler_reads_are_cached_and_no_other() -> None:
    """The template revision a Deployment was rendered at, and a WebServer's request to move to the newest one."""
    ws = webserver(name=NAME)
    ws["metadata"]["annotations"] = {UPGRADE_ANNOTATION: "true", **PADDING}
    assert webserver_as_cached(ws)["metadata"]["annotations"] == {UPGRADE_ANNOTATION: "true"}
    child = {"metadata": {"name": NAME, "annotations": {TEMPLATE_REVISION_ANNOTATION: "2", **PADDING}}}
    assert child_as_cached(child)["metadata"]["annotations"] == {TEMPLATE_REVISION_ANNOTATION: "2"}


async def test_a_converged_webserver_costs_no_writes_through_the_slim_cache() -> None:
    """Read through the transform, the Deployment still says which template revision it has: nothing to repair.

    Its rollout moves on (a status update, a new resourceVersion), so the reconciler compares it again.
    """
    api = FakeApi()
    api.put(WEBSERVERS.path(namespace=NS), webserver(name=NAME))
    operator = reconciler(api)
    await operator.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert deployment["metadata"]["annotations"][TEMPLATE_REVISION_ANNOTATION] == str(TEMPLATE_REVISION)
    deployment["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}
    api.put(DEPLOYMENTS.path(namespace=NS), deployment)
    before = len(api.writes())
    await operator.reconcile(KEY)
    assert [(c.method, c.path) for c in api.writes()[before:] if c.path.startswith(DEP_PATH)] == [], (
        "the Deployment is written nothing"
    )
