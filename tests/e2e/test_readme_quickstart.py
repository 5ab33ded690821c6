"""The README quickstart's kind block, run command by command as written, on the kind cluster of `make e2e-kind`.

Why: the quickstart is the first thing a user with a cluster runs; if it breaks, nothing else in the README matters.
The block is parsed from README.md (tests/support/readme.py), not copied, so an edit of the README is what runs.

Only the machine around the commands is prepared, as a user's would be: KUBECONFIG points at the kind cluster,
kubectl and helm are on PATH, KIND_CLUSTER_NAME names the suite's cluster (a user's only kind cluster is found
without it), no IMG or CLUSTER is set. Two things a fresh cluster would not need are done first, because earlier
e2e tests ran on this one: the CRD they left behind (kept on uninstall, as the chart promises) is marked for
adoption by the quickstart's release, and where Docker Hub's nginx cannot be pulled the suite's stand-in nginx image
(hack/images.sh) is loaded under the sample's name, `nginx:1.27`.

Needs real containers: skipped, with the reason, on the local control plane (the registry path of the same
quickstart runs there, tests/integration/test_readme_helm.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.paths import HACK, ROOT
from tests.support.cluster import Cluster, container_engine
from tests.support.readme import quickstart_blocks
from tests.support.webservers import condition

pytestmark = pytest.mark.kind

CHART = ROOT / "charts" / "webserver-operator"
CRD = "webservers.web.webserver-operator.dev"
SAMPLE_IMAGE = "docker.io/library/nginx:1.27"


def _release(commands: list[str]) -> tuple[str, str]:
    """The release name and namespace of the block's `helm install`."""
    (install,) = [shlex.split(c) for c in commands if c.startswith("helm install")]
    return install[2], install[install.index("-n") + 1]


def _kind_cluster_name() -> str:
    return os.environ.get("KIND_CLUSTER_NAME") or "webserver-operator"


def _load_sample_image(cluster: Cluster, tmp_path: Path) -> None:
    """Give the kind node an image named like the sample's, unless the real nginx is there already."""
    if cluster.web_images[0] == SAMPLE_IMAGE:
        return
    engine = container_engine()
    subprocess.run([engine, "tag", cluster.web_images[0], SAMPLE_IMAGE], check=True, timeout=120)
    load_into_kind(SAMPLE_IMAGE, tmp_path)


def load_into_kind(image: str, tmp_path: Path) -> None:
    """Save ``image`` from the container engine and load it into the kind cluster's nodes (``kind load``)."""
    engine = container_engine()
    archive = tmp_path / "sample-image.tar"
    save = [engine, "save", "-o", str(archive), image]
    if engine == "podman":
        save[2:2] = ["--format", "docker-archive"]
    subprocess.run(save, check=True, capture_output=True, timeout=300)
    kind = subprocess.run(
        [str(HACK / "tools.sh"), "ensure", "kind"], check=True, capture_output=True, text=True, timeout=1800
    ).stdout.strip()
    env = dict(os.environ, KIND_EXPERIMENTAL_PROVIDER="podman") if engine == "podman" else None
    subprocess.run(
        [kind, "load", "image-archive", "--name", _kind_cluster_name(), str(archive)],
        check=True,
        capture_output=True,
        timeout=600,
        env=env,
    )


def _adopt_crd(cluster: Cluster, release: str, namespace: str) -> None:
    """Mark a CRD left by earlier releases as the quickstart release's, which `helm install` then adopts."""
    if not cluster.kubectl("get", "crd", CRD, "--ignore-not-found", "-o", "name").stdout.strip():
        return
    cluster.kubectl(
        "annotate", "crd", CRD, "--overwrite",
        f"meta.helm.sh/release-name={release}", f"meta.helm.sh/release-namespace={namespace}",
    )  # fmt: skip
    cluster.kubectl("label", "crd", CRD, "--overwrite", "app.kubernetes.io/managed-by=Helm")


def _disown_crd(cluster: Cluster) -> None:
    """Take back what ``_adopt_crd`` wrote: the annotations and label it set belong to the field manager of
    ``kubectl annotate``/``kubectl label``, and a later ``helm install --take-ownership`` (server-side apply) would
    meet them as conflicts. Without them, the next release sets its own."""
    cluster.kubectl(
        "annotate", "crd", CRD, "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-", check=False,
    )  # fmt: skip
    cluster.kubectl("label", "crd", CRD, "app.kubernetes.io/managed-by-", check=False)


def _user_env(cluster: Cluster) -> dict[str, str]:
    env = cluster.env()
    for inherited in ("IMG", "CLUSTER", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "KUBE_CONTEXT"):
        env.pop(inherited, None)
    env["KIND_CLUSTER_NAME"] = _kind_cluster_name()
    return env


@pytest.fixture
def quickstart(cluster: Cluster, tmp_path: Path) -> Iterator[list[str]]:
    commands, _ = quickstart_blocks()
    release, namespace = _release(commands)
    _load_sample_image(cluster, tmp_path)
    _adopt_crd(cluster, release, namespace)
    try:
        yield commands
    finally:
        cluster.kubectl("delete", "webserver", "webserver-sample", "-n", "default", "--ignore-not-found", check=False)
        subprocess.run(
            [str(cluster.helm_path), "--kubeconfig", str(cluster.kubeconfig), "uninstall", release, "-n", namespace],
            capture_output=True,
            timeout=300,
            check=False,
        )
        _disown_crd(cluster)


def test_readme_quickstart_on_kind(cluster: Cluster, quickstart: list[str]) -> None:
    env = _user_env(cluster)
    for command in quickstart:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        assert result.returncode == 0, (
            f"README quickstart: `{command}` failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-3000:]}"
        )
    ws = cluster.get_json("webserver", "webserver-sample", namespace="default")
    ready = condition(ws)
    assert ready is not None and ready["status"] == "True", ws.get("status")
    assert ws["status"]["readyReplicas"] == 2
    release, namespace = _release(quickstart)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    deployment = cluster.get_json("deployment", release, namespace=namespace)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    # The image `make docker-build kind-load` made and loaded is the one the chart deploys by default.
    image = values["image"]
    assert container["image"] == f"{image['registry']}/{image['repository']}:{chart['appVersion']}"
    assert deployment["status"].get("readyReplicas") == 1, deployment["status"]
