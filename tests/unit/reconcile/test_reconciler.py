"""Every branch of the reconciler on the shared in-process fake API, asserting the objects it leaves behind.

The same behaviour is also tested against the real control plane (tests/integration); these run in milliseconds and
reach the branches that need an exact moment: a 409 at the status write, a cache that has not seen our own create.
"""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from tests.support import factories
from tests.support.fake_api import FakeApi, status_error
from webserver_operator import metrics
from webserver_operator.api.models import WEBSERVERS, WebServer
from webserver_operator.core.jsondiff import compare
from webserver_operator.core.podsecurity import PodSecurityLevel
from webserver_operator.core.resources import DEPLOYMENTS, EVENTS, NAMESPACES, PODDISRUPTIONBUDGETS, SERVICES
from webserver_operator.core.vocabulary import KubeObject, KubeObjects, ObjectKey
from webserver_operator.desired import child_labels, desired_deployment, selects_pre_stop_pods
from webserver_operator.kube.errors import Conflict, ServerError, TooManyRequests
from webserver_operator.reconcile.events import EventRecorder
from webserver_operator.reconcile.probes import GRACE
from webserver_operator.reconcile.reconciler import Caches, WebServerReconciler
from webserver_operator.reconcile.status import next_status
from webserver_operator.runtime.controller.result import Result, TerminalError, is_terminal

NS, NAME = "default", "web"
KEY = (NS, NAME)
WS_PATH = WEBSERVERS.path(namespace=NS, name=NAME)
DEP_PATH = DEPLOYMENTS.path(namespace=NS, name=NAME)
SVC_PATH = SERVICES.path(namespace=NS, name=NAME)


class LiveCache:
    """A synced informer over one fake collection (sees every write at once)."""

    def __init__(self, api: FakeApi, collection: str) -> None:
        self.api, self.collection = api, collection

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        return self.api.collections.get(self.collection, {}).get(key[1])

    def list(self, namespace: str | None = None) -> KubeObjects:
        return list(self.api.collections.get(self.collection, {}).values())


class StaleCache(LiveCache):
    """A cache that has not seen anything yet (an informer lagging behind our own create)."""

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        return None


class LabelledCache(LiveCache):
    """What the operator's child informers see: only objects carrying the WebServer's child labels."""

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        obj = super().get(key)
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        return obj if obj is not None and labels.items() >= child_labels(key[1]).items() else None


webserver = partial(factories.webserver, namespace=NS, port=80)


class _Settled(WebServerReconciler):
    """The reconciler under test, whose reconcile returns once the Events it queued are stored.

    Events go out in the background (``reconcile.events``); a person reading ``kubectl get events`` a moment after a
    reconcile sees them, and so do these tests, which also count every write a reconcile caused.
    """

    async def reconcile(self, key: ObjectKey) -> Result:
        try:
            return await super().reconcile(key)
        finally:
            await self._recorder.flush()


def reconciler(
    api: FakeApi, *, stale: bool = False, labelled: bool = False, pod_security: PodSecurityLevel = "baseline"
) -> WebServerReconciler:
    child_cache = StaleCache if stale else LabelledCache if labelled else LiveCache
    return _Settled(
        api=api,
        caches=Caches(
            webservers=LiveCache(api, WEBSERVERS.path(namespace=NS)),
            deployments=child_cache(api, DEPLOYMENTS.path(namespace=NS)),
            services=child_cache(api, SERVICES.path(namespace=NS)),
            disruption_budgets=child_cache(api, PODDISRUPTIONBUDGETS.path(namespace=NS)),
        ),
        recorder=EventRecorder(api, instance="test"),
        pod_security=pod_security,
        clock=lambda: datetime(2026, 11, 23, tzinfo=UTC),
    )


def ready(api: FakeApi) -> dict[str, Any]:
    ws = api.get(WS_PATH)
    assert ws is not None
    (condition,) = [c for c in ws["status"]["conditions"] if c["type"] == "Ready"]
    assert isinstance(condition, dict)
    return condition


def events(api: FakeApi) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in api.collections.get(EVENTS.path(namespace=NS), {}).values()]


def messages(api: FakeApi) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in api.collections.get(EVENTS.path(namespace=NS), {}).values()]


def edit_spec(api: FakeApi, **spec: Any) -> None:
    """What ``kubectl patch webserver`` does: a new spec on the stored WebServer."""
    ws = api.get(WS_PATH)
    assert ws is not None
    ws["spec"].update(spec)
    ws["metadata"]["generation"] += 1  # as the API server does on a spec change
    api.put(WEBSERVERS.path(namespace=NS), ws)


def with_world(**spec: Any) -> FakeApi:
    api = FakeApi()
    api.put(WEBSERVERS.path(namespace=NS), webserver(**spec))
    return api


async def test_creates_both_children_owned_by_the_webserver_and_reports_creating() -> None:
    api = with_world()
    result = await reconciler(api).reconcile(KEY)
    assert result.requeue_after is None
    ws = api.get(WS_PATH)
    deployment, service = api.get(DEP_PATH), api.get(SVC_PATH)
    assert ws is not None and deployment is not None and service is not None
    for child in (deployment, service):
        (ref,) = child["metadata"]["ownerReferences"]
        assert (ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (ws["metadata"]["uid"], True, True)
        assert child["metadata"]["labels"] == child_labels(NAME)
    assert deployment["spec"]["replicas"] == 2
    assert service["spec"]["type"] == "NodePort"
    assert ws["status"]["observedGeneration"] == 1
    assert ws["status"]["nodePort"] == service["spec"]["ports"][0]["nodePort"]
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "RollingOut")
    # One Event for the reconcile that created both (an Event is a write: one per child would be a third of a bulk
    # create's writes).
    assert messages(api) == [
        ("Normal", "Created", f"Created Deployment {NAME} and Service {NAME}"),
        (
            "Normal",
            "Created",
            f"Created PodDisruptionBudget {NAME}: voluntary evictions (kubectl drain, node upgrades) take at most 1 "
            "of the 2 pods at a time",
        ),
    ]


async def test_a_deleted_service_is_recreated_and_reported_alone() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    api.collections[SERVICES.path(namespace=NS)].clear()  # kubectl delete service web
    await rec.reconcile(KEY)
    assert api.get(SERVICES.path(namespace=NS, name=NAME)) is not None
    assert messages(api)[2:] == [("Normal", "Created", f"Created Service {NAME}")]


async def test_an_event_sink_that_never_answers_cannot_delay_any_child_or_status_write() -> None:
    api = FakeApi()
    api.gates[EVENTS.path(namespace=NS)] = asyncio.Event()  # every Event POST hangs
    names = [f"web-{i}" for i in range(20)]
    for name in names:
        api.put(WEBSERVERS.path(namespace=NS), {**webserver(), "metadata": {"name": name, "namespace": NS}})
    caches = Caches(
        webservers=LiveCache(api, WEBSERVERS.path(namespace=NS)),
        deployments=LiveCache(api, DEPLOYMENTS.path(namespace=NS)),
        services=LiveCache(api, SERVICES.path(namespace=NS)),
    )
    recorder = EventRecorder(api, instance="test")
    rec = WebServerReconciler(api=api, caches=caches, recorder=recorder)
    await asyncio.wait_for(asyncio.gather(*(rec.reconcile((NS, name)) for name in names)), 2.0)
    assert sorted(api.collections[DEPLOYMENTS.path(namespace=NS)]) == sorted(names)
    assert sorted(api.collections[SERVICES.path(namespace=NS)]) == sorted(names)
    statuses = [api.get(WEBSERVERS.path(namespace=NS, name=name)) for name in names]
    assert all(ws is not None and ws.get("status", {}).get("conditions") for ws in statuses)
    assert api.collections.get(EVENTS.path(namespace=NS), {}) == {}, "the Event sink was supposed to hang"
    await recorder.close(0.0)


async def test_converged_webserver_costs_no_writes() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    before = len(api.writes())
    await rec.reconcile(KEY)
    await rec.reconcile(KEY)
    assert len(api.writes()) == before


async def test_own_create_not_yet_in_the_cache_is_recognised_as_ours() -> None:
    api = with_world()
    await reconciler(api).reconcile(KEY)
    created = api.get(DEP_PATH)
    await reconciler(api, stale=True).reconcile(KEY)  # POST -> 409 AlreadyExists -> GET -> ours, converged
    assert api.get(DEP_PATH) == created
    assert not any(reason.endswith("Conflict") for _, reason in events(api))


