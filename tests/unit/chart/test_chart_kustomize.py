"""config/ (kustomize) renders and says the same as the chart: RBAC, restricted pod spec, image, CRD.

Two install paths (Helm and `kubectl apply -k`) must not drift into two products. Rendered with the project's own
kubectl (`kubectl kustomize`); no cluster needed. tests/integration/test_manifests.py sends the renders to an API
server.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness.paths import CONFIG
from tests.support.chart import (
    KUSTOMIZE_NAMESPACE,
    KUSTOMIZE_PREFIX,
    LEADER_ELECTION_RULES,
    MANAGER_RULES,
    find,
    hardening_problems,
    kustomize,
    one,
    restricted_violations,
    rule_triples,
)
from webserver_operator import __version__
from webserver_operator.api.crd import CRD_NAME, crd_manifest

pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return kustomize(CONFIG / "default")


def test_default_renders_namespace_crd_rbac_and_manager(default: list[dict[str, Any]]) -> None:
    names = sorted((d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in default)
    assert names == sorted(
        [
            ("Namespace", KUSTOMIZE_NAMESPACE, None),
            ("CustomResourceDefinition", CRD_NAME, None),
            ("ServiceAccount", f"{KUSTOMIZE_PREFIX}controller-manager", KUSTOMIZE_NAMESPACE),
            ("ClusterRole", f"{KUSTOMIZE_PREFIX}manager-role", None),
            ("ClusterRole", f"{KUSTOMIZE_PREFIX}webserver-viewer", None),
            ("ClusterRole", f"{KUSTOMIZE_PREFIX}webserver-editor", None),
            ("ClusterRole", f"{KUSTOMIZE_PREFIX}webserver-admin", None),
            ("ClusterRoleBinding", f"{KUSTOMIZE_PREFIX}manager-rolebinding", None),
            ("ClusterRole", f"{KUSTOMIZE_PREFIX}metrics-auth-role", None),
            ("ClusterRoleBinding", f"{KUSTOMIZE_PREFIX}metrics-auth-rolebinding", None),
            ("ClusterRole", f"{KUSTOMIZE_PREFIX}metrics-reader", None),
            ("Role", f"{KUSTOMIZE_PREFIX}leader-election-role", KUSTOMIZE_NAMESPACE),
            ("RoleBinding", f"{KUSTOMIZE_PREFIX}leader-election-rolebinding", KUSTOMIZE_NAMESPACE),
            ("Service", f"{KUSTOMIZE_PREFIX}controller-manager-metrics-service", KUSTOMIZE_NAMESPACE),
            ("Deployment", f"{KUSTOMIZE_PREFIX}controller-manager", KUSTOMIZE_NAMESPACE),
        ]
    )
    namespace = one(default, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert not find(default, "ServiceMonitor"), "the ServiceMonitor needs the Prometheus Operator: not in default"
    assert not find(default, "NetworkPolicy"), "the NetworkPolicy needs an enforcing network plugin: not in default"


def test_default_crd_is_the_generated_one(default: list[dict[str, Any]]) -> None:
    crd = one(default, "CustomResourceDefinition")
    generated = crd_manifest()
    assert crd["spec"] == generated["spec"]
    assert generated["metadata"]["labels"].items() <= crd["metadata"]["labels"].items()


def test_default_rbac_is_exactly_what_the_operator_uses(default: list[dict[str, Any]]) -> None:
    sa = {"kind": "ServiceAccount", "name": f"{KUSTOMIZE_PREFIX}controller-manager", "namespace": KUSTOMIZE_NAMESPACE}
    cluster_binding = one(default, "ClusterRoleBinding", f"{KUSTOMIZE_PREFIX}manager-rolebinding")
    assert cluster_binding["subjects"] == [sa]
    assert cluster_binding["roleRef"]["name"] == f"{KUSTOMIZE_PREFIX}manager-role"
    assert rule_triples(one(default, "ClusterRole", f"{KUSTOMIZE_PREFIX}manager-role")["rules"]) == MANAGER_RULES
    binding = one(default, "RoleBinding")
    assert binding["subjects"] == [sa]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": f"{KUSTOMIZE_PREFIX}leader-election-role",
    }
    role = one(default, "Role")
    assert rule_triples(role["rules"]) == LEADER_ELECTION_RULES
    manager = one(default, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    lease_ids = [a.split("=", 1)[1] for a in manager["args"] if a.startswith("--leader-election-id=")]
    named = [r["resourceNames"] for r in role["rules"] if "resourceNames" in r]
    assert named == [lease_ids]


def test_default_manager_pod_is_restricted_and_hardened(default: list[dict[str, Any]]) -> None:
    deployment = one(default, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert restricted_violations(spec) == []
    assert hardening_problems(spec) == []
    assert spec["serviceAccountName"] == f"{KUSTOMIZE_PREFIX}controller-manager"
    manager = spec["containers"][0]
    assert manager["image"] == f"localhost/webserver-operator:{__version__}"
    assert "--leader-elect" in manager["args"]
    env = {e["name"]: e for e in manager["env"]}
    assert env["WEBSERVER_OPERATOR_LEADER_ELECTION_NAMESPACE"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert one(default, "Service")["spec"]["selector"] == selector


def test_samples_render_valid_webservers_and_an_hpa_on_one() -> None:
    from webserver_operator.api.models import WebServerSpec  # noqa: PLC0415 - only this test needs it

    samples = kustomize(CONFIG / "samples")
    webservers = {d["metadata"]["name"]: d for d in samples if d["kind"] == "WebServer"}
    assert sorted(webservers) == ["webserver-pinned", "webserver-sample", "webserver-unprivileged"]
    for name, sample in webservers.items():
        assert sample["apiVersion"] == "web.webserver-operator.dev/v1", name
        WebServerSpec.model_validate(sample["spec"])
    assert webservers["webserver-sample"]["spec"]["image"] == "nginx:1.27"
    assert webservers["webserver-sample"]["spec"]["replicas"] == 2
    # Unprivileged: a non-root image needs a port above 1023 (no NET_BIND_SERVICE).
    unprivileged = webservers["webserver-unprivileged"]["spec"]
    assert "unprivileged" in unprivileged["image"]
    assert unprivileged["port"] > 1023
    assert re.fullmatch(r"[^@]+@sha256:[0-9a-f]{64}", webservers["webserver-pinned"]["spec"]["image"])
    (hpa,) = [d for d in samples if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert target == {"apiVersion": "web.webserver-operator.dev/v1", "kind": "WebServer", "name": target["name"]}
    assert "cpu" in webservers[target["name"]]["spec"]["resources"]["requests"]  # utilisation needs a request
    assert len(samples) == 4


def test_prometheus_monitor_selects_the_metrics_service(default: list[dict[str, Any]]) -> None:
    (monitor,) = kustomize(CONFIG / "prometheus")
    assert monitor["kind"] == "ServiceMonitor"
    service = one(default, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"] == "metrics"
