"""The README quickstart's registry path, run as written against the test cluster.

The registry path is the one every cluster can use: after `make docker-build docker-push IMG=...`, the README's `helm
install ... --set image.registry=... --set image.tag=... --wait`. The build and push need a container engine and a
registry (the e2e suite on kind runs the quickstart's kind block); here the placeholders get example values and the
install command runs verbatim, except for its namespace (a fresh one) and `--take-ownership` (the session's CRD was
applied outside Helm, which the chart README explains). What a user would then see: the operator Deployment runs
exactly the image they pushed, under the restricted Pod Security level.
"""

from __future__ import annotations

import shlex
import subprocess
import uuid

import pytest

from tests.support.chart import restricted_violations
from tests.support.cluster import Cluster, wait_until
from tests.support.readme import quickstart_blocks

REGISTRY = "registry.example/team"
TAG = "1.2.3"


@pytest.mark.usefixtures("crd")
def test_readme_helm_install_with_a_pushed_image(cluster: Cluster) -> None:
    _, commands = quickstart_blocks()
    (install,) = [c for c in commands if c.startswith("helm install") and "image.registry" in c]
    namespace = f"t-readme-{uuid.uuid4().hex[:6]}"
    text = install.replace("<registry>", REGISTRY).replace("<tag>", TAG).replace("webserver-operator-system", namespace)
    args = shlex.split(text)
    assert args[:2] == ["helm", "install"]
    release = args[2]
    helm = [str(cluster.helm_path), "--kubeconfig", str(cluster.kubeconfig)]
    result = subprocess.run(
        [*helm, *args[1:], "--take-ownership"], capture_output=True, text=True, timeout=330, check=False
    )
    try:
        assert result.returncode == 0, result.stderr
        assert "local image name" not in result.stdout  # the notes only warn about the local default
        deployment = wait_until(
            lambda: cluster.get_or_none("deployment", release, namespace=namespace),
            timeout=30,
            message="the operator Deployment",
        )
        spec = deployment["spec"]["template"]["spec"]
        assert spec["containers"][0]["image"] == f"{REGISTRY}/webserver-operator:{TAG}"
        assert restricted_violations(spec) == []
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    finally:
        subprocess.run([*helm, "uninstall", release, "-n", namespace], capture_output=True, timeout=120, check=False)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