async def test_foreign_object_is_never_touched_and_reported() -> None:
    api = with_world()
    foreign = api.put(
        DEPLOYMENTS.path(namespace=NS),
        {
            "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NS, "labels": {"app": "theirs"}},
            "spec": {"replicas": 7},
        },
    )
    result = await reconciler(api, stale=True).reconcile(KEY)
    assert api.get(DEP_PATH) == foreign, "a foreign Deployment is left exactly as it was"
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "DeploymentConflict")
    assert "Delete or rename that Deployment" in ready(api)["message"]
    assert ("Warning", "DeploymentConflict") in events(api)
    assert result.requeue_after == 15.0
    assert api.get(SVC_PATH) is not None, "the other child is still synced"


async def test_orphan_with_our_labels_is_adopted() -> None:
    api = with_world()
    await reconciler(api).reconcile(KEY)
    orphan = api.get(DEP_PATH)
    assert orphan is not None
    del orphan["metadata"]["ownerReferences"]
    api.put(DEPLOYMENTS.path(namespace=NS), orphan)
    await reconciler(api).reconcile(KEY)
    adopted = api.get(DEP_PATH)
    assert adopted is not None
    assert adopted["metadata"]["ownerReferences"][0]["kind"] == "WebServer"
    assert ("Normal", "Adopted") in events(api)


async def test_drift_in_owned_fields_is_repaired_and_other_fields_survive() -> None:
    api = with_world()
    await reconciler(api).reconcile(KEY)
    drifted = api.get(DEP_PATH)
    assert drifted is not None
    drifted["spec"]["replicas"] = 9
    drifted["metadata"]["labels"]["team"] = "blue"
    drifted["spec"]["template"]["metadata"]["annotations"] = {"kubectl.kubernetes.io/restartedAt": "now"}
    api.put(DEPLOYMENTS.path(namespace=NS), drifted)
    await reconciler(api).reconcile(KEY)
    repaired = api.get(DEP_PATH)
    assert repaired is not None
    assert repaired["spec"]["replicas"] == 2
    assert repaired["metadata"]["labels"]["team"] == "blue"
    assert repaired["spec"]["template"]["metadata"]["annotations"] == {"kubectl.kubernetes.io/restartedAt": "now"}
    assert ("Normal", "Repaired") in events(api)


async def test_forbidden_create_becomes_a_condition_naming_the_permission() -> None:
    api = with_world()
    api.fail(
        "POST",
        "/services",
        status_error(
            403,
            "Forbidden",
            method="POST",
            path=SERVICES.path(namespace=NS),
            message='services is forbidden: User "op" cannot create resource "services"',
        ),
    )
    result = await reconciler(api).reconcile(KEY)
    assert api.get(SVC_PATH) is None
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "ServiceForbidden")
    assert 'cannot create resource "services"' in ready(api)["message"]
    assert result.requeue_after == 15.0


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ("Internal error occurred: failed to allocate a nodePort: range is full", "--service-node-port-range"),
        ("Internal error occurred: failed to allocate a serviceIP: range is full", "--service-cluster-ip-range"),
    ],
)
async def test_a_full_service_range_becomes_a_condition_not_a_server_failure(answer: str, names: str) -> None:
    """Found at 5000 WebServers: 2768 NodePorts fill the default range and the API server answers 500 on the next."""
    api = with_world()
    api.fail("POST", "/services", status_error(500, "InternalError", method="POST", path=SVC_PATH, message=answer))
    result = await reconciler(api).reconcile(KEY)
    assert api.get(DEP_PATH) is not None, "the Deployment is still created"
    assert api.get(SVC_PATH) is None
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "ServiceRangeFull")
    assert "range is full" in ready(api)["message"] and names in ready(api)["message"]
    assert "check its health" not in ready(api)["message"]
    assert ("Warning", "ServiceRangeFull") in events(api)
    assert result.requeue_after == 15.0


async def test_invalid_child_update_becomes_a_condition() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    edit_spec(api, replicas=3)
    api.fail(
        "PATCH",
        f"/deployments/{NAME}",
        status_error(422, "Invalid", method="PATCH", path=DEP_PATH, message="spec.replicas: Invalid value"),
    )
    result = await rec.reconcile(KEY)
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "DeploymentInvalid")
    assert "spec.replicas: Invalid value" in ready(api)["message"]
    assert result.requeue_after == 15.0
    assert rec.keys_with_problems() == [KEY]


async def test_a_throttled_write_propagates_and_its_event_does_not_promise_a_backoff() -> None:
    """A 429 is held by the controller until a probe gets through (WorkQueue.hold), not backed off."""
    api = with_world()
    error = status_error(429, "TooManyRequests", method="POST", path=DEPLOYMENTS.path(namespace=NS))
    api.fail("POST", "/deployments", error, times=1)
    rec = reconciler(api)
    with pytest.raises(TooManyRequests):
        await rec.reconcile(KEY)
    ((_, _, message),) = [m for m in messages(api) if m[1] == "ReconcileError"]
    assert "throttling" in message and "backoff" not in message, message
    await rec.reconcile(KEY)
    assert api.get(DEP_PATH) is not None


async def test_server_error_propagates_for_the_queue_to_back_off_and_is_reported_once() -> None:
    api = with_world()
    error = status_error(503, "ServiceUnavailable", method="POST", path=DEPLOYMENTS.path(namespace=NS))
    api.fail("POST", "/deployments", error, times=2)
    rec = reconciler(api)
    for _ in range(2):
        with pytest.raises(ServerError):
            await rec.reconcile(KEY)
    assert events(api).count(("Warning", "ReconcileError")) == 1
    await rec.reconcile(KEY)
    assert api.get(DEP_PATH) is not None


async def test_invalid_spec_is_reported_and_children_are_not_touched() -> None:
    api = with_world(replicas=-1)
    with pytest.raises(TerminalError, match="InvalidSpec") as refused:
        await reconciler(api).reconcile(KEY)
    assert is_terminal(refused.value), "the controller counts it as terminal and does not retry it"
    assert api.get(DEP_PATH) is None
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "InvalidSpec")
    assert "spec.replicas" in ready(api)["message"]
    assert ("Warning", "InvalidSpec") in events(api)


async def test_status_409_is_retried_on_the_fresh_object_with_the_same_verdict() -> None:
    api = with_world()
    api.put(
        DEPLOYMENTS.path(namespace=NS),
        {"kind": "Deployment", "metadata": {"name": NAME, "namespace": NS, "labels": {"app": "theirs"}}},
    )
    rec = reconciler(api, stale=True)
    stale = copy.deepcopy(api.get(WS_PATH))
    fresh = api.get(WS_PATH)
    assert fresh is not None
    fresh["metadata"]["labels"] = {"added": "meanwhile"}
    api.put(WEBSERVERS.path(namespace=NS), fresh)  # the cache below still holds the stale copy

    class StaleWebServers(LiveCache):
        def get(self, key: ObjectKey, /) -> KubeObject | None:
            return stale

    rec._caches = Caches(
        webservers=StaleWebServers(api, ""),
        deployments=rec._caches.deployments,
        services=rec._caches.services,
    )
    result = await rec.reconcile(KEY)
    assert result.requeue_after is not None
    ws = api.get(WS_PATH)
    assert ws is not None
    assert ws["metadata"]["labels"] == {"added": "meanwhile"}, "written over the fresh read, not the stale cache"
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "DeploymentConflict")
    assert ws["status"]["replicas"] == 0
    status_puts = [c for c in api.calls if c.method == "PUT" and c.path.endswith("/status")]
    assert len(status_puts) == 2


async def test_deleted_webserver_is_left_to_the_garbage_collector() -> None:
    api = FakeApi()
    assert (await reconciler(api).reconcile(KEY)).requeue_after is None
    assert api.writes() == []


def test_conflict_type_is_the_kube_layers() -> None:
    assert isinstance(status_error(409, "Conflict", method="PUT", path=WS_PATH), Conflict)


# --- issue 10: defects found in review, each confirmed by a test that failed before its fix -----------------------


