"""The chart with 2 replicas and 4 shards on kind: both pods Ready, two shards each, and a deleted pod's shards move.

Real containers (``CLUSTER=kind``, `make e2e-kind`): the image built from the Dockerfile runs as the chart's two pods,
with the chart's RBAC for the member and shard Leases. kind's API server has no ``ShardedListAndWatch`` gate, so the
replicas filter on the client side (the local control plane's suites test the server side). What is asserted is what
``kubectl get`` shows: the pods, the shard Leases and who holds them (a Lease identity starts with its pod's name),
and the WebServers in namespaces spread over the shards becoming Ready, before and after a pod is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.paths import ROOT
from tests.e2e.conftest import helm, own_release_namespace, split_image
from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.sharding import fresh_namespaces
from tests.support.webservers import wait_ready

pytestmark = pytest.mark.kind

RELEASE = "wos"
FULLNAME = "webserver-operator-sharded"
SHARDS = 4
LEASE_GROUP = f"{FULLNAME}-leader"
SHARD_OF = "webserver-operator.dev/shard-of"


@pytest.fixture(scope="module")
def operator_namespace(cluster: Cluster) -> Iterator[str]:
    with own_release_namespace(cluster, "wo-sharded", RELEASE) as name:
        yield name


@pytest.fixture(scope="module")
def spread(cluster: Cluster) -> Iterator[dict[int, list[str]]]:
    """Eight fresh namespaces, two per shard."""
    with fresh_namespaces(cluster, shards=SHARDS, per_shard=2) as per_shard:
        yield per_shard


def pods(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component!=test"
    return [
        pod
        for pod in cluster.get_json("pods", "-l", selector, namespace=namespace)["items"]
        if not pod["metadata"].get("deletionTimestamp")
    ]


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def holders(cluster: Cluster, namespace: str) -> dict[int, str]:
    """Shard -> the pod holding its Lease ("" when none), from ``kubectl get leases``."""
    leases = cluster.get_json("leases", "-l", f"{SHARD_OF}={LEASE_GROUP}", namespace=namespace)["items"]
    return {
        int(lease["metadata"]["name"].rsplit("-", 1)[1]): str(lease["spec"].get("holderIdentity") or "").rsplit("_", 1)[
            0
        ]
        for lease in leases
    }


def split_between(cluster: Cluster, namespace: str, names: set[str]) -> bool:
    """Every shard held, two by each of the pods ``names``."""
    table = holders(cluster, namespace)
    shares = sorted(list(table.values()).count(name) for name in names)
    return len(table) == SHARDS and set(table.values()) == names and shares == [2] * len(names)


def create_and_wait(cluster: Cluster, spread: dict[int, list[str]], name: str) -> None:
    for names in spread.values():
        for namespace in names:
            web = webserver(name, image=cluster.web_images[0], replicas=1)
            cluster.apply(web, namespace=namespace)
    for names in spread.values():
        for namespace in names:
            wait_ready(cluster, namespace, name, timeout=180)


def two_pods_splitting_the_shards(cluster: Cluster, namespace: str) -> set[str]:
    """Wait until two operator pods are Ready and hold two shards each; their names."""
    wait_until(
        lambda: len(pods(cluster, namespace)) == 2 and all(map(ready, pods(cluster, namespace))),
        timeout=120,
        message="two operator pods Ready",
    )
    names = {pod["metadata"]["name"] for pod in pods(cluster, namespace)}
    wait_until(
        lambda: split_between(cluster, namespace, names),
        timeout=90,
        message=lambda: f"the pods {sorted(names)} never split the shards two and two: {holders(cluster, namespace)}",
    )
    return names


def test_two_sharded_replicas_split_the_shards_and_a_deleted_pods_shards_move(
    cluster: Cluster, operator_namespace: str, spread: dict[int, list[str]]
) -> None:
    repository, tag = split_image(cluster.operator_image)
    helm(
        cluster,
        "install",
        RELEASE,
        str(ROOT / "charts" / "webserver-operator"),
        "-n",
        operator_namespace,
        "--take-ownership",
        "--set",
        f"fullnameOverride={FULLNAME}",
        "--set",
        f"image.repository={repository}",
        "--set",
        f"image.tag={tag}",
        "--set",
        "image.pullPolicy=IfNotPresent",
        "--set",
        "replicaCount=2",
        "--set",
        f"sharding.shards={SHARDS}",
    )
    cluster.kubectl(
        "rollout", "status", f"deployment/{FULLNAME}", "-n", operator_namespace, "--timeout=180s", timeout=200
    )
    first = two_pods_splitting_the_shards(cluster, operator_namespace)
    create_and_wait(cluster, spread, "web")

    deleted = sorted(first)[0]
    moved = {shard for shard, holder in holders(cluster, operator_namespace).items() if holder == deleted}
    cluster.kubectl("delete", "pod", deleted, "-n", operator_namespace, "--wait=true", timeout=90)
    wait_until(
        lambda: all(holders(cluster, operator_namespace)[shard] not in {"", deleted} for shard in moved),
        timeout=60,
        message=lambda: (
            f"shards {sorted(moved)} of the deleted pod {deleted} did not move: {holders(cluster, operator_namespace)}"
        ),
    )
    two_pods_splitting_the_shards(cluster, operator_namespace)  # the Deployment's replacement pod among them
    create_and_wait(cluster, spread, "after-move")
