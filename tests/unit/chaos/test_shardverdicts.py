"""The sharded run's verdicts (chaos/shardverdicts.py, chaos/shards.py) on hand-made audit records and Lease views.

Each rule passes on a clean handover and fails on what it targets: a write after the grant expired or was released,
a write from a restarted process that inherited its slot's grant, two replicas writing one shard, a takeover later
than lease duration + 5 s, and a fleet whose Leases are not one per shard with shares within one.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import yaml

from chaos import identity, shards
from chaos.fencing import Tenure
from chaos.shardverdicts import (
    LeaseView,
    ShardWrite,
    fence_rule,
    handovers,
    incarnation,
    overlap_rule,
    overlaps,
    ownership,
    shard_lease,
    shard_tenures,
    shard_writes,
    takeover_rule,
    takeovers,
    unfenced,
)
from harness.audit import Request
from harness.paths import ROOT
from webserver_operator.runtime.sharding import ranges as operator_shards

GROUP = "chaos-unit-leader"
COUNT = 2
A = identity.username("chaos-unit-op-a")
B = identity.username("chaos-unit-op-b")
C = identity.username("chaos-unit-op-c")


def _namespace_of(shard: int) -> str:
    return next(f"ns-{k}" for k in range(1000) if shards.shard_of(f"ns-{k}", COUNT) == shard)


NS = {i: _namespace_of(i) for i in range(COUNT)}


def write(t: float, user: str, shard: int, *, code: int = 200, resource: str = "deployments") -> Request:
    return Request(f"{user}-w-{t}", t, t + 0.001, user, "op", "patch", resource, NS[shard], "web", code, "", None)


def lease(t: float, user: str, shard: int, holder: str, *, renew_time: float | None = None) -> Request:
    """A Lease write stored at ``t`` + 5 ms; a grant built at ``renew_time`` (default 20 ms before ``t``), or a
    release when ``holder`` is empty."""
    r = Request(f"{user}-l-{shard}-{t}", t, t + 0.005, user, "op", "update", "leases", "audited", "", 200, "", holder)
    built = t - 0.02 if renew_time is None else renew_time
    return replace(r, name=shard_lease(GROUP, shard), lease_renew_time=built, lease_duration=10.0)


def judged(
    requests: list[Request], starts: dict[str, list[float]] | None = None
) -> tuple[dict[int, list[Tenure]], list[ShardWrite]]:
    writer = incarnation(starts or {A: [0.0], B: [0.0], C: [0.0]})
    found = shard_tenures(requests, group=GROUP, shards=COUNT, writer=writer)
    return found, shard_writes(requests, found, shard_of=lambda ns: shards.shard_of(ns, COUNT), writer=writer)


# -- which shard, which names ---------------------------------------------------------------------------------------


def test_the_harness_hash_is_go_fnv1a_and_agrees_with_the_operator_on_every_name() -> None:
    assert shards.fnv1a_64(b"") == 0xCBF29CE484222325  # Go's hash/fnv New64a test vectors
    assert shards.fnv1a_64(b"a") == 0xAF63DC4C8601EC8C
    rng = random.Random(7)  # noqa: S311 - test data, not secrets
    for count in (1, 2, 3, 4, 8, 16):
        names = ["team-1", "default", "kube-system", *(f"chaos-{rng.getrandbits(40):x}" for _ in range(300))]
        for name in names:
            assert shards.shard_of(name, count) == operator_shards.shard_index(name, count), (name, count)


def test_random_namespace_names_give_every_shard_its_share() -> None:
    seeded = random.Random  # the run's own seeded generator, as chaos.harness passes it
    names = shards.spread_namespaces("chaos-abc", 16, 8, seeded(1))
    per = [sum(1 for n in names if shards.shard_of(n, 8) == i) for i in range(8)]
    assert per == [2] * 8 and len(set(names)) == 16
    uneven = shards.spread_namespaces("chaos-abc", 11, 8, seeded(2))
    assert sorted(sum(1 for n in uneven if shards.shard_of(n, 8) == i) for i in range(8)) == [1] * 5 + [2] * 3
    with pytest.raises(ValueError, match="cannot cover 8 shards"):
        shards.spread_namespaces("chaos-abc", 4, 8, seeded(1))


# -- fenced writes --------------------------------------------------------------------------------------------------


def test_writes_inside_a_grant_pass_and_after_expiry_or_release_or_for_another_shard_fail() -> None:
    traffic = [lease(100.0, A, 0, "op-a_1")]  # expires at 109.98
    inside, after_expiry, other_shard = write(105.0, A, 0), write(109.99, A, 0, code=409), write(105.0, A, 1)
    found, writes = judged([*traffic, inside, after_expiry, other_shard])
    assert [w.write for w in unfenced(writes)] == [other_shard, after_expiry]
    rule = fence_rule(writes, start=0, end=200, origin=100.0)
    assert not rule.passed and rule.detail.startswith("1 accepted, 1 rejected unfenced writes of 3 judged")
    assert "never covered by a grant" in rule.detail and "0.010s after its grant expired" in rule.detail

    released = [*traffic, lease(103.0, A, 0, ""), write(103.1, A, 0)]  # handed back at 103.005, written after
    found, writes = judged(released)
    assert found[0][0].released == pytest.approx(103.005)
    assert "after its grant released" in fence_rule(writes, start=0, end=200, origin=0).detail
    assert fence_rule(judged([*traffic, inside])[1], start=0, end=200, origin=0).passed


def test_a_restarted_process_does_not_inherit_its_slots_grant() -> None:
    traffic = [lease(100.0, A, 0, "op-a_1"), write(104.0, A, 0)]  # the restart at 103 writes under the old grant
    _, writes = judged(traffic, starts={A: [0.0, 103.0]})
    assert [w.write.received for w in unfenced(writes)] == [104.0]
    _, writes = judged(traffic, starts={A: [0.0]})
    assert unfenced(writes) == []


def test_lease_writes_cluster_scoped_writes_and_the_leases_namespace_are_not_judged() -> None:
    lease_retry = replace(write(200.0, A, 0, code=409), resource="leases", namespace="audited")
    cluster = replace(write(200.0, A, 0), namespace="")
    writer = incarnation({A: [0.0]})
    found = shard_tenures([], group=GROUP, shards=COUNT, writer=writer)
    events = replace(write(200.0, A, 0, resource="events"), namespace="audited")
    writes = shard_writes(
        [lease_retry, cluster, events],
        found,
        shard_of=lambda ns: None if ns == "audited" else shards.shard_of(ns, COUNT),
        writer=writer,
    )
    assert writes == []


# -- one writer per shard -------------------------------------------------------------------------------------------


def test_a_handover_by_release_or_expiry_is_one_writer_at_a_time_and_a_double_grant_is_not() -> None:
    by_release = [
        lease(100.0, A, 0, "op-a_1"),
        write(101.0, A, 0),
        lease(102.0, A, 0, ""),
        lease(102.5, B, 0, "op-b_1"),
        write(103.0, B, 0),
    ]
    assert overlap_rule(judged(by_release)[1], start=0, end=200, origin=0).passed
    by_expiry = [lease(100.0, A, 0, "op-a_1"), write(101.0, A, 0), lease(111.0, B, 0, "op-b_1"), write(111.5, B, 0)]
    assert overlaps(judged(by_expiry)[1]) == []
    other_shards = [lease(100.0, A, 0, "op-a_1"), lease(100.0, B, 1, "op-b_1"), write(101, A, 0), write(101, B, 1)]
    assert overlaps(judged(other_shards)[1]) == []

    double = [lease(100.0, A, 0, "op-a_1"), write(101.0, A, 0), lease(104.0, B, 0, "op-b_1"), write(105.0, B, 0)]
    rule = overlap_rule(judged(double)[1], start=0, end=200, origin=100.0)
    assert not rule.passed and rule.detail.startswith("1 writes while another replica's grant")
    assert "op-b#1 patch deployments ns-" in rule.detail and "(shard 0)" in rule.detail
    assert "ran until +9.980s" in rule.detail
    assert overlap_rule(judged(double)[1], start=106.0, end=200, origin=0).passed  # outside the window


# -- takeover of a dead replica's shards -----------------------------------------------------------------------------


def test_each_shard_the_dead_replica_held_must_be_granted_to_another_slot_within_the_limit() -> None:
    held = [lease(99.0, A, 0, "op-a_1"), lease(99.0, A, 1, "op-a_1")]
    quick = [*held, lease(110.0, B, 0, "op-b_1"), lease(112.0, C, 1, "op-c_1")]
    found, _ = judged(quick)
    taken = takeovers(found, victim=A, at=100.0, until=200.0)
    assert [(t.shard, round(t.delay or 0, 3), t.by) for t in taken] == [(0, 10.005, "op-b_1"), (1, 12.005, "op-c_1")]
    assert takeover_rule(taken, victim="op-a", limit=15.0).passed

    slow = [*held, lease(110.0, B, 0, "op-b_1"), lease(116.0, C, 1, "op-c_1")]
    rule = takeover_rule(takeovers(judged(slow)[0], victim=A, at=100.0, until=200.0), victim="op-a", limit=15.0)
    assert not rule.passed and "shard 1: 16.0s" in rule.detail
    back_to_itself = [*held, lease(111.0, A, 0, "op-a_2"), lease(111.0, B, 1, "op-b_1")]
    rule = takeover_rule(
        takeovers(judged(back_to_itself)[0], victim=A, at=100.0, until=200.0), victim="op-a", limit=15.0
    )
    assert not rule.passed and "shard 0: never" in rule.detail
    nothing = takeover_rule(takeovers(judged(held)[0], victim=B, at=100.0, until=200.0), victim="op-b", limit=15.0)
    assert not nothing.passed and "held no shard" in nothing.detail


def test_handovers_count_changes_of_writer_not_renewals() -> None:
    traffic = [lease(100.0, A, 0, "op-a_1"), lease(101.5, A, 0, "op-a_1"), lease(112.0, B, 0, "op-b_1")]
    assert handovers(judged(traffic)[0], 101.0, 200.0) == ["shard 0: op-b_1 from +11.0s"]


# -- ownership from the Lease objects --------------------------------------------------------------------------------


def view(shard: int, holder: str, renew: float = 95.0) -> LeaseView:
    return LeaseView(shard, holder, renew, 10.0)


def test_ownership_needs_one_live_fresh_holder_per_shard_and_shares_within_one() -> None:
    even = [view(i, f"op-{'abc'[i % 3]}_1") for i in range(8)]
    settled, text = ownership(even, shards=8, live={"op-a", "op-b", "op-c"}, now=100.0)
    assert settled and text == "shares op-a 3, op-b 3, op-c 2"
    assert not ownership(even, shards=8, live={"op-a", "op-b", "op-c", "op-d"}, now=100.0)[0]  # op-d holds none
    assert "held by op-c_1, not a running replica" in ownership(even, shards=8, live={"op-a", "op-b"}, now=100.0)[1]
    stale = [*even[:7], view(7, "op-b_1", renew=80.0)]
    assert "shard 7: op-b_1's grant expired" in ownership(stale, shards=8, live={"op-a", "op-b", "op-c"}, now=100.0)[1]
    missing = even[:7]
    assert "shard 7: no Lease" in ownership(missing, shards=8, live={"op-a", "op-b", "op-c"}, now=100.0)[1]
    released = [*even[:7], view(7, "")]
    assert "shard 7: no holder" in ownership(released, shards=8, live={"op-a", "op-b", "op-c"}, now=100.0)[1]


def test_the_audit_policy_records_every_lease_write_of_the_audited_replicas_with_its_body() -> None:
    """The shard and member Leases have names no rule can list ahead: the policy must not limit Leases by name."""
    policy = yaml.safe_load((ROOT / "hack" / "audit-policy.yaml").read_text())
    group = f"system:serviceaccounts:{identity.AUDITED_NAMESPACE}"
    first = next(
        rule
        for rule in policy["rules"]
        if group in rule.get("userGroups", [group])
        and any(
            r.get("group") == "coordination.k8s.io" and "leases" in r.get("resources", [])
            for r in rule.get("resources", [{"group": "coordination.k8s.io", "resources": ["leases"]}])
        )
    )
    assert first["level"] == "RequestResponse" and "verbs" not in first
    assert all("resourceNames" not in r for r in first.get("resources", []))