async def test_status_409_with_a_newer_generation_never_claims_the_unapplied_spec() -> None:
    """The fresh WebServer has generation 2, but the children were synced for generation 1: no observedGeneration 2."""
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    stale = api.get(WS_PATH)
    assert stale is not None
    fresh = copy.deepcopy(stale)
    fresh["spec"]["image"] = "nginx:1.28"
    stored = api.put(WEBSERVERS.path(namespace=NS), fresh)
    stored["metadata"]["generation"] = 2
    api.collections[WEBSERVERS.path(namespace=NS)][NAME]["metadata"]["generation"] = 2
    stale_status = copy.deepcopy(stale)
    # Make the cached status differ so a write is attempted (a nodePort: never a detail that could wait), as an older
    # version of the WebServer would (another resourceVersion: a cache never holds other contents under ours).
    stale_status["status"]["nodePort"] = 30999
    stale_status["metadata"]["resourceVersion"] = "older"

    class Cached(LiveCache):
        def get(self, key: ObjectKey, /) -> KubeObject | None:
            return stale_status

    rec._caches = Caches(webservers=Cached(api, ""), deployments=rec._caches.deployments, services=rec._caches.services)
    with pytest.raises(Conflict):
        await rec.reconcile(KEY)  # back to the queue: the new generation's own event reconciles it properly
    ws = api.get(WS_PATH)
    assert ws is not None
    assert ws["status"]["observedGeneration"] == 1
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"


async def test_rejected_service_update_keeps_reporting_what_exists() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    live_port = api.get(SVC_PATH)["spec"]["ports"][0]["nodePort"]  # type: ignore[index]
    api.put(
        SERVICES.path(namespace=NS),
        {
            "kind": "Service",
            "metadata": {"name": "other", "namespace": NS},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 31111}]},
        },
    )
    ws = api.get(WS_PATH)
    assert ws is not None
    ws["spec"]["nodePort"] = 31111
    api.put(WEBSERVERS.path(namespace=NS), ws)
    await rec.reconcile(KEY)
    status = api.get(WS_PATH)["status"]  # type: ignore[index]
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "ServiceInvalid")
    assert "already allocated" in ready(api)["message"]
    assert status["nodePort"] == live_port, "the live Service still serves on its old port"
    assert api.get(SVC_PATH)["spec"]["ports"][0]["nodePort"] == live_port  # type: ignore[index]


async def test_rejected_deployment_update_keeps_the_replica_counts() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    deployment["status"] = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2}
    api.put(DEPLOYMENTS.path(namespace=NS), deployment)
    edit_spec(api, replicas=3)
    api.fail(
        "PATCH",
        f"/deployments/{NAME}",
        status_error(403, "Forbidden", method="PATCH", path=DEP_PATH, message="admission webhook denied the request"),
    )
    await rec.reconcile(KEY)
    status = api.get(WS_PATH)["status"]  # type: ignore[index]
    assert ready(api)["reason"] == "DeploymentForbidden"
    assert (status["replicas"], status["readyReplicas"]) == (2, 2)


async def test_a_no_op_write_is_not_recorded_as_a_repair() -> None:
    """The API server stores ``0.5n`` cpu as ``1m`` in a pod template: comparing as it stores means no write at all."""
    api = with_world(resources={"requests": {"cpu": "0.5n"}})
    rec = reconciler(api)
    await rec.reconcile(KEY)
    stored = api.get(DEP_PATH)
    assert stored is not None
    stored["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1m"  # what the server keeps
    api.put(DEPLOYMENTS.path(namespace=NS), stored)
    writes = len(api.writes())
    for _ in range(3):
        await rec.reconcile(KEY)
    assert len(api.writes()) == writes
    assert ("Normal", "Repaired") not in events(api)


async def test_children_of_a_deleted_webserver_with_the_same_name_are_not_a_conflict() -> None:
    """Deleted and recreated quickly: the old children wait for the garbage collector; no false Conflict."""
    api = with_world()
    await reconciler(api).reconcile(KEY)
    ws = api.get(WS_PATH)
    assert ws is not None
    del api.collections[WEBSERVERS.path(namespace=NS)][NAME]
    recreated = webserver()
    api.put(WEBSERVERS.path(namespace=NS), recreated)  # same name, new uid; old children still there
    result = await reconciler(api).reconcile(KEY)
    assert ready(api)["reason"] == "WaitingForGarbageCollection"
    assert "Conflict" not in " ".join(reason for _, reason in events(api))
    assert result.requeue_after is not None
    assert result.requeue_after <= 2.0


async def test_a_controller_of_kind_webserver_from_another_api_group_is_a_foreign_owner() -> None:
    api = with_world()
    foreign_owner = {
        "apiVersion": "web.example.com/v1",
        "kind": "WebServer",
        "name": NAME,
        "uid": "other-uid",
        "controller": True,
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NS, "labels": child_labels(NAME), "ownerReferences": [foreign_owner]},
        "spec": {"replicas": 1},
    }
    api.put(DEPLOYMENTS.path(namespace=NS), deployment)
    stored = copy.deepcopy(api.get(DEP_PATH))
    result = await reconciler(api).reconcile(KEY)
    condition = ready(api)
    assert condition["reason"] == "DeploymentConflict"
    assert "controlled by WebServer.web.example.com/web" in condition["message"]
    assert api.get(DEP_PATH) == stored
    assert result.requeue_after is not None and result.requeue_after >= 10


async def test_children_the_garbage_collector_never_removes_stall_the_webserver_after_a_minute() -> None:
    api = with_world()
    await reconciler(api).reconcile(KEY)
    del api.collections[WEBSERVERS.path(namespace=NS)][NAME]
    api.put(WEBSERVERS.path(namespace=NS), webserver())  # recreated; the old children never go away
    rec = reconciler(api)
    waits: list[float] = []
    for _ in range(60):
        result = await rec.reconcile(KEY)
        assert result.requeue_after is not None
        waits.append(result.requeue_after)
        if ready(api)["reason"] != "WaitingForGarbageCollection":
            break
    condition = ready(api)
    assert condition["reason"] == "GarbageCollectionStuck", condition
    assert "kubectl delete deployment web -n default" in condition["message"]
    assert ("Warning", "GarbageCollectionStuck") in events(api)
    assert sum(waits[:-1]) >= 60, "escalated before a minute of rechecks"
    assert waits[-1] >= 10, "a stuck garbage collection is still rechecked every second or two"


async def test_a_controller_fighting_over_a_field_is_named_in_the_status_after_repeated_repairs() -> None:
    api = with_world(replicas=2)
    rec = reconciler(api)
    await rec.reconcile(KEY)
    hpa_write = {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "subresource": "scale",
        "time": "2026-11-23T00:00:00Z",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
    }
    ours = {"manager": "webserver-operator", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    verdicts = []
    for _ in range(4):
        deployment = api.get(DEP_PATH)
        assert deployment is not None
        deployment["spec"]["replicas"] = 5  # what an HPA aimed at the Deployment does every 15 s
        deployment["metadata"]["managedFields"] = [ours, hpa_write]
        api.put(DEPLOYMENTS.path(namespace=NS), deployment)
        await rec.reconcile(KEY)
        assert api.get(DEP_PATH)["spec"]["replicas"] == 2  # type: ignore[index]
        verdicts.append(ready(api)["reason"])
    assert verdicts[:3] == [verdicts[0]] * 3 and verdicts[0] != "FightingAnotherController"
    assert verdicts[3] == "FightingAnotherController"
    message = ready(api)["message"]
    assert "Deployment web: spec.replicas changed back at least 4 times" in message
    assert '"kube-controller-manager" (Update, subresource scale' in message
    assert ("Warning", "FightingAnotherController") in events(api)
    await rec.reconcile(KEY)  # no new repair, but the fight is still within its window: still reported
    assert ready(api)["reason"] == "FightingAnotherController"


async def test_pods_get_no_service_account_token_and_no_service_links() -> None:
    api = with_world()
    await reconciler(api).reconcile(KEY)
    pod = api.get(DEP_PATH)["spec"]["template"]["spec"]  # type: ignore[index]
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False


async def test_adopting_an_orphan_resets_token_and_links_but_keeps_fields_it_does_not_own() -> None:
    """Decision: adoption enforces the owned fields (token, links included); others' fields stay, as for any child."""
    api = with_world()
    await reconciler(api).reconcile(KEY)
    orphan = api.get(DEP_PATH)
    assert orphan is not None
    del orphan["metadata"]["ownerReferences"]
    pod = orphan["spec"]["template"]["spec"]
    pod.update(
        automountServiceAccountToken=True,
        enableServiceLinks=True,
        serviceAccountName="builder",
        volumes=[{"name": "cache", "emptyDir": {}}],
        securityContext={"runAsNonRoot": True},
    )
    api.put(DEPLOYMENTS.path(namespace=NS), orphan)
    await reconciler(api).reconcile(KEY)
    adopted = api.get(DEP_PATH)["spec"]["template"]["spec"]  # type: ignore[index]
    assert (adopted["automountServiceAccountToken"], adopted["enableServiceLinks"]) == (False, False)
    assert adopted["serviceAccountName"] == "builder"
    assert adopted["volumes"] == [{"name": "cache", "emptyDir": {}}]
    assert adopted["securityContext"] == {"runAsNonRoot": True}


def _privileged_orphan() -> dict[str, Any]:
    """The issue's repro: an orphan Deployment with our labels, hostPID, a hostPath / volume, a privileged web."""
    labels = child_labels(NAME)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NS, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {k: v for k, v in labels.items() if k.endswith(("/name", "/instance"))}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "hostPID": True,
                    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                    "containers": [
                        {
                            "name": "web",
                            "image": "registry.example/admin-tool:1",
                            "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                        }
                    ],
                },
            },
        },
    }


