"""Shard hash, ranges and selector: the same answers as the kube-apiserver's ShardedListAndWatch code."""

from __future__ import annotations

import itertools
import random
import string

import pytest

from webserver_operator.runtime.sharding.ranges import (
    HASH_SPACE,
    ShardUnion,
    fnv1a_64,
    namespace_hash,
    shard_index,
    shard_of,
    shard_ranges,
)

# Computed with Go's hash/fnv New64a (what k8s.io/apimachinery/pkg/sharding.HashField uses) over []byte(s).
GO_FNV1A_64 = {
    "": 0xCBF29CE484222325,
    "a": 0xAF63DC4C8601EC8C,
    "foobar": 0x85944171F73967E8,
    "default": 0xEBADA5168620C5FE,
    "kube-system": 0xDF65C7BC1D82B35E,
    "team-a": 0xDE90A3717D1252D6,
    "web-prod": 0x14ABDF980256B4B1,
    "ünïcode": 0xB1B0D40350A25BEB,
}


@pytest.mark.parametrize(("text", "expected"), GO_FNV1A_64.items())
def test_hash_matches_go_hash_fnv(text: str, expected: int) -> None:
    assert fnv1a_64(text.encode()) == expected
    assert namespace_hash(text) == expected


def test_one_shard_covers_everything_and_sends_no_selector() -> None:
    (only,) = shard_ranges(1)
    assert (only.start, only.end) == (0, HASH_SPACE)
    assert only.everything
    assert only.selector is None
    assert all(only.contains(ns) for ns in GO_FNV1A_64)
    assert shard_index("anything", 1) == 0


@pytest.mark.parametrize("count", [2, 3, 4, 7, 16, 1000])
def test_ranges_tile_the_hash_space_in_nearly_equal_parts(count: int) -> None:
    ranges = shard_ranges(count)
    assert [r.index for r in ranges] == list(range(count))
    assert ranges[0].start == 0
    assert ranges[-1].end == HASH_SPACE
    assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
    sizes = {r.end - r.start for r in ranges}
    assert max(sizes) - min(sizes) <= 1
    assert not any(r.everything for r in ranges)


def test_power_of_two_ranges_are_exact_and_written_as_the_server_echoes_them() -> None:
    ranges = shard_ranges(4)
    assert [r.selector for r in ranges] == [
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000')",
        "shardRange(object.metadata.namespace, '0x4000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.namespace, '0x8000000000000000', '0xc000000000000000')",
        "shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')",
    ]


def test_start_is_inclusive_and_end_exclusive() -> None:
    low, high = shard_ranges(2)
    boundary = HASH_SPACE // 2
    assert high.contains_hash(boundary) and not low.contains_hash(boundary)
    assert low.contains_hash(boundary - 1) and not high.contains_hash(boundary - 1)
    assert low.contains_hash(0)
    assert high.contains_hash(HASH_SPACE - 1) and not high.contains_hash(HASH_SPACE)


def test_known_namespaces_land_in_the_shard_their_hash_says() -> None:
    # default hashes to 0xeb..., web-prod to 0x14...: the last and the first quarter.
    assert shard_index("default", 4) == 3
    assert shard_index("web-prod", 4) == 0
    assert shard_index("team-a", 2) == 1
    assert shard_of("kube-system", 4).index == 3


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_every_namespace_is_in_exactly_one_range_and_it_is_the_one_shard_of_names(count: int) -> None:
    ranges = shard_ranges(count)
    for i in range(500):
        namespace = f"ns-{i}"
        holders = [r.index for r in ranges if r.contains(namespace)]
        assert holders == [shard_index(namespace, count)]
        assert shard_of(namespace, count).contains(namespace)


def test_random_namespace_names_spread_evenly() -> None:
    rng = random.Random(7)  # noqa: S311 - test data, not secrets
    counts = [0] * 4
    for _ in range(4000):
        counts[shard_index("".join(rng.choices(string.ascii_lowercase + string.digits, k=10)), 4)] += 1
    assert min(counts) > 900, counts  # 1000 each on average


def test_names_differing_only_in_a_short_suffix_spread_unevenly() -> None:
    """FNV-1a has no final mixing: the last bytes barely reach the top bits that pick the range.

    A property of the server's hash that sharding has to live with (docs/scaling.md): kept here so the documented
    numbers are checked.
    """
    counts = [0] * 16
    for i in range(4000):
        counts[shard_index(f"team-{i}", 16)] += 1
    assert counts[8] == 0
    assert max(counts) == 600


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "4"])
def test_the_number_of_shards_is_a_whole_number_of_at_least_one(bad: object) -> None:
    with pytest.raises(ValueError, match="number of shards must be a whole number of at least 1"):
        shard_ranges(bad)


def test_range_describes_itself_for_logs() -> None:
    assert str(shard_ranges(2)[1]) == "shard 1/2 [0x8000000000000000, 0x10000000000000000)"


def union(count: int, *indexes: int) -> ShardUnion:
    return ShardUnion(count, frozenset(indexes))


def test_a_union_of_one_shard_is_that_range() -> None:
    for shard in shard_ranges(4):
        one = ShardUnion.of(shard)
        assert one.selector == shard.selector and str(one) == str(shard)
        assert one.spans == ((shard.start, shard.end),)


def test_a_union_sends_its_ranges_joined_by_or_with_adjacent_ones_merged() -> None:
    """The form kube-apiserver v1.36.3 parses (shardRange and ||) and echoes in shardInfo (checked on the server)."""
    field = "object.metadata.namespace"
    assert union(4, 0, 2).selector == (
        f"shardRange({field}, '0x0000000000000000', '0x4000000000000000') || "
        f"shardRange({field}, '0x8000000000000000', '0xc000000000000000')"
    )
    assert union(4, 1, 2, 3).selector == f"shardRange({field}, '0x4000000000000000', '0x10000000000000000')"
    assert union(4, 0, 1, 3).spans == ((0, 1 << 63), (3 << 62, HASH_SPACE))
    assert union(4, 0, 1, 2, 3).everything and union(4, 0, 1, 2, 3).selector is None
    assert (
        str(union(4, 0, 2))
        == "shards 0,2/4 [0x0000000000000000, 0x4000000000000000) [0x8000000000000000, 0xc000000000000000)"
    )


def test_a_union_keeps_the_namespaces_of_its_shards_and_no_other() -> None:
    names = [f"ns-{i}-x" for i in range(300)]
    held = union(6, 1, 4)
    assert {n for n in names if held.contains(n)} == {n for n in names if shard_index(n, 6) in {1, 4}}
    assert all(held.contains(n) == any(lo <= namespace_hash(n) < hi for lo, hi in held.spans) for n in names)


def test_a_union_covers_its_subsets() -> None:
    assert union(4, 0, 2).covers(union(4, 2)) and union(4, 2).covers(union(4, 2))
    assert not union(4, 2).covers(union(4, 0, 2))
    assert not union(8, 2).covers(union(4, 2)), "another shard count is another partition"


@pytest.mark.parametrize(
    ("count", "indexes", "why"),
    [
        (4, (), "needs at least one shard"),
        (4, (4,), "not all below the shard count"),
        (4, (-1,), "not all below the shard count"),
        (0, (0,), "number of shards must be a whole number"),
    ],
)
def test_a_union_is_of_at_least_one_existing_shard(count: int, indexes: tuple[int, ...], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        union(count, *indexes)
