"""Milestone predicates: pure functions of the tracked state, shared by every scenario and every system.

Why here and pure: "children exist", "Ready at its generation" and "Deployment available" must mean exactly the same
thing for our operator, the Go peer, the kopf peer and the raw driver, and they are unit-tested without a cluster.
"""

from __future__ import annotations

from typing import Any

from bench.tracker import Check, State
from harness.selects import selects_the_pods

Body = dict[str, Any]


def children_exist(state: State, name: str) -> bool:
    return state.get("dep", name) is not None and state.get("svc", name) is not None


def ws_ready_at_generation(ws: Body | None) -> bool:
    """Ready=True computed for the WebServer's current generation (status and condition observedGeneration)."""
    if ws is None:
        return False
    generation = (ws.get("metadata") or {}).get("generation")
    status = ws.get("status") or {}
    if status.get("observedGeneration") != generation:
        return False
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return ready is not None and ready.get("status") == "True" and ready.get("observedGeneration") == generation


def ready(state: State, name: str) -> bool:
    return ws_ready_at_generation(state.get("ws", name))


def deployment_available(dep: Body | None) -> bool:
    """The Deployment controller has acted on the latest spec and every desired pod is updated and available."""
    if dep is None:
        return False
    spec, status = dep.get("spec") or {}, dep.get("status") or {}
    desired = spec.get("replicas", 1)
    return bool(
        status.get("observedGeneration", 0) >= (dep.get("metadata") or {}).get("generation", 0)
        and status.get("replicas", 0) == desired
        and status.get("updatedReplicas", 0) == desired
        and status.get("availableReplicas", 0) == desired
    )


def available(state: State, name: str) -> bool:
    return deployment_available(state.get("dep", name))


def container_image(dep: Body | None) -> str | None:
    containers = ((((dep or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    web = next((c for c in containers if c.get("name") == "web"), None)
    return None if web is None else web.get("image")


def image_is(image: str) -> Check:
    def check(state: State, name: str) -> bool:
        return container_image(state.get("dep", name)) == image

    return check


def available_with_image(image: str) -> Check:
    def check(state: State, name: str) -> bool:
        dep = state.get("dep", name)
        return container_image(dep) == image and deployment_available(dep)

    return check


def ready_at_least(generation: int) -> Check:
    """Ready at its current generation, which is at least ``generation`` (after a spec change)."""

    def check(state: State, name: str) -> bool:
        ws = state.get("ws", name)
        return (
            ws is not None
            and (ws.get("metadata") or {}).get("generation", 0) >= generation
            and ws_ready_at_generation(ws)
        )

    return check


def replaced(kind: str, old_uid: str) -> Check:
    """The object exists again with a new UID (recreated after a deletion)."""

    def check(state: State, name: str) -> bool:
        obj = state.get(kind, name)
        return obj is not None and obj["metadata"]["uid"] != old_uid

    return check


def gone_or_replaced(kind: str, old_uid: str) -> Check:
    """The deletion has been seen: the object is absent, or already back with a new UID."""

    def check(state: State, name: str) -> bool:
        obj = state.get(kind, name)
        return obj is None or obj["metadata"]["uid"] != old_uid

    return check


def field_is(kind: str, path: tuple[str, ...], value: Any) -> Check:
    def check(state: State, name: str) -> bool:
        node: Any = state.get(kind, name)
        for key in path:
            if not isinstance(node, dict):
                return False
            node = node.get(key)
        return bool(node == value)

    return check


def equivalence_problems(ws: Body, dep: Body | None, svc: Body | None) -> list[str]:
    """What differs from the children and status webserver-operator gives a WebServer (empty when equivalent)."""
    name = ws["metadata"]["name"]
    uid = ws["metadata"]["uid"]
    selector = {"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
    labels = {
        **selector,
        "app.kubernetes.io/managed-by": "webserver-operator",
        "app.kubernetes.io/component": "web-server",
    }
    problems: list[str] = []
    for kind, obj in (("Deployment", dep), ("Service", svc)):
        if obj is None:
            problems.append(f"{kind} {name} missing")
            continue
        meta = obj["metadata"]
        if {k: meta.get("labels", {}).get(k) for k in labels} != labels:
            problems.append(f"{kind} labels {meta.get('labels')}")
        owners = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
        if len(owners) != 1 or owners[0].get("uid") != uid or owners[0].get("blockOwnerDeletion") is not True:
            problems.append(f"{kind} ownerReferences {meta.get('ownerReferences')}")
    if dep is not None:
        spec = dep["spec"]
        if spec["selector"].get("matchLabels") != selector:
            problems.append(f"Deployment selector {spec['selector']}")
        web = [c for c in spec["template"]["spec"]["containers"] if c["name"] == "web"]
        want_port = ws["spec"].get("port", 80)
        if not web or [(p.get("name"), p.get("containerPort")) for p in web[0].get("ports") or []] != [
            ("http", want_port)
        ]:
            problems.append(f"Deployment container {web}")
    if svc is not None:
        spec = svc["spec"]
        ports = [(p.get("name"), p.get("port"), p.get("targetPort")) for p in spec.get("ports") or []]
        if (
            spec.get("type") != "NodePort"
            or not selects_the_pods(spec.get("selector") or {}, selector, dep)
            or ports != [("http", ws["spec"].get("port", 80), "http")]
        ):
            problems.append(f"Service spec {spec}")
    status = ws.get("status") or {}
    for key in ("observedGeneration", "replicas", "readyReplicas", "nodePort", "selector", "conditions"):
        if key not in status:
            problems.append(f"status.{key} missing")
    if svc is not None and status.get("nodePort") != next(iter(svc["spec"].get("ports") or [{}])).get("nodePort"):
        problems.append(f"status.nodePort {status.get('nodePort')} differs from the Service's")
    return problems