async def test_an_orphan_beyond_baseline_is_never_adopted_nor_given_the_tenants_image() -> None:
    api = with_world(image="attacker.example/evil:1")
    orphan = _privileged_orphan()
    api.put(DEPLOYMENTS.path(namespace=NS), copy.deepcopy(orphan))
    stored = copy.deepcopy(api.get(DEP_PATH))
    operator = reconciler(api)
    result = await operator.reconcile(KEY)
    assert api.get(DEP_PATH) == stored, "no write to the orphan: no image, no ownerReference"
    condition = ready(api)
    assert (condition["status"], condition["reason"]) == ("False", "DeploymentAdoptionRefused")
    for named in ("host namespaces (hostPID=true)", 'hostPath volumes (volume "host")', "privileged (container"):
        assert named in condition["message"]
    assert f"kubectl delete deployment {NAME} -n {NS}" in condition["message"]
    stalled = next(c for c in api.get(WS_PATH)["status"]["conditions"] if c["type"] == "Stalled")  # type: ignore[index]
    assert stalled["status"] == "True"
    assert ("Warning", "DeploymentAdoptionRefused") in events(api)
    assert ("Normal", "Adopted") not in events(api)
    assert result.requeue_after == 15.0
    # Looked at again (a resync): still nothing written, still one Warning for this generation.
    await operator.reconcile(KEY)
    assert api.get(DEP_PATH) == stored
    assert events(api).count(("Warning", "DeploymentAdoptionRefused")) == 1


async def test_an_orphan_within_baseline_once_fixed_is_adopted() -> None:
    api = with_world(image="nginx:1.27")
    orphan = _privileged_orphan()
    pod = orphan["spec"]["template"]["spec"]
    del pod["hostPID"], pod["volumes"], pod["containers"][0]["volumeMounts"], pod["containers"][0]["securityContext"]
    api.put(DEPLOYMENTS.path(namespace=NS), orphan)
    await reconciler(api).reconcile(KEY)
    adopted = api.get(DEP_PATH)
    assert adopted is not None
    assert adopted["metadata"]["ownerReferences"][0]["kind"] == "WebServer"
    assert adopted["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert ("Normal", "Adopted") in events(api)


async def test_the_opt_in_to_privileged_adopts_an_orphan_beyond_baseline() -> None:
    api = with_world()
    api.put(DEPLOYMENTS.path(namespace=NS), _privileged_orphan())
    await reconciler(api, pod_security="privileged").reconcile(KEY)
    assert api.get(DEP_PATH)["metadata"]["ownerReferences"][0]["kind"] == "WebServer"  # type: ignore[index]


async def test_an_orphan_that_would_mount_a_service_account_token_is_not_adopted() -> None:
    api = with_world()
    orphan = _privileged_orphan()
    pod = orphan["spec"]["template"]["spec"]
    del pod["hostPID"], pod["containers"][0]["securityContext"]
    pod["volumes"] = [{"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]
    api.put(DEPLOYMENTS.path(namespace=NS), orphan)
    stored = copy.deepcopy(api.get(DEP_PATH))
    await reconciler(api, pod_security="privileged").reconcile(KEY)
    assert api.get(DEP_PATH) == stored
    assert 'projected volume "token"' in ready(api)["message"]


def _orphan_service(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NS, "labels": child_labels(NAME)},
        "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}], **spec},
    }


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        pytest.param({"externalIPs": ["203.0.113.7"]}, "externalIPs (203.0.113.7)", id="external-ips"),
        pytest.param({"type": "LoadBalancer", "loadBalancerSourceRanges": ["0.0.0.0/0"]}, "type LoadBalancer", id="lb"),
        pytest.param({"type": "ExternalName", "externalName": "db.example"}, "externalName (db.example)", id="name"),
    ],
)
async def test_an_orphan_service_a_webserver_could_not_have_is_not_adopted(spec: dict[str, Any], named: str) -> None:
    api = with_world()
    api.put(SERVICES.path(namespace=NS), _orphan_service(**spec))
    stored = copy.deepcopy(api.get(SVC_PATH))
    await reconciler(api).reconcile(KEY)
    assert api.get(SVC_PATH) == stored, "no write to the orphan"
    condition = ready(api)
    assert (condition["reason"], condition["status"]) == ("ServiceAdoptionRefused", "False")
    assert named in condition["message"] and f"kubectl delete service {NAME} -n {NS}" in condition["message"]
    assert ("Warning", "ServiceAdoptionRefused") in events(api)
    assert api.get(DEP_PATH) is not None, "the other child is still synced"


async def test_an_orphan_cluster_ip_service_becomes_the_webservers_node_port_service() -> None:
    api = with_world()
    api.put(SERVICES.path(namespace=NS), _orphan_service(sessionAffinity="ClientIP"))
    await reconciler(api).reconcile(KEY)
    adopted = api.get(SVC_PATH)
    assert adopted is not None
    assert adopted["spec"]["type"] == "NodePort" and adopted["spec"]["sessionAffinity"] == "ClientIP"
    assert adopted["metadata"]["ownerReferences"][0]["kind"] == "WebServer"


async def test_a_node_port_conflict_is_rechecked_within_seconds_not_minutes() -> None:
    api = with_world(nodePort=31111)
    api.put(
        SERVICES.path(namespace=NS),
        {
            "kind": "Service",
            "metadata": {"name": "other", "namespace": NS},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 31111}]},
        },
    )
    rec = reconciler(api)
    delays = [(await rec.reconcile(KEY)).requeue_after for _ in range(8)]
    assert ready(api)["reason"] == "ServiceInvalid"
    assert all(d is not None and d <= 30.0 for d in delays), delays


