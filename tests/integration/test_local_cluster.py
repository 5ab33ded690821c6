"""`NODES=N make cluster-up` and the local cluster's Service range, on a throw-away cluster of its own.

Why its own cluster: what is tested is hack/cluster.sh creating a cluster, as a person runs it; the session cluster
may be reused from an earlier run, or be another backend. The cluster here has 20 kwok nodes (where a wait whose
timeout was shared by all nodes used to fail although every node was Ready) and is deleted at the end. It runs with
every backend: it needs only the tools that `make test-integration` builds.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.paths import HACK, tools_bin
from tests.support.cluster import Cluster

NODES = 20


@pytest.fixture(scope="module")
def scaled_cluster() -> Iterator[tuple[Cluster, subprocess.CompletedProcess[str]]]:
    env = dict(os.environ)
    env.update(CLUSTER_NAME=f"wso-nodes-{uuid.uuid4().hex[:6]}", NODES=str(NODES))
    script = str(HACK / "cluster.sh")
    try:
        up = subprocess.run([script, "up"], env=env, capture_output=True, text=True, timeout=600, check=False)
        kubeconfig = subprocess.run(
            [script, "kubeconfig"], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        yield Cluster(backend="local", kubeconfig=Path(kubeconfig), bin_dir=tools_bin()), up
    finally:
        subprocess.run([script, "down"], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_cluster_up_waits_for_every_node_whatever_their_number(
    scaled_cluster: tuple[Cluster, subprocess.CompletedProcess[str]],
) -> None:
    cluster, up = scaled_cluster
    assert up.returncode == 0, f"NODES={NODES} hack/cluster.sh up failed:\n{up.stderr[-3000:]}"
    nodes = cluster.get_json("nodes")["items"]
    ready = [
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    ]
    assert len(ready) == NODES, f"{len(ready)} of {len(nodes)} nodes Ready: {ready}"


def test_service_range_holds_ten_thousand_services(
    scaled_cluster: tuple[Cluster, subprocess.CompletedProcess[str]],
) -> None:
    cluster, _ = scaled_cluster
    cidrs = cluster.get_json("servicecidr", "kubernetes")["spec"]["cidrs"]
    sizes = [ipaddress.ip_network(c).num_addresses for c in cidrs]
    assert max(sizes) - 2 >= 10_000, f"Service range {cidrs} holds fewer than 10 000 Services"

    # 10.96.200.10 lies outside any /24 a Service range used to default to: the API server must accept it.
    name = "outside-old-range"
    cluster.kubectl("create", "namespace", "range-test")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "range-test"},
        "spec": {"clusterIP": "10.96.200.10", "ports": [{"port": 80}]},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(service))
    assert cluster.get_json("service", name, namespace="range-test")["spec"]["clusterIP"] == "10.96.200.10"
