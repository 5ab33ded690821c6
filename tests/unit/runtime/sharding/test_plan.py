"""Shard moves: the fair share, and a fleet of replicas that converges on it as replicas join, leave and die.

The fleet simulation plays the rounds the shard loop plays: every replica looks at the Lease table, then carries out
its moves in turn; a claim of a shard someone else claimed first this round loses (the API server's 409). What is
asserted is the table a person would read with ``kubectl get leases``: every shard held by exactly one replica,
shares at most one apart, and only a bounded number of rounds to get there.
"""

from __future__ import annotations

import pytest

from webserver_operator.runtime.sharding.plan import Moves, ShardView, fair_share, next_moves


@pytest.mark.parametrize(
    ("shards", "replicas", "share"),
    [(1, 1, 1), (8, 1, 8), (8, 2, 4), (8, 3, 3), (8, 4, 2), (8, 5, 2), (8, 8, 1), (8, 20, 1), (8, 0, 8)],
)
def test_fair_share(shards: int, replicas: int, share: int) -> None:
    assert fair_share(shards, replicas) == share


def test_no_shards_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        fair_share(0, 3)


def view(identity: str, *, held: set[int], claimable: set[int], shards: int = 8, replicas: int = 2) -> ShardView:
    return ShardView(identity, shards, frozenset(held), frozenset(claimable), replicas)


def test_below_the_share_claims_up_to_it_at_once() -> None:
    moves = next_moves(view("a", held={0}, claimable={1, 2, 3, 4, 5, 6, 7}))
    assert len(moves.claim) == 3 and moves.release is None
    assert set(moves.claim) <= {1, 2, 3, 4, 5, 6, 7}


def test_at_the_share_does_nothing() -> None:
    assert next_moves(view("a", held={0, 1, 2, 3}, claimable={4, 5})) == Moves()


def test_above_the_share_hands_back_one_shard_per_round() -> None:
    moves = next_moves(view("a", held={0, 1, 2, 3, 4, 5}, claimable=set(), replicas=3))
    assert moves.claim == () and moves.release in {0, 1, 2, 3, 4, 5}
    again = next_moves(view("a", held={0, 1, 2, 3, 4, 5} - {moves.release}, claimable=set(), replicas=3))
    assert again.release != moves.release, "the next round hands back another shard, not the same one again"


def test_claimable_shards_outside_the_range_are_ignored() -> None:
    assert next_moves(view("a", held=set(), claimable={8, 9, -1}, shards=8)) == Moves()


def test_replicas_claiming_at_once_mostly_want_different_shards() -> None:
    wants = [
        set(next_moves(view(f"pod-{i}", held=set(), claimable=set(range(16)), shards=16, replicas=4)).claim)
        for i in range(4)
    ]
    assert all(len(w) == 4 for w in wants)
    assert len(set().union(*wants)) > 8, f"four replicas should not all want the same four shards: {wants}"


class Fleet:
    """A Lease table (shard -> holder) and the replicas that play rounds against it."""

    def __init__(self, shards: int, replicas: list[str]) -> None:
        self.shards = shards
        self.replicas = list(replicas)
        self.holder: dict[int, str] = {}

    def round(self) -> bool:
        """One round: every replica looks, then moves in turn. True when anything changed."""
        views = {
            name: ShardView(
                identity=name,
                shards=self.shards,
                held=frozenset(s for s, h in self.holder.items() if h == name),
                claimable=frozenset(s for s in range(self.shards) if s not in self.holder),
                replicas=len(self.replicas),
            )
            for name in self.replicas
        }
        changed = False
        for name, seen in views.items():
            moves = next_moves(seen)
            for shard in moves.claim:
                if shard not in self.holder:  # a claim someone made first this round gets a 409
                    self.holder[shard] = name
                    changed = True
            if moves.release is not None:
                assert self.holder[moves.release] == name, "a replica hands back only a shard it holds"
                del self.holder[moves.release]
                changed = True
        return changed

    def settle(self, limit: int = 30) -> int:
        for rounds in range(1, limit + 1):
            if not self.round():
                return rounds
        raise AssertionError(f"the fleet did not settle in {limit} rounds: {self.holder}")

    def shares(self) -> dict[str, int]:
        return {name: sum(1 for h in self.holder.values() if h == name) for name in self.replicas}


def assert_balanced(fleet: Fleet) -> None:
    assert sorted(fleet.holder) == list(range(fleet.shards)), f"every shard has a holder: {fleet.holder}"
    shares = fleet.shares()
    assert max(shares.values()) - min(shares.values()) <= 1 or max(shares.values()) <= fair_share(
        fleet.shards, len(fleet.replicas)
    ), shares
    assert max(shares.values()) <= fair_share(fleet.shards, len(fleet.replicas)), shares


@pytest.mark.parametrize(("shards", "replicas"), [(1, 1), (8, 1), (8, 3), (8, 4), (16, 5), (4, 6)])
def test_a_fleet_starting_together_takes_every_shard_within_a_few_rounds(shards: int, replicas: int) -> None:
    fleet = Fleet(shards, [f"pod-{i}" for i in range(replicas)])
    assert fleet.settle() <= 4
    assert_balanced(fleet)


def test_scale_3_to_4_to_2_moves_shards_one_at_a_time_and_ends_balanced() -> None:
    fleet = Fleet(8, ["a", "b", "c"])
    fleet.settle()
    assert_balanced(fleet)
    fleet.replicas.append("d")
    before = dict(fleet.holder)
    fleet.round()
    moved = [s for s in before if fleet.holder.get(s) != before[s]]
    assert len(moved) <= 3, "each replica above its share hands back at most one shard per round"
    fleet.settle()
    assert_balanced(fleet)
    assert fleet.shares()["d"] == 2
    for gone in ("c", "d"):  # scaled down: both shut down gracefully and released their Leases
        fleet.replicas.remove(gone)
        for shard in [s for s, h in fleet.holder.items() if h == gone]:
            del fleet.holder[shard]
    fleet.settle()
    assert_balanced(fleet)
    assert fleet.shares() == {"a": 4, "b": 4}


def test_a_dead_replicas_shards_are_taken_over_within_two_rounds_once_its_leases_expire() -> None:
    """Two rounds: survivors may want the same orphan, and the one whose claim gets the 409 looks again next round."""
    fleet = Fleet(8, ["a", "b", "c"])
    fleet.settle()
    fleet.replicas.remove("b")
    orphaned = [s for s, h in fleet.holder.items() if h == "b"]
    for shard in orphaned:  # expired on the survivors' clocks: claimable
        del fleet.holder[shard]
    fleet.round()
    fleet.round()
    assert all(fleet.holder.get(s) in {"a", "c"} for s in orphaned), fleet.holder
    assert_balanced(fleet)
