"""Which child events can change what the reconciler does: those that change a field it reads, and every ADDED or
DELETED; a Deployment update that only touches fields it never reads queues nothing."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support import factories
from webserver_operator.reconcile.status import compute_status
from webserver_operator.reconcile.triggers import OwnWrites, child_change_matters

NOW = datetime(2026, 11, 25, tzinfo=UTC)


def deployment() -> dict[str, Any]:
    dep = factories.deployment(
        generation=2,
        observed=2,
        spec_replicas=1,
        replicas=1,
        updated=1,
        available=0,
        ready=0,
        conditions=[
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "lastUpdateTime": "t0"},
            {
                "type": "Progressing",
                "status": "True",
                "reason": "ReplicaSetUpdated",
                "message": "m",
                "lastUpdateTime": "t0",
            },
        ],
    )
    dep["metadata"].update(uid="u1", labels={"app": "web"}, ownerReferences=[{"uid": "ws", "controller": True}])
    dep["status"]["unavailableReplicas"] = 1
    return dep


def changed(path: str, value: Any) -> dict[str, Any]:
    dep = copy.deepcopy(deployment())
    *parents, last = path.split(".")
    node: Any = dep
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return dep


NOT_READ = [
    ("metadata.annotations", {"deployment.kubernetes.io/revision": "1"}),
    ("metadata.resourceVersion", "99"),
    ("status.unavailableReplicas", 0),
    ("status.collisionCount", 1),
    ("status.conditions.1.lastUpdateTime", "t1"),
    ("status.conditions.0.lastUpdateTime", "t1"),
]
READ = [
    ("metadata.generation", 3),
    ("metadata.labels", {"app": "other"}),
    ("metadata.ownerReferences", []),
    ("metadata.deletionTimestamp", "now"),
    ("spec.replicas", 2),
    ("spec.template", {"spec": {"containers": [{"name": "web", "image": "drifted"}]}}),
    ("status.observedGeneration", 1),
    ("status.replicas", 2),
    ("status.readyReplicas", 1),
    ("status.updatedReplicas", 0),
    ("status.availableReplicas", 1),
    ("status.conditions.1", {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}),
    ("status.conditions.0", {"type": "ReplicaFailure", "status": "True", "message": "quota"}),
]


@pytest.mark.parametrize(("path", "value"), NOT_READ)
def test_an_update_of_fields_never_read_queues_nothing_and_leaves_the_status(path: str, value: Any) -> None:
    old, new = deployment(), changed(path, value)
    assert not child_change_matters("MODIFIED", new, old)
    ws = factories.webserver_model(replicas=1)
    status = [compute_status(ws, deployment=d, service=factories.service(), problem=None, now=NOW) for d in (old, new)]
    assert status[0] == status[1]


@pytest.mark.parametrize(("path", "value"), READ)
def test_an_update_of_any_field_read_wakes_the_reconciler(path: str, value: Any) -> None:
    assert child_change_matters("MODIFIED", changed(path, value), deployment())


@pytest.mark.parametrize("event_type", ["ADDED", "DELETED"])
def test_additions_and_deletions_always_wake_it(event_type: Any) -> None:
    assert child_change_matters(event_type, deployment(), deployment())


def test_a_modified_event_without_the_old_object_wakes_it() -> None:
    assert child_change_matters("MODIFIED", deployment(), None)


def test_own_writes_know_only_the_latest_write_of_each_object() -> None:
    own = OwnWrites()
    first = {"metadata": {"namespace": "ns", "name": "web", "resourceVersion": "1"}}
    second = {"metadata": {"namespace": "ns", "name": "web", "resourceVersion": "2"}}
    own.record("Deployment", first)
    assert own.is_echo("Deployment", "MODIFIED", first)
    assert not own.is_echo("Service", "MODIFIED", first), "another kind of the same name is another object"
    own.record("Deployment", second)
    assert not own.is_echo("Deployment", "MODIFIED", first)
    assert own.is_echo("Deployment", "ADDED", second)
    assert not own.is_echo("Deployment", "DELETED", second)
    own.forget(("ns", "web"))
    assert not own.is_echo("Deployment", "MODIFIED", second)
