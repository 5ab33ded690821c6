"""What the sharded-replicas benchmark runs: its configurations, its namespaces and where each WebServer goes.

Why pure and apart: the plan decides what the numbers mean (which fleet sizes, which filtering path, how evenly the
shards are loaded), so it is unit-tested without a cluster. ``bench.sharded`` reads the command line through
``parse_replicas`` and ``configurations``, makes the namespaces ``balanced_namespaces`` names, creates the WebServers
``assign`` places, and waits for ``split_settled`` before it measures.

Namespaces get random names, the same number in every shard: FNV-1a spreads names that differ only in a numeric
suffix badly (docs/scaling.md), and a shard with twice the WebServers of another would make its replica the
measurement. Balancing by construction measures the mechanism; a real fleet's spread is the rendezvous of its own
namespace names.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from webserver_operator.runtime.sharding.ranges import shard_index

#: The two filtering paths: the API server applies the shard selector (ShardedListAndWatch gate on), or every
#: replica receives everything and drops the other shards' objects itself (gate off).
SERVER = "server"
CLIENT = "client"


class PlanError(ValueError):
    """A command-line value the benchmark cannot run with; the message says what to pass instead."""


@dataclass(frozen=True)
class Configuration:
    """One fleet on its own fresh cluster: ``replicas`` operator processes on one filtering ``path``."""

    path: str
    replicas: int

    @property
    def label(self) -> str:
        side = "server-side" if self.path == SERVER else "client-side (gate off)"
        return f"{self.replicas} replica{'s' if self.replicas != 1 else ''}, {side}"

    @property
    def key(self) -> str:
        """A file-name-safe key (``server-r4``)."""
        return f"{self.path}-r{self.replicas}"


def parse_replicas(text: str, *, shards: int) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]: distinct fleet sizes from 1 to ``shards``, in the order given."""
    sizes: list[int] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise PlanError(f"--replicas {text!r}: {part!r} is not a whole number of replicas; pass e.g. 1,2,4")
        size = int(part)
        if size > shards:
            raise PlanError(
                f"--replicas {text!r}: {size} replicas for {shards} shards would leave a replica without a shard; "
                f"pass at most {shards} or raise --shards"
            )
        if size not in sizes:
            sizes.append(size)
    if not sizes:
        raise PlanError(f"--replicas {text!r}: no fleet size given; pass e.g. 1,2,4")
    return sizes


def configurations(replicas: Iterable[int], *, client_side_too: bool) -> list[Configuration]:
    """Every size on the server-side path, then (``client_side_too``) the largest again with the gate off."""
    sizes = list(replicas)
    chosen = [Configuration(SERVER, size) for size in sizes]
    if client_side_too and sizes:
        chosen.append(Configuration(CLIENT, max(sizes)))
    return chosen


def baseline(chosen: Iterable[Configuration]) -> Configuration | None:
    """The configuration every ratio is taken against: one replica on the server-side path (None if not run)."""
    return next((c for c in chosen if c.path == SERVER and c.replicas == 1), None)


def balanced_namespaces(count: int, *, shards: int, prefix: str, seed: int = 0) -> list[str]:
    """``count`` random namespace names (``prefix`` + 10 random letters), ``count // shards`` or one more per shard.

    Listed with the shards interleaved, so ``assign`` gives every shard the same number of WebServers, give or take
    one.
    """
    if count < shards:
        raise PlanError(f"--namespaces {count}: fewer namespaces than the {shards} shards; pass at least {shards}")
    rng = random.Random(seed)  # noqa: S311 - reproducible names, not security
    quota = {i: count // shards + (1 if i < count % shards else 0) for i in range(shards)}
    by_shard: dict[int, list[str]] = {i: [] for i in range(shards)}
    seen: set[str] = set()
    while len(seen) < count:
        name = prefix + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))
        shard = shard_index(name, shards)
        if name in seen or len(by_shard[shard]) >= quota[shard]:
            continue
        seen.add(name)
        by_shard[shard].append(name)
    # Interleaved (shard 0, 1, ..., S-1, 0, 1, ...), so that a round-robin over the list visits the shards in turn.
    return [by_shard[shard][k] for k in range(max(quota.values())) for shard in range(shards) if k < quota[shard]]


def assign(names: Iterable[str], namespaces: list[str]) -> dict[str, str]:
    """WebServer name -> namespace, round-robin, so every namespace (and so every shard) gets its share."""
    return {name: namespaces[i % len(namespaces)] for i, name in enumerate(names)}


def per_shard(placement: Mapping[str, str], shards: int) -> dict[int, int]:
    """WebServers per shard for a placement (name -> namespace)."""
    counts = dict.fromkeys(range(shards), 0)
    for namespace in placement.values():
        counts[shard_index(namespace, shards)] += 1
    return counts


def split_settled(holders: Mapping[int, str], identities: Iterable[str], shards: int) -> bool:
    """Every shard held by one of ``identities``, each of which holds its fair share (floor or ceil of S / R)."""
    members = list(identities)
    if not members or any(not holders.get(i) for i in range(shards)):
        return False
    counts = Counter(holders[i] for i in range(shards))
    if set(counts) - set(members):
        return False
    low, high = shards // len(members), -(-shards // len(members))
    return all(low <= counts.get(member, 0) <= high for member in members)
