"""The tenant boundary against the real API server: what a WebServer editor can get, held against PodSecurity.

A platform team grants WebServers without granting pods. These tests show, in a namespace that enforces the Pod
Security baseline level, that (1) the pods of the most permissive WebServer the CRD accepts pass there, so the
operator never needs more than baseline; (2) every pod the operator's own check (``core.podsecurity``) refuses is
refused by Kubernetes' PodSecurity admission as well, and the pod both accept passes both: the reconciler's second
line of defence agrees with the plugin it stands in for where a namespace has no Pod Security label. Nothing is
stored: every request is a server-side dry run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cluster import Cluster
from tests.support.factories import webserver
from tests.support.pod_security import ALLOWED_EDGES, BEYOND, Allowed, Beyond
from webserver_operator.api.models import WebServer
from webserver_operator.core.podsecurity import BASELINE_CAPABILITIES, baseline_violations
from webserver_operator.desired import desired_deployment

MOST_PERMISSIVE_SPEC: dict[str, Any] = {
    "image": "nginx:1.27",
    "replicas": 1,
    "port": 80,
    "securityContext": {
        "runAsNonRoot": False,
        "runAsUser": 0,
        "runAsGroup": 0,
        "allowPrivilegeEscalation": True,
        "readOnlyRootFilesystem": False,
        "capabilities": {"add": list(BASELINE_CAPABILITIES)},
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/web.json"},
    },
}
"""Every spec field that reaches the pod, at the most the CRD accepts."""


@pytest.fixture
def baseline_namespace(cluster: Cluster, namespace: str) -> str:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline", "--overwrite")
    return namespace


def _dry_run(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> tuple[int, str]:
    result = cluster.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False
    )
    return result.returncode, result.stderr


def _pod(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "probe", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def test_the_most_permissive_webserver_renders_pods_that_pass_baseline(
    cluster: Cluster, crd: str, baseline_namespace: str
) -> None:
    manifest = webserver(namespace=baseline_namespace, spec=MOST_PERMISSIVE_SPEC)
    admitted = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(manifest), check=False
    )
    assert admitted.returncode == 0, (
        f"the CRD refuses the most permissive WebServer it should accept: {admitted.stderr}"
    )
    # As the API server would store it (defaults applied, a uid for the children's ownerReference).
    deployment = desired_deployment(WebServer.model_validate(json.loads(admitted.stdout)))
    template = deployment["spec"]["template"]
    assert baseline_violations(template["spec"]) == []
    code, err = _dry_run(cluster, baseline_namespace, deployment)
    assert code == 0, err
    assert "PodSecurity" not in err, f"the Deployment would violate baseline: {err}"
    code, err = _dry_run(
        cluster, baseline_namespace, {**_pod(template["spec"]), "metadata": {**template["metadata"], "name": "web"}}
    )
    assert code == 0, f"a pod of the most permissive WebServer is refused at baseline: {err}"


@pytest.mark.parametrize("case", ALLOWED_EDGES, ids=[c.id for c in ALLOWED_EDGES])
def test_what_the_operator_allows_podsecurity_admission_allows(
    cluster: Cluster, baseline_namespace: str, case: Allowed
) -> None:
    assert baseline_violations(case.spec, annotations=case.annotations) == []
    code, err = _dry_run(cluster, baseline_namespace, _pod(case.spec, case.annotations))
    if _server_minor(cluster) < case.since_minor:
        # The check follows Kubernetes 1.36; an older API server's admission is stricter here, and refuses the pod
        # (so it never runs there), naming the same field.
        assert code != 0 and 'violates PodSecurity "baseline:latest"' in err, (
            f"{case.id}: a Kubernetes before 1.{case.since_minor} admitted it: {err}"
        )
        return
    assert code == 0, f"{case.id}: refused by the API server although the operator's check allows it: {err}"
    assert "PodSecurity" not in err, err


def _server_minor(cluster: Cluster) -> int:
    """The API server's minor version (``kubectl version``), e.g. 34 on the oldest line the chart claims."""
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    return int("".join(ch for ch in str(version["minor"]) if ch.isdigit()))


@pytest.mark.parametrize("case", [c for c in BEYOND if c.admission], ids=[c.id for c in BEYOND if c.admission])
def test_what_the_operator_refuses_podsecurity_admission_refuses_in_the_same_words(
    cluster: Cluster, baseline_namespace: str, case: Beyond
) -> None:
    violations = baseline_violations(case.spec, annotations=case.annotations)
    assert violations, "the operator's check lets it through"
    code, err = _dry_run(cluster, baseline_namespace, _pod(case.spec, case.annotations))
    assert code != 0, f"{case.id}: PodSecurity admission accepted a pod the operator refuses"
    assert 'violates PodSecurity "baseline:latest"' in err, err
    # Each check's line is admission's own "reason (detail)", word for word (Kubernetes 1.36).
    for line in violations:
        assert line in err, f"{case.id}: admission words it differently: {err}"


@pytest.mark.parametrize("case", [c for c in BEYOND if not c.admission], ids=[c.id for c in BEYOND if not c.admission])
def test_what_only_validation_refuses_is_refused_by_the_api_server(
    cluster: Cluster, baseline_namespace: str, case: Beyond
) -> None:
    assert baseline_violations(case.spec, annotations=case.annotations)
    code, err = _dry_run(cluster, baseline_namespace, _pod(case.spec, case.annotations))
    assert code != 0, f"{case.id}: the API server accepted a pod the operator refuses: {err}"
