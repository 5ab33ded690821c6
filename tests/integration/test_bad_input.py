"""Every row of the bad-input table (tests/support/bad_input.py, docs/bad-input.md) against the real API server.

WebServer rows run with one operator watching a namespace per row (rows that the API server rejects share one), as a
ServiceAccount of the audited namespace so the API server's audit log counts its requests. Each row asserts the
documented outcome: the API server's rejection message, or the operator's Ready condition (status, reason and message),
or the documented behaviour of an accepted object. The last test then watches a quiet window: the operator must be
alive, must not have printed a traceback, must write nothing, and must send at most one request per two seconds for
any row (a problem waiting on a person is re-checked with backoff, a hot loop would send hundreds).

Settings rows run ``webserver-operator run`` with the bad setting: exit code 2, the documented message, no traceback.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chaos import identity
from harness.audit import AuditLog
from harness.kubeapi import Endpoint, KubeApi
from harness.operator import OperatorProcess
from harness.paths import HACK
from tests.support.bad_input import CASES, SETTINGS, Case, SettingCase
from tests.support.cluster import Cluster, wait_until
from tests.support.webservers import condition, free_node_port, wait_condition, wait_ready
from webserver_operator.api.crd import CRD_NAME
from webserver_operator.api.models import BASELINE_RULE_MARKER

QUIET_WINDOW = 20.0
MAX_REQUESTS_PER_ROW = int(QUIET_WINDOW / 2)


@dataclass
class World:
    cluster: Cluster
    operator: OperatorProcess
    audit: AuditLog
    user: str
    namespaces: dict[str, str]
    settled: list[str] = field(default_factory=list)

    def namespace(self, case: Case) -> str:
        return self.namespaces[case.id if case.id in self.namespaces else "rejected"]


def _own_namespace(case: Case) -> bool:
    return case.outcome != "rejected" or case.action != "create"


async def _identity(cluster: Cluster, prefix: str, sa: str, path: Path) -> Path:
    async with KubeApi(Endpoint.from_kubeconfig(cluster.kubeconfig)) as api:
        await identity.grant(api, prefix=prefix, serviceaccounts=[sa], lease_name=f"{prefix}-unused")
        token = await identity.issue_token(api, sa, secret=f"{sa}-token")
        server = Endpoint.from_kubeconfig(cluster.kubeconfig)
        return identity.write_kubeconfig(
            path, server=server.server, ca_file=server.require_ca_file(), token=token.value
        )


async def _revoke(cluster: Cluster, prefix: str, sa: str) -> None:
    async with KubeApi(Endpoint.from_kubeconfig(cluster.kubeconfig)) as api:
        await identity.revoke(api, prefix=prefix, serviceaccounts=[sa])
        await api.delete(f"/api/v1/namespaces/{identity.AUDITED_NAMESPACE}/secrets/{sa}-token")


@pytest.fixture(scope="module")
def world(cluster: Cluster, crd: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if cluster.backend != "local":
        pytest.skip("the hot-loop check reads the local control plane's audit log: run with CLUSTER=local")
    prefix = f"bad-{uuid.uuid4().hex[:6]}"
    sa = f"{prefix}-operator"
    tmp = tmp_path_factory.mktemp("bad-input")
    ids = ["rejected"] + [c.id for c in CASES if _own_namespace(c)]
    namespaces = {row: f"{prefix}-{row}"[:63].rstrip("-") for row in ids}
    for ns in namespaces.values():
        cluster.kubectl("create", "namespace", ns)
        cluster.kubectl("label", "namespace", ns, "webserver-operator.dev/test=true")
    kubeconfig = asyncio.run(_identity(cluster, prefix, sa, tmp / "operator.kubeconfig"))
    audit_path = subprocess.run(
        [str(HACK / "cluster.sh"), "audit-log"], check=True, capture_output=True, text=True
    ).stdout.strip()
    op = OperatorProcess(
        kubeconfig=kubeconfig,
        args=[f"--namespaces={','.join(namespaces.values())}", "--log-level=INFO"],
        log_path=tmp / "operator.log",
    )
    try:
        op.wait_started(timeout=60)
        user = identity.username(sa)
        yield World(cluster, op, AuditLog(Path(audit_path), users_prefix=user), user, namespaces)
    finally:
        code = op.stop()
        asyncio.run(_revoke(cluster, prefix, sa))
        for ns in namespaces.values():
            cluster.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)
        assert code == 0, f"the operator exited with {code} on SIGTERM:\n{op.tail()}"


def _create(cluster: Cluster, manifest: dict[str, Any], namespace: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(manifest), check=False)


def _without_baseline_rules(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` as it was before it refused capabilities and seccomp profiles beyond the Pod Security baseline."""
    older = copy.deepcopy(crd)
    for version in older["spec"]["versions"]:
        context = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["securityContext"]
        rules = context.pop("x-kubernetes-validations", [])
        kept = [rule for rule in rules if BASELINE_RULE_MARKER not in rule["message"]]
        assert len(kept) < len(rules), "the CRD has no Pod Security baseline rule to take away"
        if kept:
            context["x-kubernetes-validations"] = kept
    return older


