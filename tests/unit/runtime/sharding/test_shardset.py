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
from tests.support.fake_api import FakeApi, status_error
from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.runtime.leases.lease import Lease
from webserver_operator.runtime.sharding.config import SHARD_COUNT_LABEL
from webserver_operator.runtime.sharding.membership import LeaseGroup, Membership
from webserver_operator.runtime.sharding.plan import ShardView, next_moves
from webserver_operator.runtime.sharding.ranges import shard_index
from webserver_operator.runtime.sharding.shardset import SHARD_OF_LABEL, ShardSet, no_shard_leases_live

NS = "ops"
SETTINGS = LeaseSettings(lease_duration=15, renew_deadline=10, retry_period=2)


async def never(_: float) -> None:
    """Renewals wait forever: a Lease's record changes only when the test makes a replica act."""
    await asyncio.Event().wait()


class Replica:
    def __init__(self, api: FakeApi, clock: ManualClock, identity: str, shards: int = 8) -> None:
        self.events: list[str] = []
        self.membership = Membership(LeaseGroup(api, "wso", NS, identity, SETTINGS, clock), shards=shards)
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


class Fleet:
    """Replicas of one group on one fake API and one manual clock; each stopped at the end of the test."""

    def __init__(self) -> None:
        self.api, self.clock = FakeApi(), ManualClock()
        self.replicas: list[Replica] = []

    async def join(self, identity: str, shards: int = 8, *, rounds: int = 0) -> Replica:
        """A replica that holds its member Lease, after ``rounds`` rounds of its shard set."""
        replica = Replica(self.api, self.clock, identity, shards=shards)
        await replica.membership.lease.acquire()
        self.replicas.append(replica)
        for _ in range(rounds):
            await replica.set.round()
        return replica

    def held_by(self, holder: str) -> int:
        """How many shard Leases name ``holder``."""
        return count(holders(self.api), holder)


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    fleet = Fleet()
    yield fleet
    for replica in fleet.replicas:
        await replica.set.stop()  # cancels the never-renewing holds


async def test_two_replicas_split_eight_shards_four_and_four(fleet: Fleet) -> None:
    api = fleet.api
    a, b = await fleet.join("a"), await fleet.join("b")
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
    fleet: Fleet,
) -> None:
    clock = fleet.clock
    a, b = await fleet.join("a"), await fleet.join("b")
    await a.set.round()
    await b.set.round()
    bs = b.set.held
    await a.set.round()  # a sees b's records: expiry is measured from here, on a's clock
    clock.advance(14.9)
    await a.set.round()
    assert fleet.held_by("a") == 4, "b's Leases have not expired yet on a's clock"
    clock.advance(0.1)
    await a.set.round()
    assert fleet.held_by("a") == 8
    assert a.set.held == bs, "a acts for b's shards now; its own four fences closed (the test never renews them)"


async def test_a_joining_replica_gets_shards_handed_back_one_per_round_after_the_drain(
    fleet: Fleet,
) -> None:
    api = fleet.api
    a = await fleet.join("a", rounds=1)
    assert fleet.held_by("a") == 8
    c = await fleet.join("c")
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


async def test_stop_hands_every_shard_back(fleet: Fleet) -> None:
    api = fleet.api
    a = await fleet.join("a", rounds=1)
    await a.set.stop()
    assert set(holders(api).values()) == {""}
    assert sorted(e for e in a.events if e.startswith("-")) == sorted(f"-{s}" for s in range(8))
    assert a.set.held == frozenset()


async def test_the_write_gate_follows_each_namespaces_shard_lease(
    fleet: Fleet,
) -> None:
    clock = fleet.clock
    a, b = await fleet.join("a"), await fleet.join("b")
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


async def test_a_claim_lost_to_another_replica_is_made_up_from_the_next_free_shard_in_the_same_round(
    fleet: Fleet,
) -> None:
    """A dead replica's shards are free for every survivor at once; the one whose write comes second must not leave
    its share short until the next round (that cost a takeover a whole retry period under chaos)."""
    api = fleet.api
    a = await fleet.join("a")
    await fleet.join("b")  # a live member that plays no round here: the fair share is 4
    for shard in range(8):
        api.put(
            LEASES.path(namespace=NS),
            {
                "metadata": {"name": f"wso-shard-{shard}", "labels": {SHARD_OF_LABEL: "wso"}},
                "spec": {"holderIdentity": ""},
            },
        )
    first = next_moves(ShardView("a", 8, frozenset(), frozenset(range(8)), 2)).claim[0]
    path = LEASES.path(namespace=NS, name=f"wso-shard-{first}")
    api.fail("PUT", path, status_error(409, "Conflict", method="PUT", path=path))
    api.calls.clear()
    await a.set.round()
    table = holders(api)
    assert count(table, "a") == 4, table
    assert table[f"wso-shard-{first}"] == "", "the shard whose claim lost the race stays with whoever wrote first"
    shard_reads = [c for c in api.calls if c.method == "GET" and "/leases/wso-shard-" in c.path]
    assert not shard_reads, "the list's records are enough"


# -- a change of the shard count: no two configurations at once ----------------------------------------------------


