"""The sharded benchmark's plan: fleet sizes from the command line, balanced random namespaces, the settled split."""

import pytest

from bench.sharded_plan import (
    CLIENT,
    SERVER,
    Configuration,
    PlanError,
    assign,
    balanced_namespaces,
    baseline,
    configurations,
    parse_replicas,
    per_shard,
    split_settled,
)
from webserver_operator.runtime.sharding.ranges import shard_index


def test_replicas_are_parsed_in_order_without_duplicates() -> None:
    assert parse_replicas("1, 2,4,2,", shards=8) == [1, 2, 4]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1,x", "'x' is not a whole number of replicas; pass e.g. 1,2,4"),
        ("0", "'0' is not a whole number"),
        ("1,16", "16 replicas for 8 shards would leave a replica without a shard; pass at most 8 or raise --shards"),
        (",", "no fleet size given"),
    ],
)
def test_bad_replicas_say_what_to_pass(text: str, says: str) -> None:
    with pytest.raises(PlanError, match=says.replace("(", r"\(")):
        parse_replicas(text, shards=8)


def test_client_side_run_is_the_largest_fleet_added_after_the_server_side_ones() -> None:
    chosen = configurations([1, 4, 2], client_side_too=True)
    assert chosen == [
        Configuration(SERVER, 1),
        Configuration(SERVER, 4),
        Configuration(SERVER, 2),
        Configuration(CLIENT, 4),
    ]
    assert [c.key for c in chosen] == ["server-r1", "server-r4", "server-r2", "client-r4"]
    assert chosen[3].label == "4 replicas, client-side (gate off)"
    assert configurations([1, 2], client_side_too=False) == [Configuration(SERVER, 1), Configuration(SERVER, 2)]
    assert baseline(chosen) == Configuration(SERVER, 1)
    assert baseline([Configuration(SERVER, 2)]) is None


def test_namespaces_are_random_distinct_and_as_many_in_every_shard() -> None:
    names = balanced_namespaces(40, shards=8, prefix="sb-")
    assert len(set(names)) == 40
    assert all(n.startswith("sb-") and len(n) == 13 for n in names)
    counts = [sum(1 for n in names if shard_index(n, 8) == s) for s in range(8)]
    assert counts == [5] * 8
    uneven = balanced_namespaces(10, shards=4, prefix="sb-")
    assert sorted(sum(1 for n in uneven if shard_index(n, 4) == s) for s in range(4)) == [2, 2, 3, 3]
    assert balanced_namespaces(40, shards=8, prefix="sb-") == names, "the same seed gives the same names"
    with pytest.raises(PlanError, match="fewer namespaces than the 8 shards; pass at least 8"):
        balanced_namespaces(7, shards=8, prefix="sb-")


def test_webservers_go_round_robin_so_every_shard_gets_the_same_number() -> None:
    namespaces = balanced_namespaces(16, shards=8, prefix="sb-")
    placement = assign([f"ws-{i:05d}" for i in range(1000)], namespaces)
    assert placement["ws-00000"] == namespaces[0] and placement["ws-00016"] == namespaces[0]
    assert per_shard(placement, 8) == dict.fromkeys(range(8), 125)


def test_split_is_settled_when_every_shard_is_held_one_fair_share_each() -> None:
    assert split_settled({0: "a", 1: "b", 2: "a", 3: "b"}, ["a", "b"], 4)
    assert not split_settled({0: "a", 1: "a", 2: "a", 3: "b"}, ["a", "b"], 4), "a holds more than its share"
    assert not split_settled({0: "a", 1: "b", 2: "a", 3: ""}, ["a", "b"], 4), "shard 3 has no holder"
    assert not split_settled({0: "a", 1: "b", 2: "a"}, ["a", "b"], 4), "shard 3's Lease does not exist yet"
    assert not split_settled({0: "a", 1: "b", 2: "a", 3: "gone"}, ["a", "b"], 4), "held by a replica not in the fleet"
    assert not split_settled({0: "a", 1: "a"}, [""], 2), "a replica whose identity is not known yet"
    assert split_settled({0: "a", 1: "b", 2: "c", 3: "a", 4: "b"}, ["a", "b", "c"], 5), "2, 2, 1 of 5"
    assert not split_settled({0: "a", 1: "b", 2: "a", 3: "b", 4: "a"}, ["a", "b", "c"], 5), "c holds none"


def test_an_uneven_count_of_webservers_differs_by_at_most_one_per_shard() -> None:
    namespaces = balanced_namespaces(24, shards=8, prefix="sb-")
    counts = per_shard(assign([f"ws-{i}" for i in range(1003)], namespaces), 8)
    assert sum(counts.values()) == 1003
    assert max(counts.values()) - min(counts.values()) == 1
