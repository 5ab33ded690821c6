"""``ShardSet``: the shard Leases of one replica: claim its fair share, hand back the excess, react to losses at once.

Why one loop for all shards: the fair share depends on every shard and every member at once (``runtime.sharding.plan``),
and a replica that decided shard by shard would claim more than its share and hand it back again. Each round (one
retry period, jittered) it counts the live members (``runtime.sharding.membership``), lists the shard Leases (one
request, by label), decides with ``runtime.sharding.plan.next_moves`` and carries the moves out with one
``runtime.leases.lease.Lease`` per
shard, named ``<group>-shard-<i>``: the same mechanism and the same fence as the leader's Lease.

What the holder of the set is told, through two callbacks, in this order and never concurrently for one shard:

- ``on_gained(shard)`` once the shard's Lease is held: start that shard's informers and accept its keys (it must
  return promptly: the Lease's renewals start after it). Writes for the shard are allowed while
  ``lease(shard).fence`` is open; ``why_not(path)`` is that rule as the API client's write gate.
- ``on_lost(shard)`` when the shard is handed back (after ``on_lost`` returns, its Lease is released: drain its
  in-flight reconciles there, stop its informers and drop its keys), and at once when its Lease was lost (a renew
  round failed or someone else holds it: the fence is already closed, so nothing of the shard's can be written).

Knows nothing of WebServers: the manager (``manager.operator``) decides what a shard's informers and keys are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from webserver_operator.core.resources import LEASES
from webserver_operator.core.vocabulary import ApiRequests
from webserver_operator.kube.errors import Forbidden, KubeError, NotFound
from webserver_operator.kube.paths import parse_path
from webserver_operator.runtime.leases.lease import Lease, LeaseLost
from webserver_operator.runtime.sharding.config import SHARD_COUNT_LABEL, OtherConfig, OtherConfigs, waiting_message
from webserver_operator.runtime.sharding.membership import Membership
from webserver_operator.runtime.sharding.plan import ShardView, next_moves
from webserver_operator.runtime.sharding.ranges import shard_index

__all__ = ["SHARD_OF_LABEL", "ShardSet", "no_shard_leases_live"]

log = logging.getLogger(__name__)

SHARD_OF_LABEL = "webserver-operator.dev/shard-of"

ShardCallback = Callable[[int], Awaitable[None]]


class ShardSet:
    """The ``shards`` shard Leases of the membership's group, as its replica sees them. See the module docstring."""

    def __init__(
        self,
        membership: Membership,
        *,
        shards: int,
        on_gained: ShardCallback,
        on_lost: ShardCallback,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if shards < 1:
            raise ValueError(f"the number of shards must be at least 1, got {shards}")
        self._group = group = membership.group
        self._shards = shards
        self._membership = membership
        self._on_gained = on_gained
        self._on_lost = on_lost
        self._sleep = sleep
        self._rand = rand
        labels = {SHARD_OF_LABEL: group.name, SHARD_COUNT_LABEL: str(shards)}
        self._leases = [
            group.lease(f"{group.name}-shard-{shard}", labels=labels, sleep=sleep) for shard in range(shards)
        ]
        self._others = OtherConfigs(
            shards=shards, leader=group.name, lease_duration=group.settings.lease_duration, clock=group.clock
        )
        self._waiting_for: list[OtherConfig] = []
        self._holds: dict[int, asyncio.Task[None]] = {}
        #: Shards whose ``on_lost`` is still running: not claimed again until it has ended (it stops their informers).
        self._leaving: set[int] = set()
        self._replicas = 1
        self._stopping = False
        self._round_lock = asyncio.Lock()

    def lease(self, shard: int) -> Lease:
        """The Lease of ``shard``: its ``fence`` gates that shard's writes."""
        return self._leases[shard]

    def shard_of(self, namespace: str) -> int:
        """The shard whose Lease covers objects in ``namespace``."""
        return shard_index(namespace, self._shards)

    def why_not(self, path: str) -> str | None:
        """The write gate (``kube.gate.WriteCheck``): ``None`` while a write to ``path`` may leave, else why not.

        The namespace in the path names the shard; that shard's Lease fence decides, exactly as the leader's fence
        does without sharding. A write outside any namespace is covered by no shard Lease and never leaves.
        """
        info = parse_path(path)
        namespace = info.namespace if info is not None else None
        if not namespace:
            return (
                f"{path} is not in a namespace: with sharding, every write must be covered by the Lease of its "
                "namespace's shard"
            )
        return self._leases[self.shard_of(namespace)].fence.why_not()

    @property
    def held(self) -> frozenset[int]:
        """The shards this replica may act for now (held, and the fence open)."""
        return frozenset(shard for shard in self._holds if self._leases[shard].is_held)

    async def run(self) -> None:
        """Play a round every retry period (jittered) until ``stop_rounds`` (or cancellation); ``stop`` hands back."""
        while True:
            async with self._round_lock:
                if self._stopping:
                    return
                await self.round()
            await self._sleep(self._group.settings.retry_backoff.delay(0, rand=self._rand))

    async def stop_rounds(self) -> None:
        """Claim and hand back nothing more (a round in progress ends first); held shards stay held until ``stop``."""
        self._stopping = True
        async with self._round_lock:
            pass

    async def round(self) -> None:
        """Look at the members and the shard Leases, then claim up to the fair share or hand one shard back."""
        try:
            self._replicas = await self._membership.live()
            listing = await self._group.api.request(
                "GET",
                LEASES.path(namespace=self._group.namespace),
                query={"labelSelector": f"{SHARD_OF_LABEL}={self._group.name}"},
            )
        except (KubeError, TimeoutError) as error:
            log.warning("shard round skipped: the Leases could not be read (%s); holding what is held", error)
            return
        items = listing.get("items") or []
        listed = _by_name(items)
        moves = next_moves(
            ShardView(
                identity=self._group.identity,
                shards=self._shards,
                held=frozenset(self._holds),  # a slow renewal closes a fence for a while; the shard is still ours
                claimable=self._claimable(listed),
                replicas=self._replicas,
            )
        )
        others = await self._other_configs(items)
        if others and any(other.shards == 1 for other in others) and self._holds:
            # A leader of an operator version without this check took the leader Lease while we hold shards: it
            # writes every namespace, so ours must stop (the leader of this version never takes it while we do).
            log.warning("%s; handing every shard back", waiting_message(others, shards=self._shards))
            for shard in sorted(self._holds):
                await self._hand_back(shard)
            return
        wanted = len(moves.claim) if others == [] else 0
        for shard in (*moves.claim, *moves.spare):
            if wanted == 0:
                break
            if await self._leases[shard].try_acquire(listed.get(self._leases[shard].name)):
                wanted -= 1
                await self._gained(shard)
        if moves.release is not None:
            log.info(
                "handing shard %d back: %d live replicas, a fair share of %d",
                moves.release,
                self._replicas,
                -(-self._shards // self._replicas),
            )
            await self._hand_back(moves.release)

    async def _other_configs(self, items: list[dict[str, Any]]) -> list[OtherConfig] | None:
        """The live Leases of another shard count and the live unsharded leader Lease; ``None`` if unreadable.

        Every round: expiry counts from the first sighting, and an unsharded leader of a version that does not wait
        for shard Leases (0.1.0) must be noticed even in steady state. Costs one GET of the leader Lease per round,
        next to the two lists. See ``runtime.sharding.config``.
        """
        leader = None
        try:
            leader = await self._group.api.request(
                "GET", LEASES.path(namespace=self._group.namespace, name=self._group.name)
            )
        except NotFound:
            pass
        except (KubeError, TimeoutError) as error:
            log.warning("not claiming shards this round: the leader Lease could not be read (%s)", error)
            return None
        others = self._others.live(items, leader)
        if others and others != self._waiting_for:
            log.warning(waiting_message(others, shards=self._shards))
        elif not others and self._waiting_for:
            log.info("no replica of another shard configuration is left: claiming shards")
        self._waiting_for = others
        return others

    async def stop(self) -> None:
        """Stop the rounds and hand every held shard back (drained, then released); for a graceful shutdown."""
        await self.stop_rounds()
        for shard in sorted(self._holds):
            await self._hand_back(shard)

    def _claimable(self, listed: dict[str, dict[str, Any]]) -> frozenset[int]:
        return frozenset(
            shard
            for shard, lease in enumerate(self._leases)
            if shard not in self._holds and shard not in self._leaving and lease.observe(_spec(listed.get(lease.name)))
        )

    async def _gained(self, shard: int) -> None:
        log.info("holding shard %d of %d", shard, self._shards)
        await self._on_gained(shard)
        self._holds[shard] = asyncio.create_task(self._hold(shard), name=f"shard-{shard}-hold")

    async def _hold(self, shard: int) -> None:
        try:
            await self._leases[shard].hold()
        except LeaseLost:
            self._holds.pop(shard, None)
            log.error("lost shard %d: its work stops at once", shard)
            self._leaving.add(shard)
            try:
                await self._on_lost(shard)
            finally:
                self._leaving.discard(shard)

    async def _hand_back(self, shard: int) -> None:
        hold = self._holds.pop(shard, None)
        if hold is None:
            return
        hold.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeaseLost):
            await hold
        await self._on_lost(shard)
        await self._leases[shard].release()


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str((item.get("metadata") or {}).get("name") or ""): item for item in items}


