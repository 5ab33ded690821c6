"""Membership: live replicas counted from the member Leases as ``kubectl get leases`` shows them, and cleanup."""

from __future__ import annotations

import pytest

from tests.support.clock import ManualClock
from tests.support.fake_api import FakeApi
from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.runtime.sharding.membership import MEMBER_OF_LABEL, LeaseGroup, Membership, member_name

NS = "ops"
SETTINGS = LeaseSettings(lease_duration=15, renew_deadline=10, retry_period=2)


def member(api: FakeApi, clock: ManualClock, identity: str, group: str = "wso") -> Membership:
    return Membership(LeaseGroup(api, group, NS, identity, SETTINGS, clock))


def leases(api: FakeApi) -> dict[str, dict[str, object]]:
    return api.collections.get(LEASES.path(namespace=NS), {})


@pytest.mark.parametrize(
    ("identity", "name"),
    [
        ("pod-7f9c_1a2b3c4d", "wso-member-pod-7f9c-1a2b3c4d"),
        ("Node.Example_x", "wso-member-node.example-x"),
        ("___", "wso-member-replica"),
    ],
)
def test_member_names_are_object_names(identity: str, name: str) -> None:
    assert member_name("wso", identity) == name


async def test_members_count_each_other_and_label_their_leases() -> None:
    api, clock = FakeApi(), ManualClock()
    a, b = member(api, clock, "a_1"), member(api, clock, "b_2")
    assert await a.live() == 1, "alone, a replica counts itself"
    await a.lease.acquire()
    await b.lease.acquire()
    assert (await a.live(), await b.live()) == (2, 2)
    assert {name: obj["metadata"]["labels"] for name, obj in leases(api).items()} == {  # type: ignore[index]
        "wso-member-a-1": {MEMBER_OF_LABEL: "wso"},
        "wso-member-b-2": {MEMBER_OF_LABEL: "wso"},
    }
    other_group = member(api, clock, "c_3", group="other")
    await other_group.lease.acquire()
    assert await a.live() == 2, "members of another group do not count"


async def test_a_member_that_stops_renewing_stops_counting_after_its_lease_duration_on_our_clock() -> None:
    api, clock = FakeApi(), ManualClock()
    a, b = member(api, clock, "a_1"), member(api, clock, "b_2")
    await a.lease.acquire()
    await b.lease.acquire()
    assert await a.live() == 2
    clock.advance(14.9)
    assert await a.live() == 2
    clock.advance(0.1)
    assert await a.live() == 1


async def test_a_member_gone_for_long_is_deleted_and_a_renewed_one_is_kept() -> None:
    api, clock = FakeApi(), ManualClock()
    a, gone, frozen = member(api, clock, "a_1"), member(api, clock, "gone_2"), member(api, clock, "frozen_3")
    for m in (a, gone, frozen):
        await m.lease.acquire()
    await a.live()
    clock.advance(150)
    # The frozen member wakes and renews just after a's list and before a's delete: the precondition keeps its Lease.
    original_request = api.request

    async def renew_frozen_before_deletes(method: str, path: str, **options: object) -> dict[str, object]:
        if method == "DELETE" and path.endswith("frozen-3"):
            stored = await original_request("GET", path)
            stored["spec"]["renewTime"] = "2026-11-24T16:00:00.000000Z"
            await original_request("PUT", path, body=stored)
        return await original_request(method, path, **options)  # type: ignore[arg-type]

    api.request = renew_frozen_before_deletes  # type: ignore[method-assign]
    assert await a.live() == 1
    assert sorted(leases(api)) == ["wso-member-a-1", "wso-member-frozen-3"]


async def test_leaving_deletes_the_own_member_lease() -> None:
    api, clock = FakeApi(), ManualClock()
    a = member(api, clock, "a_1")
    await a.lease.acquire()
    await a.leave()
    assert leases(api) == {}
    await a.leave()  # already gone: nothing to do, no error
