"""The sharded cache: each held shard's objects, and only those, behind one view per resource; eviction on hand-over.

The API is the in-process fake with one informer per namespace (it ignores the shard selector, as an API server
without the ``ShardedListAndWatch`` gate does, so the client-side filter is what keeps other shards out). What is
asserted is what the replica's cache holds, what its handlers were told, and what the probes read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.fake_api import FakeApi
from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.core.vocabulary import EventType, KubeObject, object_key
from webserver_operator.runtime.informers.informer import CacheShape
from webserver_operator.runtime.sharding.cache import ShardedInformerCache
from webserver_operator.runtime.sharding.ranges import shard_index

pytestmark = pytest.mark.timeout(5)

WEBSERVERS = Resource("example.com", "v1", "webservers", "WebServer")
SHARDS = 2


def namespaces_of(shard: int, count: int = 3) -> list[str]:
    return [ns for ns in (f"ns-{i}" for i in range(200)) if shard_index(ns, SHARDS) == shard][:count]


NAMESPACES = {shard: namespaces_of(shard) for shard in range(SHARDS)}


def obj(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": "1"}}


def keys_of(objects: list[KubeObject]) -> set[tuple[str, str]]:
    return {object_key(o) for o in objects}


@pytest.fixture
def api() -> FakeApi:
    every = [obj(ns, f"web-{ns}") for nss in NAMESPACES.values() for ns in nss]
    return FakeApi([(WEBSERVERS.path(namespace=o["metadata"]["namespace"]), o) for o in every])


async def test_a_view_holds_the_started_shards_and_evicts_a_stopped_one(api: FakeApi) -> None:
    cache = ShardedInformerCache(
        api, WatchSettings(namespaces=[ns for nss in NAMESPACES.values() for ns in nss]), shards=SHARDS
    )
    view = cache.group(WEBSERVERS)
    seen: list[tuple[EventType, tuple[str, str]]] = []
    evicted: list[tuple[str, str]] = []
    view.add_handler(lambda event, o, _old: seen.append((event, object_key(o))))
    view.add_eviction_handler(lambda o: evicted.append(object_key(o)))
    shard0 = {(ns, f"web-{ns}") for ns in NAMESPACES[0]}
    shard1 = {(ns, f"web-{ns}") for ns in NAMESPACES[1]}
    assert view.has_synced and len(view) == 0, "no shard held: nothing to wait for, nothing cached"
    try:
        cache.start(0)
        await asyncio.wait_for(cache.synced(0), 2)
        assert keys_of(view.list()) == shard0
        assert {key for _, key in seen} == shard0 and {event for event, _ in seen} == {"ADDED"}
        other = next(iter(shard1))
        assert view.get(other) is None and view.list(other[0]) == [], "another shard's objects never reach the cache"
        assert view.get(next(iter(shard0))) is not None
        assert view.cached_per_shard() == {0: 3}
        assert view.has_synced and not view.died

        cache.start(1)
        await asyncio.wait_for(cache.synced(1), 2)
        assert keys_of(view.list()) == shard0 | shard1
        assert cache.started == {0, 1}

        await cache.stop(0)
        assert keys_of(view.list()) == shard1
        assert set(evicted) == shard0, "the eviction handlers hear of every object the view let go"
        assert view.get(next(iter(shard0))) is None
        assert not cache.is_synced(0) and cache.is_synced(1)
    finally:
        await cache.close()
    assert len(view) == 0 and set(evicted) == shard0 | shard1


def test_views_are_declared_before_the_first_shard_starts(api: FakeApi) -> None:
    cache = ShardedInformerCache(api, WatchSettings(namespaces=["a"]), shards=SHARDS)
    assert cache.group(WEBSERVERS) is cache.group(WEBSERVERS)
    assert list(cache.groups) == ["webservers"]


async def test_a_views_transform_and_page_size_reach_the_informers_of_the_held_shards(api: FakeApi) -> None:
    namespaces = [ns for nss in NAMESPACES.values() for ns in nss]
    cache = ShardedInformerCache(api, WatchSettings(namespaces=namespaces), shards=SHARDS)

    def marked(o: dict[str, Any]) -> dict[str, Any]:
        return {**o, "metadata": {**o["metadata"], "transformed": True}}

    view = cache.group(WEBSERVERS, shape=CacheShape(transform=marked, page_size=7))
    try:
        cache.start(0)
        await asyncio.wait_for(cache.synced(0), 2)
        assert view.list() and all(o["metadata"]["transformed"] for o in view.list())
        assert {informer.page_size for informer in view.informers} == {7}
        with pytest.raises(RuntimeError, match="declare every view first"):
            cache.group(Resource("", "v1", "services", "Service"), shape=CacheShape(transform=marked))
    finally:
        await cache.close()
