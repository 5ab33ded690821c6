"""Sharded informers against real kube-apiservers: one with the ShardedListAndWatch gate, one without it.

What only a real server proves: the selector syntax our ``runtime.sharding.ranges`` writes is the one the server parses
and echoes in ``metadata.shardInfo``; the server puts every namespace in the shard our FNV-1a says; it filters lists
(page by page) and watches, for a custom resource (WebServers) and a built-in one (ConfigMaps); and a server without
the gate ignores the parameter, so the informers' client-side fallback is what keeps each cache to its shard.

Both paths run in every `make test` (the ``gate_cluster`` fixture, tests/integration/conftest.py: the session
cluster serves the path its gate gives, a second local control plane the other, about 20 s to start). Each path: 12
namespaces, three in each of 4 shards, one informer per shard and resource, plus objects created and deleted after
the informers synced (the watch path).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.support.cluster import Cluster, wait_until
from tests.support.factories import webserver
from tests.support.sharding import kept_shards, namespaces_per_shard, raw_list
from webserver_operator import metrics
from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import ClientSettings
from webserver_operator.core.vocabulary import KubeObject
from webserver_operator.kube.client import KubeClient
from webserver_operator.kube.config import load_configuration
from webserver_operator.runtime.informers.informer import CacheShape, Informer
from webserver_operator.runtime.sharding.filter import FallbackNotice, ShardFilter
from webserver_operator.runtime.sharding.ranges import shard_index, shard_ranges

SHARDS = 4
PER_SHARD = 3
WEBSERVERS = Resource("web.webserver-operator.dev", "v1", "webservers", "WebServer")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
RESOURCES = (WEBSERVERS, CONFIGMAPS)


@pytest.fixture
def spread(gate_cluster: tuple[str, Cluster]) -> Iterator[tuple[str, dict[int, list[str]]]]:
    """12 labelled namespaces (3 per shard), each with a WebServer and a ConfigMap carrying the run's label."""
    _, cluster = gate_cluster
    run = uuid.uuid4().hex[:6]
    per_shard = namespaces_per_shard(run, shards=SHARDS, per_shard=PER_SHARD)
    namespaces = [ns for names in per_shard.values() for ns in names]
    items: list[dict[str, Any]] = []
    for ns in namespaces:
        labels = {"webserver-operator.dev/test": "true", "shard-run": run}
        items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        objects: list[dict[str, Any]] = []
        for ns in namespaces:
            web = webserver("web", replicas=0)
            web["metadata"].update(namespace=ns, labels={"shard-run": run})
            objects.append(web)
            objects.append(_configmap("listed", ns, run))
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        yield run, per_shard
    finally:
        cluster.kubectl("delete", "namespace", *namespaces, "--wait=false", "--ignore-not-found", check=False)


def _configmap(name: str, namespace: str, run: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"shard-run": run}},
        "data": {"k": "v"},
    }


def test_the_server_puts_every_namespace_in_the_shard_our_hash_says(
    gate_cluster: tuple[str, Cluster], spread: tuple[str, dict[int, list[str]]]
) -> None:
    path, cluster = gate_cluster
    run, per_shard = spread
    everything = {ns for names in per_shard.values() for ns in names}
    for resource in RESOURCES:
        for shard in shard_ranges(SHARDS):
            answer = raw_list(cluster, resource.path(), selector=shard.selector, label_selector=f"shard-run={run}")
            got = {item["metadata"]["namespace"] for item in answer["items"]}
            if path == "server":
                # Kubernetes 1.36 echoes the selector on built-in lists only: a custom resource's list is an
                # UnstructuredList, which has no SetShardInfo, so the server filters it without saying so.
                echo = {"selector": shard.selector} if resource is CONFIGMAPS else None
                assert answer["metadata"].get("shardInfo") == echo, resource.plural
                assert got == set(per_shard[shard.index]), f"{resource.plural}, {shard}"
            else:
                assert "shardInfo" not in answer["metadata"], "a server without the gate ignores shardSelector"
                assert got == everything
    if path == "server":
        # Every namespace the cluster has (kube-root-ca.crt is in each), whatever its name: the same shard both ways.
        placed: dict[str, int] = {}
        for shard in shard_ranges(SHARDS):
            answer = raw_list(cluster, CONFIGMAPS.path(), selector=shard.selector, label_selector=None)
            for item in answer["items"]:
                placed[item["metadata"]["namespace"]] = shard.index
        assert everything <= placed.keys()
        assert {"default", "kube-system", "kube-public"} <= placed.keys()
        assert {ns: shard_index(ns, SHARDS) for ns in placed} == placed


