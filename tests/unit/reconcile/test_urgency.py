"""Which Deployment changes are reconciled ahead of the rest (those that change what the Ready condition says), and
which may wait (rollout progress only)."""

from __future__ import annotations

from typing import Any

from webserver_operator.reconcile.status import PROGRESS_DETAIL_INTERVAL
from webserver_operator.reconcile.urgency import availability_changed, progress_wait


def _deployment(
    *,
    generation: int = 1,
    observed: int = 1,
    replicas: int = 1,
    updated: int = 1,
    available: int = 0,
    conditions: dict[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": observed,
        "replicas": replicas,
        "updatedReplicas": updated,
        "conditions": [
            {"type": kind, "status": status, "reason": reason} for kind, (status, reason) in (conditions or {}).items()
        ],
    }
    if available:
        status["availableReplicas"] = available
    return {"metadata": {"name": "web", "generation": generation}, "spec": {"replicas": 1}, "status": status}


def test_a_new_deployment_is_urgent_only_when_it_becomes_available() -> None:
    created = {"metadata": {"name": "web", "generation": 1}, "spec": {"replicas": 1}}
    observed = _deployment(replicas=0, updated=0, conditions={"Progressing": ("True", "NewReplicaSetCreated")})
    pod_running = _deployment(
        conditions={"Progressing": ("True", "ReplicaSetUpdated"), "Available": ("False", "MinimumReplicasUnavailable")}
    )
    available = _deployment(
        available=1,
        conditions={
            "Progressing": ("True", "NewReplicaSetAvailable"),
            "Available": ("True", "MinimumReplicasAvailable"),
        },
    )
    assert not availability_changed(observed, created)
    assert not availability_changed(pod_running, observed)
    assert availability_changed(available, pod_running)


def test_losing_availability_and_a_stalled_rollout_are_urgent_too() -> None:
    available = _deployment(available=1, conditions={"Available": ("True", "MinimumReplicasAvailable")})
    lost = _deployment(available=0, conditions={"Available": ("False", "MinimumReplicasUnavailable")})
    assert availability_changed(lost, available)
    stalled = _deployment(conditions={"Progressing": ("False", "ProgressDeadlineExceeded")})
    assert availability_changed(stalled, _deployment(conditions={"Progressing": ("True", "ReplicaSetUpdated")}))
    failing = _deployment(conditions={"ReplicaFailure": ("True", "FailedCreate")})
    assert availability_changed(failing, _deployment())


def test_the_end_of_a_rollout_is_urgent_even_when_the_available_count_stays() -> None:
    # The new pod is available and the old one is not: the old ReplicaSet's scale-down completes the rollout.
    surging = _deployment(generation=2, observed=2, replicas=2, updated=1, available=1)
    done = _deployment(generation=2, observed=2, replicas=1, updated=1, available=1)
    assert availability_changed(done, surging)


def test_a_change_the_status_does_not_read_is_not_urgent() -> None:
    before = _deployment(available=1, conditions={"Available": ("True", "MinimumReplicasAvailable")})
    after = {**before, "metadata": {**before["metadata"], "annotations": {"kubectl.kubernetes.io/restartedAt": "x"}}}
    assert not availability_changed(after, before)


def test_rollout_progress_waits_the_status_detail_interval_and_nothing_else_does() -> None:
    created = {"metadata": {"name": "web", "generation": 1}, "spec": {"replicas": 1}}
    observed = _deployment(replicas=0, updated=0, conditions={"Progressing": ("True", "NewReplicaSetCreated")})
    pod_running = _deployment(
        conditions={"Progressing": ("True", "ReplicaSetUpdated"), "Available": ("False", "MinimumReplicasUnavailable")}
    )
    available = _deployment(available=1, conditions={"Available": ("True", "MinimumReplicasAvailable")})
    assert progress_wait(observed, created) == PROGRESS_DETAIL_INTERVAL
    assert progress_wait(pod_running, observed) == PROGRESS_DETAIL_INTERVAL
    assert progress_wait(available, pod_running) is None, "availability is urgent, it never waits"

    def changed(**meta: Any) -> dict[str, Any]:
        edited = _deployment(conditions={"Progressing": ("True", "ReplicaSetUpdated")})
        edited["metadata"].update(meta)
        return edited

    before = _deployment(conditions={"Progressing": ("True", "ReplicaSetUpdated")})
    scaled = {**before, "spec": {"replicas": 0}}
    assert progress_wait(scaled, before) is None, "a spec drift is repaired at once"
    assert progress_wait(changed(generation=2), before) is None
    assert progress_wait(changed(labels={"app": "other"}), before) is None
    assert progress_wait(changed(ownerReferences=[]), before) is None
    assert progress_wait(changed(deletionTimestamp="2026-11-27T00:00:00Z"), before) is None
