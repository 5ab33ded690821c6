"""One list+watch per view for all the shards a replica holds, against a server whose every watch hears every change.

Why: with one informer per held shard, a replica holding k shards of an API server without the ShardedListAndWatch
gate received every watch event k times (each per-shard watch is unfiltered) and dropped k-1 of them. What is
asserted is what a replica sees: how many lists and watches it opens, how many events it receives (the
``webserver_operator_watch_events_total`` series), what its handlers and eviction handlers are told when a shard
comes and goes, what its views read, and who it finds filtering.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.support.shard_server import ShardServer
from tests.unit.runtime.informers.test_informer import FakeKube, page
from webserver_operator import metrics
from webserver_operator.core.backoff import Backoff, BackoffPolicy
from webserver_operator.core.resources import Resource
from webserver_operator.core.settings import WatchSettings
from webserver_operator.core.vocabulary import EventType, KubeObject, KubeObjects, ObjectKey, object_key
from webserver_operator.kube.errors import TransportError
from webserver_operator.runtime.informers.informer import Informer
from webserver_operator.runtime.sharding.cache import ShardedInformerCache
from webserver_operator.runtime.sharding.filter import FallbackNotice, ShardFilter
from webserver_operator.runtime.sharding.ranges import ShardUnion, shard_index, shard_ranges

pytestmark = pytest.mark.timeout(10)

SHARDS = 4
WEBSERVERS = Resource("example.com", "v1", "webservers", "WebServer")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
NAMESPACES = {
    shard: [ns for ns in (f"web-{i}-ns" for i in range(400)) if shard_index(ns, SHARDS) == shard][:2]
    for shard in range(SHARDS)
}


def keys(*shards: int) -> set[ObjectKey]:
    return {(ns, "web") for shard in shards for ns in NAMESPACES[shard]}


def keys_of(objects: KubeObjects) -> set[ObjectKey]:
    return {object_key(obj) for obj in objects}


def selector(shard: int) -> str:
    text = shard_ranges(SHARDS)[shard].selector
    assert text is not None
    return text


def item(namespace: str) -> KubeObject:
    return {"metadata": {"namespace": namespace, "name": "web", "resourceVersion": "1"}, "spec": {}}


def populated(resource: Resource, *, gate: bool) -> ShardServer:
    server = ShardServer(resource, gate=gate)
    for names in NAMESPACES.values():
        for ns in names:
            server.put(ns, "web")
    return server


def received(name: str) -> float:
    """Watch events received by the informers called ``name`` (before any shard filter)."""
    return sum(
        metrics.REGISTRY.get_sample_value("webserver_operator_watch_events_total", {"resource": name, "type": t}) or 0.0
        for t in ("ADDED", "MODIFIED", "DELETED")
    )


class Seen:
    """An event handler that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, ObjectKey]] = []

    def __call__(self, event_type: EventType, obj: KubeObject, _old: KubeObject | None) -> None:
        self.events.append((event_type, object_key(obj)))


async def synced(cache: ShardedInformerCache, *shards: int) -> None:
    await asyncio.wait_for(asyncio.gather(*(cache.synced(shard) for shard in shards)), 5)


async def test_a_replica_holding_two_shards_receives_each_event_once_from_a_server_without_the_gate() -> None:
    server = populated(WEBSERVERS, gate=False)
    cache = ShardedInformerCache(server, WatchSettings(), shards=SHARDS)
    view = cache.group(WEBSERVERS)
    seen = Seen()
    view.add_handler(seen)
    cache.start(0)
    cache.start(1)
    try:
        await synced(cache, 0, 1)
        await server.settled()
        before = received("webservers")
        seen.events.clear()
        for names in NAMESPACES.values():
            for ns in names:
                server.put(ns, "web")
        await server.delivered()

        assert received("webservers") - before == 8, "each of the 8 changes reached the replica once"
        assert sorted(seen.events) == sorted(("MODIFIED", key) for key in keys(0, 1)), "its shards' changes, once"
        assert (len(server.list_queries), len(server.watch_queries), server.open_watches) == (1, 1, 1), (
            "one list and one watch for both shards"
        )
        assert keys_of(view.list()) == keys(0, 1)
    finally:
        await cache.close()


