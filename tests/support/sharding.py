"""Clusters with and without the ShardedListAndWatch gate, and namespace names that land in chosen shards.

Why here: the sharded-informer test and the sharded-replicas test both run once on a cluster whose kube-apiserver
filters by shard and once on one that ignores the selector (the client-side fallback). The session cluster serves
the path its gate gives (on by default, see hack/cluster.sh); ``sibling_cluster`` starts a second local control plane
next to it, ``<CLUSTER_NAME>-off`` (or ``-on``), for the other path. The ``gate_cluster`` fixture of
tests/integration/conftest.py chooses between them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.paths import HACK
from tests.support.cluster import Cluster
from webserver_operator.runtime.informers.informer import Informer
from webserver_operator.runtime.sharding.filter import ShardFilter
from webserver_operator.runtime.sharding.ranges import ShardUnion, shard_index, shard_ranges


def gate_on(cluster: Cluster) -> bool:
    """Whether the cluster's API server applies shard selectors (it echoes shardInfo on a sharded list)."""
    answer = raw_list(cluster, "/api/v1/namespaces", selector=shard_ranges(2)[0].selector, label_selector=None)
    return "shardInfo" in answer["metadata"]


def raw_list(cluster: Cluster, path: str, *, selector: str | None, label_selector: str | None) -> dict[str, Any]:
    """``kubectl get --raw`` of a list with the shard selector (and label selector) as given."""
    query = {"limit": "500"}
    if selector:
        query["shardSelector"] = selector
    if label_selector:
        query["labelSelector"] = label_selector
    out = cluster.kubectl("get", "--raw", f"{path}?{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}")
    data: dict[str, Any] = json.loads(out.stdout)
    return data


@contextlib.contextmanager
def sibling_cluster(gate: bool) -> Iterator[Cluster]:
    """A local control plane with the gate as asked, next to the session cluster; stopped if started here."""
    base = os.environ.get("CLUSTER_NAME") or "webserver-operator"
    env = dict(os.environ, CLUSTER_NAME=f"{base}-{'on' if gate else 'off'}", SHARDED_LIST_WATCH=str(int(gate)))
    script = str(HACK / "cluster.sh")
    running = subprocess.run([script, "status"], env=env, capture_output=True, timeout=60, check=False).returncode == 0
    if not running:
        up = subprocess.run([script, "up"], env=env, capture_output=True, text=True, timeout=900, check=False)
        assert up.returncode == 0, f"{env['CLUSTER_NAME']}: hack/cluster.sh up failed:\n{up.stderr[-3000:]}"
    try:
        kubeconfig = subprocess.run([script, "kubeconfig"], env=env, capture_output=True, text=True, check=True)
        yield Cluster(backend="local", kubeconfig=Path(kubeconfig.stdout.strip()), started_here=not running)
    finally:
        if not running and not os.environ.get("KEEP_CLUSTER"):
            subprocess.run([script, "down"], env=env, capture_output=True, text=True, timeout=300, check=False)


def namespaces_per_shard(run: str, *, shards: int, per_shard: int) -> dict[int, list[str]]:
    """``per_shard`` fresh namespace names in each of ``shards`` shards (by our hash; random: FNV-1a spreads those)."""
    chosen: dict[int, list[str]] = {i: [] for i in range(shards)}
    while any(len(names) < per_shard for names in chosen.values()):
        name = f"t-shard-{run}-{uuid.uuid4().hex[:6]}"
        names = chosen[shard_index(name, shards)]
        if len(names) < per_shard:
            names.append(name)
    return chosen


@contextlib.contextmanager
def fresh_namespaces(cluster: Cluster, *, shards: int, per_shard: int) -> Iterator[dict[int, list[str]]]:
    """``per_shard`` new namespaces in each of ``shards`` shards (shard -> names), created now, deleted afterwards."""
    by_shard = namespaces_per_shard(uuid.uuid4().hex[:6], shards=shards, per_shard=per_shard)
    namespaces = [ns for names in by_shard.values() for ns in names]
    items = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"webserver-operator.dev/test": "true"}},
        }
        for ns in namespaces
    ]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    try:
        yield by_shard
    finally:
        cluster.kubectl("delete", "namespace", *namespaces, "--wait=false", "--ignore-not-found", check=False)


def kept_shards(informer: Informer) -> ShardUnion | None:
    """The shards an informer keeps now (its scope is a shard filter), ``None`` when it keeps everything."""
    return informer.scope.scope if isinstance(informer.scope, ShardFilter) else None
