"""Leases of another shard configuration: while one is live, a replica claims nothing, so no namespace has two writers.

Why: a shard Lease covers the namespaces whose hash falls in its range, and the range depends on the shard count.
During a rolling update that changes ``--shards`` (4 to 8, or 1 to 4, or back), old and new replicas run together:
an old replica holding ``<group>-shard-1`` of 4 and a new one holding ``<group>-shard-2`` of 8 would both write the
same namespaces, each under a Lease it rightly holds; so would the unsharded leader (its Lease ``<group>`` covers
everything) and any sharded replica. Every shard Lease therefore carries its shard count in a label, and a replica
claims no Lease of its own configuration while a Lease of another one is live: named, and renewed within its
declared duration on the observer's own clock (``runtime.leases.record.is_live``, as for members). The old replicas keep
working until they stop; a Lease they release or let expire ends the wait.

Pure: ``OtherConfigs`` keeps one sighting per Lease and says which are live now; ``runtime.sharding.shardset`` (sharded
replicas, which also read the leader's Lease) and ``manager.operator`` (the unsharded leader, which lists the shard
Leases) ask it before claiming, and log what it hands back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webserver_operator.runtime.leases.record import Sighting, holder_of, is_live, sighted

__all__ = ["SHARD_COUNT_LABEL", "OtherConfig", "OtherConfigs", "waiting_message"]

SHARD_COUNT_LABEL = "webserver-operator.dev/shard-count"


@dataclass(frozen=True)
class OtherConfig:
    """A live Lease of another configuration: its name, holder, and shard count.

    ``shards`` is 1 for the unsharded leader's Lease and ``None`` for a shard Lease without the label (written
    before shard counts were labelled).
    """

    lease: str
    holder: str
    shards: int | None

    def describe(self) -> str:
        if self.shards == 1:
            what = "the unsharded leader Lease"
        elif self.shards is None:
            what = "a shard Lease of an unknown shard count"
        else:
            what = f"a shard Lease of {self.shards} shards"
        return f"{self.lease} ({what}) held by {self.holder}"


def shard_count_of(lease: Mapping[str, Any], *, leader: str) -> int | None:
    """The shard count a Lease was written for: 1 for the leader Lease ``leader``, else its label (None if absent)."""
    metadata = lease.get("metadata") or {}
    if metadata.get("name") == leader:
        return 1
    value = (metadata.get("labels") or {}).get(SHARD_COUNT_LABEL)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class OtherConfigs:
    """The Leases of configurations other than ``shards`` shards, as one replica keeps seeing them."""

    def __init__(self, *, shards: int, leader: str, lease_duration: float, clock: Callable[[], float]) -> None:
        self._shards = shards
        self._leader = leader
        self._lease_duration = lease_duration
        self._clock = clock
        self._sightings: dict[str, Sighting] = {}

    def live(
        self, shard_leases: Iterable[Mapping[str, Any]], leader: Mapping[str, Any] | None = None
    ) -> list[OtherConfig]:
        """Which Leases block claiming now.

        ``shard_leases`` are every shard Lease of the group, as just listed; ``leader`` is the leader Lease, when it
        was read too.

        Each Lease's expiry is measured from when this replica first saw its current record, so call this with every
        list of the shard Leases, including the rounds that claim nothing. When the leader's Lease is not passed, its
        last sighting is kept for the next read (the same record seen again means it was not renewed).
        """
        now = self._clock()
        seen = {name: sighting for name, sighting in self._sightings.items() if name == self._leader}
        blocking: list[OtherConfig] = []
        for lease in (*shard_leases, *([leader] if leader is not None else [])):
            name = str((lease.get("metadata") or {}).get("name") or "")
            count = shard_count_of(lease, leader=self._leader)
            if not name or count == self._shards:
                continue
            spec = lease.get("spec")
            sighting = seen[name] = sighted(self._sightings.get(name), spec if isinstance(spec, dict) else {}, now=now)
            if is_live(sighting, now=now, lease_duration=self._lease_duration):
                blocking.append(OtherConfig(name, holder_of(sighting.spec), count))
        self._sightings = seen
        return sorted(blocking, key=lambda other: other.lease)


def waiting_message(others: list[OtherConfig], *, shards: int) -> str:
    """What a replica that claims nothing because of ``others`` tells the user, and what to do about it."""
    mine = "unsharded (leader election)" if shards == 1 else f"{shards} shards"
    return (
        f"not taking any Lease of this replica's configuration ({mine}) while a replica of another configuration is "
        f"running: {'; '.join(other.describe() for other in others)}. Two shard counts at once would give some "
        "namespaces two writers. This is a change of --shards (sharding.shards) in progress: it ends once the old "
        "replicas have stopped (their Leases are released, or expire after the lease duration). If no old replica "
        "should be running, find it with kubectl get leases -n <namespace> and stop it"
    )
