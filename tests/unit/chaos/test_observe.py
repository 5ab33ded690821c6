"""Convergence as the harness judges it (chaos.observe.mismatch): Ready and at rest, as ``kubectl get`` shows it."""

from __future__ import annotations

import time
from typing import Any

from chaos.observe import Backlog, backlog_recovery, mismatch


def webserver(*, replicas: int = 2, shown: int = 2, ready_shown: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 3},
        "spec": {"replicas": replicas, "image": "nginx:1.27", "port": 80},
        "status": {
            "observedGeneration": 3,
            "replicas": shown,
            "readyReplicas": ready_shown,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Available", "message": ""}],
        },
    }


def deployment(*, spec_replicas: int = 2, replicas: int = 2, ready: int = 2, observed: int = 5) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "generation": 5,
            "ownerReferences": [{"kind": "WebServer", "name": "web", "uid": "u-1", "controller": True}],
        },
        "spec": {
            "replicas": spec_replicas,
            "template": {
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}
            },
        },
        "status": {"observedGeneration": observed, "replicas": replicas, "readyReplicas": ready},
    }


SERVICE = {
    "metadata": {
        "name": "web",
        "namespace": "ns",
        "ownerReferences": [{"kind": "WebServer", "name": "web", "uid": "u-1", "controller": True}],
    },
    "spec": {
        "ports": [{"port": 80, "nodePort": 30080}],
        "selector": {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "web"},
    },
}


def test_a_ready_webserver_whose_numbers_match_its_settled_deployment_is_converged() -> None:
    assert mismatch(webserver(), deployment(), SERVICE) is None


def test_a_scale_down_still_removing_pods_is_not_converged_although_ready() -> None:
    """Ready=True once enough pods are available, but the status still has a write to make when the rest go."""
    why = mismatch(webserver(replicas=2, shown=3, ready_shown=3), deployment(replicas=3, ready=3), SERVICE)
    assert why == "Deployment status.replicas 3 != spec.replicas 2 (pods still coming or going)"


def test_a_status_behind_its_settled_deployment_is_not_converged() -> None:
    assert (
        mismatch(webserver(shown=2, ready_shown=1), deployment(), SERVICE)
        == "status.readyReplicas 1 != the Deployment's 2"
    )


def test_a_deployment_whose_status_has_not_seen_its_spec_is_not_converged() -> None:
    why = mismatch(webserver(), deployment(observed=4), SERVICE)
    assert why == "Deployment status has not observed its generation yet"


def test_zero_replicas_with_no_counts_written_is_converged() -> None:
    ws = webserver(replicas=0, shown=0, ready_shown=0)
    del ws["status"]["replicas"], ws["status"]["readyReplicas"]
    deploy = deployment(spec_replicas=0, replicas=0, ready=0)
    del deploy["status"]["replicas"], deploy["status"]["readyReplicas"]
    assert mismatch(ws, deploy, SERVICE) is None


def test_a_webserver_that_is_not_ready_is_reported_with_what_its_deployment_says() -> None:
    """The verdict shows both sides: a status lagging a settled Deployment is the operator's miss."""
    ws = webserver()
    ws["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "RollingOut", "message": "1 old pod"}]
    why = mismatch(ws, deployment(replicas=2, ready=2), SERVICE)
    assert why == (
        "Ready=False (RollingOut: 1 old pod); the Deployment says generation 5, observedGeneration 5, spec.replicas 2, "
        "replicas 2, updatedReplicas 0, readyReplicas 2, availableReplicas 0, resourceVersion None"
    )


def test_a_service_that_also_selects_the_pre_stop_label_its_pods_carry_is_converged() -> None:
    """webserver-operator's Service selects the preStop-pause label of its pods too (reconcile.handover)."""
    label = {"webserver-operator.dev/pre-stop-pause": "true"}
    selector = {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "web", **label}
    service: dict[str, Any] = {**SERVICE, "spec": {"ports": [{"port": 80, "nodePort": 30080}], "selector": selector}}
    unlabelled = deployment()
    assert mismatch(webserver(), unlabelled, service) == f"Service selector {selector}"
    labelled = deployment()
    labelled["spec"]["template"]["metadata"] = {"labels": label}
    assert mismatch(webserver(), labelled, service) is None


def test_the_backlog_trail_shows_one_look_per_interval_and_the_last() -> None:
    seen = Backlog(counts=[(0.4, 42), (1.4, 40), (10.5, 7), (11.5, 7), (20.6, 2), (23.0, 0)])
    assert seen.trail() == "42 at +0s, 7 at +10s, 2 at +21s, 0 at +23s"


class _Listing:
    """``KubeApi.items`` answering the WebServers as each look finds them."""

    def __init__(self, looks: list[list[dict[str, Any]]]) -> None:
        self.looks = looks

    async def items(self, path: str, **_query: str) -> list[dict[str, Any]]:
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]


def _behind(name: str, generation: int, observed: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": name, "generation": generation},
        "status": {"observedGeneration": observed},
    }


async def test_a_backlog_that_does_not_catch_up_names_who_is_left_behind() -> None:
    at_heal = [_behind("a", 3, 2), _behind("b", 5, 4)]
    later = [_behind("a", 4, 3), _behind("b", 5, 5)]  # a: its heal-time generation 3 observed; b: caught up
    stuck = [_behind("a", 4, 2), _behind("b", 6, 5)]
    api = _Listing([at_heal, at_heal, stuck])
    seen = Backlog()
    assert await backlog_recovery(api, run_label="x", healed=time.time(), cap=1.5, seen=seen) is None  # type: ignore[arg-type]
    assert seen.last == ["ns/a (observed 2 of generation 3)"]
    assert [count for _, count in seen.counts][:2] == [2, 1]

    api = _Listing([at_heal, later])
    seen = Backlog()
    took = await backlog_recovery(api, run_label="x", healed=time.time(), cap=5, seen=seen)  # type: ignore[arg-type]
    assert took is not None
    assert seen.last == []
