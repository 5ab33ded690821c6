"""InformerGroup: one informer per namespace (or cluster-wide), merged read view, synced when all are synced."""

import asyncio
import contextlib
from typing import Any

import pytest

from tests.support.fake_api import FakeApi
from webserver_operator.core.resources import NAMESPACES, Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.runtime.informers.group import InformerGroup
from webserver_operator.runtime.sharding.filter import ShardFilter
from webserver_operator.runtime.sharding.ranges import shard_index, shard_ranges

pytestmark = pytest.mark.timeout(5)

WEBSERVERS = Resource("example.com", "v1", "webservers", "WebServer")


def obj(namespace: str, name: str, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "resourceVersion": "1"}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"metadata": meta}


def PerNamespaceKube(objects: list[dict[str, Any]], *, slow: str | None = None) -> FakeApi:  # noqa: N802
    """The shared fake holding ``objects`` per namespace; ``release`` opens the list of namespace ``slow``."""
    api = FakeApi([(WEBSERVERS.path(namespace=o["metadata"]["namespace"]), o) for o in objects])
    if slow is not None:
        api.gates[WEBSERVERS.path(namespace=slow)] = asyncio.Event()
    return api


def test_one_informer_per_namespace_or_one_cluster_wide() -> None:
    kube = PerNamespaceKube([])
    group = InformerGroup.for_namespaces(kube, WEBSERVERS, settings=WatchSettings(namespaces=["a", "b", "a", ""]))
    assert [i.namespace for i in group.informers] == ["a", "b"]
    assert [
        i.namespace
        for i in InformerGroup.for_namespaces(kube, WEBSERVERS, settings=WatchSettings(namespaces=[])).informers
    ] == [None]
    cluster_scoped = InformerGroup.for_namespaces(kube, NAMESPACES, settings=WatchSettings(namespaces=["a"]))
    assert [i.namespace for i in cluster_scoped.informers] == [None]


async def test_merged_view_and_synced_only_when_all_namespaces_listed() -> None:
    kube = PerNamespaceKube([obj("a", "x", owner="u"), obj("b", "y", owner="u"), obj("c", "z")], slow="b")
    group = InformerGroup.for_namespaces(
        kube, WEBSERVERS, settings=WatchSettings(namespaces=["a", "b"], watch_timeout=60)
    )
    task = asyncio.create_task(group.run())
    try:
        await asyncio.wait_for(group.informers[0].synced.wait(), 1)
        await asyncio.sleep(0.01)
        assert not group.synced.is_set()
        assert not group.has_synced
        kube.gates[WEBSERVERS.path(namespace="b")].set()
        await asyncio.wait_for(group.synced.wait(), 1)
        assert not group.died
        assert group.get(("a", "x")) is not None
        assert group.get(("b", "y")) is not None
        assert group.get(("c", "z")) is None, "namespaces outside the group are not watched"
        assert sorted(o["metadata"]["name"] for o in group.list()) == ["x", "y"]
        assert len(group) == 2
        assert [o["metadata"]["name"] for o in group.list("b")] == ["y"]
        assert group.list("c") == []
        assert sorted(call.path for call in kube.calls) == [
            "/apis/example.com/v1/namespaces/a/webservers",
            "/apis/example.com/v1/namespaces/b/webservers",
        ]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_watch_stopped_by_shutdown_has_not_died_but_one_that_crashed_has() -> None:
    """Liveness reads ``died``: a replica shutting down (informers cancelled) must keep answering /healthz 200."""
    kube = PerNamespaceKube([obj("a", "x")])
    group = InformerGroup.for_namespaces(kube, WEBSERVERS, settings=WatchSettings(namespaces=["a", "b"]))
    task = asyncio.create_task(group.run())
    await asyncio.wait_for(group.synced.wait(), 1)
    assert not group.died
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert not group.died, "cancelled by the shutdown: the process is stopping, not wedged"

    crashing = InformerGroup.for_namespaces(kube, WEBSERVERS, settings=WatchSettings(namespaces=["a", "b"]))

    async def bug() -> None:
        raise RuntimeError("a bug in the informer loop")

    crashing.informers[1].run = bug  # type: ignore[method-assign]
    with pytest.raises(ExceptionGroup):
        await crashing.run()
    assert crashing.died, "a watch task that ended on an exception has died: a restart would bring it back"


async def test_a_sharded_group_holds_only_its_shards_namespaces() -> None:
    """The fake API ignores shardSelector, as a server without the gate: the group's informers filter themselves."""
    namespaces = [f"team-{i}" for i in range(40)]
    shard = shard_ranges(4)[1]
    kube = PerNamespaceKube([obj(ns, "w") for ns in namespaces])
    group = InformerGroup.for_namespaces(
        kube, WEBSERVERS, settings=WatchSettings(namespaces=namespaces), scope=ShardFilter.factory(shard)
    )
    task = asyncio.create_task(group.run())
    try:
        await asyncio.wait_for(group.synced.wait(), 2)
        held = {o["metadata"]["namespace"] for o in group.list()}
        assert held == {ns for ns in namespaces if shard_index(ns, 4) == 1}
        assert 0 < len(held) < len(namespaces)
        # A custom resource without an echo: the informers that received another shard's objects know the server
        # ignored the selector; the others cannot tell (Kubernetes 1.36 does not echo it for custom resources).
        assert {i.namespace for i in group.informers if i.scope_filtering == "client"} == set(namespaces) - held
        assert {i.namespace for i in group.informers if i.scope_filtering == "unconfirmed"} == held
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
