"""Why pods are unready: the kubelet's probe Events, read only after a grace and at most every few seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.factories import webserver_model
from tests.support.fake_api import FakeApi
from webserver_operator.core.resources import EVENTS
from webserver_operator.reconcile.probes import GRACE, LOOK_INTERVAL, ProbeFailures, latest_failure, needs_look
from webserver_operator.reconcile.status import ready_verdict

NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def event(pod: str, message: str, *, ago: float = 5, reason: str = "Unhealthy") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pod}.1", "namespace": "team-a"},
        "involvedObject": {"kind": "Pod", "name": pod},
        "reason": reason,
        "message": message,
        "lastTimestamp": (NOW - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def unready(updated: int = 1, available: int = 0, generation: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "generation": generation},
        "status": {
            "observedGeneration": 2,
            "replicas": 2,
            "updatedReplicas": updated,
            "readyReplicas": available,
            "availableReplicas": available,
        },
    }


def test_the_newest_recent_failure_of_one_of_the_webservers_own_pods_is_reported() -> None:
    events = [
        event("web-7d9f8c6b5-abcde", "Readiness probe failed: HTTP probe failed with statuscode: 403", ago=20),
        event("web-7d9f8c6b5-fghij", 'Readiness probe failed: Get "http://10.0.0.5:80/": connection refused', ago=3),
        event("web-2-7d9f8c6b5-klmno", "Readiness probe failed: of another WebServer named web-2", ago=1),
        event("web-7d9f8c6b5-pqrst", "Back-off restarting failed container", ago=1, reason="BackOff"),
        event("web-7d9f8c6b5-uvwxy", "Readiness probe failed: an hour ago", ago=3600),
    ]
    assert latest_failure(events, "web", now=NOW) == (
        'pod web-7d9f8c6b5-fghij: Readiness probe failed: Get "http://10.0.0.5:80/": connection refused'
    )
    assert latest_failure(events[2:], "web", now=NOW) is None
    assert latest_failure(events, "web", now=NOW + timedelta(minutes=2)) is None, "too old to explain anything now"


def test_only_unavailable_pods_of_the_current_version_are_worth_a_look() -> None:
    ws = webserver_model(replicas=2)
    assert needs_look(ws, unready())
    assert not needs_look(ws, unready(updated=2, available=2))
    assert not needs_look(ws, unready(updated=0)), "no pod of the new version yet: nothing to ask about"
    assert not needs_look(ws, unready(generation=3)), "the Deployment controller has not acted yet"
    assert not needs_look(ws, None)
    assert not needs_look(webserver_model(replicas=0), unready())


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


async def test_no_read_during_the_grace_then_one_per_interval() -> None:
    api = FakeApi()
    api.put(EVENTS.path(namespace="team-a"), event("web-7d9f8c6b5-abcde", "Readiness probe failed: 403"))
    clock = Clock()
    probes = ProbeFailures(api, clock)
    ws = webserver_model(replicas=2)
    assert await probes.look(ws, unready()) == (None, GRACE)
    clock.now = NOW + timedelta(seconds=GRACE - 1)
    assert await probes.look(ws, unready()) == (None, 1)
    assert api.calls == [], "a rollout whose pods get ready within the grace costs no read"
    clock.now = NOW + timedelta(seconds=GRACE)
    assert await probes.look(ws, unready()) == ("pod web-7d9f8c6b5-abcde: Readiness probe failed: 403", LOOK_INTERVAL)
    assert len(api.calls) == 1
    assert api.calls[0].query == {"fieldSelector": "involvedObject.kind=Pod,reason=Unhealthy"}
    clock.now = NOW + timedelta(seconds=GRACE + 1)
    failure, again = await probes.look(ws, unready())
    assert (failure is not None, again, len(api.calls)) == (True, LOOK_INTERVAL - 1, 1)
    assert await probes.look(ws, unready(updated=2, available=2)) == (None, None)
    assert await probes.look(ws, unready()) == (None, GRACE), "unready again: a new grace"


async def test_the_grace_counts_from_the_deployments_last_progress() -> None:
    """After an operator restart the grace is not started over: the Deployment says when it last progressed."""
    api = FakeApi()
    clock = Clock()
    stuck = unready()
    stuck["status"]["conditions"] = [
        {"type": "Progressing", "status": "True", "lastUpdateTime": "2026-11-28T02:59:30Z"}
    ]
    assert await ProbeFailures(api, clock).look(webserver_model(replicas=2), stuck) == (None, LOOK_INTERVAL)
    assert len(api.calls) == 1


def test_a_probe_failure_explains_a_wait_but_is_not_a_stall_by_itself() -> None:
    ws = webserver_model(replicas=2, port=8080, health={"path": "/healthz"})
    deployment = {**unready(), "spec": {"replicas": 2}}
    deployment["metadata"]["generation"] = 2
    verdict = ready_verdict(ws, deployment=deployment, service={}, problem=None, probe_failure="pod p: 403")
    assert (verdict["status"], verdict["reason"]) == ("False", "ProbeFailing")
    assert verdict["message"] == (
        "0/2 pods available; pods of the current version fail their probe (pod p: 403). Check that the image serves "
        "/healthz on port 8080 (spec.port, spec.health.path); pods that never pass are never sent traffic, and the "
        "old ones keep serving."
    )
    deadline = {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": 'ReplicaSet "web-1" has timed out progressing.',
    }
    deployment["status"]["conditions"] = [deadline]
    verdict = ready_verdict(ws, deployment=deployment, service={}, problem=None, probe_failure="pod p: 403")
    assert verdict["reason"] == "ProgressDeadlineExceeded"
    assert verdict["message"].endswith("Last probe failure: pod p: 403.")
