"""runtime.sharding.config: which Leases count as another configuration, when they stop blocking, and what the user
reads."""

from __future__ import annotations

from typing import Any

from tests.support.clock import ManualClock
from webserver_operator.runtime.sharding.config import SHARD_COUNT_LABEL, OtherConfig, OtherConfigs, waiting_message


def lease(name: str, holder: str, *, count: str | None = None, renewed: str = "t0") -> dict[str, Any]:
    labels = {} if count is None else {SHARD_COUNT_LABEL: count}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed},
    }


def test_leases_of_the_same_count_never_block_and_others_do_while_held() -> None:
    others = OtherConfigs(shards=8, leader="wso", lease_duration=15, clock=ManualClock())
    listed = [
        lease("wso-shard-0", "a", count="8"),
        lease("wso-shard-1", "old", count="4"),
        lease("wso-shard-2", "", count="4"),  # released
        lease("wso-shard-3", "older"),  # no label: an unknown count
    ]
    assert others.live(listed, lease("wso", "leader")) == [
        OtherConfig("wso", "leader", 1),
        OtherConfig("wso-shard-1", "old", 4),
        OtherConfig("wso-shard-3", "older", None),
    ]


def test_a_lease_stops_blocking_once_its_record_has_not_changed_for_its_duration() -> None:
    clock = ManualClock()
    others = OtherConfigs(shards=8, leader="wso", lease_duration=15, clock=clock)
    assert others.live([lease("wso-shard-1", "old", count="4")])
    clock.advance(10)
    assert others.live([lease("wso-shard-1", "old", count="4", renewed="t10")]), "renewed: live again from now"
    clock.advance(14)
    assert others.live([lease("wso-shard-1", "old", count="4", renewed="t10")])
    clock.advance(1.1)
    assert others.live([lease("wso-shard-1", "old", count="4", renewed="t10")]) == []


def test_the_leaders_sighting_is_kept_between_its_reads() -> None:
    clock = ManualClock()
    others = OtherConfigs(shards=4, leader="wso", lease_duration=15, clock=clock)
    assert others.live([], lease("wso", "leader"))
    clock.advance(16)
    assert others.live([]) == [], "not read this round: nothing said about it"
    assert others.live([], lease("wso", "leader")) == [], "the same record 16 s later: it was not renewed"


def test_the_message_names_the_leases_and_says_how_the_wait_ends() -> None:
    message = waiting_message([OtherConfig("wso-shard-1", "old-pod-x", 4)], shards=8)
    assert "wso-shard-1 (a shard Lease of 4 shards) held by old-pod-x" in message
    assert "(8 shards)" in message and "released, or expire" in message
    assert "unsharded (leader election)" in waiting_message([OtherConfig("wso-shard-0", "p", 4)], shards=1)
