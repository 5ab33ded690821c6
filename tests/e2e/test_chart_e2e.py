"""End to end: install the chart, use WebServers as a person would, upgrade the release, uninstall it.

Runs in file order against one release (see conftest.py for how the operator runs on each backend). The ``kind``
tests, placed right after the step they check, need real containers (CLUSTER=kind, `make e2e-kind`): the operator pod
passing its real probes as UID 65532 on a read-only root filesystem, web server pods answering on the NodePort after
each change, repairs with real pods, a restarted operator pod writing nothing, `helm test`, logs and /metrics.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from harness.paths import ROOT
from harness.scrape import scrape
from tests.e2e.conftest import FULLNAME, Release, helm
from tests.support.cluster import Cluster, wait_until
from tests.support.serviceaccounts import service_account_token
from tests.support.webservers import wait_deployment, wait_field, wait_ready
from webserver_operator.kube.client import FIELD_MANAGER

SAMPLE = ROOT / "config" / "samples" / "web_v1_webserver.yaml"
WEB_PAGE_MARK = "Welcome to nginx!"
"""The page both nginx and the Debian-nginx stand-in serve at / (hack/images/nginx.Containerfile)."""


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


@pytest.mark.kind
def test_kind_operator_pod_is_ready_read_only_as_65532_under_restricted(cluster: Cluster, release: Release) -> None:
    (pod,) = release.operator_pods()
    name = pod["metadata"]["name"]
    (container,) = pod["spec"]["containers"]
    print(f"\noperator pod {name} securityContext (from the API server):")
    print(json.dumps({"pod": pod["spec"].get("securityContext"), "container": container["securityContext"]}, indent=2))
    assert container["image"] == cluster.operator_image
    # Ready through the real probes: the kubelet ran them against the operator's health endpoints.
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Ready"] == "True", pod["status"]
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] is True and "running" in status["state"], status
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    def in_pod(code: str) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl("exec", name, "-n", release.namespace, "--", "python", "-c", code, check=False)

    ids = in_pod("import os; print(os.getuid(), os.getgid(), os.geteuid())")
    assert ids.stdout.split() == ["65532", "65532", "65532"], ids.stdout + ids.stderr
    root_write = in_pod("open('/probe', 'w')")
    assert root_write.returncode != 0 and "Read-only file system" in root_write.stderr, root_write.stderr
    tmp_write = in_pod("open('/tmp/probe', 'w').write('ok')")
    assert tmp_write.returncode == 0, tmp_write.stderr
    # The restricted level is enforced, not just labelled: a privileged pod is refused in the same namespace.
    privileged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged-probe"},
        "spec": {
            "containers": [{"name": "c", "image": cluster.operator_image, "securityContext": {"privileged": True}}]
        },
    }
    refused = cluster.kubectl(
        "apply", "--dry-run=server", "-n", release.namespace, "-f", "-", input=json.dumps(privileged), check=False
    )
    assert refused.returncode != 0 and 'violates PodSecurity "restricted' in refused.stderr, refused.stderr


def test_crd_is_owned_by_the_release_and_kept(cluster: Cluster, release: Release) -> None:
    crd = cluster.get_json("crd", "webservers.web.webserver-operator.dev")
    annotations = crd["metadata"].get("annotations", {})
    assert annotations.get("meta.helm.sh/release-name") == release.name
    assert annotations.get("helm.sh/resource-policy") == "keep"


def test_sample_webserver_becomes_ready(cluster: Cluster, release: Release, app_namespace: str) -> None:
    sample = yaml.safe_load(SAMPLE.read_text())
    sample["spec"]["image"] = cluster.web_images[0]  # the sample's nginx where it can be pulled, else the stand-in
    cluster.apply(sample, namespace=app_namespace)
    ws = wait_ready(cluster, app_namespace, "webserver-sample", timeout=180)
    assert ws["status"]["readyReplicas"] == 2
    assert 30000 <= ws["status"]["nodePort"] <= 32767


@pytest.mark.kind
def test_kind_sample_pods_run_and_the_node_port_serves_the_page(cluster: Cluster, app_namespace: str) -> None:
    pods = _web_pods(cluster, app_namespace)
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert pod["status"]["phase"] == "Running" and status["ready"], pod["status"]
        assert pod["spec"]["containers"][0]["image"] == cluster.web_images[0]
    _serve(cluster, app_namespace)


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


@pytest.mark.kind
def test_kind_node_port_serves_after_the_scale(cluster: Cluster, app_namespace: str) -> None:
    pods = _wait_rolled_out(cluster, app_namespace, image=cluster.web_images[0], replicas=3)
    assert len({p["status"]["podIP"] for p in pods}) == 3
    _serve(cluster, app_namespace)


def test_image_upgrade(cluster: Cluster, release: Release, app_namespace: str) -> None:
    cluster.kubectl(
        "patch",
        "webserver",
        "webserver-sample",
        "-n",
        app_namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"image": cluster.web_images[1]}}),
    )
    wait_field(
        cluster,
        "deployment",
        "webserver-sample",
        namespace=app_namespace,
        path="spec.template.spec.containers.0.image",
        expected=cluster.web_images[1],
    )
    ws = wait_ready(cluster, app_namespace, "webserver-sample", timeout=180)
    assert ws["status"]["observedGeneration"] == ws["metadata"]["generation"]


@pytest.mark.kind
def test_kind_node_port_serves_the_new_image(cluster: Cluster, app_namespace: str) -> None:
    _wait_rolled_out(cluster, app_namespace, image=cluster.web_images[1], replicas=3)
    _serve(cluster, app_namespace)


@pytest.mark.kind
def test_kind_drift_is_repaired_with_real_pods(cluster: Cluster, app_namespace: str) -> None:
    """Someone edits the managed Deployment by hand: the operator puts its fields back and the pods follow."""
    cluster.kubectl(
        "patch",
        "deployment",
        "webserver-sample",
        "-n",
        app_namespace,
        "--type=json",
        "-p",
        json.dumps(
            [
                {"op": "replace", "path": "/spec/replicas", "value": 1},
                {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": cluster.web_images[0]},
            ]
        ),
    )
    wait_field(cluster, "deployment", "webserver-sample", namespace=app_namespace, path="spec.replicas", expected=3)
    wait_field(
        cluster,
        "deployment",
        "webserver-sample",
        namespace=app_namespace,
        path="spec.template.spec.containers.0.image",
        expected=cluster.web_images[1],
    )
    _wait_rolled_out(cluster, app_namespace, image=cluster.web_images[1], replicas=3)
    _serve(cluster, app_namespace)


def test_deleted_children_are_repaired(cluster: Cluster, release: Release, app_namespace: str) -> None:
    for kind in ("deployment", "service"):
        uid = cluster.get_json(kind, "webserver-sample", namespace=app_namespace)["metadata"]["uid"]
        cluster.kubectl("delete", kind, "webserver-sample", "-n", app_namespace)

        def replaced(kind: str = kind, uid: str = uid) -> bool:
            obj = cluster.get_or_none(kind, "webserver-sample", namespace=app_namespace)
            return obj is not None and obj["metadata"]["uid"] != uid

        wait_until(replaced, timeout=60, message=f"the {kind} to be recreated")
    wait_ready(cluster, app_namespace, "webserver-sample", timeout=120)


@pytest.mark.kind
def test_kind_deleted_children_come_back_with_serving_pods(cluster: Cluster, app_namespace: str) -> None:
    _wait_rolled_out(cluster, app_namespace, image=cluster.web_images[1], replicas=3)
    _serve(cluster, app_namespace)


@pytest.mark.kind
def test_kind_helm_test_passes(cluster: Cluster, release: Release) -> None:
    result = helm(cluster, "test", release.name, "-n", release.namespace, "--logs", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"\n{result.stdout}")


@pytest.mark.kind
def test_kind_logs_and_metrics_come_from_the_running_pod(cluster: Cluster, release: Release) -> None:
    (pod,) = release.operator_pods()
    assert pod["status"]["phase"] == "Running"
    logs = cluster.kubectl("logs", pod["metadata"]["name"], "-n", release.namespace, "--tail=-1").stdout.splitlines()
    parsed = [json.loads(line) for line in logs if line.startswith("{")]
    assert parsed and len(parsed) == len(logs), "every log line is one JSON object (logFormat: json)"
    assert any(entry.get("msg", "").startswith("caches synced") for entry in parsed), logs[-20:]
    # /metrics straight from the pod's IP and port, not through the Service: HTTPS with the scraper's token.
    (port,) = [p["containerPort"] for p in pod["spec"]["containers"][0]["ports"] if p["name"] == "metrics"]
    status, raw = release.scraper_pod().scrape(f"https://{pod['status']['podIP']}:{port}/metrics")
    assert status == 200, raw
    assert 'controller_runtime_reconcile_total{controller="webserver",result="success"}' in raw
    assert release.metric("controller_runtime_reconcile_total", {"controller": "webserver"}) > 0


def test_metrics_are_scraped_as_the_service_monitor_says(cluster: Cluster, release: Release) -> None:
    """The chart's ServiceMonitor (rendered with this release's values) is followed to the letter."""
    monitor = release.rendered("ServiceMonitor", "--set", "metrics.serviceMonitor.enabled=true")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the operator's self-signed certificate
    service = cluster.get_json("service", f"{FULLNAME}-metrics", namespace=release.namespace)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (port,) = [p["port"] for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    if release.in_cluster:
        url = f"{endpoint['scheme']}://{FULLNAME}-metrics.{release.namespace}.svc:{port}{endpoint['path']}"
        token = f"file:{endpoint['bearerTokenFile']}"
        status, body = release.scraper_pod().scrape(
            url, token=token, insecure=endpoint["tlsConfig"]["insecureSkipVerify"]
        )
    else:  # kwok runs no pods: the chart's operator is a host process, its token a TokenRequest one
        assert release.host_operator is not None
        url = f"{endpoint['scheme']}://127.0.0.1:{release.host_operator.metrics_port}{endpoint['path']}"
        status, body = scrape(url, token=release.scraper_token())
    assert status == 200, body
    assert 'controller_runtime_reconcile_total{controller="webserver",result="success"}' in body


def test_metrics_refuse_a_missing_token_and_a_serviceaccount_without_the_reader_role(
    cluster: Cluster, release: Release
) -> None:
    outsider = service_account_token(cluster, namespace=release.namespace, name="not-a-scraper")
    if release.in_cluster:
        url = release.metrics_service_url
        no_token, denied = (
            release.scraper_pod().scrape(url, token="none"),
            release.scraper_pod().scrape(url, token=outsider),
        )
    else:
        assert release.host_operator is not None
        url = release.host_operator.metrics_url
        no_token, denied = scrape(url), scrape(url, token=outsider)
    assert no_token[0] == 401, no_token
    assert denied[0] == 403, denied
    assert f"Authorization denied for user system:serviceaccount:{release.namespace}:not-a-scraper" in denied[1]


@pytest.mark.kind
def test_kind_deleted_operator_pod_is_replaced_and_writes_nothing(
    cluster: Cluster, release: Release, app_namespace: str
) -> None:
    """Nothing the operator owns on converged objects is written again across an operator pod restart.

    The WebServer is written only by the operator (status) and this test, so its resourceVersion must stay. The
    Deployment's status belongs to kube-controller-manager, which may still write it; there the operator's own
    ``managedFields`` entries (each carries the time of that manager's last write) must stay.
    """

    def versions() -> dict[str, object]:
        webserver = cluster.get_json("webserver", "webserver-sample", namespace=app_namespace)
        seen: dict[str, object] = {"webserver": webserver["metadata"]["resourceVersion"]}
        for kind in ("deployment", "service"):
            child = cluster.get_json(kind, "webserver-sample", "--show-managed-fields", namespace=app_namespace)
            ours = [e for e in child["metadata"]["managedFields"] if e["manager"] == FIELD_MANAGER]
            assert ours, f"{kind} webserver-sample has no managedFields entry of {FIELD_MANAGER}"
            seen[kind] = ours
        return seen

    # kube-controller-manager may still be writing the Deployment's status after Ready (on a busy machine, seconds
    # later), and the operator follows each write with one to the WebServer's status: "before" is read once that
    # controller is done and the operator has had time for its last status write.
    wait_deployment(cluster, app_namespace, "webserver-sample")
    time.sleep(3)
    before = versions()
    (old,) = release.operator_pods()
    cluster.kubectl("delete", "pod", old["metadata"]["name"], "-n", release.namespace, "--wait=true", timeout=120)

    def replacement() -> dict[str, Any] | None:
        pods = [p for p in release.operator_pods() if p["metadata"]["uid"] != old["metadata"]["uid"]]
        ready = [
            p
            for p in pods
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]
        return ready[0] if ready else None

    new = wait_until(replacement, timeout=180, message="the Deployment to start a new, Ready operator pod")
    # The new pod has taken the lease over and reconciled the WebServer (its own counter, from its own /metrics).
    wait_until(
        lambda: (
            release.metric("controller_runtime_reconcile_total", {"controller": "webserver", "result": "success"}) >= 1
        ),
        timeout=120,
        message=f"{new['metadata']['name']} to reconcile the WebServer",
    )
    time.sleep(3)
    assert versions() == before, "the restarted operator wrote to converged objects"
    _serve(cluster, app_namespace)


def test_serviceaccount_has_exactly_the_rules_it_needs(cluster: Cluster, release: Release) -> None:
    sa = f"system:serviceaccount:{release.namespace}:{FULLNAME}"
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={sa}", "-n", release.namespace).stdout
    print(f"\nkubectl auth can-i --list --as={sa} -n {release.namespace}:\n{out}")
    for allowed in (
        ("create", "deployments.apps"),
        ("patch", "services"),
        ("update", "webservers.web.webserver-operator.dev", "--subresource=status"),
        ("create", "leases.coordination.k8s.io"),
        ("create", "tokenreviews.authentication.k8s.io"),  # secure metrics: whose token is it
        ("create", "subjectaccessreviews.authorization.k8s.io"),  # and may it get /metrics
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
    # The new pod registers its controller once it leads (after the old pod hands the Lease over).
    wait_until(
        lambda: release.metric("controller_runtime_max_concurrent_reconciles", {"controller": "webserver"}) == 2,
        timeout=90,
        message="the upgraded operator to run its controller with 2 workers",
    )
    cluster.kubectl("scale", "webserver/webserver-sample", "-n", app_namespace, "--replicas=1")
    wait_field(cluster, "deployment", "webserver-sample", namespace=app_namespace, path="spec.replicas", expected=1)


def test_helm_uninstall_keeps_the_crd_and_the_webservers(
    cluster: Cluster, release: Release, app_namespace: str
) -> None:
    release.stop_operator()
    helm(cluster, "uninstall", release.name, "-n", release.namespace)
    assert cluster.get_or_none("deployment", FULLNAME, namespace=release.namespace) is None
    assert cluster.kubectl("get", "crd", "webservers.web.webserver-operator.dev", check=False).returncode == 0
    ws = cluster.get_json("webserver", "webserver-sample", namespace=app_namespace)
    assert ws["spec"]["image"] == cluster.web_images[1]
    assert cluster.get_or_none("deployment", "webserver-sample", namespace=app_namespace) is not None


@pytest.mark.kind
def test_kind_after_uninstall_the_operator_pod_is_gone_and_the_web_servers_still_serve(
    cluster: Cluster, release: Release, app_namespace: str
) -> None:
    wait_until(lambda: not release.operator_pods(), timeout=120, message="the operator pod to be deleted")
    _serve(cluster, app_namespace)


# --- helpers --------------------------------------------------------------------------------------------------------


def _web_pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    pods = cluster.get_json("pods", "-l", "app.kubernetes.io/instance=webserver-sample", namespace=namespace)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _ready_web_pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in _web_pods(cluster, namespace)
        if p["status"].get("phase") == "Running"
        and all(s.get("ready") for s in p["status"].get("containerStatuses") or [{}])
    ]


def _wait_rolled_out(cluster: Cluster, namespace: str, *, image: str, replicas: int) -> list[dict[str, Any]]:
    """Wait until exactly ``replicas`` web server pods exist, all running ``image`` and ready."""

    def rolled() -> list[dict[str, Any]] | None:
        pods = _web_pods(cluster, namespace)
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        ready = _ready_web_pods(cluster, namespace)
        return pods if images == {image} and len(ready) == len(pods) == replicas else None

    return wait_until(rolled, timeout=180, message=f"{replicas} ready web server pods on {image}")


def _serve(cluster: Cluster, namespace: str) -> str:
    """GET http://<node>:<nodePort>/ as a user outside the cluster would; the body must be the web page."""
    ws = wait_ready(cluster, namespace, "webserver-sample", timeout=180)
    node = cluster.get_json("nodes")["items"][0]
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    url = f"http://{address}:{ws['status']['nodePort']}/"
    body = wait_until(lambda: _fetch(url), timeout=60, message=f"{url} to answer")
    assert WEB_PAGE_MARK in body, body[:500]
    print(f"\ncurl {url} ->\n{body[:400]}")
    return body


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - the kind node's own address
            text: str = resp.read().decode()
            return text
    except (OSError, subprocess.SubprocessError):
        return None