async def test_security_context_is_enforced_while_set_and_left_to_others_when_not() -> None:
    wanted = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    api = with_world(securityContext=wanted)
    rec = reconciler(api)
    await rec.reconcile(KEY)

    def container() -> dict[str, Any]:
        (c,) = api.get(DEP_PATH)["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
        assert isinstance(c, dict)
        return c

    assert container()["securityContext"] == wanted
    drifted = api.get(DEP_PATH)
    assert drifted is not None
    drifted["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    api.put(DEPLOYMENTS.path(namespace=NS), drifted)
    await rec.reconcile(KEY)
    assert container()["securityContext"] == wanted

    ws = api.get(WS_PATH)
    assert ws is not None
    del ws["spec"]["securityContext"]
    api.put(WEBSERVERS.path(namespace=NS), ws)
    hardened = api.get(DEP_PATH)
    assert hardened is not None
    hardened["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"readOnlyRootFilesystem": True}
    api.put(DEPLOYMENTS.path(namespace=NS), hardened)  # e.g. an admission webhook that hardens every pod
    await rec.reconcile(KEY)
    assert container()["securityContext"] == {"readOnlyRootFilesystem": True}


HOSTILE_CONTEXTS = [
    pytest.param({"capabilities": {"add": ["ALL"]}}, '"ALL" in securityContext.capabilities.add', id="cap-all"),
    pytest.param({"capabilities": {"add": ["NET_BIND_SERVICE", "SYS_ADMIN"]}}, '"SYS_ADMIN"', id="cap-sys-admin"),
    pytest.param({"capabilities": {"add": ["SYS_MODULE"]}}, '"SYS_MODULE"', id="cap-sys-module"),
    pytest.param({"seccompProfile": {"type": "Unconfined"}}, 'seccompProfile.type to "Unconfined"', id="unconfined"),
]


@pytest.mark.parametrize(("context", "named"), HOSTILE_CONTEXTS)
async def test_a_webserver_beyond_pod_security_baseline_never_reaches_a_deployment(
    context: dict[str, Any], named: str
) -> None:
    # Stored before the CRD refused it (or under a CRD someone edited): the reconciler is the second line.
    api = with_world(securityContext=context)
    with pytest.raises(TerminalError, match="ExceedsPodSecurityBaseline"):  # nothing to retry until the spec changes
        await reconciler(api).reconcile(KEY)
    assert api.get(DEP_PATH) is None
    assert api.get(SVC_PATH) is None
    condition = ready(api)
    assert (condition["status"], condition["reason"]) == ("False", "ExceedsPodSecurityBaseline")
    assert named in condition["message"] and "--pod-security-level=privileged" in condition["message"]
    stalled = [c for c in api.get(WS_PATH)["status"]["conditions"] if c["type"] == "Stalled"]  # type: ignore[index]
    assert [c["status"] for c in stalled] == ["True"]
    assert ("Warning", "ExceedsPodSecurityBaseline") in events(api)


async def test_an_edit_beyond_baseline_leaves_the_running_deployment_as_it_was() -> None:
    api = with_world(securityContext={"capabilities": {"add": ["NET_BIND_SERVICE"]}})
    rec = reconciler(api)
    await rec.reconcile(KEY)
    before = copy.deepcopy(api.get(DEP_PATH))
    assert before is not None
    assert before["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "capabilities": {"add": ["NET_BIND_SERVICE"]}
    }
    edit_spec(api, securityContext={"capabilities": {"add": ["NET_BIND_SERVICE", "SYS_ADMIN"]}}, replicas=5)
    with pytest.raises(TerminalError):
        await rec.reconcile(KEY)
    assert api.get(DEP_PATH) == before  # neither the capability nor the new replica count was written
    assert ready(api)["reason"] == "ExceedsPodSecurityBaseline"


async def test_an_installation_that_opts_into_privileged_gets_what_the_webserver_asks_for() -> None:
    api = with_world(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})
    await reconciler(api, pod_security="privileged").reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {
        "capabilities": {"add": ["SYS_ADMIN"]}
    }


async def test_a_recheck_of_a_foreign_namesake_reads_it_instead_of_posting_a_create_again() -> None:
    """A Stalled WebServer must not send writes the API server can only refuse (`make chaos`: "0 writes once
    converged"). The foreign Deployment is outside the label-filtered cache, so the recheck reads it; once it is
    deleted, the next look creates ours."""
    api = with_world()
    api.put(DEPLOYMENTS.path(namespace=NS), {"kind": "Deployment", "metadata": {"name": NAME, "namespace": NS}})
    recheck = reconciler(api, labelled=True)
    await recheck.reconcile(KEY)
    assert ready(api)["reason"] == "DeploymentConflict"
    writes_before = len(api.writes())
    await recheck.reconcile(KEY)
    assert ready(api)["reason"] == "DeploymentConflict"
    assert [(w.method, w.path) for w in api.writes()[writes_before:]] == [], "no create that can only get a 409"

    await api.request("DELETE", DEP_PATH)
    await recheck.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert deployment["metadata"]["labels"] == child_labels(NAME), "the WebServer's own Deployment, created"


async def test_a_change_right_after_our_status_write_is_written_from_that_write_not_a_stale_cache() -> None:
    """The WebServer informer has not delivered our status write yet when the Deployment reports progress.

    The next status write starts from the object our write returned: no 409, no extra GET, the status says what is.
    """
    api = with_world()
    lagging = copy.deepcopy(api.get(WS_PATH))  # what the WebServer informer still holds after our write

    class LaggingWebServers(LiveCache):
        def get(self, key: ObjectKey, /) -> KubeObject | None:
            return lagging

    rec = reconciler(api)
    rec._caches = Caches(
        webservers=LaggingWebServers(api, ""),
        deployments=rec._caches.deployments,
        services=rec._caches.services,
    )
    await rec.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    deployment["status"] = {
        "observedGeneration": 1,
        "replicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "updatedReplicas": 2,
    }
    api.put(DEPLOYMENTS.path(namespace=NS), deployment)
    await rec.reconcile(KEY)
    assert [c.method for c in api.calls if c.path.startswith(WS_PATH)] == ["PUT", "PUT"], "no 409, no re-read"
    assert api.get(WS_PATH)["status"]["readyReplicas"] == 2  # type: ignore[index]

    # Once the cache shows any other version, the cache is the truth again.
    moved_on = copy.deepcopy(api.get(WS_PATH))
    assert moved_on is not None
    moved_on["metadata"]["labels"] = {"changed": "by someone"}
    lagging = moved_on
    writes = len(api.writes())
    await rec.reconcile(KEY)
    assert len(api.writes()) == writes
    assert rec._latest(KEY, lagging) is lagging


def drift_repairs(kind: str) -> float:
    return metrics.REGISTRY.get_sample_value("webserver_operator_drift_repairs_total", {"kind": kind}) or 0.0


async def test_a_spec_change_is_reported_as_an_update_and_an_edit_of_the_child_as_a_repair() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    repairs = drift_repairs("Deployment")
    edit_spec(api, image="nginx:1.28")  # kubectl patch webserver: the user asked for it
    await rec.reconcile(KEY)
    assert api.get(DEP_PATH)["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"  # type: ignore[index]
    assert messages(api)[-1] == (
        "Normal",
        "Updated",
        f"Updated Deployment {NAME}: spec.template.spec.containers[{NAME}].image",
    )
    assert drift_repairs("Deployment") == repairs, "a spec change is not drift"

    drifted = api.get(DEP_PATH)
    assert drifted is not None
    drifted["spec"]["replicas"] = 9  # kubectl scale deployment: someone else changed our child
    api.put(DEPLOYMENTS.path(namespace=NS), drifted)
    await rec.reconcile(KEY)
    assert messages(api)[-1][:2] == ("Normal", "Repaired")
    assert drift_repairs("Deployment") == repairs + 1


class FrozenWebServerCache(LiveCache):
    """A WebServer informer whose watch has not delivered anything since ``snapshot`` (a relist delayed by 429s)."""

    def __init__(self, api: FakeApi, snapshot: KubeObject) -> None:
        super().__init__(api, WEBSERVERS.path(namespace=NS))
        self.snapshot = snapshot

    def get(self, key: ObjectKey, /) -> KubeObject | None:
        return copy.deepcopy(self.snapshot) if key == KEY else None


async def test_children_the_garbage_collector_removes_for_a_stale_owner_are_not_created_again_and_again() -> None:
    """The WebServer was deleted and recreated while its watch lagged: the cache still holds the old uid.

    A child created from that copy carries the old uid as its owner, so the garbage collector deletes it, and the
    delete queues the WebServer again. Created again from the same stale copy each time, that was a loop of creates
    and deletes until the relist (32 Deployments in 7 s under chaos). A second create of the same child for the same
    uid within seconds reads the API server's WebServer beside the create; once that read finds the cache behind (a
    requeue), the owner is read before any further create. So the stale copy costs one more child of each kind, not
    a loop of them.
    """
    api = with_world()
    old = api.get(WS_PATH)
    assert old is not None
    del api.collections[WEBSERVERS.path(namespace=NS)][NAME]
    api.put(WEBSERVERS.path(namespace=NS), webserver())  # recreated: same name, new uid
    rec = _Settled(
        api=api,
        caches=Caches(
            webservers=FrozenWebServerCache(api, old),
            deployments=LiveCache(api, DEPLOYMENTS.path(namespace=NS)),
            services=LiveCache(api, SERVICES.path(namespace=NS)),
        ),
        recorder=EventRecorder(api, instance="test"),
        clock=lambda: datetime(2026, 11, 23, tzinfo=UTC),
    )
    with pytest.raises(Conflict):  # its status write: the new WebServer gets no status about the old one's children
        await rec.reconcile(KEY)
    assert (api.get(WS_PATH) or {}).get("status") is None
    owners = {
        ref["uid"] for path in (DEP_PATH, SVC_PATH) for ref in (api.get(path) or {})["metadata"]["ownerReferences"]
    }
    assert owners == {old["metadata"]["uid"]}

    created: list[tuple[bool, bool]] = []
    for _ in range(4):  # the garbage collector deletes them; each delete queues the WebServer again
        api.collections[DEPLOYMENTS.path(namespace=NS)].pop(NAME, None)
        api.collections[SERVICES.path(namespace=NS)].pop(NAME, None)
        with pytest.raises(Conflict):
            await rec.reconcile(KEY)
        created.append((api.get(DEP_PATH) is not None, api.get(SVC_PATH) is not None))
    assert created == [(True, True), (False, False), (False, False), (False, False)], (
        "created once more beside the read that found the cache behind, then not until the cache caught up"
    )

    rec._caches = Caches(  # the relist: the cache has the new WebServer
        webservers=LiveCache(api, WEBSERVERS.path(namespace=NS)),
        deployments=LiveCache(api, DEPLOYMENTS.path(namespace=NS)),
        services=LiveCache(api, SERVICES.path(namespace=NS)),
    )
    await rec.reconcile(KEY)
    new = api.get(WS_PATH)
    assert new is not None
    owners = {
        ref["uid"] for path in (DEP_PATH, SVC_PATH) for ref in (api.get(path) or {})["metadata"]["ownerReferences"]
    }
    assert owners == {new["metadata"]["uid"]}
    assert ready(api)["reason"] != "WaitingForGarbageCollection"


async def test_a_child_deleted_again_right_after_its_create_is_created_again_when_the_cache_is_current() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    for _ in range(2):  # someone deletes the Deployment twice in a row, seconds after the operator made it
        api.collections[DEPLOYMENTS.path(namespace=NS)].pop(NAME)
        await rec.reconcile(KEY)
        assert api.get(DEP_PATH) is not None
    gets = [call for call in api.calls if call.method == "GET" and call.path == WS_PATH]
    assert len(gets) == 2, "one WebServer read per quick recreate, none on the first create"
    posts = [call.path for call in api.calls if call.method == "POST" and call.path.endswith("/deployments")]
    assert len(posts) == 3, "each quick recreate went out beside its read, not after a refusal"


async def test_a_quick_recreate_does_not_wait_for_the_read_of_its_owner() -> None:
    """The repair of a brand-new child someone deleted goes out at once; the owner check runs beside it."""
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    api.collections[DEPLOYMENTS.path(namespace=NS)].pop(NAME)
    api.gates[WS_PATH] = asyncio.Event()  # the read of the WebServer hangs
    repair = asyncio.create_task(rec.reconcile(KEY))
    for _ in range(50):
        await asyncio.sleep(0)
    assert api.get(DEP_PATH) is not None, "the Deployment was created while the owner read was still waiting"
    assert not repair.done()
    api.gates[WS_PATH].set()
    await repair
    assert ready(api)["status"] in ("True", "False")


#: What kube-controller-manager writes to a new one-replica Deployment's status, in order (recorded on the local
#: control plane): the Deployment controller has acted but the ReplicaSet has no pod yet; the pod exists; it is ready;
#: the rollout is marked complete.
NEW_DEPLOYMENT_PROGRESS: list[dict[str, Any]] = [
    {
        "observedGeneration": 1,
        "unavailableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated"},
        ],
    },
    {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "unavailableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
        ],
    },
    {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
        ],
    },
    {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    },
]