def _spec(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    spec = item.get("spec")
    return spec if isinstance(spec, dict) else {}


def no_shard_leases_live(
    api: ApiRequests, *, namespace: str, leader: str, lease_duration: float, clock: Callable[[], float]
) -> Callable[[], Awaitable[bool]]:
    """For the unsharded leader's ``Lease.acquire(may_try=...)``: True once no shard Lease of its group is live.

    The leader Lease ``namespace/leader`` covers every namespace, so it is not taken while a sharded replica still
    holds a shard (a change from ``--shards`` S back to 1 in progress; ``runtime.sharding.config``). One list of the
    group's shard Leases per attempt, only while this replica is not the leader.
    """
    others = OtherConfigs(shards=1, leader=leader, lease_duration=lease_duration, clock=clock)
    waiting: list[OtherConfig] = []
    forbidden = False

    async def may_try() -> bool:
        nonlocal waiting, forbidden
        if forbidden:
            return True
        try:
            listing = await api.request(
                "GET", LEASES.path(namespace=namespace), query={"labelSelector": f"{SHARD_OF_LABEL}={leader}"}
            )
        except Forbidden as error:
            # RBAC from before this check (config/ or a Role of one's own): lead as before, and say what is missing.
            log.warning(
                "cannot list the Leases of namespace %s (%s), so the leader cannot tell whether sharded replicas of "
                "a change of --shards still hold shard Leases. Grant list on leases in that namespace (the chart "
                "and config/rbac do); until then, change --shards only with the old replicas stopped first",
                namespace,
                error,
            )
            forbidden = True
            return True
        except (KubeError, TimeoutError) as error:
            log.warning("not trying for the leader Lease this period: the shard Leases could not be read (%s)", error)
            return False
        live = others.live(listing.get("items") or [])
        if live and live != waiting:
            log.warning(waiting_message(live, shards=1))
        elif not live and waiting:
            log.info("no sharded replica is left: trying for the leader Lease")
        waiting = live
        return not live

    return may_try
