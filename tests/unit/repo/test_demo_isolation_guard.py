"""The test fixture refuses the demo's cluster: `make demo` then `make test` must never share a cluster.

hack/demo.sh runs its own cluster; a CLUSTER_NAME pointing the tests at it (by accident, e.g. copied from the demo's
output) is an error with the way out in the message, never a silent reuse.
"""

from __future__ import annotations

import subprocess

import pytest

from harness.paths import HACK
from tests.support.cluster import ClusterUnavailableError, demo_kubeconfig, local_kubeconfig, provide_cluster


def _demo_cluster_name() -> str:
    return subprocess.run(
        [str(HACK / "demo.sh"), "cluster-name"], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_demo_and_the_tests_use_different_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    monkeypatch.delenv("DEMO_CLUSTER_NAME", raising=False)
    assert _demo_cluster_name() == "webserver-operator-demo"
    assert local_kubeconfig() != demo_kubeconfig()
    assert demo_kubeconfig().parent.name == "webserver-operator-demo"


def test_the_fixture_refuses_the_demo_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEMO_CLUSTER_NAME", raising=False)
    monkeypatch.setenv("CLUSTER_NAME", _demo_cluster_name())
    with pytest.raises(ClusterUnavailableError, match=r"names the cluster of `make demo`.*Unset CLUSTER_NAME"):
        provide_cluster("local")
