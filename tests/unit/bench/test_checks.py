"""Milestone predicates: what "Ready at its generation", "available" and "equivalent children" mean for every system."""

from typing import Any

from bench import checks
from bench.tracker import State
from tests.support.factories import webserver

Obj = dict[str, Any]


def ws(generation: int = 2, *, observed: int = 2, condition_generation: int = 2, ready: str = "True") -> Obj:
    status = {
        "observedGeneration": observed,
        "replicas": 1,
        "readyReplicas": 1,
        "selector": "app.kubernetes.io/instance=web,app.kubernetes.io/name=webserver",
        "nodePort": 30080,
        "conditions": [{"type": "Ready", "status": ready, "observedGeneration": condition_generation}],
    }
    return webserver(uid="u-1", generation=generation, replicas=1, port=80, status=status)


def deployment(*, generation: int = 3, observed: int = 3, replicas: int = 1, available: int = 1) -> Obj:
    labels = {
        "app.kubernetes.io/name": "webserver",
        "app.kubernetes.io/instance": "web",
        "app.kubernetes.io/managed-by": "webserver-operator",
        "app.kubernetes.io/component": "web-server",
    }
    return {
        "metadata": {
            "name": "web",
            "uid": "d-1",
            "generation": generation,
            "labels": labels,
            "ownerReferences": [{"uid": "u-1", "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "replicas": replicas,
            "selector": {
                "matchLabels": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}
            },
            "template": {
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 80}]}
                    ]
                }
            },
        },
        "status": {
            "observedGeneration": observed,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "availableReplicas": available,
        },
    }


def service(node_port: int = 30080) -> Obj:
    dep = deployment()
    return {
        "metadata": {**dep["metadata"], "uid": "s-1"},
        "spec": {
            "type": "NodePort",
            "selector": dep["spec"]["selector"]["matchLabels"],
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": node_port}],
        },
    }


def test_ready_needs_status_and_condition_at_the_current_generation() -> None:
    assert checks.ws_ready_at_generation(ws())
    assert not checks.ws_ready_at_generation(ws(observed=1))
    assert not checks.ws_ready_at_generation(ws(condition_generation=1))
    assert not checks.ws_ready_at_generation(ws(ready="False"))
    assert not checks.ws_ready_at_generation(None)


def test_available_needs_the_latest_generation_observed_and_every_pod_available() -> None:
    assert checks.deployment_available(deployment())
    assert not checks.deployment_available(deployment(observed=2))
    assert not checks.deployment_available(deployment(replicas=2, available=1))
    assert checks.deployment_available(deployment(replicas=0, available=0))


def test_replaced_is_true_only_for_a_new_uid() -> None:
    state = State()
    check = checks.replaced("dep", "d-1")
    state.objects["dep"]["web"] = deployment()
    assert not check(state, "web")
    del state.objects["dep"]["web"]
    assert not check(state, "web")
    assert checks.gone_or_replaced("dep", "d-1")(state, "web")
    state.objects["dep"]["web"] = {**deployment(), "metadata": {**deployment()["metadata"], "uid": "d-2"}}
    assert check(state, "web")


def test_equivalent_children_have_no_problems() -> None:
    assert checks.equivalence_problems(ws(), deployment(), service()) == []


def test_a_service_may_also_select_a_label_every_pod_of_the_template_carries() -> None:
    dep, svc = deployment(), service()
    svc["spec"]["selector"] = {**svc["spec"]["selector"], "webserver-operator.dev/pre-stop-pause": "true"}
    assert checks.equivalence_problems(ws(), dep, svc) != [], "the pods do not carry it: the Service selects none"
    dep["spec"]["template"]["metadata"] = {"labels": {"webserver-operator.dev/pre-stop-pause": "true"}}
    assert checks.equivalence_problems(ws(), dep, svc) == []
    svc["spec"]["selector"] = {"webserver-operator.dev/pre-stop-pause": "true"}
    assert checks.equivalence_problems(ws(), dep, svc) != [], "without the pod selector it selects other pods too"


def test_equivalence_names_what_differs() -> None:
    foreign = deployment()
    foreign["metadata"]["ownerReferences"] = [{"uid": "someone-else", "controller": True, "blockOwnerDeletion": True}]
    problems = checks.equivalence_problems(ws(), foreign, service(node_port=31000))
    assert any("Deployment ownerReferences" in p for p in problems), problems
    assert any("status.nodePort 30080 differs" in p for p in problems), problems
    assert checks.equivalence_problems(ws(), None, service()) == ["Deployment web missing"]
