"""The kubebuilder-style install targets, run as users run them (`make ...`), judged by a real API server.

- `make build-installer` writes dist/install.yaml: the CRD, RBAC and the operator Deployment with IMG in one file;
  moved into a namespace that enforces the `restricted` Pod Security level, a server-side dry run accepts every
  object, and the operator's pod is admitted there.
- `make install` / `uninstall` (the CRD) and `make deploy` / `undeploy` (config/default with IMG, into
  DEPLOY_NAMESPACE) are run with DRY_RUN=server against the test cluster: the API server validates every object
  and nothing changes (the CRD is shared by the whole session, so it is never really deleted here).
- `make chart-package` writes a versioned chart archive that passes `helm lint --strict` and whose render a server
  dry run accepts in a restricted namespace.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.paths import ROOT
from tests.support.chart import docs_of
from tests.support.cluster import Cluster
from tests.support.manifests import (
    DRY_RUN_SUFFIX,
    assert_enforcement_is_on,
    assert_restricted_pss_admits,
    bare_pod,
    dry_run_lines,
    kustomize_overlay,
    server_dry_run,
)
from webserver_operator.api.crd import CRD_NAME

IMG = "registry.example/team/webserver-operator:1.2.3"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def make(cluster: Cluster, target: str, *variables: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`make -s <target> VAR=value...` in the repository, against the test cluster's kubeconfig."""
    env = cluster.env()
    env.pop("MAKEFLAGS", None)
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", target, *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    if check:
        assert result.returncode == 0, f"make {target} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def _into_namespace(cluster: Cluster, manifest: Path, namespace: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The manifest moved into ``namespace`` by a kustomize overlay (as a user would move it)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "install.yaml").write_text(manifest.read_text())
    return kustomize_overlay(cluster, tmp_path, {"namespace": namespace, "resources": ["install.yaml"]})


def _assert_pod_admitted(cluster: Cluster, template: dict[str, Any], namespace: str) -> None:
    pod = bare_pod(template, "installer-manager", namespace)
    pod["spec"] = {**pod["spec"], "serviceAccountName": "default"}  # the dry run does not create the ServiceAccount
    assert_enforcement_is_on(cluster, namespace)
    assert_restricted_pss_admits(cluster, pod)


def test_build_installer_writes_one_file_the_api_server_accepts(
    cluster: Cluster, restricted_namespace: str, tmp_path: Path
) -> None:
    make(cluster, "build-installer", f"IMG={IMG}", f"DIST={tmp_path}")
    installer = tmp_path / "install.yaml"
    docs = docs_of(installer.read_text())
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == sorted(
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
            "Deployment",
        ]
    )
    (crd,) = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crd["metadata"]["name"] == CRD_NAME
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["metadata"]["namespace"] == "webserver-operator-system"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMG
    moved = _into_namespace(cluster, installer, restricted_namespace, tmp_path)
    server_dry_run(cluster, moved)
    (moved_deployment,) = [d for d in moved if d["kind"] == "Deployment"]
    _assert_pod_admitted(cluster, moved_deployment["spec"]["template"], restricted_namespace)


def test_build_installer_takes_a_digest_and_refuses_an_image_without_tag(cluster: Cluster, tmp_path: Path) -> None:
    make(cluster, "build-installer", f"IMG=registry.example/op@{DIGEST}", f"DIST={tmp_path}")
    (deployment,) = [d for d in docs_of((tmp_path / "install.yaml").read_text()) if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.example/op@{DIGEST}"
    refused = make(cluster, "build-installer", "IMG=registry.example/op", f"DIST={tmp_path / 'no'}", check=False)
    assert refused.returncode != 0
    assert "has neither a tag nor a digest" in refused.stderr
    assert not (tmp_path / "no" / "install.yaml").exists()


@pytest.mark.usefixtures("crd")
def test_install_and_uninstall_the_crd(cluster: Cluster) -> None:
    installed = make(cluster, "install", "DRY_RUN=server")
    assert dry_run_lines(installed.stdout) == [
        f"customresourcedefinition.apiextensions.k8s.io/{CRD_NAME} serverside-applied {DRY_RUN_SUFFIX}"
    ]
    removed = make(cluster, "uninstall", "DRY_RUN=server")
    assert dry_run_lines(removed.stdout) == [
        f'customresourcedefinition.apiextensions.k8s.io "{CRD_NAME}" deleted {DRY_RUN_SUFFIX}'
    ]
    assert "every WebServer" in removed.stderr  # the warning
    assert cluster.kubectl("get", "crd", CRD_NAME, "-o", "name").stdout.strip()  # a dry run changed nothing


@pytest.mark.usefixtures("crd")
def test_deploy_and_undeploy_into_a_restricted_namespace(
    cluster: Cluster, restricted_namespace: str, tmp_path: Path
) -> None:
    variables = (f"IMG={IMG}", f"DEPLOY_NAMESPACE={restricted_namespace}", "DRY_RUN=server")
    make(cluster, "build-installer", *variables, f"DIST={tmp_path}")  # what deploy applies, as a file
    expected = docs_of((tmp_path / "install.yaml").read_text())
    deployed = make(cluster, "deploy", *variables)
    applied = dry_run_lines(deployed.stdout)
    assert len(applied) == len(expected), deployed.stdout
    assert any(line.startswith("deployment.apps/webserver-operator-controller-manager ") for line in applied), applied
    assert any(line.startswith(f"namespace/{restricted_namespace} ") for line in applied), applied
    for doc in expected:
        assert doc["metadata"].get("namespace") in (None, restricted_namespace), doc["metadata"]
    assert not cluster.get_or_none(
        "deployment", "webserver-operator-controller-manager", namespace=restricted_namespace
    )
    undeployed = make(cluster, "undeploy", *variables)
    deleted = dry_run_lines(undeployed.stdout)
    # Only what exists can be deleted: the namespace and the CRD; everything else is ignored as not found.
    assert f'namespace "{restricted_namespace}" deleted {DRY_RUN_SUFFIX}' in deleted, undeployed.stdout
    assert f'customresourcedefinition.apiextensions.k8s.io "{CRD_NAME}" deleted {DRY_RUN_SUFFIX}' in deleted
    assert cluster.kubectl("get", "namespace", restricted_namespace, "-o", "name").stdout.strip()


def test_chart_package_is_versioned_lint_clean_and_accepted(
    cluster: Cluster, restricted_namespace: str, tmp_path: Path
) -> None:
    version = yaml.safe_load((ROOT / "charts" / "webserver-operator" / "Chart.yaml").read_text())["version"]
    make(cluster, "chart-package", f"DIST={tmp_path}")
    archive = tmp_path / f"webserver-operator-{version}.tgz"
    assert archive.is_file(), sorted(os.listdir(tmp_path))
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for required in (
        "Chart.yaml",
        "values.yaml",
        "values.schema.json",
        "README.md",
        "templates/deployment.yaml",
        "templates/prometheusrule.yaml",
        "files/crds/web.webserver-operator.dev_webservers.yaml",
        "files/dashboards/webserver-operator.json",
    ):
        assert f"webserver-operator/{required}" in names, required
    helm = str(cluster.helm_path)
    lint = subprocess.run(
        [helm, "lint", "--strict", str(archive)], capture_output=True, text=True, timeout=60, check=False
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "[WARNING]" not in lint.stdout + lint.stderr
    rendered = subprocess.run(
        [helm, "template", "pkg", str(archive), "--namespace", restricted_namespace, "--set", "crds.enabled=false"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    server_dry_run(cluster, docs_of(rendered))
