"""What a tenant who may only write WebServers can get through the operator, on the real control plane.

Two ways past the Pod Security baseline level and the operator's memory that issue 32 found, each tried as the
tenant would: (1) name a WebServer after an orphan with our labels that someone with more rights left behind (a
privileged Deployment, a Service with ``externalIPs``): the operator must not adopt it, nor write the tenant's image
into it; (2) pad WebServers with labels and annotations up to the API server's object size limit: the operator must
stay within its memory limit through a list and a relist. Assertions are about what ``kubectl get`` shows and, for
(2), the operator process's own peak resident memory (``VmHWM`` in /proc).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.operator import OperatorProcess
from tests.support.chart import MANAGER_RULES
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.rbac import grant_operator
from tests.support.webservers import condition, events_for, wait_condition, wait_ready
from webserver_operator.desired import child_labels

EVIL_IMAGE = "attacker.example/evil:1"
MEMORY_LIMIT = 256 * 1024 * 1024
"""The chart's default memory limit for the operator (values.yaml ``resources.limits.memory: 256Mi``)."""
PADDED_PEAK_BOUND = 160 * 1024 * 1024
"""What 100 padded WebServers may cost at most, list and relist included: well inside the limit, which must also hold
the Deployments, Services and reconciles of the WebServers that are not padded. Measured with ``kube.skim``: 113 MiB
on an idle machine and 113 MiB at load 15; decoded whole and trimmed after, 175 MiB idle and 271-299 MiB on a busy
one (the CI failure this bound now catches before the limit does)."""


def _privileged_orphan(name: str) -> dict[str, Any]:
    """The issue's repro: our labels, no controller, hostPID, a hostPath / volume, a privileged ``web`` container."""
    labels = child_labels(name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {
                "matchLabels": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}
            },
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "hostPID": True,
                    "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                    "containers": [
                        {
                            "name": "web",
                            "image": "registry.example/node-debugger:1",
                            "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                        }
                    ],
                },
            },
        },
    }


@pytest.mark.usefixtures("operator")
def test_an_orphan_beyond_baseline_is_not_adopted_and_never_gets_the_tenants_image(
    cluster: Cluster, namespace: str
) -> None:
    cluster.apply(_privileged_orphan("web"), namespace=namespace)
    before = cluster.get_json("deployment", "web", namespace=namespace)
    cluster.apply(webserver("web", image=EVIL_IMAGE, replicas=1), namespace=namespace)

    ready = wait_condition(cluster, namespace, "web", status="False", reason="DeploymentAdoptionRefused")
    for named in ("host namespaces (hostPID=true)", 'hostPath volumes (volume "host")', 'privileged (container "web"'):
        assert named in ready["message"], ready
    assert f"kubectl delete deployment web -n {namespace}" in ready["message"], ready
    ws = cluster.get_json("webserver", "web", namespace=namespace)
    stalled = condition(ws, "Stalled")
    assert stalled is not None and stalled["status"] == "True", ws["status"]
    wait_until(
        lambda: any(e["reason"] == "DeploymentAdoptionRefused" for e in events_for(cluster, namespace, "web")),
        timeout=10,
        message="a DeploymentAdoptionRefused Warning on the WebServer",
    )
    time.sleep(2)  # a few more reconciles (its status write, the Service's events) must not change the verdict
    after = cluster.get_json("deployment", "web", namespace=namespace)
    assert "ownerReferences" not in after["metadata"], "the orphan was adopted"
    assert after["spec"]["template"] == before["spec"]["template"], "the orphan's pod template was written"
    assert after["metadata"]["generation"] == before["metadata"]["generation"], "the orphan's spec was written"
    assert EVIL_IMAGE not in json.dumps(after)

    # What the message says to do works: the orphan deleted, the operator makes its own within baseline.
    cluster.kubectl("delete", "deployment", "web", "-n", namespace)
    wait_ready(cluster, namespace, "web")
    pod = cluster.get_json("deployment", "web", namespace=namespace)["spec"]["template"]["spec"]
    assert "hostPID" not in pod and "volumes" not in pod, pod


