"""Sharded, the Lease rules granted are exactly the Lease requests the replicas send: no verb more, none missing.

test_rbac_use.py proves this for one leader. Sharded (``--shards`` > 1), a replica does more with Leases: it lists the
member and shard Leases by label, creates its member Lease and the shard Leases nobody holds yet, takes over the
shards of a replica that died (an update of an expired Lease), deletes the member Lease of a replica gone for long,
hands its shards back (an update) and deletes its own member Lease when it stops. This drives the operator's own
``Membership`` and ``ShardSet`` through each of those against the in-process fake API, maps each request to the
(apiGroup, resource, verb) the API server authorizes, and compares that with
``tests.support.chart.SHARDED_LEADER_ELECTION_RULES``, against which the chart's sharded Role is checked in
test_chart_sharding.py and config/sharding's here (its text; rendered in test_chart_sharding.py).
"""

from __future__ import annotations

import asyncio

import yaml

from harness.paths import CONFIG
from tests.support.chart import SHARDED_LEADER_ELECTION_RULES, rule_triples
from tests.support.clock import ManualClock
from tests.unit.chart.test_rbac_use import RecordingApi
from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.runtime.sharding.membership import LeaseGroup, Membership
from webserver_operator.runtime.sharding.shardset import ShardSet

NS = "ops"
GROUP = "rel-webserver-operator-leader"
SHARDS = 4
SETTINGS = LeaseSettings(lease_duration=15, renew_deadline=10, retry_period=2)


async def _never(_: float) -> None:
    """Renewals wait forever: a Lease changes only when the test makes a replica act."""
    await asyncio.Event().wait()


async def _nothing(_: int) -> None:
    return None


def _replica(api: RecordingApi, clock: ManualClock, identity: str) -> tuple[Membership, ShardSet]:
    membership = Membership(LeaseGroup(api, GROUP, NS, identity, SETTINGS, clock))
    shards = ShardSet(membership, shards=SHARDS, on_gained=_nothing, on_lost=_nothing, sleep=_never)
    return membership, shards


def _leases(api: RecordingApi) -> dict[str, str]:
    """``kubectl get leases -n ops``: name -> holder."""
    return {
        name: str(obj["spec"].get("holderIdentity") or "")
        for name, obj in api.collections.get(LEASES.path(namespace=NS), {}).items()
    }


async def test_sharded_replicas_use_exactly_the_sharded_lease_rules() -> None:
    api, clock = RecordingApi(), ManualClock()
    dead_member, dead_shards = _replica(api, clock, "dead")
    await dead_member.lease.acquire()
    await dead_shards.round()  # alone: it creates and takes every shard Lease
    assert set(_leases(api).values()) == {"dead"}

    member, shards = _replica(api, clock, "alive")
    await member.lease.acquire()
    await shards.round()  # sees "dead" as a member and its shards as held
    clock.advance(10 * SETTINGS.lease_duration + 1)  # "dead" renewed nothing since: its Leases expired long ago
    await shards.round()  # deletes the dead member's Lease, takes its shards over
    await shards.round()
    assert _leases(api) == {
        f"{GROUP}-member-alive": "alive",
        **{f"{GROUP}-shard-{shard}": "alive" for shard in range(SHARDS)},
    }
    assert shards.held == frozenset(range(SHARDS))

    await shards.stop()  # hands every shard back
    await member.leave()  # and leaves
    await dead_shards.stop()
    assert _leases(api) == {f"{GROUP}-shard-{shard}": "" for shard in range(SHARDS)}

    leases = {rule for rule in api.used if rule[:2] == ("coordination.k8s.io", "leases")}
    assert api.used == leases, "sharding sends no request beyond Leases"
    assert leases == SHARDED_LEADER_ELECTION_RULES


def test_config_sharding_grants_exactly_the_sharded_lease_rules() -> None:
    role = yaml.safe_load((CONFIG / "sharding" / "leader_election_role.yaml").read_text())
    assert rule_triples(role["rules"]) == SHARDED_LEADER_ELECTION_RULES
    assert all("resourceNames" not in rule for rule in role["rules"])