async def test_gaining_a_shard_relists_once_and_hands_on_only_its_objects() -> None:
    server = populated(WEBSERVERS, gate=False)
    cache = ShardedInformerCache(server, WatchSettings(), shards=SHARDS)
    view = cache.group(WEBSERVERS)
    seen = Seen()
    view.add_handler(seen)
    try:
        cache.start(0)
        await synced(cache, 0)
        await server.settled()
        assert sorted(seen.events) == sorted(("ADDED", key) for key in keys(0))
        seen.events.clear()
        lists = len(server.list_queries)

        cache.start(2)
        assert cache.is_synced(0) and not cache.is_synced(2)
        ready_while_listing = view.has_synced
        assert not ready_while_listing, "a shard still to be listed: not ready"
        await synced(cache, 2)
        assert view.has_synced

        assert sorted(seen.events) == sorted(("ADDED", key) for key in keys(2)), "nothing for shard 0's objects"
        assert len(server.list_queries) == lists + 1, "one relist"
        assert server.list_queries[-1]["shardSelector"] == f"{selector(0)} || {selector(2)}"
        assert await server.settled() == 1
        assert server.watch_queries[-1]["shardSelector"] == f"{selector(0)} || {selector(2)}"

        # Reads route by namespace: the held shards' objects, and nothing of the others.
        assert keys_of(view.list()) == keys(0, 2)
        shard2, shard1 = sorted(keys(2))[0], sorted(keys(1))[0]
        assert view.get(shard2) is not None and view.get(shard1) is None
        assert keys_of(view.list(shard2[0])) == {shard2} and view.list(shard1[0]) == []
        assert view.cached_per_shard() == {0: 2, 2: 2}  # shard 1 holds nothing
        assert len(view) == 4 and cache.started == {0, 2}
    finally:
        await cache.close()


async def test_gains_a_few_loop_turns_apart_make_one_list_with_adjacent_ranges_merged() -> None:
    server = populated(WEBSERVERS, gate=True)
    cache = ShardedInformerCache(server, WatchSettings(), shards=SHARDS)
    view = cache.group(WEBSERVERS)
    try:
        cache.start(1)
        for _ in range(5):  # a Lease write between two claims of one round
            await asyncio.sleep(0)
        cache.start(2)
        await synced(cache, 1, 2)

        merged = f"shardRange(object.metadata.namespace, '{shard_ranges(SHARDS)[1].start:#018x}', "
        merged += f"'{shard_ranges(SHARDS)[2].end:#018x}')"
        assert [q["shardSelector"] for q in server.list_queries] == [merged]
        assert keys_of(view.list()) == keys(1, 2)
    finally:
        await cache.close()


async def test_losing_a_shard_evicts_only_its_objects_and_narrows_the_watch_without_a_relist() -> None:
    server = populated(WEBSERVERS, gate=False)
    cache = ShardedInformerCache(server, WatchSettings(), shards=SHARDS)
    view = cache.group(WEBSERVERS)
    seen = Seen()
    evicted: list[ObjectKey] = []
    view.add_handler(seen)
    view.add_eviction_handler(lambda obj: evicted.append(object_key(obj)))
    try:
        cache.start(0)
        cache.start(2)
        await synced(cache, 0, 2)
        await server.settled()
        seen.events.clear()
        lists, resume = len(server.list_queries), server.watch_queries[-1]["resourceVersion"]

        await cache.stop(0)
        assert sorted(evicted) == sorted(keys(0)), "the eviction handlers hear of shard 0's objects, only"
        assert seen.events == [], "they were not deleted: no DELETED event"
        assert keys_of(view.list()) == keys(2)
        assert view.cached_per_shard() == {2: 2}
        assert not cache.is_synced(0) and cache.is_synced(2) and cache.started == {2}

        assert await server.settled() == 1
        assert len(server.list_queries) == lists, "no relist: what is left is in the store already"
        assert server.watch_queries[-1]["shardSelector"] == selector(2)
        assert server.watch_queries[-1]["resourceVersion"] == resume

        server.put(NAMESPACES[0][0], "web")
        server.put(NAMESPACES[2][0], "web")
        await server.delivered()
        assert seen.events == [("MODIFIED", (NAMESPACES[2][0], "web"))]

        await cache.stop(2)
        assert sorted(evicted) == sorted(keys(0, 2)) and len(view) == 0
        assert await server.settled() == 0, "no shard held: nothing watched"
        assert view.has_synced and not view.died
    finally:
        await cache.close()