class _Clock:
    """The reconciler's wall clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def deployment_reports(api: FakeApi, status: dict[str, Any]) -> None:
    """kube-controller-manager writes ``status`` to the Deployment (a new resourceVersion, as the watch delivers it)."""
    live = api.get(DEP_PATH)
    assert live is not None
    api.put(DEPLOYMENTS.path(namespace=NS), {**live, "status": copy.deepcopy(status)})


def status_puts(api: FakeApi) -> int:
    return sum(1 for c in api.writes() if c.method == "PUT" and c.path == f"{WS_PATH}/status")


async def test_a_new_webserver_costs_two_status_writes_however_fast_its_deployment_progresses() -> None:
    """Created (Reconciling), then Ready: the Deployment's intermediate states, each seen within a second, change
    only the rollout's details and are superseded by Ready before they are due."""
    api = with_world(replicas=1)
    rec, clock = reconciler(api), _Clock()
    rec._clock = clock
    await rec.reconcile(KEY)
    for status in NEW_DEPLOYMENT_PROGRESS:
        clock.advance(0.3)
        deployment_reports(api, status)
        await rec.reconcile(KEY)
    assert status_puts(api) == 2, "one status write on create, one when Ready"
    stored = api.get(WS_PATH)
    assert stored is not None
    assert (stored["status"]["replicas"], stored["status"]["readyReplicas"]) == (1, 1)
    assert {c["type"]: c["status"] for c in stored["status"]["conditions"]} == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
    }
    assert ready(api)["message"] == "1/1 pods available."


async def test_held_back_progress_is_written_when_due_and_a_stall_at_once() -> None:
    """A pod that never becomes ready: its replica count reaches the status after the interval, not never; a
    ReplicaFailure (Stalled, a person must act) is written the moment it is seen."""
    api = with_world(replicas=1)
    rec, clock = reconciler(api), _Clock()
    rec._clock = clock
    await rec.reconcile(KEY)
    clock.advance(0.3)
    deployment_reports(api, NEW_DEPLOYMENT_PROGRESS[0])
    first = await rec.reconcile(KEY)
    clock.advance(0.3)
    deployment_reports(api, NEW_DEPLOYMENT_PROGRESS[1])
    second = await rec.reconcile(KEY)
    assert status_puts(api) == 1
    assert first.requeue_after == pytest.approx(1.7) and second.requeue_after == pytest.approx(1.4)
    clock.advance(second.requeue_after or 0)
    # Nothing more to write; the pod is looked at again when it has been unready for the probe-failure grace.
    assert (await rec.reconcile(KEY)).requeue_after == pytest.approx(GRACE - 1.4, abs=1e-3)
    stored = api.get(WS_PATH)
    assert stored is not None
    assert (stored["status"]["replicas"], stored["status"]["readyReplicas"], status_puts(api)) == (1, 0, 2)
    assert (ready(api)["reason"], ready(api)["message"].split(".")[0]) == ("Scaling", "0/1 pods available")

    clock.advance(0.1)
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota exceeded"}
    deployment_reports(
        api, {**NEW_DEPLOYMENT_PROGRESS[1], "conditions": [*NEW_DEPLOYMENT_PROGRESS[1]["conditions"], failure]}
    )
    await rec.reconcile(KEY)
    assert status_puts(api) == 3
    assert (ready(api)["reason"], find_condition(api, "Stalled")["status"]) == ("ReplicaFailure", "True")


def find_condition(api: FakeApi, condition_type: str) -> dict[str, Any]:
    ws = api.get(WS_PATH)
    assert ws is not None
    (condition,) = [c for c in ws["status"]["conditions"] if c["type"] == condition_type]
    return dict(condition)


async def test_the_status_is_decided_again_only_when_something_it_reads_has_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The echo of our own status write, or a second event for the same versions, costs no status computation; a
    new Deployment status does, and the status follows it. What the reconciler remembers after a write is what a
    reconciler without that memory decides from the same objects: nothing to write."""
    decided: list[str] = []

    def counting(obj: KubeObject, seen: Any, **kwargs: Any) -> dict[str, Any] | None:
        decided.append(obj["metadata"]["resourceVersion"])
        return next_status(obj, seen, **kwargs)

    monkeypatch.setattr("webserver_operator.reconcile.reconciler.next_status", counting)
    api = with_world(replicas=1)
    rec, clock = reconciler(api), _Clock()
    rec._clock = clock
    await rec.reconcile(KEY)
    await rec.reconcile(KEY)  # the watch delivers our write; nothing else moved
    await rec.reconcile(KEY)
    assert len(decided) == 1
    for status in NEW_DEPLOYMENT_PROGRESS[2:]:
        clock.advance(0.3)
        deployment_reports(api, status)
        await rec.reconcile(KEY)
        await rec.reconcile(KEY)
    assert len(decided) == 3, "one decision per new Deployment status"
    assert ready(api)["status"] == "True"
    writes = len(api.writes())
    fresh = reconciler(api)
    fresh._clock = clock
    await fresh.reconcile(KEY)
    assert len(api.writes()) == writes


def stored(api: FakeApi, path: str) -> KubeObject:
    obj = api.get(path)
    assert obj is not None
    return copy.deepcopy(obj)


async def test_the_echo_of_each_own_write_is_known_and_anyone_elses_write_is_not() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    own = rec.own_writes
    # The watch brings back the created children and the written status: no reconcile needed for any of them.
    kinds = (("WebServer", WS_PATH), ("Deployment", DEP_PATH), ("Service", SVC_PATH))
    assert all(own.is_echo(kind, "MODIFIED", stored(api, path)) for kind, path in kinds)
    assert all(own.is_echo(kind, "ADDED", stored(api, path)) for kind, path in kinds)
    # A deletion is never an echo: a deleted child is recreated at once.
    assert not any(own.is_echo(kind, "DELETED", stored(api, path)) for kind, path in kinds)
    # Someone edits the Deployment: a new resourceVersion, not ours.
    drifted = stored(api, DEP_PATH)
    drifted["spec"]["replicas"] = 9
    api.put(DEPLOYMENTS.path(namespace=NS), drifted)
    assert not own.is_echo("Deployment", "MODIFIED", stored(api, DEP_PATH))
    # The repair is ours again.
    await rec.reconcile(KEY)
    repaired = stored(api, DEP_PATH)
    assert repaired["spec"]["replicas"] == 2
    assert own.is_echo("Deployment", "MODIFIED", repaired)


async def test_a_deleted_webserver_leaves_no_memory_of_its_writes() -> None:
    api = with_world()
    rec = reconciler(api)
    await rec.reconcile(KEY)
    assert len(rec.own_writes) == 4  # the status, the Deployment, the Service and the PodDisruptionBudget
    api.collections[WEBSERVERS.path(namespace=NS)].clear()
    await rec.reconcile(KEY)
    assert len(rec.own_writes) == 0


async def test_children_are_compared_again_only_when_a_child_or_the_spec_has_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconcile that reads the same children versions for the same generation (our own status write's echo, a
    resync) does not compare them again; a new child version (status, drift) or a new spec does, and one reconciler
    that remembered a clean check still repairs drift and rolls out a spec change."""
    compared: list[str] = []

    def counting(live: KubeObject, desired: KubeObject) -> Any:
        compared.append(str(live["kind"]))
        return compare(live, desired)

    monkeypatch.setattr("webserver_operator.reconcile.children.compare", counting)
    api = with_world(replicas=1)
    rec = reconciler(api)
    await rec.reconcile(KEY)  # creates both: nothing compared
    await rec.reconcile(KEY)  # the first look at what exists: both compared, both clean
    assert sorted(compared) == ["Deployment", "Service"]
    await rec.reconcile(KEY)
    await rec.reconcile(KEY)
    assert len(compared) == 2, "same versions, same generation: no compare"

    deployment_reports(api, NEW_DEPLOYMENT_PROGRESS[0])
    await rec.reconcile(KEY)
    assert len(compared) == 4, "a new Deployment version: both checked again"

    drifted = stored(api, DEP_PATH)
    drifted["spec"]["replicas"] = 9
    api.put(DEPLOYMENTS.path(namespace=NS), drifted)
    await rec.reconcile(KEY)
    assert stored(api, DEP_PATH)["spec"]["replicas"] == 1
    assert ("Normal", "Repaired") in events(api)

    edit_spec(api, replicas=3)
    await rec.reconcile(KEY)
    assert stored(api, DEP_PATH)["spec"]["replicas"] == 3
    writes = len(api.writes())
    await rec.reconcile(KEY)
    await rec.reconcile(KEY)
    assert len(api.writes()) == writes