def _create_as_stored_before_the_crd(
    cluster: Cluster, manifest: dict[str, Any], namespace: str
) -> subprocess.CompletedProcess[str]:
    """Create ``manifest`` under the older CRD, then put the current CRD back (as an upgrade of the CRD would)."""
    current = cluster.get_json("crd", CRD_NAME)
    for key in ("resourceVersion", "managedFields", "generation", "creationTimestamp", "uid"):
        current["metadata"].pop(key, None)
    current.pop("status", None)
    cluster.kubectl("replace", "-f", "-", input=json.dumps(_without_baseline_rules(current)))

    def admitted() -> subprocess.CompletedProcess[str] | None:
        result = _create(cluster, manifest, namespace)
        return result if result.returncode == 0 else None

    try:
        # The API server picks up a CRD change asynchronously: retry until the older schema admits the object.
        return wait_until(
            admitted,
            timeout=30,
            message="the API server to admit the WebServer under the CRD without the baseline rules",
        )
    finally:
        cluster.kubectl("replace", "-f", "-", input=json.dumps(current))
        hostile = {**manifest, "metadata": {"name": "probe"}}
        probe = ("create", "--dry-run=server", "-n", namespace, "-f", "-")
        wait_until(
            lambda: cluster.kubectl(*probe, input=json.dumps(hostile), check=False).returncode != 0,
            timeout=30,
            message="the API server to enforce the restored CRD's baseline rules again",
        )


def _foreign(cluster: Cluster, action: str, namespace: str) -> None:
    pod = {
        "metadata": {"labels": {"app": "foreign"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example.com/foreign:1"}]},
    }
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "foreign"}}, "template": pod},
    }
    if action == "foreign-service":
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "foreign"}, "ports": [{"port": 80}]},
        }
        cluster.apply(service, namespace=namespace)
        return
    if action == "foreign-controlled":
        owner = json.loads(cluster.kubectl("create", "configmap", "owner", "-n", namespace, "-o", "json").stdout)
        deployment["metadata"]["labels"] = {
            "app.kubernetes.io/managed-by": "webserver-operator",
            "app.kubernetes.io/name": "webserver",
            "app.kubernetes.io/instance": "web",
        }
        deployment["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "owner",
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    cluster.apply(deployment, namespace=namespace)


def _node_port_holder(cluster: Cluster, namespace: str) -> int:
    port = free_node_port(cluster)
    holder = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "holder"},
        "spec": {"type": "NodePort", "selector": {"app": "none"}, "ports": [{"port": 80, "nodePort": port}]},
    }
    cluster.apply(holder, namespace=namespace)
    return port


def _writes(world: World, namespace: str, start: float, end: float) -> list[str]:
    return [
        f"{r.verb} {r.resource}/{r.name} -> {r.code}"
        for r in world.audit.requests(start, end)
        if r.namespace == namespace and r.is_write and r.ok and r.resource != "webservers/status"
    ]


def _assert_rejected(result: subprocess.CompletedProcess[str], case: Case) -> None:
    assert result.returncode != 0, f"{case.id}: the API server accepted it:\n{result.stdout}"
    assert case.message in result.stderr, f"{case.id}: expected {case.message!r} in:\n{result.stderr}"


