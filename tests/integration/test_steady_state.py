"""A converged operator writes nothing: restart it over converged WebServers and count its writes.

Counted twice, independently: from the operator's own request metrics (rest_client_requests_total by method) and,
on the local control plane, from the API server's audit log (hack/audit-policy.yaml records writes to WebServers,
Deployments and Services with the client's user agent).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from harness.operator import OperatorProcess
from harness.paths import HACK
from tests.support.cluster import Cluster
from tests.support.factories import webserver
from tests.support.webservers import wait_deployment, wait_field, wait_ready

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _audit_writes(cluster: Cluster, namespace: str) -> int | None:
    """Writes by webserver-operator in ``namespace`` per the audit log; None where there is no local audit log."""
    if cluster.backend != "local":
        return None
    path = Path(
        subprocess.run(
            [str(HACK / "cluster.sh"), "audit-log"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    count = 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            event = json.loads(line)
            if (
                event.get("userAgent", "").startswith("webserver-operator/")
                and (event.get("objectRef") or {}).get("namespace") == namespace
                and event.get("verb") in {"create", "update", "patch", "delete"}
            ):
                count += 1
    return count


def test_restart_over_converged_webservers_writes_nothing(
    cluster: Cluster, crd: str, namespace: str, tmp_path: Path
) -> None:
    first = OperatorProcess(
        kubeconfig=cluster.kubeconfig, args=[f"--namespaces={namespace}"], log_path=tmp_path / "first.log"
    )
    try:
        first.wait_started()
        for name, replicas in (("alpha", 1), ("beta", 2), ("gamma", 0)):
            cluster.apply(webserver(name, replicas=replicas), namespace=namespace)
        for name, replicas in (("alpha", 1), ("beta", 2), ("gamma", 0)):
            wait_ready(cluster, namespace, name)
            wait_field(cluster, "webserver", name, namespace=namespace, path="status.replicas", expected=replicas)
            # Ready is not the end of kube-controller-manager's writes (Progressing turns NewReplicaSetAvailable
            # after it): once it has none left, the first operator has no status write left to make either.
            wait_deployment(cluster, namespace, name)
        time.sleep(2)  # let the last Deployment status update be reconciled
    finally:
        assert first.stop() == 0
    writes_before = _audit_writes(cluster, namespace)
    if writes_before is not None:
        assert writes_before > 0, "the audit log recorded none of the first operator's writes: is auditing on?"

    second = OperatorProcess(
        kubeconfig=cluster.kubeconfig, args=[f"--namespaces={namespace}"], log_path=tmp_path / "second.log"
    )
    try:
        second.wait_started()
        time.sleep(5)
        reconciles = second.metric(
            "controller_runtime_reconcile_total", {"controller": "webserver", "result": "success"}
        )
        assert reconciles >= 3, f"the restarted operator reconciled only {reconciles} times"
        writes = {m: second.metric("rest_client_requests_total", {"method": m}) for m in WRITE_METHODS}
        assert sum(writes.values()) == 0, f"a converged operator wrote: {writes}\n{second.tail()}"
    finally:
        assert second.stop() == 0
    if writes_before is not None:
        assert _audit_writes(cluster, namespace) == writes_before, (
            "the API server saw writes from the restarted operator"
        )
