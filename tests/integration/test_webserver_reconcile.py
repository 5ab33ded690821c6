"""The operator against the real control plane: one test per behaviour a user relies on.

Every assertion is about the resulting cluster state as `kubectl get` shows it, never about which calls the
operator made.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from harness.operator import OperatorProcess
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.webservers import (
    condition,
    events_for,
    free_node_port,
    wait_condition,
    wait_deployment,
    wait_field,
    wait_ready,
)
from webserver_operator.kube.client import FIELD_MANAGER

pytestmark = pytest.mark.usefixtures("operator")


def test_create_makes_children_and_reports_ready(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=2), namespace=namespace)
    ws = wait_ready(cluster, namespace, "web")

    dep = cluster.get_json("deployment", "web", namespace=namespace)
    svc = cluster.get_json("service", "web", namespace=namespace)
    for child in (dep, svc):
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref["kind"] == "WebServer" and ref["name"] == "web" and ref["uid"] == ws["metadata"]["uid"]
        assert ref["controller"] is True and ref["blockOwnerDeletion"] is True
        assert child["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "webserver-operator"
    assert dep["spec"]["replicas"] == 2
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1.27"
    assert container["ports"] == [{"name": "http", "containerPort": 80, "protocol": "TCP"}]
    assert svc["spec"]["type"] == "NodePort"
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 80 and port["targetPort"] == "http"

    status = ws["status"]
    assert status["observedGeneration"] == ws["metadata"]["generation"]
    assert status["replicas"] == 2 and status["readyReplicas"] == 2
    assert status["nodePort"] == port["nodePort"]
    assert status["selector"] == "app.kubernetes.io/instance=web,app.kubernetes.io/name=webserver"
    ready = condition(ws)
    assert ready is not None and ready["reason"] == "Available", ready
    # Events leave in the background (a reconcile never waits for one): eventually there.
    wait_until(
        lambda: any(e["reason"] == "Created" for e in events_for(cluster, namespace, "web")),
        timeout=10,
        message="a Created Event on the WebServer",
    )
    # The printer columns show what users look at.
    row = cluster.kubectl("get", "ws", "web", "-n", namespace, "--no-headers").stdout.split()
    assert row[:5] == ["web", "nginx:1.27", "2", "2", str(port["nodePort"])], row


def test_spec_replicas_edit_is_followed(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    cluster.kubectl("patch", "webserver", "web", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":3}}')
    wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=3)
    wait_field(cluster, "webserver", "web", namespace=namespace, path="status.readyReplicas", expected=3)
    wait_ready(cluster, namespace, "web")


def test_scale_subresource_scales_deployment_and_status(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    cluster.kubectl("scale", "webserver/web", "-n", namespace, "--replicas=4")
    wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=4)
    wait_field(cluster, "webserver", "web", namespace=namespace, path="status.replicas", expected=4)
    scale = json.loads(
        cluster.kubectl(
            "get", "--raw", f"/apis/web.webserver-operator.dev/v1/namespaces/{namespace}/webservers/web/scale"
        ).stdout
    )
    assert scale["spec"]["replicas"] == 4
    assert scale["status"]["selector"] == "app.kubernetes.io/instance=web,app.kubernetes.io/name=webserver"
    # Scaling to zero is a valid, Ready state.
    cluster.kubectl("scale", "webserver/web", "-n", namespace, "--replicas=0")
    wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=0)
    wait_condition(cluster, namespace, "web", status="True", reason="Available")


def test_image_change_rolls_the_template(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=2), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    cluster.kubectl(
        "patch", "webserver", "web", "-n", namespace, "--type=merge", "-p", '{"spec":{"image":"nginx:1.28"}}'
    )
    wait_field(
        cluster,
        "deployment",
        "web",
        namespace=namespace,
        path="spec.template.spec.containers.0.image",
        expected="nginx:1.28",
    )
    ws = wait_ready(cluster, namespace, "web")
    assert ws["status"]["observedGeneration"] == ws["metadata"]["generation"] == 2


def test_deleted_service_is_recreated(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web"), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    old_uid = cluster.get_json("service", "web", namespace=namespace)["metadata"]["uid"]
    cluster.kubectl("delete", "service", "web", "-n", namespace)
    svc = wait_until(
        lambda: (
            (s := cluster.get_or_none("service", "web", namespace=namespace)) and s["metadata"]["uid"] != old_uid and s
        ),
        timeout=30,
        message="the Service to be recreated",
    )
    assert svc["spec"]["type"] == "NodePort"
    wait_ready(cluster, namespace, "web")


def test_deleted_deployment_is_recreated(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web"), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    old_uid = cluster.get_json("deployment", "web", namespace=namespace)["metadata"]["uid"]
    cluster.kubectl("delete", "deployment", "web", "-n", namespace)
    wait_until(
        lambda: (
            (d := cluster.get_or_none("deployment", "web", namespace=namespace)) and d["metadata"]["uid"] != old_uid
        ),
        timeout=30,
        message="the Deployment to be recreated",
    )
    wait_ready(cluster, namespace, "web")


def test_manual_deployment_scale_is_reverted(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=2), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    cluster.kubectl("scale", "deployment/web", "-n", namespace, "--replicas=5")
    wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=2, timeout=30)
    wait_until(
        lambda: "Repaired" in [e["reason"] for e in events_for(cluster, namespace, "web")],
        timeout=10,
        message="a Repaired Event on the WebServer",
    )


def test_service_port_edit_is_reverted(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", port=8080), namespace=namespace)
    ws = wait_ready(cluster, namespace, "web")
    node_port = ws["status"]["nodePort"]
    cluster.kubectl(
        "patch",
        "service",
        "web",
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/ports/0/port","value":9999}]',
    )
    svc = wait_field(
        cluster, "service", "web", namespace=namespace, path="spec.ports.0.port", expected=8080, timeout=30
    )
    # A server-allocated nodePort stays stable through the repair.
    assert svc["spec"]["ports"][0]["nodePort"] == node_port


def test_rollout_restart_and_foreign_metadata_survive(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    cluster.kubectl("rollout", "restart", "deployment/web", "-n", namespace)
    cluster.kubectl("label", "deployment/web", "-n", namespace, "team=payments")
    cluster.kubectl("annotate", "service/web", "-n", namespace, "example.com/owner=payments")
    restarted = cluster.get_json("deployment", "web", namespace=namespace)["spec"]["template"]["metadata"][
        "annotations"
    ]
    # Make the operator write to both children (a replicas change) and check others' edits are still there.
    cluster.kubectl("patch", "webserver", "web", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":2}}')
    dep = wait_field(cluster, "deployment", "web", namespace=namespace, path="spec.replicas", expected=2)
    wait_ready(cluster, namespace, "web")
    dep = cluster.get_json("deployment", "web", namespace=namespace)
    assert dep["spec"]["template"]["metadata"]["annotations"] == restarted
    assert dep["metadata"]["labels"]["team"] == "payments"
    svc = cluster.get_json("service", "web", namespace=namespace)
    assert svc["metadata"]["annotations"]["example.com/owner"] == "payments"


def test_foreign_deployment_with_the_same_name_is_left_alone(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("create", "deployment", "web", "-n", namespace, "--image=busybox:1.36", "--replicas=1")
    # kube-controller-manager writes this Deployment too (its revision annotation, then status): "before" is the object
    # once it has acted on it, or its annotation would count as a change the operator made.
    before = wait_deployment(cluster, namespace, "web", settled=False)
    cluster.apply(webserver("web", replicas=3), namespace=namespace)
    cond = wait_condition(cluster, namespace, "web", status="False", reason="DeploymentConflict")
    assert "already exists" in cond["message"] and "will not modify it" in cond["message"], cond
    time.sleep(2)
    after = cluster.get_json("deployment", "web", "--show-managed-fields", namespace=namespace)
    # kube-controller-manager keeps writing this Deployment's status, so its resourceVersion moves on its own; what
    # shows the operator never wrote to it is an unchanged spec generation and no managedFields entry of ours.
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"] == before["spec"]
    assert after["metadata"].get("labels") == before["metadata"].get("labels")
    assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
    managers = {entry["manager"] for entry in after["metadata"]["managedFields"]}
    assert FIELD_MANAGER not in managers, managers
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert "ownerReferences" not in after["metadata"]
    warnings = [e for e in events_for(cluster, namespace, "web") if e["reason"] == "DeploymentConflict"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning", warnings
    # The Service has no conflict and is still managed, and its managedFields name the operator (so the check above
    # looks for the right manager).
    svc = cluster.get_json("service", "web", "--show-managed-fields", namespace=namespace)
    assert svc["spec"]["type"] == "NodePort"
    assert FIELD_MANAGER in {entry["manager"] for entry in svc["metadata"]["managedFields"]}


def test_orphaned_children_are_adopted(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web", replicas=2), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    dep_uid = cluster.get_json("deployment", "web", namespace=namespace)["metadata"]["uid"]
    cluster.kubectl("delete", "webserver", "web", "-n", namespace, "--cascade=orphan", timeout=90)
    wait_until(
        lambda: "ownerReferences" not in cluster.get_json("deployment", "web", namespace=namespace)["metadata"],
        timeout=30,
        message="the garbage collector to orphan the Deployment",
    )
    cluster.apply(webserver("web", replicas=2), namespace=namespace)
    ws = wait_ready(cluster, namespace, "web")
    for kind in ("deployment", "service"):

        def adopted(kind: str = kind) -> dict[str, Any] | None:
            child = cluster.get_json(kind, "web", namespace=namespace)
            return child if child["metadata"].get("ownerReferences") else None

        child = wait_until(adopted, timeout=30, message=f"the {kind} to be adopted")
        assert child["metadata"]["ownerReferences"][0]["uid"] == ws["metadata"]["uid"]
    assert cluster.get_json("deployment", "web", namespace=namespace)["metadata"]["uid"] == dep_uid


def test_duplicate_node_port_is_reported_and_recovers(cluster: Cluster, namespace: str) -> None:
    port = free_node_port(cluster)
    cluster.apply(webserver("first", replicas=1, nodePort=port), namespace=namespace)
    wait_ready(cluster, namespace, "first")
    cluster.apply(webserver("second", replicas=1, nodePort=port), namespace=namespace)
    cond = wait_condition(cluster, namespace, "second", status="False", reason="ServiceInvalid")
    assert "already allocated" in cond["message"], cond
    assert condition(cluster.get_json("webserver", "first", namespace=namespace))["status"] == "True"  # type: ignore[index]
    wait_until(
        lambda: [e for e in events_for(cluster, namespace, "second") if e["reason"] == "ServiceInvalid"],
        timeout=10,
        message="a ServiceInvalid Event on the WebServer",
    )
    time.sleep(1)  # and only one, also a moment later
    invalid = [e for e in events_for(cluster, namespace, "second") if e["reason"] == "ServiceInvalid"]
    assert len(invalid) == 1, invalid
    cluster.kubectl("delete", "webserver", "first", "-n", namespace)
    ws = wait_ready(cluster, namespace, "second", timeout=60)
    assert ws["status"]["nodePort"] == port


def test_pods_rejected_by_pod_security_surface_in_ready(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    cond = wait_condition(cluster, namespace, "web", status="False", reason="ReplicaFailure", timeout=60)
    assert "violates PodSecurity" in cond["message"], cond


@pytest.mark.parametrize(
    ("name", "spec", "expected"),
    [
        ("Web-Upper", {}, "metadata.name"),
        ("a" * 64, {}, "metadata.name must be"),
        ("web", {"image": ""}, "spec.image"),
        ("web", {"image": "NGINX:latest"}, "spec.image"),
        ("web", {"replicas": -1}, "spec.replicas"),
        ("web", {"replicas": 100000}, "spec.replicas"),
        ("web", {"port": 0}, "spec.port"),
        ("web", {"port": 70000}, "spec.port"),
        ("web", {"nodePort": 80}, "spec.nodePort"),
        ("web", {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}, "must not exceed"),
        ("web", {"resources": {"limits": {"memory": "lots"}}}, "spec.resources.limits"),
    ],
)
def test_invalid_webservers_are_rejected_by_the_api(
    cluster: Cluster, namespace: str, name: str, spec: dict[str, object], expected: str
) -> None:
    body = webserver(name)
    body["spec"].update(spec)
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body), check=False)
    assert result.returncode != 0, f"accepted: {body}"
    assert expected in result.stderr, result.stderr


def test_deleting_the_webserver_removes_its_children(cluster: Cluster, namespace: str) -> None:
    cluster.apply(webserver("web"), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    cluster.kubectl("delete", "webserver", "web", "-n", namespace, "--wait=true", timeout=90)
    for kind in ("deployment", "service"):

        def gone(kind: str = kind) -> bool:
            return cluster.get_or_none(kind, "web", namespace=namespace) is None

        wait_until(gone, timeout=60, message=f"the garbage collector to delete the {kind}")


def test_metrics_move_when_a_webserver_is_reconciled(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    before = operator.metric("controller_runtime_reconcile_total", {"controller": "webserver"})
    adds_before = operator.metric("workqueue_adds_total", {"controller": "webserver", "name": "webserver"})
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    wait_ready(cluster, namespace, "web")
    assert operator.metric("controller_runtime_reconcile_total", {"controller": "webserver"}) > before
    assert operator.metric("workqueue_adds_total", {"controller": "webserver", "name": "webserver"}) > adds_before
    assert operator.metric("rest_client_requests_total", {"code": "201", "method": "POST"}) >= 2
    assert operator.metric("webserver_operator_managed_webservers") >= 1
