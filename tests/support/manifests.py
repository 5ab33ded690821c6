"""Installation manifests judged by a real API server: server-side dry runs and Pod Security admission.

Why here: the manifest tests (config/, the chart) and the install-target tests (``make build-installer``) ask the
same questions of the same API server: does it accept every object, and does the restricted Pod Security Standard
admit the manager's pod in a namespace that enforces it (and refuse a naive pod there, so the admission proves
something). Offline renders come from tests/support/chart.py; these helpers need the cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from harness.paths import CHART
from tests.support.chart import docs_of, restricted_violations
from tests.support.cluster import Cluster

DRY_RUN_SUFFIX = "(server dry run)"


def dry_run_lines(output: str) -> list[str]:
    """The lines of a server-side dry run's output that name an object the API server accepted."""
    return [line for line in output.splitlines() if line.endswith(DRY_RUN_SUFFIX)]


def enforce_restricted(cluster: Cluster, namespace: str) -> str:
    """Label ``namespace`` to enforce the `restricted` Pod Security Standard; return it."""
    cluster.kubectl(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    return namespace


def server_dry_run(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    """kubectl apply --dry-run=server (strict field validation): every object must be accepted."""
    text = yaml.safe_dump_all(docs, sort_keys=False)
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False, timeout=120)
    assert result.returncode == 0, f"API server rejected the manifests:\n{result.stderr}"
    assert len(dry_run_lines(result.stdout)) == len(docs), result.stdout


def kustomize_overlay(
    cluster: Cluster, tmp_path: Path, kustomization: dict[str, Any], *, bases: tuple[Path, ...] = ()
) -> list[dict[str, Any]]:
    """Render an overlay of ``kustomization`` over ``bases`` (as relative paths: kustomize refuses absolute ones)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir(exist_ok=True)
    resources = [*kustomization.get("resources", []), *(os.path.relpath(base, overlay) for base in bases)]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({**kustomization, "resources": resources}))
    return docs_of(cluster.kubectl("kustomize", str(overlay)).stdout)


def helm_template(cluster: Cluster, release: str, namespace: str, *args: str) -> list[dict[str, Any]]:
    """The chart rendered by the cluster's helm (the cluster's Kubernetes version, not helm's offline default)."""
    assert cluster.helm_path.is_file(), f"helm not found at {cluster.helm_path}: run `make tools`"
    result = subprocess.run(
        [str(cluster.helm_path), "template", release, str(CHART), "--namespace", namespace, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=cluster.env(),
    )
    assert result.returncode == 0, result.stderr
    return docs_of(result.stdout)


def bare_pod(template: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    """The pod a Deployment's template would create, as a Pod of its own for a dry run."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": template["metadata"].get("labels", {})},
        "spec": template["spec"],
    }


def create_dry_run(cluster: Cluster, pod: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(pod), check=False)


def assert_enforcement_is_on(cluster: Cluster, namespace: str) -> None:
    """A pod with no securityContext at all must be rejected: otherwise an admission proves nothing."""
    naive = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "naive", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
    }
    result = create_dry_run(cluster, naive)
    assert result.returncode != 0, "a pod without securityContext was admitted: is PodSecurity enforcing?"
    assert "violates PodSecurity" in result.stderr, result.stderr


def assert_restricted_pss_admits(cluster: Cluster, pod: dict[str, Any]) -> None:
    """The pod passes our restricted checklist and the API server's Pod Security admission."""
    assert restricted_violations(pod["spec"]) == []
    result = create_dry_run(cluster, pod)
    assert result.returncode == 0, f"Pod Security admission rejected {pod['metadata']['name']}: {result.stderr}"
    assert "violates PodSecurity" not in result.stderr, result.stderr
