"""Chart defaults that install everywhere, and the knobs added for clusters that need other ones.

- No fixed runAsUser/runAsGroup (the image's user applies; OpenShift's restricted-v2 rejects fixed UIDs), while
  runAsNonRoot stays on.
- The pods only land on Linux nodes.
- Probe timings and the Deployment strategy are values; the probe endpoints are not.
- extraObjects adds the user's own objects to the release.
- No public image is implied: the default image is a local name, and the notes say so.

Rendered by the project's helm (marker ``tools``); the API server's verdict on the same renders is in
tests/integration/test_manifests.py.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from harness.paths import CHART
from tests.support.chart import (
    FULLNAME,
    NAMESPACE,
    RELEASE,
    deployment_of,
    helm_binary,
    helm_template,
    manager_of,
    one,
    render,
)
from webserver_operator import __version__

pytestmark = pytest.mark.tools


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod spec the chart renders: the operator's template and the `helm test` Pod."""
    test_pod = one(docs, "Pod", f"{FULLNAME}-healthz-test")
    return {"operator": deployment_of(docs)["spec"]["template"]["spec"], "helm-test": test_pod["spec"]}


def test_no_pod_pins_a_user_or_group_but_all_refuse_root() -> None:
    for which, spec in _pods(render()).items():
        contexts = [spec["securityContext"], *(c["securityContext"] for c in spec["containers"])]
        for context in contexts:
            assert not {"runAsUser", "runAsGroup"} & set(context), which
        assert spec["securityContext"]["runAsNonRoot"] is True, which


def test_pods_land_on_linux_nodes_only() -> None:
    for which, spec in _pods(render()).items():
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}, which
    # Helm merges maps with the defaults: a value adds to the selector, a null removes the default.
    added = render(values={"nodeSelector": {"pool": "ops"}})
    assert deployment_of(added)["spec"]["template"]["spec"]["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "pool": "ops",
    }
    dropped = render(values={"nodeSelector": {"kubernetes.io/os": None}})
    assert "nodeSelector" not in deployment_of(dropped)["spec"]["template"]["spec"]


def test_default_probe_timings() -> None:
    manager = manager_of(render())
    timings = {
        probe: {k: v for k, v in manager[probe].items() if k != "httpGet"}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert timings == {
        "startupProbe": {"periodSeconds": 2, "timeoutSeconds": 1, "failureThreshold": 30},
        "livenessProbe": {"periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 3},
        "readinessProbe": {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
    }


def test_probe_timings_are_settable_and_endpoints_are_not() -> None:
    values = {
        "startupProbe": {"periodSeconds": 5, "failureThreshold": 60},
        "livenessProbe": {"periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 5},
        "readinessProbe": {"periodSeconds": 3},
    }
    manager = manager_of(render(values=values))
    assert manager["startupProbe"]["periodSeconds"] == 5
    assert manager["startupProbe"]["failureThreshold"] == 60
    assert manager["startupProbe"]["timeoutSeconds"] == 1  # untouched values keep their defaults
    assert manager["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "periodSeconds": 30,
        "timeoutSeconds": 10,
        "failureThreshold": 5,
    }
    assert manager["readinessProbe"]["periodSeconds"] == 3
    assert manager["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


@pytest.mark.parametrize(
    "setting",
    [
        "livenessProbe.periodSeconds=0",
        "readinessProbe.timeoutSeconds=0",
        "startupProbe.httpGet.path=/",
        "livenessProbe.successThreshold=2",
        "strategy.typo=Recreate",
    ],
)
def test_schema_rejects_bad_probe_and_strategy_values(setting: str) -> None:
    result = helm_template("--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr


def test_strategy_defaults_to_kubernetes_and_is_settable() -> None:
    assert "strategy" not in deployment_of(render())["spec"]
    recreate = deployment_of(render("--set", "strategy.type=Recreate"))
    assert recreate["spec"]["strategy"] == {"type": "Recreate"}
    rolling = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert deployment_of(render(values={"strategy": rolling}))["spec"]["strategy"] == rolling


def test_extra_objects_are_rendered_through_tpl() -> None:
    values = {
        "extraObjects": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "{{ .Release.Name }}-extra", "namespace": "{{ .Release.Namespace }}"},
                "data": {"chart": "{{ .Chart.Name }}"},
            },
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: as-string\n  namespace: {{ .Release.Namespace }}\n"
            "stringData:\n  token: x\n",
        ]
    }
    docs = render(values=values)
    config_map = one(docs, "ConfigMap", f"{RELEASE}-extra")
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert config_map["data"] == {"chart": "webserver-operator"}
    secret = one(docs, "Secret", "as-string")
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert len(docs) == len(render()) + 2


def test_default_image_is_a_local_name_and_the_notes_say_so() -> None:
    manager = manager_of(render())
    assert manager["image"] == f"localhost/webserver-operator:{__version__}"
    cmd = [str(helm_binary()), "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    notes = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout.split("NOTES:", 1)[1]
    assert "This is a local image name" in notes
    assert "kubectl -n default port-forward service/web 8080:8080" in notes
    assert "jsonpath='{.status.nodePort}'" in notes
    own = subprocess.run(
        [*cmd, "--set", "image.registry=registry.example/team,image.tag=1.2.3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("NOTES:", 1)[1]
    assert "registry.example/team/webserver-operator:1.2.3" in own
    assert "local image name" not in own
