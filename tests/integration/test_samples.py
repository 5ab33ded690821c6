"""The samples in config/samples do what their comments say, on a real API server.

- The HorizontalPodAutoscaler scales its WebServer through the scale subresource: the controller-manager's HPA
  controller raises a WebServer below minReplicas to minReplicas (no metrics server needed for that), so the
  WebServer's own spec.replicas changes, never the Deployment's behind the operator's back.
- The unprivileged WebServer becomes Ready under the operator in a namespace that enforces the `restricted` Pod
  Security level; the digest-pinned one in a `baseline` namespace, running exactly the pinned reference.

(Every sample is also accepted by a server-side dry run: tests/integration/test_manifests.py.)
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from harness.paths import ROOT
from tests.support.cluster import Cluster, wait_until
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


def _enforce(cluster: Cluster, namespace: str, level: str) -> str:
    cluster.kubectl(
        "label", "namespace", namespace, f"pod-security.kubernetes.io/enforce={level}",
        "pod-security.kubernetes.io/enforce-version=latest",
    )  # fmt: skip
    return namespace


@pytest.fixture
def baseline_namespace(cluster: Cluster, namespace: str) -> str:
    return _enforce(cluster, namespace, "baseline")


@pytest.mark.usefixtures("operator")
def test_unprivileged_sample_runs_under_the_restricted_level(cluster: Cluster, namespace: str) -> None:
    restricted = _enforce(cluster, namespace, "restricted")
    cluster.apply(_sample("web_v1_webserver_unprivileged.yaml"), namespace=restricted)
    obj = wait_ready(cluster, restricted, "webserver-unprivileged", timeout=90)
    assert obj["status"]["readyReplicas"] == 2
    deployment = cluster.get_json("deployment", "webserver-unprivileged", namespace=restricted)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.usefixtures("operator")
def test_pinned_sample_runs_exactly_the_pinned_reference(cluster: Cluster, baseline_namespace: str) -> None:
    pinned = _sample("web_v1_webserver_digest.yaml")
    cluster.apply(pinned, namespace=baseline_namespace)
    obj = wait_ready(cluster, baseline_namespace, "webserver-pinned", timeout=90)
    assert obj["status"]["readyReplicas"] == 2
    deployment = cluster.get_json("deployment", "webserver-pinned", namespace=baseline_namespace)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == pinned["spec"]["image"]
    assert "@sha256:" in container["image"]