async def test_a_webserver_cache_two_status_writes_behind_never_hides_what_the_status_says() -> None:
    """The WebServer informer is relisting (an API server restart) while a rollout writes the status twice.

    Seen in `make test`'s chaos run: the Deployment was deleted, created again and rolled out while the WebServer
    informer was still listing. The cache held the Ready status from before the deletion; the reconciler had written
    "rolling out" twice since. When the Deployment settled, the reconcile decided from the cache, whose Ready status
    was what it would write, and wrote nothing: the stored status said "rolling out" for good, since the relist
    only brought back the echo of our own last write.
    """
    api = with_world(replicas=1)
    rec, clock = reconciler(api), _Clock()
    rec._clock = clock
    await rec.reconcile(KEY)
    settled = NEW_DEPLOYMENT_PROGRESS[-1]
    deployment_reports(api, settled)
    await rec.reconcile(KEY)
    assert ready(api)["status"] == "True"
    relisting = copy.deepcopy(api.get(WS_PATH))  # all the WebServer informer holds from now on

    class RelistingWebServers(LiveCache):
        def get(self, key: ObjectKey, /) -> KubeObject | None:
            return relisting

    rec._caches = Caches(
        webservers=RelistingWebServers(api, ""), deployments=rec._caches.deployments, services=rec._caches.services
    )
    rolling = {**settled, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2}
    writes: list[KubeObject] = []
    for step in (rolling, {**rolling, "readyReplicas": 1, "availableReplicas": 1}):
        clock.advance(10)  # past the status-detail interval: each step is written
        deployment_reports(api, step)
        await rec.reconcile(KEY)
        assert ready(api)["reason"] == "RollingOut"
        stored = api.get(WS_PATH)
        assert stored is not None
        writes.append(copy.deepcopy(stored))
    assert status_puts(api) == 4
    rec.webserver_cached(writes[0])  # the informer catching up, one of our writes behind the last
    assert rec.remembered_status_writes() == 1, "the last write is kept until the informer has it"

    clock.advance(10)
    deployment_reports(api, settled)
    await rec.reconcile(KEY)
    assert (ready(api)["status"], ready(api)["message"]) == ("True", "1/1 pods available.")


# --- template revisions (docs/upgrades.md) -------------------------------------------------------------------------


def left_at_revision_1(api: FakeApi) -> None:
    """What an operator of 0.1.0 left: a Deployment rendered at revision 1, with its status caught up."""
    ws = api.get(WS_PATH)
    assert ws is not None
    deployment = desired_deployment(WebServer.model_validate(ws), 1)
    deployment["status"] = {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2}
    deployment["metadata"]["generation"] = 1
    api.put(DEPLOYMENTS.path(namespace=NS), deployment)


def revision(api: FakeApi) -> str | None:
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    return (deployment["metadata"].get("annotations") or {}).get("webserver-operator.dev/template-revision")


async def test_a_new_webserver_is_rendered_at_the_newest_revision() -> None:
    api = with_world()
    await reconciler(api).reconcile(KEY)
    assert revision(api) == "2"
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert "readinessProbe" in deployment["spec"]["template"]["spec"]["containers"][0]


async def test_a_deployment_at_revision_1_is_not_rewritten_by_the_new_operator_and_says_how_to_move() -> None:
    api = with_world()
    left_at_revision_1(api)
    before = copy.deepcopy(api.get(DEP_PATH))
    rec = reconciler(api)
    await rec.reconcile(KEY)
    await rec.reconcile(KEY)
    assert api.get(DEP_PATH) == before
    assert [m for m in messages(api) if m[1] == "TemplateUpgradePending"] == [
        (
            "Normal",
            "TemplateUpgradePending",
            f"Deployment {NAME} keeps pod template revision 1 (newest: 2), so upgrading the operator restarted none "
            "of its pods. The newest revision adds: readiness probe (spec.health), preStop pause, "
            "terminationGracePeriodSeconds, rollout strategy maxUnavailable 0 and minReadySeconds. It is applied "
            "with the next change of the WebServer's pod template (image, port, resources...), or now, as one "
            f"rolling update, with `kubectl -n {NS} annotate webserver {NAME} "
            "webserver-operator.dev/template-upgrade=true`",
        )
    ]
    assert metrics.TEMPLATE_REVISION_WEBSERVERS.labels(revision="1")._value.get() >= 1


async def test_scaling_a_webserver_at_revision_1_restarts_nothing() -> None:
    api = with_world()
    left_at_revision_1(api)
    rec = reconciler(api)
    await rec.reconcile(KEY)
    edit_spec(api, replicas=5)
    await rec.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 5
    assert revision(api) is None
    assert "readinessProbe" not in deployment["spec"]["template"]["spec"]["containers"][0]


async def test_a_new_image_moves_the_webserver_to_the_newest_revision_in_the_same_rollout() -> None:
    api = with_world()
    left_at_revision_1(api)
    rec = reconciler(api)
    await rec.reconcile(KEY)
    writes = len(api.writes())
    edit_spec(api, image="nginx:1.28")
    await rec.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert revision(api) == "2"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1.28" and "readinessProbe" in container
    deployment_writes = [w for w in api.writes()[writes:] if w.path == DEP_PATH]
    assert len(deployment_writes) == 1, "one write, so one rollout"


async def test_the_owners_annotation_moves_the_webserver_to_the_newest_revision() -> None:
    api = with_world()
    left_at_revision_1(api)
    rec = reconciler(api)
    await rec.reconcile(KEY)
    ws = api.get(WS_PATH)
    assert ws is not None
    ws["metadata"]["annotations"] = {"webserver-operator.dev/template-upgrade": "true"}
    api.put(WEBSERVERS.path(namespace=NS), ws)  # metadata only: the generation stays
    await rec.reconcile(KEY)
    assert revision(api) == "2"


def service_selects_pre_stop_pods(api: FakeApi) -> bool:
    service = api.get(SVC_PATH)
    assert service is not None
    return selects_pre_stop_pods(service)


