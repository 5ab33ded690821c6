"""Status: counts, nodePort, and a Ready condition that says what is wrong and what to do."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.factories import deployment, service, webserver_model
from webserver_operator.api.models import WebServer
from webserver_operator.reconcile.problems import Problem
from webserver_operator.reconcile.status import compute_status, progress_detail, ready_verdict, status_changed

Obj = dict[str, Any]
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=10)
SELECTOR = "app.kubernetes.io/instance=web,app.kubernetes.io/name=webserver"
PREVIOUS: dict[str, Any] = {
    "observedGeneration": 1,
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": "2024-04-01T08:00:00Z",
            "reason": "Available",
            "message": "3/3 pods available.",
        }
    ],
}


def make_ws(status: Obj | None = None, **fields: Any) -> WebServer:
    """The WebServer these cases judge: generation 2 of three replicas, with ``status`` as last written."""
    return webserver_model(status=status, **{"generation": 2, "replicas": 3, **fields})


REPLICA_FAILURE = {
    "type": "ReplicaFailure",
    "status": "True",
    "reason": "FailedCreate",
    "message": 'pods "web-5d9c" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true',
}
DEADLINE = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "web-5d9c" has timed out progressing.',
}

# (id, ws, deployment, service, problem, expected status, reason, message fragments)
VERDICTS: list[tuple[str, WebServer, Obj | None, Obj | None, Problem | None, str, str, list[str]]] = [
    (
        "problem-wins",
        make_ws(PREVIOUS),
        deployment(),
        service(),
        Problem("ServiceConflict", "a Service named web already exists; delete or rename it"),
        "False",
        "ServiceConflict",
        ["a Service named web already exists; delete or rename it"],
    ),
    ("first-reconcile", make_ws(), None, None, None, "False", "Creating", ["Creating the Deployment and Service web"]),
    (
        "deployment-deleted",
        make_ws(PREVIOUS),
        None,
        service(),
        None,
        "False",
        "DeploymentMissing",
        ["Deployment web does not exist", "recreating", "kubectl -n team-a describe webserver web"],
    ),
    ("service-deleted", make_ws(PREVIOUS), deployment(), None, None, "False", "ServiceMissing", ["Service web"]),
    (
        "deployment-controller-behind",
        make_ws(PREVIOUS),
        deployment(generation=6, observed=5),
        service(),
        None,
        "False",
        "RollingOut",
        ["generation 6, observed 5", "kube-controller-manager"],
    ),
    (
        "fresh-deployment-no-status",
        make_ws(),
        deployment(generation=1, observed=None, replicas=0, updated=0, available=0, ready=0),
        service(None),
        None,
        "False",
        "RollingOut",
        ["generation 1, observed 0"],
    ),
    (
        "pods-rejected-by-admission",
        make_ws(PREVIOUS),
        deployment(replicas=0, updated=0, available=0, ready=0, conditions=[REPLICA_FAILURE]),
        service(),
        None,
        "False",
        "ReplicaFailure",
        ["Pod Security", "spec.resources", 'violates PodSecurity "restricted:latest"'],
    ),
    (
        "progress-deadline",
        make_ws(PREVIOUS),
        deployment(available=1, ready=1, conditions=[DEADLINE]),
        service(),
        None,
        "False",
        "ProgressDeadlineExceeded",
        ["1/3 pods available", "has timed out progressing", "kubectl -n team-a get pods -l " + SELECTOR],
    ),
    (
        "progressing-false-for-another-reason",
        make_ws(PREVIOUS),
        deployment(conditions=[{**DEADLINE, "reason": "Other"}]),
        service(),
        None,
        "True",
        "Available",
        ["3/3 pods available"],
    ),
    (
        "replica-failure-resolved",
        make_ws(PREVIOUS),
        deployment(conditions=[{**REPLICA_FAILURE, "status": "False"}]),
        service(),
        None,
        "True",
        "Available",
        ["3/3"],
    ),
    (
        "deployment-not-yet-scaled",
        make_ws(PREVIOUS),
        deployment(spec_replicas=1, replicas=1, updated=1, available=1, ready=1),
        service(),
        None,
        "False",
        "Scaling",
        ["from 1 to 3"],
    ),
    (
        "old-pods-still-running",
        make_ws(PREVIOUS),
        deployment(replicas=4, updated=2, available=3),
        service(),
        None,
        "False",
        "RollingOut",
        ["2/3 pods updated", "3/3 available", "2 old pods still running"],
    ),
    (
        "scaling-down",
        make_ws(PREVIOUS),
        deployment(replicas=5, updated=5, available=5, ready=5),
        service(),
        None,
        "False",
        "Scaling",
        ["Scaling down to 3 pods: 5 still running"],
    ),
    (
        "pods-not-yet-available",
        make_ws(PREVIOUS),
        deployment(available=2, ready=2),
        service(),
        None,
        "False",
        "Scaling",
        ["2/3 pods available", "cannot pull the image"],
    ),
    ("all-available", make_ws(PREVIOUS), deployment(), service(), None, "True", "Available", ["3/3 pods available."]),
    (
        "scaled-to-zero",
        make_ws(PREVIOUS, replicas=0),
        deployment(spec_replicas=0, replicas=0, updated=0, available=0, ready=0),
        service(),
        None,
        "True",
        "Available",
        ["Scaled to zero"],
    ),
]


@pytest.mark.parametrize(
    ("ws", "live_deployment", "live_service", "problem", "status", "reason", "fragments"),
    [case[1:] for case in VERDICTS],
    ids=[case[0] for case in VERDICTS],
)
def test_ready_condition(
    ws: WebServer,
    live_deployment: Obj | None,
    live_service: Obj | None,
    problem: Problem | None,
    status: str,
    reason: str,
    fragments: list[str],
) -> None:
    verdict = ready_verdict(ws, deployment=live_deployment, service=live_service, problem=problem)
    assert (verdict["status"], verdict["reason"]) == (status, reason)
    for fragment in fragments:
        assert fragment in verdict["message"]
    result = compute_status(ws, deployment=live_deployment, service=live_service, problem=problem, now=T1)
    (ready,) = [c for c in result["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (status, reason, verdict["message"])
    assert ready["observedGeneration"] == 2


def test_full_status() -> None:
    result = compute_status(
        make_ws(PREVIOUS), deployment=deployment(ready=2, available=3), service=service(30080), problem=None, now=T1
    )
    assert result == {
        "observedGeneration": 2,
        "replicas": 3,
        "readyReplicas": 2,
        "selector": SELECTOR,
        "nodePort": 30080,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 2,
                "lastTransitionTime": "2024-04-01T08:00:00Z",
                "reason": "Available",
                "message": "3/3 pods available.",
            },
            {
                "type": "Reconciling",
                "status": "False",
                "observedGeneration": 2,
                "lastTransitionTime": "2024-05-01T12:10:00Z",
                "reason": "Available",
                "message": "3/3 pods available.",
            },
            {
                "type": "Stalled",
                "status": "False",
                "observedGeneration": 2,
                "lastTransitionTime": "2024-05-01T12:10:00Z",
                "reason": "Available",
                "message": "3/3 pods available.",
            },
        ],
    }


@pytest.mark.parametrize("live_service", [None, service(None), {"spec": {"type": "ClusterIP", "ports": []}}])
def test_no_node_port_reported_until_one_is_allocated(live_service: Obj | None) -> None:
    result = compute_status(make_ws(), deployment=None, service=live_service, problem=None, now=T0)
    assert "nodePort" not in result
    assert (result["replicas"], result["readyReplicas"]) == (0, 0)


def test_transition_time_moves_only_when_ready_flips() -> None:
    flipped = compute_status(
        make_ws(PREVIOUS), deployment=deployment(available=1), service=service(), problem=None, now=T1
    )
    assert flipped["conditions"][0]["lastTransitionTime"] == "2024-05-01T12:10:00Z"
    still = compute_status(
        make_ws(flipped), deployment=deployment(available=2), service=service(), problem=None, now=T1
    )
    assert still["conditions"][0]["lastTransitionTime"] == "2024-05-01T12:10:00Z"
    assert still["conditions"][0]["message"].startswith("2/3 pods available")


def test_other_condition_types_are_kept() -> None:
    previous = {
        "conditions": [
            *PREVIOUS["conditions"],
            {"type": "Degraded", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "Fine"},
        ]
    }
    result = compute_status(make_ws(previous), deployment=deployment(), service=service(), problem=None, now=T1)
    assert [c["type"] for c in result["conditions"]] == ["Ready", "Degraded", "Reconciling", "Stalled"]


def test_steady_state_writes_nothing() -> None:
    """Recomputing from the stored status later, with nothing changed, must not count as a change."""
    first = compute_status(make_ws(), deployment=deployment(), service=service(), problem=None, now=T0)
    stored = {
        **first,
        "conditions": [{**c, "lastTransitionTime": "2024-05-01T12:00:00.000000Z"} for c in first["conditions"]],
    }
    second = compute_status(make_ws(stored), deployment=deployment(), service=service(), problem=None, now=T1)
    assert second == first
    assert not status_changed(stored, second)


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (None, {}, False),
        (None, {"replicas": 0}, True),
        (PREVIOUS, PREVIOUS, False),
        ({**PREVIOUS, "nodePort": None}, PREVIOUS, False),
        (
            PREVIOUS,
            {
                **PREVIOUS,
                "conditions": [{**PREVIOUS["conditions"][0], "lastTransitionTime": "2024-04-01T10:00:00+02:00"}],
            },
            False,
        ),
        (
            {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]},
            {"conditions": [{"type": "B", "status": "True"}, {"type": "A", "status": "True", "message": ""}]},
            False,
        ),
        (PREVIOUS, {**PREVIOUS, "conditions": [{**PREVIOUS["conditions"][0], "message": "2/3"}]}, True),
        (
            PREVIOUS,
            {**PREVIOUS, "conditions": [{**PREVIOUS["conditions"][0], "lastTransitionTime": "2024-04-01T08:00:01Z"}]},
            True,
        ),
        ({**PREVIOUS, "nodePort": 30080}, PREVIOUS, True),
        (PREVIOUS, {**PREVIOUS, "observedGeneration": 2}, True),
        (PREVIOUS, {**PREVIOUS, "conditions": []}, True),
    ],
)
def test_status_changed(old: Obj | None, new: Obj, changed: bool) -> None:
    assert status_changed(old, new) is changed


def _in_progress(**fields: Any) -> Obj:
    """A stored status of a rollout in progress: Ready=False, Reconciling=True, Stalled=False."""
    conditions = [
        {"type": t, "status": v, "reason": "Scaling", "message": "0/1 pods available.", "lastTransitionTime": "x"}
        for t, v in (("Ready", "False"), ("Reconciling", "True"), ("Stalled", "False"))
    ]
    return {
        "observedGeneration": 1,
        "replicas": 0,
        "readyReplicas": 0,
        "nodePort": 30080,
        "conditions": conditions,
        **fields,
    }


def _flipped(status: Obj, **statuses: str) -> Obj:
    return {
        **status,
        "conditions": [{**c, "status": statuses.get(c["type"], c["status"])} for c in status["conditions"]],
    }


@pytest.mark.parametrize(
    ("old", "new", "detail"),
    [
        (_in_progress(), _in_progress(replicas=1), True),
        (
            _in_progress(),
            {
                **_in_progress(),
                "conditions": [
                    {**c, "reason": "RollingOut", "message": "1/3 pods updated"} for c in _in_progress()["conditions"]
                ],
            },
            True,
        ),
        (None, _in_progress(), False),
        (_in_progress(), _in_progress(observedGeneration=2), False),
        (_in_progress(), _in_progress(nodePort=30081), False),
        (_in_progress(), _flipped(_in_progress(readyReplicas=1), Ready="True", Reconciling="False"), False),
        (_in_progress(), _flipped(_in_progress(), Reconciling="False", Stalled="True"), False),
        (
            _flipped(_in_progress(), Reconciling="False", Stalled="True"),
            _flipped(_in_progress(replicas=1), Reconciling="False", Stalled="True"),
            False,
        ),
    ],
    ids=[
        "replicas",
        "reason-and-message",
        "first-status",
        "new-generation",
        "node-port",
        "ready",
        "stalled",
        "while-stalled",
    ],
)
def test_progress_detail_is_only_a_change_of_detail_while_reconciling(old: Obj | None, new: Obj, detail: bool) -> None:
    assert progress_detail(old, new) is detail
