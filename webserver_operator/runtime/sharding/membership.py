"""Membership: this replica's member Lease, and how many replicas are alive, for the shard loop's fair share.

Why Leases: every replica already holds Leases under the rules of ``runtime.leases.lease``. One member Lease per
replica,
renewed like any other, makes "alive" mean exactly what it means for a shard: a record renewed within its declared
duration, measured on the observer's own monotonic clock (``runtime.leases.record.is_live``). No other channel, and no
clocks of different nodes compared.

Names and labels: ``<group>-member-<identity>``, labelled ``webserver-operator.dev/member-of=<group>`` so that one
list returns every member. Identities are made of the pod name and a random suffix (``manager.operator``), so a
restarted pod is a new member and its old Lease expires.

Garbage: a replica that shuts down gracefully deletes its member Lease (``leave``); one that died leaves an expired
Lease, which any member deletes once it has been expired for ``_STALE_DURATIONS`` lease durations, with a
resourceVersion precondition, so a member that was only frozen and renewed meanwhile keeps its Lease.

Used by ``manager.shards``: ``run()`` holds the member Lease for the life of the process, ``live()`` counts the
members each round.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from webserver_operator.core.resources import LEASES
from webserver_operator.core.settings import LeaseSettings
from webserver_operator.core.vocabulary import ApiRequests
from webserver_operator.kube.errors import Conflict, KubeError, NotFound
from webserver_operator.runtime.leases.lease import Lease, LeaseLost
from webserver_operator.runtime.leases.record import Sighting, is_live, sighted
from webserver_operator.runtime.sharding.config import SHARD_COUNT_LABEL

__all__ = ["MEMBER_OF_LABEL", "LeaseGroup", "Membership", "member_name"]

log = logging.getLogger(__name__)

MEMBER_OF_LABEL = "webserver-operator.dev/member-of"
#: A member Lease expired for this many lease durations belongs to a replica that is gone: it is deleted.
_STALE_DURATIONS = 10
_NOT_IN_A_NAME = re.compile(r"[^a-z0-9.-]+")


def member_name(group: str, identity: str) -> str:
    """The member Lease of ``identity`` in ``group``: a valid object name whatever the identity contains."""
    cleaned = _NOT_IN_A_NAME.sub("-", identity.lower()).strip("-.") or "replica"
    return f"{group}-member-{cleaned}"[:253].rstrip("-.")


@dataclass(frozen=True)
class LeaseGroup:
    """The Leases of one installation as one replica sees them: where they live, who it is, how they are timed.

    ``name`` starts every Lease name of the group (member and shard Leases alike); ``lease`` makes one of them.
    """

    api: ApiRequests
    name: str
    namespace: str
    identity: str
    settings: LeaseSettings
    clock: Callable[[], float] = time.monotonic

    def lease(
        self, name: str, *, labels: dict[str, str], sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> Lease:
        """The Lease ``name`` of this group, held as this replica, created with ``labels``."""
        return Lease(
            self.api,
            name=name,
            namespace=self.namespace,
            identity=self.identity,
            settings=self.settings,
            labels=labels,
            clock=self.clock,
            sleep=sleep,
        )


class Membership:
    """A replica's member Lease in its ``LeaseGroup``, and the count of live members seen from it."""

    def __init__(self, group: LeaseGroup, *, shards: int | None = None) -> None:
        """The member Lease of ``group``'s replica; ``shards`` is its shard count, put on the Lease.

        Only members of the same count are counted (``None``: every member), so during a change of ``--shards`` the
        old replicas' share is not cut for new replicas that may not claim yet (``runtime.sharding.config``).
        """
        self.group = group
        self._shards = None if shards is None else str(shards)
        labels = {MEMBER_OF_LABEL: group.name}
        if self._shards is not None:
            labels[SHARD_COUNT_LABEL] = self._shards
        self.lease = group.lease(member_name(group.name, group.identity), labels=labels)
        self._sightings: dict[str, Sighting] = {}

    async def run(self) -> None:
        """Hold the member Lease until cancelled; take it again if it was lost (deleted while this replica froze)."""
        while True:
            await self.lease.acquire()
            try:
                await self.lease.hold()
            except LeaseLost as lost:
                log.warning("member Lease of %s lost (%s); joining again", self.lease.identity, lost)

    async def live(self) -> int:
        """Live members of this replica's shard count as seen now, itself included; deletes any gone for long.

        Raises ``KubeError`` when the members cannot be listed (the caller keeps its last count for that round).
        """
        group = self.group
        listing = await group.api.request(
            "GET", LEASES.path(namespace=group.namespace), query={"labelSelector": f"{MEMBER_OF_LABEL}={group.name}"}
        )
        now = group.clock()
        others, stale = 0, []
        sightings: dict[str, Sighting] = {}
        for item in listing.get("items") or []:
            meta = item.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name or name == self.lease.name:
                continue
            spec = item.get("spec")
            sighting = sightings[name] = sighted(
                self._sightings.get(name), spec if isinstance(spec, dict) else {}, now=now
            )
            if is_live(sighting, now=now, lease_duration=group.settings.lease_duration):
                others += self._shards is None or (meta.get("labels") or {}).get(SHARD_COUNT_LABEL) == self._shards
            elif now - sighting.since >= _STALE_DURATIONS * group.settings.lease_duration:
                stale.append((name, str(meta.get("resourceVersion") or "")))
        self._sightings = sightings
        for name, resource_version in stale:
            await self._delete(name, resource_version)
        return others + 1

    async def leave(self) -> None:
        """Delete this replica's member Lease on a graceful shutdown; never raises (an expired one is collected)."""
        try:
            await self.group.api.request("DELETE", LEASES.path(namespace=self.group.namespace, name=self.lease.name))
        except NotFound:
            pass
        except (KubeError, TimeoutError) as error:
            log.warning(
                "could not delete member Lease %s (%s); the others collect it once it expires", self.lease.name, error
            )

    async def _delete(self, name: str, resource_version: str) -> None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if resource_version:
            body["preconditions"] = {"resourceVersion": resource_version}
        try:
            await self.group.api.request("DELETE", LEASES.path(namespace=self.group.namespace, name=name), body=body)
        except (NotFound, Conflict):
            return  # someone else collected it, or its member renewed it after all
        except (KubeError, TimeoutError) as error:
            log.debug("could not delete stale member Lease %s: %s", name, error)
            return
        log.info("deleted member Lease %s: expired for more than %d lease durations", name, _STALE_DURATIONS)