async def test_the_move_off_revision_1_takes_the_old_pods_out_of_the_service_once_a_new_pod_is_ready() -> None:
    """docs/upgrades.md: pods of 0.1.0 have no preStop pause, so they leave the Service before the rollout ends them."""
    api = with_world(replicas=2)
    left_at_revision_1(api)
    rec = reconciler(api)
    await rec.reconcile(KEY)
    assert not service_selects_pre_stop_pods(api), "revision 1's pods have no label: the Service must select them"
    ws = api.get(WS_PATH)
    assert ws is not None
    ws["metadata"]["annotations"] = {"webserver-operator.dev/template-upgrade": "true"}
    api.put(WEBSERVERS.path(namespace=NS), ws)
    await rec.reconcile(KEY)
    deployment = api.get(DEP_PATH)
    assert deployment is not None
    assert deployment["spec"]["template"]["metadata"]["labels"]["webserver-operator.dev/pre-stop-pause"] == "true"
    generation = deployment["metadata"]["generation"]
    repairs = metrics.DRIFT_REPAIRS.labels(kind="Service")._value.get()

    surging = {"observedGeneration": generation, "replicas": 3, "updatedReplicas": 1, "readyReplicas": 2}
    deployment_reports(api, surging)  # the first new pod starts; both old pods still serve alone
    await rec.reconcile(KEY)
    assert not service_selects_pre_stop_pods(api)
    deployment_reports(api, {**surging, "readyReplicas": 3})  # the new pod is ready: it can take the traffic
    await rec.reconcile(KEY)
    assert service_selects_pre_stop_pods(api)
    assert [m for m in messages(api) if m[1] == "HandedOver"] == [
        (
            "Normal",
            "HandedOver",
            f"Service {NAME} now sends traffic only to pods with the preStop pause "
            "(webserver-operator.dev/pre-stop-pause); the pods started without it leave it before the rollout stops "
            "them",
        )
    ]
    assert metrics.DRIFT_REPAIRS.labels(kind="Service")._value.get() == repairs, "the move is not a drift repair"
    deployment_reports(api, surging)  # a new pod failing its probe later changes nothing: the old pods are leaving
    await rec.reconcile(KEY)
    assert service_selects_pre_stop_pods(api)


async def test_pods_that_never_pass_their_probe_make_the_webserver_say_probe_failing_with_the_kubelets_answer() -> None:
    api = with_world(replicas=1)
    rec, clock = reconciler(api), _Clock()
    rec._clock = clock
    await rec.reconcile(KEY)
    deployment_reports(api, NEW_DEPLOYMENT_PROGRESS[1])  # one pod of the current version, not ready
    await rec.reconcile(KEY)
    seen = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.put(
        EVENTS.path(namespace=NS),
        {
            "metadata": {"name": "web-5d8f7b9c4-x2k9p.1", "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": "web-5d8f7b9c4-x2k9p"},
            "reason": "Unhealthy",
            "message": 'Readiness probe failed: Get "http://10.244.1.7:80/": dial tcp 10.244.1.7:80: connect: '
            "connection refused",
            "lastTimestamp": seen,
        },
    )
    clock.advance(GRACE)
    result = await rec.reconcile(KEY)
    assert ready(api)["reason"] == "ProbeFailing"
    assert "pod web-5d8f7b9c4-x2k9p: Readiness probe failed" in ready(api)["message"]
    assert find_condition(api, "Stalled")["status"] == "False", "not a stall: the Deployment's deadline makes it one"
    assert find_condition(api, "Reconciling")["status"] == "True"
    assert result.requeue_after is not None


# --- the PodDisruptionBudget -----------------------------------------------------------------------------------------

PDB_PATH = PODDISRUPTIONBUDGETS.path(namespace=NS, name=NAME)


async def test_a_budget_comes_with_two_replicas_is_repaired_and_goes_below_two() -> None:
    api = with_world(replicas=2)
    rec = reconciler(api)
    await rec.reconcile(KEY)
    budget = api.get(PDB_PATH)
    assert budget is not None
    ws = api.get(WS_PATH)
    assert ws is not None
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": NAME}},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    assert budget["metadata"]["ownerReferences"][0]["uid"] == ws["metadata"]["uid"]

    budget["spec"] = {**budget["spec"], "maxUnavailable": 0}  # a drain would wait forever
    api.put(PODDISRUPTIONBUDGETS.path(namespace=NS), budget)
    await rec.reconcile(KEY)
    repaired = api.get(PDB_PATH)
    assert repaired is not None and repaired["spec"]["maxUnavailable"] == 1

    writes = len(api.writes())
    await rec.reconcile(KEY)
    assert len(api.writes()) == writes, "a converged budget costs no write"

    edit_spec(api, replicas=1)
    await rec.reconcile(KEY)
    assert api.get(PDB_PATH) is None
    assert ("Normal", "Deleted") in events(api)
    await rec.reconcile(KEY)
    assert api.get(PDB_PATH) is None

    edit_spec(api, replicas=3)
    await rec.reconcile(KEY)
    assert api.get(PDB_PATH) is not None


async def test_a_single_replica_webserver_gets_no_budget() -> None:
    api = with_world(replicas=1)
    await reconciler(api).reconcile(KEY)
    assert api.get(PDB_PATH) is None


async def test_a_foreign_budget_of_the_same_name_is_reported_and_never_adopted_or_deleted() -> None:
    api = with_world(replicas=2)
    foreign = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": NAME, "namespace": NS, "labels": {"team": "payments"}},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "payments"}}},
    }
    api.put(PODDISRUPTIONBUDGETS.path(namespace=NS), foreign)
    rec = reconciler(api, labelled=True)
    await rec.reconcile(KEY)
    stored = api.get(PDB_PATH)
    assert stored is not None
    assert stored["spec"] == foreign["spec"] and stored["metadata"].get("ownerReferences") is None
    assert ready(api)["reason"] == "PodDisruptionBudgetConflict"
    assert "a PodDisruptionBudget named web already exists" in ready(api)["message"]
    edit_spec(api, replicas=1)
    await rec.reconcile(KEY)
    assert api.get(PDB_PATH) is not None, "not ours: never deleted"


def _left_on_revision_1(namespace_labels: dict[str, str]) -> tuple[FakeApi, WebServerReconciler]:
    """Two converged WebServers whose Deployments are at template revision 1, a reconciler pacing one a minute."""
    api = FakeApi()
    api.put(
        NAMESPACES.path(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": namespace_labels}},
    )
    for name in ("web", "other"):
        api.put(WEBSERVERS.path(namespace=NS), {**webserver(), "metadata": {"name": name, "namespace": NS}})
        ws = api.get(WEBSERVERS.path(namespace=NS, name=name))
        assert ws is not None
        left = desired_deployment(WebServer.model_validate(ws), 1)
        left["metadata"]["generation"] = 1
        left["status"] = {
            "observedGeneration": 1,
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
        }
        api.put(DEPLOYMENTS.path(namespace=NS), left)
    rec = WebServerReconciler(
        api=api,
        caches=Caches(
            webservers=LiveCache(api, WEBSERVERS.path(namespace=NS)),
            deployments=LiveCache(api, DEPLOYMENTS.path(namespace=NS)),
            services=LiveCache(api, SERVICES.path(namespace=NS)),
        ),
        recorder=EventRecorder(api, instance="test"),
        template_upgrade_rate=1,
    )
    return api, rec


def _revisions(api: FakeApi) -> list[str | None]:
    return [
        (d["metadata"].get("annotations") or {}).get("webserver-operator.dev/template-revision")
        for d in (api.get(DEPLOYMENTS.path(namespace=NS, name=n)) for n in ("web", "other"))
        if d is not None
    ]


async def test_at_the_admins_pace_a_webserver_left_on_revision_1_moves_one_at_a_time() -> None:
    api, rec = _left_on_revision_1({})

    def revisions() -> list[str | None]:
        return _revisions(api)

    first = await rec.reconcile((NS, "web"))
    second = await rec.reconcile((NS, "other"))
    assert revisions() == ["2", None], "one per minute"
    assert second.requeue_after == 60, "its turn comes at the pace"
    assert first.requeue_after is None


async def test_the_pacer_leaves_a_namespace_labelled_manual_alone_and_the_owners_annotation_still_moves() -> None:
    api, rec = _left_on_revision_1({"webserver-operator.dev/template-upgrade": "manual"})
    for name in ("web", "other"):
        await rec.reconcile((NS, name))
    assert _revisions(api) == [None, None], "the namespace opted out: the pacer moves nothing there"
    ws = api.get(WEBSERVERS.path(namespace=NS, name="web"))
    assert ws is not None
    ws["metadata"]["annotations"] = {"webserver-operator.dev/template-upgrade": "true"}
    api.put(WEBSERVERS.path(namespace=NS), ws)
    for name in ("web", "other"):
        await rec.reconcile((NS, name))
    assert _revisions(api) == ["2", None], "the owner's annotation moves its own WebServer, and only that one"
