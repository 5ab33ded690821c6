"""Shard Leases over rounds: two replicas split the shards, a dead one's shards move, a joining one gets its share.

The API is the in-process fake; time is a manual clock that only the test moves, and renewals never run (each
replica's Leases stay as its last write left them), so expiry happens exactly when the test says. What is asserted is
the Lease table as ``kubectl get leases`` shows it, and what each replica was told to start and stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.support.clock import ManualClock
from tests.support.fake_api import FakeApi
from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.core.shards import shard_index
from webserver_operator.runtime.membership import LeaseGroup, Membership
from webserver_operator.runtime.shardset import ShardSet

NS = "ops"
SETTINGS = LeaseSettings(lease_duration=15, renew_deadline=10, retry_period=2)


async def never(_: float) -> None:
    """Renewals wait forever: a Lease's record changes only when the test makes a replica act."""
    await asyncio.Event().wait()


class Replica:
    def __init__(self, api: FakeApi, clock: ManualClock, identity: str, shards: int = 8) -> None:
        self.events: list[str] = []
        self.membership = Membership(LeaseGroup(api, "wso", NS, identity, SETTINGS, clock))
        self.set = ShardSet(self.membership, shards=shards, on_gained=self._gained, on_lost=self._lost, sleep=never)

    async def _gained(self, shard: int) -> None:
        self.events.append(f"+{shard}")

    async def _lost(self, shard: int) -> None:
        self.events.append(f"-{shard}")


def holders(api: FakeApi) -> dict[str, str]:
    """``kubectl get leases -l webserver-operator.dev/shard-of=wso``: shard Lease name -> holder."""
    return {
        name: obj["spec"]["holderIdentity"]
        for name, obj in api.collections.get(LEASES.path(namespace=NS), {}).items()
        if "-shard-" in name
    }


def count(table: dict[str, str], holder: str) -> int:
    return sum(1 for h in table.values() if h == holder)


@pytest.fixture
async def fleet() -> AsyncIterator[tuple[FakeApi, ManualClock, list[Replica]]]:
    api, clock = FakeApi(), ManualClock()
    replicas: list[Replica] = []
    yield api, clock, replicas
    for replica in replicas:
        await replica.set.stop()  # cancels the never-renewing holds


async def join(api: FakeApi, clock: ManualClock, replicas: list[Replica], identity: str) -> Replica:
    replica = Replica(api, clock, identity)
    await replica.membership.lease.acquire()
    replicas.append(replica)
    return replica


async def test_two_replicas_split_eight_shards_four_and_four(fleet: tuple[FakeApi, ManualClock, list[Replica]]) -> None:
    api, clock, replicas = fleet
    a, b = await join(api, clock, replicas, "a"), await join(api, clock, replicas, "b")
    await a.set.round()
    await b.set.round()
    table = holders(api)
    assert len(table) == 8 and count(table, "a") == 4 and count(table, "b") == 4, table
    assert sorted(a.set.held | b.set.held) == list(range(8))
    assert len(a.events) == 4 and all(e.startswith("+") for e in a.events)
    await a.set.round()
    await b.set.round()
    assert holders(api) == table, "at the fair share nothing moves"


async def test_a_dead_replicas_shards_are_taken_once_its_leases_expire_on_the_survivors_clock(
    fleet: tuple[FakeApi, ManualClock, list[Replica]],
) -> None:
    api, clock, replicas = fleet
    a, b = await join(api, clock, replicas, "a"), await join(api, clock, replicas, "b")
    await a.set.round()
    await b.set.round()
    bs = b.set.held
    await a.set.round()  # a sees b's records: expiry is measured from here, on a's clock
    clock.advance(14.9)
    await a.set.round()
    assert count(holders(api), "a") == 4, "b's Leases have not expired yet on a's clock"
    clock.advance(0.1)
    await a.set.round()
    assert count(holders(api), "a") == 8
    assert a.set.held == bs, "a acts for b's shards now; its own four fences closed (the test never renews them)"