def leader_lease(api: FakeApi, clock: ManualClock, identity: str) -> Lease:
    """The unsharded leader's Lease of the group, as a replica of ``--shards 1`` holds it."""
    return Lease(api, name="wso", namespace=NS, identity=identity, settings=SETTINGS, clock=clock)


def shard_counts(api: FakeApi) -> dict[str, str]:
    """``kubectl get leases -L webserver-operator.dev/shard-count``: shard Lease name -> its shard-count label."""
    return {
        name: obj["metadata"].get("labels", {}).get(SHARD_COUNT_LABEL, "")
        for name, obj in api.collections.get(LEASES.path(namespace=NS), {}).items()
        if "-shard-" in name
    }


async def test_a_replica_of_a_new_shard_count_waits_until_the_old_replicas_leases_are_released(
    fleet: Fleet,
) -> None:
    """A rolling update from 4 to 8 shards: shard 2 of 8 and shard 1 of 4 cover the same namespaces."""
    api = fleet.api
    old = await fleet.join("old", 4, rounds=1)
    assert fleet.held_by("old") == 4
    new = await fleet.join("new", 8, rounds=1)
    await old.set.round()
    assert fleet.held_by("new") == 0, "no Lease of 8 shards while one of 4 is live"
    assert fleet.held_by("old") == 4, "nor does the old replica claim the new configuration's free shards"
    await old.set.stop()  # the old pod stops: its shards are handed back
    await new.set.round()
    table = holders(api)
    assert count(table, "new") == 8 and count(table, "old") == 0, table
    assert set(shard_counts(api).values()) == {"8"}, "the Leases claimed from the old configuration carry its count"


async def test_a_killed_old_replicas_leases_end_the_wait_when_they_expire(
    fleet: Fleet,
) -> None:
    api, clock = fleet.api, fleet.clock
    old = await fleet.join("old", 4, rounds=1)
    fleet.replicas.remove(old)  # killed: never renews, never hands back
    await old.set.stop_rounds()
    new = await fleet.join("new", 2, rounds=1)
    assert fleet.held_by("new") == 0
    clock.advance(SETTINGS.lease_duration + 0.1)
    await new.set.round()
    assert fleet.held_by("new") == 2, holders(api)
    for hold in old.set._holds.values():
        hold.cancel()


async def test_sharded_replicas_wait_for_the_unsharded_leader_and_it_waits_for_them(
    fleet: Fleet,
) -> None:
    """1 -> 4 shards: the leader Lease covers every namespace, so no shard Lease is taken while it is live."""
    api, clock = fleet.api, fleet.clock
    leader = leader_lease(api, clock, "leader")
    assert await leader.try_acquire()
    sharded = await fleet.join("sharded", 4, rounds=1)
    assert fleet.held_by("sharded") == 0
    await leader.release()
    await sharded.set.round()
    assert fleet.held_by("sharded") == 4


async def test_the_unsharded_leader_is_not_taken_while_a_sharded_replica_holds_a_shard(
    fleet: Fleet,
) -> None:
    """4 -> 1 shard: the new unsharded replica waits for the old sharded one to hand its shards back."""
    api, clock = fleet.api, fleet.clock
    sharded = await fleet.join("sharded", 4, rounds=1)
    may_lead = no_shard_leases_live(api, namespace=NS, leader="wso", lease_duration=15, clock=clock)
    assert not await may_lead()
    clock.advance(SETTINGS.lease_duration - 1)
    assert not await may_lead()
    await sharded.set.stop()
    assert await may_lead()
    leader = leader_lease(api, clock, "leader")
    await leader.acquire(may_try=may_lead)
    assert (api.get(LEASES.path(namespace=NS, name="wso")) or {}).get("spec", {}).get("holderIdentity") == "leader"


async def test_shards_are_handed_back_when_a_leader_that_does_not_wait_takes_the_leader_lease(
    fleet: Fleet,
) -> None:
    """1 -> 4 shards from 0.1.0, whose standby takes the leader Lease without looking at shard Leases."""
    api, clock = fleet.api, fleet.clock
    sharded = await fleet.join("sharded", 4, rounds=1)
    assert fleet.held_by("sharded") == 4
    old_standby = leader_lease(api, clock, "old-standby")
    assert await old_standby.try_acquire()
    await sharded.set.round()
    assert fleet.held_by("sharded") == 0
    assert sharded.events[-4:] == ["-0", "-1", "-2", "-3"], "each shard's work stopped before its Lease was released"
    await old_standby.release()
    await sharded.set.round()
    assert fleet.held_by("sharded") == 4


async def test_a_leader_whose_rbac_cannot_list_leases_leads_as_before() -> None:
    api = FakeApi()
    path = LEASES.path(namespace=NS)
    api.fail("GET", path, status_error(403, "Forbidden", method="GET", path=path), times=5)
    may_lead = no_shard_leases_live(api, namespace=NS, leader="wso", lease_duration=15, clock=ManualClock())
    assert await may_lead()
    assert await may_lead()
    assert len([c for c in api.calls if c.path == path]) == 1, "asked once, then not again"