async def test_a_shard_let_go_while_its_event_is_on_the_way_is_no_evidence_against_the_server() -> None:
    """The server filters by the selector sent: an event of the shard just let go still belongs to the open watch."""
    server = populated(DEPLOYMENTS, gate=True)
    seen = Seen()
    informer = Informer(
        server,
        DEPLOYMENTS,
        scope=ShardFilter.factory(ShardUnion(SHARDS, frozenset({0, 1})), notice=FallbackNotice()),
        name="deployments-let-go",
        on_event=seen,
        scope_settle=0.0,
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 5)
        await server.settled()
        assert informer.scope_filtering == "server"
        seen.events.clear()

        server.put(NAMESPACES[1][0], "web")  # on its way on the watch of shards 0 and 1
        released = informer.rescope(ShardUnion(SHARDS, frozenset({0})))
        assert await server.settled() == 1
        await server.delivered()

        assert received("deployments-let-go") == 1, "the event arrived"
        assert keys_of(released) == keys(1)
        assert seen.events == [], "and was dropped: shard 1 is not kept any more"
        assert keys_of(informer.store.list()) == keys(0)
        assert informer.scope_filtering == "server", "the server sent it for the selector the watch carried"
        filtered = {"resource": "deployments-let-go"}
        assert metrics.REGISTRY.get_sample_value("webserver_operator_shard_filter_dropped_total", filtered) == 0
        assert metrics.REGISTRY.get_sample_value("webserver_operator_shard_filter_client_side", filtered) == 0
        assert server.watch_queries[-1]["shardSelector"] == selector(0)
        assert len(server.list_queries) == 1
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_shard_gained_while_the_informer_backs_off_is_listed_before_it_watches_again() -> None:
    """A gain between two requests (nothing to give up) must still bring a list, or the shard never syncs."""
    lists = [
        page([item(ns) for ns in NAMESPACES[0]], "10"),
        page([item(ns) for ns in NAMESPACES[0] + NAMESPACES[1]], "20"),
    ]
    kube = FakeKube(lists=lists, watches=[TransportError(method="GET", path=DEPLOYMENTS.path(), cause="reset")])
    informer = Informer(
        kube,
        DEPLOYMENTS,
        scope=ShardFilter.factory(ShardUnion(SHARDS, frozenset({0})), notice=FallbackNotice()),
        name="deployments-backing-off",
        scope_settle=0.0,
        backoff=Backoff(BackoffPolicy(base=0.5, cap=0.5)),
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_listed(0), 3)
        await asyncio.sleep(0.1)  # the watch opened after the list and failed at once: its 0.5 s backoff runs
        assert informer.consecutive_failures == 1 and kube.watch_queries[0]["shardSelector"] == selector(0)
        informer.rescope(ShardUnion(SHARDS, frozenset({0, 1})))
        await asyncio.wait_for(informer.wait_listed(informer.scope_version), 3)

        both = ShardUnion(SHARDS, frozenset({0, 1})).selector
        assert [q.get("shardSelector") for q in kube.list_queries] == [selector(0), both]
        assert keys_of(informer.store.list()) == keys(0, 1) and informer.scope_listed
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