@pytest.fixture
async def kube(gate_cluster: tuple[str, Cluster]) -> AsyncIterator[KubeClient]:
    _, cluster = gate_cluster
    configuration = await load_configuration(kubeconfig=str(cluster.kubeconfig), context=cluster.context)
    client = await KubeClient.create(configuration, settings=ClientSettings(connect_timeout=5, read_timeout=10))
    async with client:
        yield client


def _keys(objects: list[KubeObject]) -> set[tuple[str, str]]:
    return {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}


def _index(informer: Informer) -> int:
    """The one shard ``informer`` keeps."""
    kept = kept_shards(informer)
    assert kept is not None
    (index,) = kept.indexes
    return index


def _sample(name: str, labels: dict[str, str]) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels)


async def test_an_informer_per_shard_holds_exactly_its_shards_objects(
    gate_cluster: tuple[str, Cluster], spread: tuple[str, dict[int, list[str]]], kube: KubeClient
) -> None:
    path, cluster = gate_cluster
    run, per_shard = spread
    everything = [ns for names in per_shard.values() for ns in names]
    seen: dict[str, set[str]] = {}
    informers: list[Informer] = []
    for resource in RESOURCES:
        for shard in shard_ranges(SHARDS):
            name = f"{resource.plural}-{path}-{run}-{shard.index}"
            seen[name] = set()

            def record(_type: str, obj: KubeObject, _old: KubeObject | None, into: set[str] = seen[name]) -> None:
                into.add(obj["metadata"]["namespace"])

            informers.append(
                Informer(
                    kube,
                    resource,
                    label_selector=f"shard-run={run}",
                    scope=ShardFilter.factory(shard, notice=FallbackNotice()),
                    name=name,
                    on_event=record,
                    shape=CacheShape(page_size=2),  # several pages per list: each must carry the selector
                )
            )
    tasks = [asyncio.create_task(informer.run()) for informer in informers]
    try:
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), 30)
        for informer in informers:
            assert kept_shards(informer) is not None
            # Without an echo and with nothing from another shard, an informer of a custom resource cannot tell.
            unconfirmed = path == "server" and informer.resource is WEBSERVERS
            assert informer.scope_filtering == ("unconfirmed" if unconfirmed else path), informer.name
            expected = {
                (ns, "web" if informer.resource is WEBSERVERS else "listed") for ns in per_shard[_index(informer)]
            }
            assert _keys(informer.store.list()) == expected, informer.name

        # The watch path: a ConfigMap created in every namespace, one WebServer deleted per shard.
        late = [_configmap("late", ns, run) for ns in everything]
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": late}))
        for names in per_shard.values():
            cluster.kubectl("delete", "webserver", "web", "-n", names[0], "--wait=false")

        def expected_now(informer: Informer) -> set[tuple[str, str]]:
            assert kept_shards(informer) is not None
            mine = per_shard[_index(informer)]
            if informer.resource is WEBSERVERS:
                return {(ns, "web") for ns in mine[1:]}
            return {(ns, name) for ns in mine for name in ("listed", "late")}

        def all_caught_up() -> bool:
            return all(_keys(i.store.list()) == expected_now(i) for i in informers)

        await asyncio.to_thread(
            wait_until,
            all_caught_up,
            timeout=30,
            message=lambda: str({i.name: sorted(_keys(i.store.list()) ^ expected_now(i)) for i in informers}),
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    for informer in informers:
        assert kept_shards(informer) is not None
        assert seen[informer.name] == set(per_shard[_index(informer)]), "handlers saw only the shard's objects"
        dropped = _sample("webserver_operator_shard_filter_dropped_total", {"resource": informer.name})
        client_side = _sample("webserver_operator_shard_filter_client_side", {"resource": informer.name})
        watched = _sample("webserver_operator_watch_events_total", {"resource": informer.name, "type": "ADDED"})
        others = len(everything) - PER_SHARD
        deletes = _sample("webserver_operator_watch_events_total", {"resource": informer.name, "type": "DELETED"})
        if path == "server":
            assert dropped == 0, informer.name
            assert client_side == (0 if informer.resource is CONFIGMAPS else None), informer.name
            if informer.resource is CONFIGMAPS:
                assert watched == PER_SHARD, "the server sent this shard's watch events only"
            else:
                assert deletes == 1, "the server sent this shard's watch events only (custom resources too)"
        else:
            assert client_side == 1
            # Every other shard's object was received and dropped: the list, then (ConfigMaps) the new ones.
            assert dropped == (2 * others if informer.resource is CONFIGMAPS else others + SHARDS - 1), informer.name
            if informer.resource is CONFIGMAPS:
                assert watched == len(everything), "without the gate every watch event reaches every shard"
            else:
                assert deletes == SHARDS, "without the gate every watch event reaches every shard"