def _delete_pods_quietly(world: World, ns: str) -> None:
    """Pods deleted and recreated: the Deployment's status churns; the operator may update the WebServer's status
    but must not PATCH the Deployment (nothing we own changed) nor record an Event."""
    cluster = world.cluster
    start = time.time()
    cluster.kubectl("delete", "pods", "-n", ns, "-l", "app.kubernetes.io/instance=web", "--wait=false")
    time.sleep(2)
    wait_ready(cluster, ns, "web", timeout=60)
    time.sleep(3)
    world.audit.refresh()
    writes = _writes(world, ns, start, time.time())
    assert not writes, f"writes while only pods changed: {writes}\n{world.operator.tail()}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_webserver_row(world: World, case: Case) -> None:
    cluster, ns = world.cluster, world.namespace(case)
    if case.outcome == "rejected" and case.action == "create":
        _assert_rejected(_create(cluster, case.manifest, ns), case)
        name = case.manifest["metadata"]["name"]
        assert cluster.get_or_none("webserver", name, namespace=ns) is None
        return
    if case.action.startswith("foreign-"):
        _foreign(cluster, case.action, ns)
    manifest = json.loads(json.dumps(case.manifest))
    taken = 0
    if case.action == "nodeport-taken":
        taken = _node_port_holder(cluster, ns)
        manifest["spec"]["nodePort"] = taken
    if case.action == "finalizer-delete":
        manifest["metadata"]["finalizers"] = ["example.com/hold"]
    if case.action == "stored-before-crd":
        created = _create_as_stored_before_the_crd(cluster, manifest, ns)
    else:
        created = _create(cluster, manifest, ns)
    assert created.returncode == 0, created.stderr
    if case.outcome == "condition" and case.action != "nodeport-changed-to-taken":
        cond = wait_condition(cluster, ns, "web", status=case.status, reason=case.reason, timeout=60)
        assert case.message in cond["message"], f"{case.id}: expected {case.message!r} in {cond['message']!r}"
        if case.action == "stored-before-crd":
            assert cluster.get_or_none("deployment", "web", namespace=ns) is None, "a Deployment beyond baseline"
            assert cluster.get_or_none("service", "web", namespace=ns) is None
        world.settled.append(ns)
        return
    wait_ready(cluster, ns, "web", timeout=90)
    if case.action == "scale-2000":
        _assert_rejected(cluster.kubectl("scale", "webserver/web", "-n", ns, "--replicas=2000", check=False), case)
    elif case.action == "patch-null-image":
        patch = cluster.kubectl(
            "patch", "webserver", "web", "-n", ns, "--type=merge", "-p", '{"spec": {"image": null}}', check=False
        )
        _assert_rejected(patch, case)
    elif case.action == "nodeport-changed-to-taken":
        before = cluster.get_json("webserver", "web", namespace=ns)["status"]["nodePort"]
        taken = _node_port_holder(cluster, ns)
        cluster.kubectl(
            "patch", "webserver", "web", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"nodePort": taken}})
        )
        cond = wait_condition(cluster, ns, "web", status=case.status, reason=case.reason, timeout=60)
        assert case.message in cond["message"], cond
        status = cluster.get_json("webserver", "web", namespace=ns)["status"]
        assert status.get("nodePort") == before, f"the Service still serves on {before}; status says {status}"
    elif case.action == "delete-pods-quiet":
        _delete_pods_quietly(world, ns)
    elif case.action == "baseline-capability":
        deployment = cluster.get_json("deployment", "web", namespace=ns)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["securityContext"]["capabilities"] == {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}
    elif case.action == "fake-status":
        fake = {
            "status": {
                "observedGeneration": 99,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Faked",
                        "message": "written by someone else",
                        "lastTransitionTime": "2020-01-01T00:00:00Z",
                    }
                ],
            }
        }
        cluster.kubectl(
            "patch", "webserver", "web", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(fake)
        )

        def restored() -> dict[str, Any] | None:
            obj = cluster.get_json("webserver", "web", namespace=ns)
            cond = condition(obj) or {}
            ok = (
                obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
                and cond.get("reason") != "Faked"
            )
            return obj if ok else None

        wait_until(restored, timeout=30, message="the operator to write the true status back")
    elif case.action == "finalizer-delete":
        start = time.time()
        cluster.kubectl("delete", "webserver", "web", "-n", ns, "--wait=false")
        time.sleep(8)
        world.audit.refresh()
        writes = [
            f"{r.verb} {r.resource}/{r.name}"
            for r in world.audit.requests(start, time.time())
            if r.namespace == ns and r.is_write
        ]
        cluster.kubectl(
            "patch", "webserver", "web", "-n", ns, "--type=merge", "-p", '{"metadata": {"finalizers": null}}'
        )
        assert not writes, f"writes to a WebServer being deleted: {writes}"
    world.settled.append(ns)


@pytest.mark.parametrize("case", SETTINGS, ids=[s.id for s in SETTINGS])
def test_setting_row(cluster: Cluster, case: SettingCase) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBSERVER_OPERATOR_") and k != "KUBECONFIG"}
    env.update(dict(case.env))
    args = list(case.args)
    if case.id == "missing-context":
        args.append(f"--kubeconfig={cluster.kubeconfig}")
    result = subprocess.run(
        [sys.executable, "-m", "webserver_operator", "run", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, f"exit {result.returncode}:\n{result.stderr}"
    assert case.message in result.stderr, f"expected {case.message!r} in:\n{result.stderr}"
    assert "Traceback" not in result.stderr, f"a traceback for a settings error:\n{result.stderr}"


def test_no_crash_and_no_hot_loop(world: World) -> None:
    assert world.settled, "no WebServer row has run: this test checks what the rows left behind"
    time.sleep(3)
    start = time.time()
    time.sleep(QUIET_WINDOW)
    end = time.time()
    time.sleep(1)
    requests = world.audit.requests(start, end)
    per_row = Counter(r.namespace for r in requests if r.namespace in world.settled)
    writes = [f"{r.verb} {r.resource} {r.namespace}/{r.name} -> {r.code}" for r in requests if r.is_write and r.ok]
    assert world.operator.proc.poll() is None, f"the operator died:\n{world.operator.tail()}"
    assert not writes, f"accepted writes in the {QUIET_WINDOW:.0f}s quiet window: {writes}"
    busiest = per_row.most_common(1)
    assert not busiest or busiest[0][1] <= MAX_REQUESTS_PER_ROW, (
        f"a row is hot-looping: {per_row.most_common(3)} requests in {QUIET_WINDOW:.0f}s (limit {MAX_REQUESTS_PER_ROW})"
    )
    tracebacks = [line for line in world.operator.raw if "Traceback (most recent call last)" in line]
    assert not tracebacks, f"{len(tracebacks)} tracebacks on the operator's stderr, first:\n{tracebacks[0][:2000]}"
