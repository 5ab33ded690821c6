"""`kubectl`-level observations of WebServers shared by the integration and e2e suites (their manifests come from
tests/support/factories.py)."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.support.cluster import Cluster, wait_until


def condition(obj: dict[str, Any] | None, type_: str = "Ready") -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def wait_ready(cluster: Cluster, namespace: str, name: str, *, timeout: int = 60) -> dict[str, Any]:
    cluster.kubectl(
        "wait",
        "-n",
        namespace,
        "--for=condition=Ready",
        f"webserver/{name}",
        f"--timeout={timeout}s",
        timeout=timeout + 30,
    )
    return cluster.get_json("webserver", name, namespace=namespace)


def wait_condition(
    cluster: Cluster, namespace: str, name: str, *, status: str, reason: str, timeout: float = 60
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = cluster.get_or_none("webserver", name, namespace=namespace)
        cond = condition(obj)
        if cond and cond["status"] == status and cond["reason"] == reason:
            return cond
        return None

    def now() -> str:
        current = condition(cluster.get_or_none("webserver", name, namespace=namespace))
        return f"Ready={status} reason={reason}; now: {current}"

    return wait_until(probe, timeout=timeout, message=now)


def wait_field(
    cluster: Cluster, kind: str, name: str, *, namespace: str, path: str, expected: Any, timeout: float = 60
) -> dict[str, Any]:
    """Wait until the dotted ``path`` of the object equals ``expected``; return the object."""

    def value(obj: dict[str, Any] | None) -> Any:
        current: Any = obj
        for part in path.split("."):
            if isinstance(current, list):
                current = current[int(part)]
            elif isinstance(current, dict):
                current = current.get(part)
            else:
                return None
        return current

    def probe() -> dict[str, Any] | None:
        obj = cluster.get_or_none(kind, name, namespace=namespace)
        return obj if obj is not None and value(obj) == expected else None

    return wait_until(
        probe,
        timeout=timeout,
        message=lambda: (
            f"{kind}/{name} {path} == {expected!r}; now {value(cluster.get_or_none(kind, name, namespace=namespace))!r}"
        ),
    )


def events_for(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={name},involvedObject.kind=WebServer",
        "-o",
        "json",
    )
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


def free_node_port(cluster: Cluster) -> int:
    used = {
        port.get("nodePort")
        for svc in cluster.get_json("services", "-A")["items"]
        for port in svc["spec"].get("ports") or []
    }
    candidates = [p for p in range(30000, 32768) if p not in used]
    return random.choice(candidates)  # noqa: S311 - not security relevant


REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def deployment_observed(deployment: dict[str, Any]) -> bool:
    """Whether kube-controller-manager's Deployment controller has acted on the latest ``deployment`` spec: it stamped
    its revision annotation (written once per pod template, in the sync that creates the ReplicaSet) and reported the
    generation it saw. From then on it writes only ``status`` until the spec changes again.

    A test that compares a Deployment's metadata or spec before and after something must read "before" only once this
    holds: on a busy machine that controller can run seconds after the object was created (issue 33: the annotation
    appeared between the test's two reads, and a foreign Deployment looked changed by the operator).
    """
    metadata = deployment.get("metadata") or {}
    status = deployment.get("status") or {}
    stamped = REVISION_ANNOTATION in (metadata.get("annotations") or {})
    return stamped and status.get("observedGeneration") == metadata.get("generation")


def deployment_settled(deployment: dict[str, Any]) -> bool:
    """``deployment_observed``, and the rollout is finished: every wanted replica updated and available, the
    Progressing condition at NewReplicaSetAvailable. Then the Deployment controller has no further status write to
    make, so neither has the operator for the WebServer that owns it (tests of "nothing written" wait for this)."""
    status = deployment.get("status") or {}
    wanted = (deployment.get("spec") or {}).get("replicas", 1)
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    progressing = next((c for c in conditions if c.get("type") == "Progressing"), {})
    return (
        deployment_observed(deployment)
        and all(status.get(key, 0) == wanted for key in ("replicas", "updatedReplicas", "availableReplicas"))
        and progressing.get("reason") == "NewReplicaSetAvailable"
    )


def wait_deployment(
    cluster: Cluster, namespace: str, name: str, *, settled: bool = True, timeout: float = 90
) -> dict[str, Any]:
    """Wait until ``deployment_settled`` (or, with ``settled=False``, ``deployment_observed``) holds for Deployment
    ``name``; return it as ``kubectl get`` shows it then."""
    done = deployment_settled if settled else deployment_observed

    def probe() -> dict[str, Any] | None:
        obj = cluster.get_or_none("deployment", name, namespace=namespace)
        return obj if obj is not None and done(obj) else None

    return wait_until(
        probe,
        timeout=timeout,
        message=lambda: (
            f"kube-controller-manager to {'finish' if settled else 'act on'} Deployment {namespace}/{name}; now "
            f"{cluster.get_or_none('deployment', name, namespace=namespace)!r}"
        ),
    )
