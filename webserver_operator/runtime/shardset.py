"""``ShardSet``: the shard Leases of one replica: claim its fair share, hand back the excess, react to losses at once.

Why one loop for all shards: the fair share depends on every shard and every member at once (``core.shardplan``),
and a replica that decided shard by shard would claim more than its share and hand it back again. Each round (one
retry period, jittered) it counts the live members (``runtime.membership``), lists the shard Leases (one request,
by label), decides with ``core.shardplan.next_moves`` and carries the moves out with one ``runtime.lease.Lease`` per
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
from webserver_operator.core.shardplan import ShardView, next_moves
from webserver_operator.core.shards import shard_index
from webserver_operator.kube.errors import KubeError
from webserver_operator.kube.paths import parse_path
from webserver_operator.runtime.lease import Lease, LeaseLost
from webserver_operator.runtime.membership import Membership

__all__ = ["SHARD_OF_LABEL", "ShardSet"]

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
        self._leases = [
            group.lease(f"{group.name}-shard-{shard}", labels={SHARD_OF_LABEL: group.name}, sleep=sleep)
            for shard in range(shards)
        ]
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
        moves = next_moves(
            ShardView(
                identity=self._group.identity,
                shards=self._shards,
                held=frozenset(self._holds),  # a slow renewal closes a fence for a while; the shard is still ours
                claimable=self._claimable(listing.get("items") or []),
                replicas=self._replicas,
            )
        )
        for shard in moves.claim:
            if await self._leases[shard].try_acquire():
                await self._gained(shard)
        if moves.release is not None:
            log.info(
                "handing shard %d back: %d live replicas, a fair share of %d",
                moves.release,
                self._replicas,
                -(-self._shards // self._replicas),
            )
            await self._hand_back(moves.release)

    async def stop(self) -> None:
        """Stop the rounds and hand every held shard back (drained, then released); for a graceful shutdown."""
        await self.stop_rounds()
        for shard in sorted(self._holds):
            await self._hand_back(shard)

    def _claimable(self, items: list[dict[str, Any]]) -> frozenset[int]:
        specs: dict[str, dict[str, Any]] = {}
        for item in items:
            name = str((item.get("metadata") or {}).get("name") or "")
            spec = item.get("spec")
            specs[name] = spec if isinstance(spec, dict) else {}
        return frozenset(
            shard
            for shard, lease in enumerate(self._leases)
            if shard not in self._holds and shard not in self._leaving and lease.observe(specs.get(lease.name))
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
