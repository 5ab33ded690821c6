"""End to end: install the chart, use WebServers as a person would, upgrade the release, uninstall it.

Runs in file order against one release (see conftest.py for how the operator runs on each backend). The kind-only
checks at the end need real containers and run where a Docker engine answers (CLUSTER=kind, make e2e-kind).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import FULLNAME, Release, helm
from tests.support.cluster import ROOT, Cluster, wait_until
from tests.support.webservers import wait_field, wait_ready

SAMPLE = ROOT / "config" / "samples" / "web_v1_webserver.yaml"


@pytest.fixture(scope="module")
def app_namespace(cluster: Cluster, release: Release) -> Iterator[str]:
    """The namespace users put their WebServers in (not the operator's)."""
    with cluster.temporary_namespace("e2e-app") as name:
        yield name


def test_operator_pod_is_admitted_in_a_restricted_namespace(cluster: Cluster, release: Release) -> None:
    labels = cluster.get_json("namespace", release.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    wait_until(
        lambda: (
            cluster.get_json("deployment", FULLNAME, namespace=release.namespace)["status"].get("readyReplicas") == 1
        ),
        timeout=90,
        message="the chart's operator pod to be admitted and (kwok: simulated) ready",
    )
    pods = cluster.get_json("pods", "-l", "app.kubernetes.io/name=webserver-operator", namespace=release.namespace)
    assert len(pods["items"]) == 1, pods["items"]


def test_crd_is_owned_by_the_release_and_kept(cluster: Cluster, release: Release) -> None:
    crd = cluster.get_json("crd", "webservers.web.webserver-operator.dev")
    annotations = crd["metadata"].get("annotations", {})
    assert annotations.get("meta.helm.sh/release-name") == release.name
    assert annotations.get("helm.sh/resource-policy") == "keep"


def test_sample_webserver_becomes_ready(cluster: Cluster, release: Release, app_namespace: str) -> None:
    cluster.kubectl("apply", "-n", app_namespace, "-f", str(SAMPLE))
    ws = wait_ready(cluster, app_namespace, "webserver-sample", timeout=120)
    assert ws["status"]["readyReplicas"] == 2
    assert 30000 <= ws["status"]["nodePort"] <= 32767


def test_kubectl_scale_webserver(cluster: Cluster, release: Release, app_namespace: str) -> None:
    cluster.kubectl("scale", "webserver/webserver-sample", "-n", app_namespace, "--replicas=3")
    wait_field(cluster, "deployment", "webserver-sample", namespace=app_namespace, path="spec.replicas", expected=3)
    wait_field(
        cluster,
        "webserver",
        "webserver-sample",
        namespace=app_namespace,
        path="status.readyReplicas",
        expected=3,
        timeout=120,
    )


def test_image_upgrade(cluster: Cluster, release: Release, app_namespace: str) -> None:
    cluster.kubectl(
        "patch",
        "webserver",
        "webserver-sample",
        "-n",
        app_namespace,
        "--type=merge",
        "-p",
        '{"spec":{"image":"nginx:1.28"}}',
    )
    wait_field(
        cluster,
        "deployment",
        "webserver-sample",
        namespace=app_namespace,
        path="spec.template.spec.containers.0.image",
        expected="nginx:1.28",
    )
    ws = wait_ready(cluster, app_namespace, "webserver-sample", timeout=180)
    assert ws["status"]["observedGeneration"] == ws["metadata"]["generation"]


def test_deleted_children_are_repaired(cluster: Cluster, release: Release, app_namespace: str) -> None:
    for kind in ("deployment", "service"):
        uid = cluster.get_json(kind, "webserver-sample", namespace=app_namespace)["metadata"]["uid"]
        cluster.kubectl("delete", kind, "webserver-sample", "-n", app_namespace)

        def replaced(kind: str = kind, uid: str = uid) -> bool:
            obj = cluster.get_or_none(kind, "webserver-sample", namespace=app_namespace)
            return obj is not None and obj["metadata"]["uid"] != uid

        wait_until(replaced, timeout=60, message=f"the {kind} to be recreated")
    wait_ready(cluster, app_namespace, "webserver-sample", timeout=120)


def test_serviceaccount_has_exactly_the_rules_it_needs(cluster: Cluster, release: Release) -> None:
    sa = f"system:serviceaccount:{release.namespace}:{FULLNAME}"
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={sa}", "-n", release.namespace).stdout
    print(f"\nkubectl auth can-i --list --as={sa} -n {release.namespace}:\n{out}")
    for allowed in (
        ("create", "deployments.apps"),
        ("patch", "services"),
        ("update", "webservers.web.webserver-operator.dev", "--subresource=status"),
        ("create", "leases.coordination.k8s.io"),
    ):
        assert (
            cluster.kubectl(
                "auth", "can-i", *allowed, f"--as={sa}", "-n", release.namespace, check=False
            ).stdout.strip()
            == "yes"
        ), allowed
    for denied in (
        ("delete", "deployments.apps"),
        ("get", "secrets"),
        ("create", "pods"),
        ("delete", "webservers.web.webserver-operator.dev"),
        ("update", "webservers.web.webserver-operator.dev"),
    ):
        assert (
            cluster.kubectl("auth", "can-i", *denied, f"--as={sa}", "-n", release.namespace, check=False).stdout.strip()
            == "no"
        ), denied


def test_helm_upgrade_with_changed_values(cluster: Cluster, release: Release, app_namespace: str) -> None:
    release.upgrade("--set", "workers=2", "--set", "logLevel=DEBUG")
    args = release.deployment()["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--workers=2" in args, args
    assert "--log-level=DEBUG" in args, args
    release.start_operator()  # what kubelet does when the pod template changes
    # Ready means caches synced; the controller (and its gauge) starts once this replica holds the Lease.
    wait_until(
        lambda: release.metric("controller_runtime_max_concurrent_reconciles", {"controller": "webserver"}) == 2,
        timeout=45,
        message="the upgraded operator to lead with 2 workers",
    )
    cluster.kubectl("scale", "webserver/webserver-sample", "-n", app_namespace, "--replicas=1")
    wait_field(cluster, "deployment", "webserver-sample", namespace=app_namespace, path="spec.replicas", expected=1)


@pytest.mark.kind
def test_kind_operator_pod_runs_and_logs(cluster: Cluster, release: Release) -> None:
    pods = cluster.get_json("pods", "-l", "app.kubernetes.io/name=webserver-operator", namespace=release.namespace)[
        "items"
    ]
    assert pods
    assert all(p["status"]["phase"] == "Running" for p in pods)
    logs = cluster.kubectl("logs", f"deployment/{FULLNAME}", "-n", release.namespace, "--tail=50").stdout.splitlines()
    parsed = [json.loads(line) for line in logs if line.startswith("{")]
    assert any(entry.get("msg", "").startswith("caches synced") for entry in parsed), logs


@pytest.mark.kind
def test_kind_helm_test_passes(cluster: Cluster, release: Release) -> None:
    result = helm(cluster, "test", release.name, "-n", release.namespace, "--logs", check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.kind
def test_kind_nodeport_serves_the_web_page(cluster: Cluster, release: Release, app_namespace: str) -> None:
    ws = wait_ready(cluster, app_namespace, "webserver-sample", timeout=180)
    node = cluster.get_json("nodes")["items"][0]
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    url = f"http://{address}:{ws['status']['nodePort']}/"
    body = wait_until(lambda: _fetch(url), timeout=60, message=f"{url} to answer")
    assert "Welcome to nginx" in body


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - the kind node's own address
            text: str = resp.read().decode()
            return text
    except (OSError, subprocess.SubprocessError):
        return None


def test_helm_uninstall_keeps_the_crd_and_the_webservers(
    cluster: Cluster, release: Release, app_namespace: str
) -> None:
    release.stop_operator()
    helm(cluster, "uninstall", release.name, "-n", release.namespace)
    assert cluster.get_or_none("deployment", FULLNAME, namespace=release.namespace) is None
    assert cluster.kubectl("get", "crd", "webservers.web.webserver-operator.dev", check=False).returncode == 0
    ws = cluster.get_json("webserver", "webserver-sample", namespace=app_namespace)
    assert ws["spec"]["image"] == "nginx:1.28"
    assert cluster.get_or_none("deployment", "webserver-sample", namespace=app_namespace) is not None
