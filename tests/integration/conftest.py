"""Fixtures for the integration suites: the CRD on the real API server and the operator as a real process.

The operator fixture is module-scoped and watches all namespaces: tests in one module share it (each test works in
its own namespace); modules that need their own operator (restart, leader election) do not use it, and module
scoping guarantees two shared operators never run at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.operator import OperatorProcess
from harness.paths import CRD_FILE
from tests.support.cluster import Cluster
from tests.support.manifests import enforce_restricted
from tests.support.sharding import gate_on, sibling_cluster

CRD = "webservers.web.webserver-operator.dev"


def apply_crd(cluster: Cluster, path: Path = CRD_FILE) -> None:
    """Install or upgrade the CRD in ``path`` with server-side apply (as an upgrade does) and wait until Established."""
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=webserver-operator-tests", "-f", str(path)
    )
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s", timeout=90)


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> str:
    """Install (or upgrade) the generated CRD with server-side apply and wait until it is Established."""
    apply_crd(cluster)
    return CRD


@pytest.fixture(scope="module")
def operator(cluster: Cluster, crd: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log_path: Path = tmp_path_factory.mktemp("operator") / "operator.log"
    proc = OperatorProcess(kubeconfig=cluster.kubeconfig, log_path=log_path).wait_started()
    try:
        yield proc
    finally:
        code = proc.stop()
        assert code == 0, f"operator exited with {code} on SIGTERM:\n{proc.tail()}"


@pytest.fixture
def restricted_namespace(cluster: Cluster, namespace: str) -> str:
    """The test namespace, enforcing the `restricted` Pod Security Standard."""
    return enforce_restricted(cluster, namespace)


@pytest.fixture(scope="module", params=["server", "client"])
def gate_cluster(request: pytest.FixtureRequest, cluster: Cluster, crd: str) -> Iterator[tuple[str, Cluster]]:
    """``("server", a cluster with the gate on)`` and ``("client", one with it off)``."""
    path: str = request.param
    want_on = path == "server"
    if want_on and os.environ.get("KUBERNETES_LINE") == "oldest":
        pytest.skip(
            "server-side shard filtering needs the ShardedListAndWatch gate, new in Kubernetes 1.36: the oldest line "
            "tests the client-side path, and the same `make test` tests the server path on 1.36"
        )
    if gate_on(cluster) == want_on:
        yield path, cluster
        return
    with sibling_cluster(want_on) as sibling:
        assert gate_on(sibling) == want_on, (
            f"{sibling.kubeconfig}: the ShardedListAndWatch gate is {'off' if want_on else 'on'} on a cluster created "
            f"for it to be {'on' if want_on else 'off'}: it was created with an older hack/kwokctl.yaml; stop it "
            "with hack/cluster.sh down (same CLUSTER_NAME) and run again"
        )
        apply_crd(sibling)
        yield path, sibling