async def test_a_joining_replica_gets_shards_handed_back_one_per_round_after_the_drain(
    fleet: tuple[FakeApi, ManualClock, list[Replica]],
) -> None:
    api, clock, replicas = fleet
    a = await join(api, clock, replicas, "a")
    await a.set.round()
    assert count(holders(api), "a") == 8
    c = await join(api, clock, replicas, "c")
    await a.set.round()
    assert a.events[-1].startswith("-"), "the handed-back shard was drained (on_lost) before its Lease was released"
    handed = int(a.events[-1][1:])
    assert holders(api)[f"wso-shard-{handed}"] == ""
    await c.set.round()
    assert holders(api)[f"wso-shard-{handed}"] == "c", "a released Lease is taken at once"
    for _ in range(4):
        await a.set.round()
        await c.set.round()
    table = holders(api)
    assert (count(table, "a"), count(table, "c")) == (4, 4), table


async def test_stop_hands_every_shard_back(fleet: tuple[FakeApi, ManualClock, list[Replica]]) -> None:
    api, clock, replicas = fleet
    a = await join(api, clock, replicas, "a")
    await a.set.round()
    await a.set.stop()
    assert set(holders(api).values()) == {""}
    assert sorted(e for e in a.events if e.startswith("-")) == sorted(f"-{s}" for s in range(8))
    assert a.set.held == frozenset()


async def test_the_write_gate_follows_each_namespaces_shard_lease(
    fleet: tuple[FakeApi, ManualClock, list[Replica]],
) -> None:
    api, clock, replicas = fleet
    a, b = await join(api, clock, replicas, "a"), await join(api, clock, replicas, "b")
    await a.set.round()
    await b.set.round()
    mine = next(f"team-{i}" for i in range(1000) if shard_index(f"team-{i}", 8) in a.set.held)
    theirs = next(f"team-{i}" for i in range(1000) if shard_index(f"team-{i}", 8) in b.set.held)
    assert a.set.why_not(f"/apis/apps/v1/namespaces/{mine}/deployments/web") is None
    assert a.set.why_not(f"/api/v1/namespaces/{mine}/events") is None
    refused = a.set.why_not(f"/apis/apps/v1/namespaces/{theirs}/deployments/web")
    assert refused is not None and "not held" in refused, refused
    assert a.set.why_not("/api/v1/namespaces") is not None, "a write outside any namespace has no shard Lease"
    clock.advance(SETTINGS.renew_deadline)  # no renewal in time (the test never renews): every fence closes
    assert a.set.why_not(f"/apis/apps/v1/namespaces/{mine}/deployments/web") is not None


async def test_a_lost_shard_is_not_claimed_again_until_its_work_has_stopped() -> None:
    """A Lease lost to a failed renewal may still be claimable at once (deleted, or still naming us); claiming it while
    ``on_lost`` is still stopping the shard's informers would leave the new holder without them."""
    api, clock = FakeApi(), ManualClock()
    tick, stopping = asyncio.Event(), asyncio.Event()
    events: list[str] = []

    async def renewals(_: float) -> None:
        await tick.wait()
        await asyncio.sleep(0.005)  # the fake API answers without suspending: give the test its turns

    async def gained(shard: int) -> None:
        events.append(f"+{shard}")

    async def lost(shard: int) -> None:
        events.append(f"-{shard}")
        await stopping.wait()  # draining and stopping informers takes a while
        events.append(f"-{shard} done")

    membership = Membership(LeaseGroup(api, "wso", NS, "a", SETTINGS, clock))
    await membership.lease.acquire()
    shards = ShardSet(membership, shards=4, on_gained=gained, on_lost=lost, sleep=renewals)
    await shards.round()
    assert sorted(holders(api).values()) == ["a"] * 4
    del api.collections[LEASES.path(namespace=NS)]["wso-shard-2"]  # e.g. deleted by a person
    tick.set()
    await asyncio.sleep(0.05)  # a few renewal rounds: shard 2's finds its Lease gone
    tick.clear()
    assert "-2" in events and "-2 done" not in events
    await shards.round()
    assert "wso-shard-2" not in holders(api), "not claimed while its on_lost runs"
    stopping.set()
    await asyncio.sleep(0.01)
    assert events[-1] == "-2 done"
    await shards.round()
    assert holders(api)["wso-shard-2"] == "a" and events[-1] == "+2"
    stopping.set()
    await shards.stop()
