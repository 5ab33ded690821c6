"""Sharded informers against a scripted API: the selector sent, shardInfo checked, and the client-side fallback.

What a replica's cache holds is the assertion throughout: objects outside the informer's shard never reach the store
or a handler, whether the server filtered (it echoed ``metadata.shardInfo``) or ignored the parameter.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.support.fake_api import FakeApi
from tests.support.sharding import kept_shards
from tests.unit.runtime.informers.test_informer import (
    WEBSERVERS,
    FakeKube,
    Recorder,
    bookmark,
    counter,
    event,
    fast_backoff,
    page,
    run_until_idle,
)
from webserver_operator import metrics
from webserver_operator.core.resources import Resource
from webserver_operator.runtime.informers.informer import Informer
from webserver_operator.runtime.sharding.filter import FallbackNotice, ShardFilter
from webserver_operator.runtime.sharding.ranges import ShardRange, shard_index, shard_ranges

pytestmark = pytest.mark.timeout(5)

SHARDS = 4
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
SHARD = shard_ranges(SHARDS)[2]
SELECTOR = "shardRange(object.metadata.namespace, '0x8000000000000000', '0xc000000000000000')"


def namespaces_in(shard: int, count: int = 3) -> list[str]:
    found = [f"team-{i}" for i in range(1000) if shard_index(f"team-{i}", SHARDS) == shard]
    return found[:count]


MINE = namespaces_in(2)
OTHERS = namespaces_in(0, 2) + namespaces_in(1, 2) + namespaces_in(3, 2)


def item(name: str, namespace: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, "spec": {}}


def sharded_page(items: list[dict[str, Any]], rv: str, *, echo: str | None, cont: str | None = None) -> dict[str, Any]:
    answer = page(items, rv, cont)
    if echo is not None:
        answer["metadata"]["shardInfo"] = {"selector": echo}
    return answer


def cached(informer: Informer) -> set[tuple[str, str]]:
    return {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in informer.store.list()}


def sharded_informer(kube: FakeApi, name: str, *, resource: Resource = DEPLOYMENTS, **kwargs: Any) -> Informer:
    """A cluster-wide informer of ``SHARD``; a built-in resource unless told (the server echoes shardInfo for those)."""
    options: dict[str, Any] = {
        "namespace": None,
        "shard": SHARD,
        "name": name,
        "fallback_notice": FallbackNotice(),
        "backoff": fast_backoff(),
        "forbidden_backoff": fast_backoff(),
        "rng": lambda: 1.0,
    }
    options.update(kwargs)
    options["scope"] = ShardFilter.factory(options.pop("shard"), notice=options.pop("fallback_notice"))
    return Informer(kube, resource, **options)


def dropped(name: str) -> float:
    return counter("webserver_operator_shard_filter_dropped_total", {"resource": name})


def client_side(name: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("webserver_operator_shard_filter_client_side", {"resource": name})


def test_the_test_namespaces_are_where_the_test_says() -> None:
    assert len(MINE) == 3 and all(SHARD.contains(ns) for ns in MINE)
    assert len(OTHERS) == 6 and not any(SHARD.contains(ns) for ns in OTHERS)
    assert SHARD.selector == SELECTOR


async def test_server_side_filter_sends_the_selector_on_every_list_page_and_watch() -> None:
    kube = FakeKube(
        lists=[
            sharded_page([item("a", MINE[0], "1")], "10", echo=SELECTOR, cont="tok"),
            sharded_page([item("b", MINE[1], "2")], "10", echo=SELECTOR),
        ],
        watches=[[event("ADDED", item("c", MINE[2], "11"))]],
    )
    informer = sharded_informer(kube, "shards-server")
    await run_until_idle(informer, kube)

    assert informer.scope_filtering == "server"
    assert cached(informer) == {(MINE[0], "a"), (MINE[1], "b"), (MINE[2], "c")}
    assert [q.get("shardSelector") for q in kube.list_queries] == [SELECTOR, SELECTOR]
    assert {q.get("shardSelector") for q in kube.watch_queries} == {SELECTOR}
    assert client_side("shards-server") == 0
    assert dropped("shards-server") == 0


async def test_server_ignoring_the_selector_is_filtered_client_side_on_list_and_watch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    everything = [item(f"o{i}", ns, str(i)) for i, ns in enumerate(OTHERS + MINE)]
    kube = FakeKube(
        lists=[page(everything, "20")],
        watches=[
            [
                event("ADDED", item("new-mine", MINE[0], "21")),
                event("ADDED", item("new-other", OTHERS[0], "22")),
                event("MODIFIED", item("o0", OTHERS[0], "23")),
                event("DELETED", item("o1", OTHERS[1], "24")),
            ]
        ],
    )
    rec = Recorder()
    informer = sharded_informer(kube, "shards-fallback", on_event=rec)
    with caplog.at_level(logging.WARNING):
        await run_until_idle(informer, kube)

    mine = {(ns, f"o{i}") for i, ns in enumerate(OTHERS + MINE) if ns in MINE}
    assert cached(informer) == mine | {(MINE[0], "new-mine")}
    assert all(SHARD.contains(ns) for ns, _ in cached(informer))
    assert {name.split("@")[0] for _, name, _ in rec.events} == {name for _, name in mine} | {"new-mine"}
    assert informer.scope_filtering == "client"
    assert client_side("shards-fallback") == 1
    assert dropped("shards-fallback") == len(OTHERS) + 3
    # Dropped events still move the resume point: the next watch starts after the last one.
    assert kube.watch_queries[1]["resourceVersion"] == "24"
    assert kube.watch_queries[0]["shardSelector"] == SELECTOR  # the parameter is still sent: the server may gain it
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "ignored shardSelector" in warnings[0]
    assert "--feature-gates=ShardedListAndWatch=true" in warnings[0]
    assert str(SHARD) in warnings[0]


async def test_the_fallback_is_announced_once_per_process_not_per_informer(caplog: pytest.LogCaptureFixture) -> None:
    notice = FallbackNotice()
    first = FakeKube(lists=[page([item("a", MINE[0], "1")], "5")], watches=[])
    second = FakeKube(lists=[page([item("b", OTHERS[0], "1")], "5")], watches=[])
    with caplog.at_level(logging.INFO):
        await run_until_idle(sharded_informer(first, "shards-once-a", fallback_notice=notice), first)
        await run_until_idle(sharded_informer(second, "shards-once-b", fallback_notice=notice), second)

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.informer for r in warnings] == ["shards-once-a"]  # type: ignore[attr-defined]
    assert any("filtering" in r.getMessage() and r.informer == "shards-once-b" for r in caplog.records)  # type: ignore[attr-defined]


async def test_objects_of_other_shards_are_dropped_even_when_the_server_claims_to_filter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An HA API server without the gate can serve the watch after a peer with it served the list.
    kube = FakeKube(
        lists=[sharded_page([item("a", MINE[0], "1")], "10", echo=SELECTOR)],
        watches=[[event("ADDED", item("stray", OTHERS[0], "11")), bookmark("12")]],
    )
    informer = sharded_informer(kube, "shards-stray")
    with caplog.at_level(logging.WARNING):
        await run_until_idle(informer, kube)

    assert cached(informer) == {(MINE[0], "a")}
    assert informer.scope_filtering == "client", "a server that sent another shard's object is not trusted to filter"
    assert client_side("shards-stray") == 1
    assert dropped("shards-stray") == 1
    assert [f"namespace {OTHERS[0]!r}, outside the shard" in r.getMessage() for r in caplog.records] == [True]


async def test_a_server_echoing_another_selector_never_syncs_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    other = shard_ranges(SHARDS)[1].selector
    kube = FakeKube(lists=[sharded_page([item("a", MINE[0], "1")], "10", echo=other)], watches=[])
    informer = sharded_informer(kube, "shards-mismatch")
    await run_until_idle(informer, kube)

    assert not informer.synced.is_set()
    assert len(informer.store) == 0
    message = next(r.getMessage() for r in caplog.records if "ShardSelectorMismatch" in r.getMessage())
    assert repr(other) in message and repr(SELECTOR) in message


async def test_relists_follow_the_server_gaining_and_losing_the_gate(caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeKube(
        lists=[
            page([item("a", MINE[0], "1"), item("x", OTHERS[0], "2")], "10"),
            sharded_page([item("a", MINE[0], "1")], "30", echo=SELECTOR),
            page([item("a", MINE[0], "1"), item("x", OTHERS[0], "2")], "40"),
        ],
        watches=[[event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"})]] * 2,
    )
    informer = sharded_informer(kube, "shards-flip")
    with caplog.at_level(logging.INFO):
        await run_until_idle(informer, kube)

    assert informer.scope_filtering == "client"
    assert cached(informer) == {(MINE[0], "a")}
    flips = [r.getMessage() for r in caplog.records if getattr(r, "shard_filtering", None)]
    assert ["ignored shardSelector" in m for m in flips] == [True, False, True]
    assert "the API server filters by" in flips[1]


@pytest.mark.parametrize("shard", [None, shard_ranges(1)[0]])
async def test_without_shards_nothing_is_sent_and_nothing_is_filtered(shard: ShardRange | None) -> None:
    kube = FakeKube(lists=[page([item("a", MINE[0], "1"), item("x", OTHERS[0], "2")], "10")], watches=[])
    informer = sharded_informer(kube, "shards-none", shard=shard)
    await run_until_idle(informer, kube)

    assert kept_shards(informer) is None
    assert informer.scope_filtering is None
    assert cached(informer) == {(MINE[0], "a"), (OTHERS[0], "x")}
    assert all("shardSelector" not in q for q in kube.list_queries + kube.watch_queries)
    assert client_side("shards-none") is None


def test_cluster_scoped_resources_cannot_be_sharded_by_namespace() -> None:
    nodes = Resource("", "v1", "nodes", "Node", namespaced=False)
    with pytest.raises(ValueError, match="nodes are cluster-scoped"):
        Informer(FakeKube(lists=[], watches=[]), nodes, scope=ShardFilter.factory(SHARD))
    assert Informer(FakeKube(lists=[], watches=[]), nodes, scope=ShardFilter.factory(shard_ranges(1)[0])).scope is None
    assert WEBSERVERS.namespaced


async def test_a_custom_resource_filtered_without_an_echo_is_unconfirmed_until_a_stray_arrives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kubernetes 1.36 filters custom resources' lists by shard without echoing shardInfo (unstructured lists)."""
    quiet = FakeKube(
        lists=[page([item("a", MINE[0], "1")], "10")], watches=[[event("ADDED", item("b", MINE[1], "11"))]]
    )
    informer = sharded_informer(quiet, "shards-crd", resource=WEBSERVERS)
    with caplog.at_level(logging.INFO):
        await run_until_idle(informer, quiet)
    assert cached(informer) == {(MINE[0], "a"), (MINE[1], "b")}
    assert informer.scope_filtering == "unconfirmed"
    assert client_side("shards-crd") is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("did not confirm that it filters" in r.getMessage() for r in caplog.records)

    stray = FakeKube(
        lists=[page([item("a", MINE[0], "1")], "10")], watches=[[event("ADDED", item("x", OTHERS[0], "11"))]]
    )
    informer = sharded_informer(stray, "shards-crd-stray", resource=WEBSERVERS)
    with caplog.at_level(logging.INFO):
        await run_until_idle(informer, stray)
    assert cached(informer) == {(MINE[0], "a")}
    assert informer.scope_filtering == "client"
    assert client_side("shards-crd-stray") == 1
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


async def test_a_custom_resource_list_with_other_shards_objects_shows_the_fallback_at_once() -> None:
    kube = FakeKube(lists=[page([item("a", MINE[0], "1"), item("x", OTHERS[0], "2")], "10")], watches=[])
    informer = sharded_informer(kube, "shards-crd-strays", resource=WEBSERVERS)
    await run_until_idle(informer, kube)

    assert informer.scope_filtering == "client"
    assert cached(informer) == {(MINE[0], "a")}
    assert client_side("shards-crd-strays") == 1


def test_a_shard_filter_is_made_only_for_a_proper_part_of_the_hash_space() -> None:
    assert ShardFilter.for_range(None, DEPLOYMENTS, name="d") is None
    assert ShardFilter.for_range(shard_ranges(1)[0], DEPLOYMENTS, name="d") is None
    with pytest.raises(ValueError, match="needs no shard filter"):
        ShardFilter(shard_ranges(1)[0], DEPLOYMENTS, name="d")
    made = ShardFilter.for_range(SHARD, DEPLOYMENTS, name="d")
    assert made is not None
    query: dict[str, str] = {"limit": "500"}
    made.add_to(query)
    assert query == {"limit": "500", "shardSelector": SELECTOR}
