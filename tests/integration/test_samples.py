"""The samples in config/samples do what their comments say, on a real API server.

- The HorizontalPodAutoscaler scales its WebServer through the scale subresource: the controller-manager's HPA
  controller raises a WebServer below minReplicas to minReplicas (no metrics server needed for that), so the
  WebServer's own spec.replicas changes, never the Deployment's behind the operator's back.
- The unprivileged and the digest-pinned WebServers become Ready under the operator in a namespace that enforces
  the `baseline` Pod Security level, and the pinned one runs exactly the pinned reference.

(Every sample is also accepted by a server-side dry run: tests/integration/test_manifests.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import ROOT, Cluster, wait_until
from tests.support.webservers import condition, wait_field, wait_ready

SAMPLES = ROOT / "config" / "samples"


def _sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


@pytest.mark.usefixtures("crd")
def test_hpa_sample_scales_its_webserver_through_the_scale_subresource(cluster: Cluster, namespace: str) -> None:
    webserver = _sample("web_v1_webserver_unprivileged.yaml")
    hpa = _sample("autoscaling_v2_horizontalpodautoscaler.yaml")
    assert hpa["spec"]["scaleTargetRef"]["name"] == webserver["metadata"]["name"]
    webserver["spec"]["replicas"] = hpa["spec"]["minReplicas"] - 1
    cluster.apply(webserver, namespace=namespace)
    cluster.apply(hpa, namespace=namespace)
    name = webserver["metadata"]["name"]
    wait_field(
        cluster, "webserver", name, namespace=namespace, path="spec.replicas", expected=hpa["spec"]["minReplicas"]
    )

    def able_to_scale() -> dict[str, Any] | None:
        obj = cluster.get_or_none("hpa", hpa["metadata"]["name"], namespace=namespace)
        cond = condition(obj, "AbleToScale")
        return cond if cond and cond["status"] == "True" else None

    wait_until(able_to_scale, timeout=60, message="the HPA reading the WebServer's scale subresource")
    # The HPA went through the WebServer: no Deployment exists without the operator, and none was touched.
    assert cluster.get_or_none("deployment", name, namespace=namespace) is None


@pytest.fixture
def baseline_namespace(cluster: Cluster, namespace: str) -> str:
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline",
        "pod-security.kubernetes.io/enforce-version=latest",
    )  # fmt: skip
    return namespace


@pytest.mark.usefixtures("operator")
def test_unprivileged_and_pinned_samples_become_ready(
    cluster: Cluster, baseline_namespace: str, tmp_path: Path
) -> None:
    pinned = _sample("web_v1_webserver_digest.yaml")
    for sample in (_sample("web_v1_webserver_unprivileged.yaml"), pinned):
        cluster.apply(sample, namespace=baseline_namespace)
    for sample_name in ("webserver-unprivileged", "webserver-pinned"):
        obj = wait_ready(cluster, baseline_namespace, sample_name, timeout=90)
        assert obj["status"]["readyReplicas"] == 2, sample_name
    deployment = cluster.get_json("deployment", "webserver-pinned", namespace=baseline_namespace)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == pinned["spec"]["image"]
    assert "@sha256:" in container["image"]
