"""A sharded replica's work: only the held, synced shards' WebServers are reconciled, and a shard leaves cleanly.

The API is the in-process fake (it ignores the shard selector, so each informer filters on the client side); the
reconciler records which replica reconciled which WebServer. Asserted: who reconciles what, what each replica's
cache holds, the shard Leases as ``kubectl get leases`` shows them, and the shard metrics.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.support.fake_api import FakeApi
from tests.support.waiting import eventually
from webserver_operator import metrics
from webserver_operator.core.resources import LEASES, Resource
from webserver_operator.core.settings import ControllerSettings, LeaseSettings, WatchSettings
from webserver_operator.core.vocabulary import ObjectKey
from webserver_operator.manager.shards import ShardWork, publish_one_shard, run_sharded
from webserver_operator.runtime.controller.builder import ControllerBuilder
from webserver_operator.runtime.controller.loop import Controller
from webserver_operator.runtime.controller.result import Result
from webserver_operator.runtime.controller.workqueue import WorkQueue
from webserver_operator.runtime.sharding.cache import ShardedInformerCache
from webserver_operator.runtime.sharding.membership import LeaseGroup, Membership
from webserver_operator.runtime.sharding.ranges import shard_index
from webserver_operator.runtime.sharding.shardset import ShardSet

pytestmark = pytest.mark.timeout(20)

WEBSERVERS = Resource("example.com", "v1", "webservers", "WebServer")
SHARDS = 4
#: Ten namespaces in each shard (FNV-1a puts names that differ only in a numeric suffix into few shards).
NAMESPACES = [
    ns
    for shard in range(SHARDS)
    for ns in [n for n in (f"ns-{i}" for i in range(2000)) if shard_index(n, SHARDS) == shard][:10]
]
KEYS = {(ns, "web") for ns in NAMESPACES}
FAST = LeaseSettings(lease_duration=3, renew_deadline=2, retry_period=0.2)


def of_shard(shard: int) -> set[ObjectKey]:
    return {key for key in KEYS if shard_index(key[0], SHARDS) == shard}


def fleet_api() -> FakeApi:
    return FakeApi(
        [
            (WEBSERVERS.path(namespace=ns), {"metadata": {"namespace": ns, "name": "web", "resourceVersion": "1"}})
            for ns in NAMESPACES
        ]
    )


class Recorder:
    """Records every reconcile as (replica, key); ``gate`` holds reconciles while it is clear."""

    def __init__(self, replica: str, log: list[tuple[str, ObjectKey]]) -> None:
        self.replica = replica
        self.log = log
        self.gate = asyncio.Event()
        self.gate.set()
        self.running: set[ObjectKey] = set()

    async def reconcile(self, key: ObjectKey) -> Result:
        self.running.add(key)
        try:
            await self.gate.wait()
        finally:
            self.running.discard(key)
        self.log.append((self.replica, key))
        return Result()


def replica(api: FakeApi, name: str, log: list[tuple[str, ObjectKey]]) -> tuple[ShardWork, Controller, Recorder]:
    cache = ShardedInformerCache(api, WatchSettings(namespaces=NAMESPACES), shards=SHARDS)
    work = ShardWork(cache, drain_timeout=5)
    recorder = Recorder(name, log)
    controller = (
        ControllerBuilder("shards-test", cache, ControllerSettings(workers=2)).for_(WEBSERVERS).complete(recorder)
    )
    work.serve(controller)
    return work, controller, recorder


def sample(name: str, **labels: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels)


async def test_only_held_synced_shards_are_reconciled_and_a_lost_shard_drains_then_leaves() -> None:
    log: list[tuple[str, ObjectKey]] = []
    work, controller, recorder = replica(fleet_api(), "a", log)
    running = asyncio.create_task(controller.run())
    try:
        await work.gained(1)
        await eventually(lambda: {key for _, key in log} == of_shard(1))
        controller.enqueue(next(iter(of_shard(2))))  # an event for a shard not held here
        await work.gained(3)
        await eventually(lambda: {key for _, key in log} == of_shard(1) | of_shard(3))
        assert len(log) == len(of_shard(1) | of_shard(3)), "each WebServer once, and none of shards 0 and 2"
        work.publish()
        assert sample("webserver_operator_shard_held", shard="1") == 1
        assert sample("webserver_operator_shard_held", shard="0") == 0
        assert sample("webserver_operator_shard_cached_objects", shard="3", resource="webservers") == len(of_shard(3))
        assert sample("webserver_operator_shards") == SHARDS

        recorder.gate.clear()
        busy = next(iter(of_shard(3)))
        controller.enqueue(busy)
        await eventually(lambda: busy in recorder.running)
        for key in of_shard(3) - {busy}:
            controller.enqueue(key)
        await asyncio.sleep(0.05)  # the second worker takes a key of the shard too
        in_flight = set(recorder.running)
        assert busy in in_flight and len(in_flight) == 2
        lost = asyncio.create_task(work.lost(3))
        await asyncio.sleep(0.1)
        assert not lost.done(), "the hand-over waits for the shard's reconciles in flight"
        assert work.cache.is_synced(3), "its informers run until those reconciles have ended"
        before = len(log)
        recorder.gate.set()
        await lost
        await asyncio.sleep(0.05)
        assert {key for _, key in log[before:]} == in_flight and len(log) == before + 2, (
            "the reconciles in flight finished; the shard's queued keys were dropped, not reconciled"
        )
        assert work.admitted == {1} and work.cache.started == {1}
        assert sample("webserver_operator_shard_held", shard="3") == 0
        assert sample("webserver_operator_shard_cached_objects", shard="3", resource="webservers") is None
    finally:
        await controller.stop(0)
        await running
        await work.cache.close()


async def test_two_replicas_split_the_shards_and_one_stopping_hands_its_shards_to_the_other() -> None:
    api = fleet_api()
    log: list[tuple[str, ObjectKey]] = []
    stops = {name: asyncio.Event() for name in ("a", "b")}
    runs: dict[str, asyncio.Task[int]] = {}
    works: dict[str, ShardWork] = {}
    for name in ("a", "b"):
        work, _, _ = replica(api, name, log)
        membership = Membership(LeaseGroup(api, "wso", "ops", name, FAST))
        shardset = ShardSet(membership, shards=SHARDS, on_gained=work.gained, on_lost=work.lost)
        works[name] = work
        runs[name] = asyncio.create_task(
            run_sharded(work, shardset, membership, stop_requested=stops[name], drain_timeout=1)
        )
        await asyncio.sleep(0.3)  # b joins a moment after a, as a second pod does

    def holders() -> dict[str, str]:
        return {
            name: lease["spec"].get("holderIdentity", "")
            for name, lease in api.collections.get(LEASES.path(namespace="ops"), {}).items()
            if "-shard-" in name
        }

    try:
        await eventually(lambda: sorted(holders().values()) == ["a", "a", "b", "b"], within=10)
        await eventually(lambda: works["a"].admitted | works["b"].admitted == set(range(SHARDS)), within=10)
        await eventually(lambda: {key for _, key in log} == KEYS, within=10)
        for name in ("a", "b"):
            held = works[name].admitted
            assert len(works[name].cache.groups["webservers"]) == 10 * len(held), (
                "each replica caches its own shards' WebServers only"
            )
        assert all(
            not (who == "a" and any(w == "b" and k == key for w, k in log[:at])) for at, (who, key) in enumerate(log)
        ), "a shard moves from a to b (b joined later) and never back: nothing is reconciled by a after b took it"
        stops["a"].set()
        assert await asyncio.wait_for(runs["a"], 5) == 0
        assert "wso-member-a" not in api.collections.get(LEASES.path(namespace="ops"), {}), "a left the group"
        await eventually(lambda: sorted(holders().values()) == ["b"] * SHARDS, within=5)
        await eventually(lambda: works["b"].admitted == set(range(SHARDS)), within=10)
    finally:
        for name, stop in stops.items():
            stop.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(runs[name], 5)
    assert set(holders().values()) == {""}, "every shard was released on the way out"


async def test_without_sharding_the_fleet_is_shard_zero_held_by_the_replica_that_reconciles() -> None:
    queue: WorkQueue[ObjectKey] = WorkQueue(name="one-shard-test")
    controller = Controller("one-shard-test", Recorder("a", []), queue, workers=1)
    leading = False
    publishing = asyncio.create_task(
        publish_one_shard({"webservers": [1, 2, 3], "deployments": [1, 2]}, controller, lambda: leading)
    )
    try:
        await asyncio.sleep(0.01)
        assert sample("webserver_operator_shards") == 1
        assert sample("webserver_operator_shard_held", shard="0") == 0, "not reconciling yet"
        assert sample("webserver_operator_shard_cached_objects", shard="0", resource="webservers") == 3
        assert sample("webserver_operator_shard_cached_objects", shard="0", resource="deployments") == 2
    finally:
        publishing.cancel()
        await asyncio.gather(publishing, return_exceptions=True)
    leading = True
    running = asyncio.create_task(controller.run())
    publishing = asyncio.create_task(publish_one_shard({"webservers": [1]}, controller, lambda: leading))
    try:
        await eventually(lambda: sample("webserver_operator_shard_held", shard="0") == 1)
    finally:
        publishing.cancel()
        await controller.stop(0)
        await asyncio.gather(publishing, running, return_exceptions=True)
