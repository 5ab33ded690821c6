"""Smoke tests proving the local control plane is a real Kubernetes, not a fake.

Each test exercises something fakes get wrong and the operator depends on: controllers turning a Deployment into
Ready pods on a (kwok) node, NodePort allocation, garbage collection by ownerReference, RBAC enforcement with a
ServiceAccount token, and Pod Security admission.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.paths import HACK
from tests.support.cluster import Cluster, wait_until


def _pinned_version() -> str:
    """The Kubernetes version hack/versions.env pins for the line under test (``KUBERNETES_LINE``: newest or oldest)."""
    pins = dict(
        line.split("=", 1)
        for line in (HACK / "versions.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    oldest = os.environ.get("KUBERNETES_LINE") == "oldest"
    return pins["KUBERNETES_OLDEST_VERSION" if oldest else "KUBERNETES_VERSION"]


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


def test_server_and_kubectl_run_the_pinned_version(cluster: Cluster) -> None:
    out = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"] == _pinned_version(), out["serverVersion"]
    assert out["clientVersion"]["gitVersion"] == _pinned_version(), out["clientVersion"]


def test_deployment_gets_ready_pods_on_a_kwok_node(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_deployment("smoke", 2), namespace=namespace)
    cluster.kubectl(
        "wait", "-n", namespace, "--for=condition=Available", "deployment/smoke", "--timeout=90s", timeout=120
    )

    def ready_pods() -> list[dict[str, Any]]:
        pods = cluster.get_json("pods", "-l", "app=smoke", namespace=namespace)["items"]
        ready = [
            p
            for p in pods
            if p["status"].get("phase") == "Running"
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]
        return ready if len(ready) == 2 else []

    pods = wait_until(ready_pods, timeout=60, message="2 Running/Ready pods")
    nodes = {n["metadata"]["name"]: n for n in cluster.get_json("nodes")["items"]}
    for pod in pods:
        node = nodes[pod["spec"]["nodeName"]]
        assert node["metadata"]["annotations"].get("kwok.x-k8s.io/node") == "fake", node["metadata"]


def test_nodeport_service_gets_a_port_in_range(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("create", "service", "nodeport", "smoke", "--tcp=80:80", "-n", namespace)
    svc = cluster.get_json("service", "smoke", namespace=namespace)
    assert svc["spec"]["type"] == "NodePort"
    assert 30000 <= svc["spec"]["ports"][0]["nodePort"] <= 32767


def test_garbage_collector_removes_dependents_of_a_deleted_owner(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    owner_uid = cluster.get_json("configmap", "owner", namespace=namespace)["metadata"]["uid"]
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "dependent",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}],
            },
        },
        namespace=namespace,
    )
    cluster.kubectl("delete", "configmap", "owner", "-n", namespace)
    wait_until(
        lambda: cluster.get_or_none("configmap", "dependent", namespace=namespace) is None,
        timeout=60,
        message="the garbage collector to delete the dependent ConfigMap",
    )


def test_rbac_denies_a_serviceaccount_without_permissions(cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    cluster.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    kubeconfig = cluster.serviceaccount_kubeconfig(namespace=namespace, serviceaccount="nobody", path=tmp_path / "k")
    result = Cluster(backend="token", kubeconfig=kubeconfig, bin_dir=cluster.bin_dir).kubectl(
        "get", "--raw", f"/api/v1/namespaces/{namespace}/pods", check=False
    )
    assert result.returncode != 0
    assert "(Forbidden)" in result.stderr, result.stderr
    assert f"system:serviceaccount:{namespace}:nobody" in result.stderr, result.stderr


def test_restricted_namespace_rejects_a_privileged_pod(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod), check=False)
    assert result.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in result.stderr, result.stderr
    assert "privileged" in result.stderr
    assert cluster.get_or_none("pod", "privileged", namespace=namespace) is None
