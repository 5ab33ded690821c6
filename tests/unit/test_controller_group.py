"""InformerGroup: one informer per namespace (or cluster-wide), merged read view, synced when all are synced."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from webserver_operator.controller.group import InformerGroup
from webserver_operator.kube.resources import NAMESPACES, Resource

pytestmark = pytest.mark.timeout(5)

WEBSERVERS = Resource("example.com", "v1", "webservers", "WebServer")


def obj(namespace: str, name: str, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "resourceVersion": "1"}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"metadata": meta}


class PerNamespaceKube:
    """Lists ``objects`` of the namespace in the path; ``release`` gates the list of namespace ``slow``."""

    def __init__(self, objects: list[dict[str, Any]], *, slow: str | None = None) -> None:
        self.objects = objects
        self.slow = slow
        self.release = asyncio.Event()
        self.paths: list[str] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        self.paths.append(path)
        namespace = path.split("/namespaces/")[1].split("/", maxsplit=1)[0] if "/namespaces/" in path else None
        if namespace is not None and namespace == self.slow:
            await self.release.wait()
        items = [o for o in self.objects if namespace is None or o["metadata"]["namespace"] == namespace]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    @contextlib.asynccontextmanager
    async def watch(self, path: str, *, query: Mapping[str, str]) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        await asyncio.Event().wait()
        yield self._never()

    async def _never(self) -> AsyncIterator[dict[str, Any]]:
        await asyncio.Event().wait()
        yield {}


def test_one_informer_per_namespace_or_one_cluster_wide() -> None:
    kube = PerNamespaceKube([])
    group = InformerGroup.for_namespaces(kube, WEBSERVERS, namespaces=["a", "b", "a", ""])
    assert [i.namespace for i in group.informers] == ["a", "b"]
    assert [i.namespace for i in InformerGroup.for_namespaces(kube, WEBSERVERS, namespaces=[]).informers] == [None]
    cluster_scoped = InformerGroup.for_namespaces(kube, NAMESPACES, namespaces=["a"])
    assert [i.namespace for i in cluster_scoped.informers] == [None]


async def test_merged_view_and_synced_only_when_all_namespaces_listed() -> None:
    kube = PerNamespaceKube([obj("a", "x", owner="u"), obj("b", "y", owner="u"), obj("c", "z")], slow="b")
    group = InformerGroup.for_namespaces(kube, WEBSERVERS, namespaces=["a", "b"], watch_timeout_seconds=60)
    task = asyncio.create_task(group.run())
    try:
        await asyncio.wait_for(group.informers[0].synced.wait(), 1)
        await asyncio.sleep(0.01)
        assert not group.synced.is_set()
        assert not group.has_synced
        kube.release.set()
        await asyncio.wait_for(group.synced.wait(), 1)
        assert group.alive
        assert group.get(("a", "x")) is not None
        assert group.get(("b", "y")) is not None
        assert group.get(("c", "z")) is None, "namespaces outside the group are not watched"
        assert sorted(o["metadata"]["name"] for o in group.list()) == ["x", "y"]
        assert len(group) == 2
        assert [o["metadata"]["name"] for o in group.list("b")] == ["y"]
        assert group.list("c") == []
        assert sorted(o["metadata"]["name"] for o in group.by_owner("u")) == ["x", "y"]
        assert sorted(kube.paths) == [
            "/apis/example.com/v1/namespaces/a/webservers",
            "/apis/example.com/v1/namespaces/b/webservers",
        ]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