@pytest.mark.usefixtures("operator")
def test_an_orphan_service_with_external_ips_is_not_adopted(cluster: Cluster, namespace: str) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "labels": child_labels("web")},
        "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}], "externalIPs": ["203.0.113.7"]},
    }
    cluster.apply(service, namespace=namespace)
    before = cluster.get_json("service", "web", namespace=namespace)
    cluster.apply(webserver("web", replicas=1), namespace=namespace)
    ready = wait_condition(cluster, namespace, "web", status="False", reason="ServiceAdoptionRefused")
    assert "externalIPs (203.0.113.7)" in ready["message"] and "kubectl delete service web" in ready["message"]
    time.sleep(2)
    after = cluster.get_json("service", "web", namespace=namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "the orphan was written"
    assert cluster.get_or_none("deployment", "web", namespace=namespace) is not None, "the Deployment still converges"


# -- oversized tenant objects ------------------------------------------------------------------------------------

PADDED_COUNT = 100
PADDED_BYTES = 1_300_000
"""Each WebServer's JSON size as the API server returns it without managedFields (labels and one annotation)."""


def padded_webserver(name: str, size: int = PADDED_BYTES) -> dict[str, Any]:
    """A WebServer of ``size`` bytes of JSON (without managedFields): a 250 kB annotation, the rest in labels.

    Short label keys (``p00001``) and 63-character values, the most bytes per label: every label key also appears in
    the object's managedFields, and the stored object (with them) must stay under etcd's 1.5 MiB request limit.
    """
    obj = webserver(name, replicas=0)
    obj["metadata"]["annotations"] = {"tenant.example/padding": "a" * 250_000}
    labels: dict[str, str] = {}
    obj["metadata"]["labels"] = labels
    base = len(json.dumps(obj, separators=(",", ":")))
    per_label = len(json.dumps({"p00000": "v" * 63}, separators=(",", ":"))) - 1  # the braces, plus one comma
    for i in range((size - base) // per_label):
        labels[f"p{i:05d}"] = "v" * 63
    return obj


def _memory(pid: int) -> tuple[int, int]:
    """(resident now, peak resident) of process ``pid`` in bytes, from /proc (VmRSS, VmHWM)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


@pytest.fixture
def padded_namespace(cluster: Cluster, crd: str, namespace: str) -> Iterator[str]:
    """``namespace`` holding PADDED_COUNT padded WebServers (created, never applied: no last-applied copy)."""
    names = [f"pad-{i:03d}" for i in range(PADDED_COUNT)]

    def create(name: str) -> None:
        body = json.dumps(padded_webserver(name))
        result = cluster.kubectl("create", "-n", namespace, "-f", "-", input=body, timeout=600, check=False)
        # A create the busy API server timed out on may still have been stored: then it answers AlreadyExists.
        while result.returncode != 0 and "Timeout" in result.stderr:
            result = cluster.kubectl("create", "-n", namespace, "-f", "-", input=body, timeout=600, check=False)
        assert result.returncode == 0 or "AlreadyExists" in result.stderr, result.stderr

    def delete(batch: list[str]) -> None:
        cluster.kubectl("delete", "webserver", *batch, "-n", namespace, "--ignore-not-found", "--wait=false",
                        "-o", "name", timeout=600, check=False)  # fmt: skip

    # Each create costs the API server seconds of CPU (about 13,000 labels, each also in managedFields): in parallel.
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(create, names))
    yield namespace
    # By name, 10 a request: the namespace's own cleanup lists them, 130 MB at once, and times out on a busy server.
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(delete, [names[i : i + 10] for i in range(0, len(names), 10)]))


def test_a_padded_webserver_fits_the_api_servers_limits(cluster: Cluster, crd: str, namespace: str) -> None:
    """1.3 MB of labels and annotations is accepted: the API server's 3 MB request and etcd's 1.5 MiB limits."""
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(padded_webserver("pad")), timeout=60)
    stored = cluster.kubectl("get", "webserver", "pad", "-n", namespace, "-o", "json", "--show-managed-fields").stdout
    obj = json.loads(stored)
    with_managed_fields = len(json.dumps(obj, separators=(",", ":")))
    del obj["metadata"]["managedFields"]
    size = len(json.dumps(obj, separators=(",", ":")))
    print(f"padded WebServer: {size} bytes of JSON, {with_managed_fields} with its managedFields (as stored)")
    assert size >= PADDED_BYTES
    assert with_managed_fields < 1.5 * 2**20


@pytest.mark.timeout(3600)  # creating 130 MB of WebServers takes the API server minutes on 2 cores
def test_oversized_webservers_leave_the_operator_within_its_memory_limit_through_a_relist(
    cluster: Cluster, padded_namespace: str, tmp_path: Path
) -> None:
    namespace = padded_namespace
    cluster.kubectl("create", "serviceaccount", "operator", "-n", namespace)
    grant_operator(cluster, namespace, MANAGER_RULES)
    kubeconfig = cluster.serviceaccount_kubeconfig(namespace=namespace, serviceaccount="operator", path=tmp_path / "k")
    op = OperatorProcess(
        kubeconfig=kubeconfig,
        args=[f"--namespaces={namespace}", "--watch-timeout=10", "--read-timeout=120"],
        log_path=tmp_path / "op.log",
    )
    try:
        # Ready once the first list of 130 MB of WebServers is in: 10 a page, and on a loaded API server a continuation
        # page can be refused for a while (1.34: 504 "Too large resource version", its watch cache behind the list's
        # resourceVersion) until the cache catches up; the informer retries. Seen taking over 120 s at load 15.
        op.wait_started(timeout=360)
        wait_until(
            lambda: op.metric("webserver_operator_managed_webservers") == PADDED_COUNT,
            timeout=60,
            message=lambda: f"managed WebServers: {op.metric('webserver_operator_managed_webservers')}",
        )
        listed = _memory(op.proc.pid)
        relists = {"resource": "webservers"}
        assert op.metric("webserver_operator_watch_relists_total", relists) == 1
        # A relist: without list and watch on WebServers the next watch (at most 10 s away) is refused, and the
        # informer starts over with a list once the right is back (runtime.informers.informer: 403 -> relist).
        grant_operator(
            cluster,
            namespace,
            MANAGER_RULES - {(g, "webservers", v) for g, _r, _v in MANAGER_RULES for v in ("list", "watch")},
        )
        wait_until(
            lambda: (
                op.metric("webserver_operator_watch_restarts_total", {"resource": "webservers", "reason": "forbidden"})
                > 0
            ),
            timeout=60,
            message="the WebServer watch refused",
        )
        grant_operator(cluster, namespace, MANAGER_RULES)
        wait_until(
            lambda: op.metric("webserver_operator_watch_relists_total", relists) == 2,
            timeout=120,
            message=op.tail,
        )
        wait_until(
            lambda: op.metric("webserver_operator_managed_webservers") == PADDED_COUNT, timeout=30, message="relisted"
        )
        time.sleep(5)  # the reconciles the relist wakes
        resident, peak = _memory(op.proc.pid)
        print(
            f"operator RSS with {PADDED_COUNT} WebServers of {PADDED_BYTES} bytes: after the list "
            f"{listed[0] / 2**20:.0f} MiB (peak {listed[1] / 2**20:.0f} MiB), after the relist "
            f"{resident / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB"
        )
        assert op.metric("webserver_operator_managed_webservers") == PADDED_COUNT
        assert peak < MEMORY_LIMIT, f"peak RSS {peak / 2**20:.0f} MiB exceeds the chart's 256Mi limit"
        assert peak < PADDED_PEAK_BOUND, (
            f"peak RSS {peak / 2**20:.0f} MiB: padded WebServers cost more than {PADDED_PEAK_BOUND // 2**20} MiB; is "
            "something decoding them whole (kube.skim)?"
        )
        assert op.probe("/healthz")[0] == 200
    finally:
        op.stop()
