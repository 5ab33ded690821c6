"""Which shard Leases a replica claims or hands back next: its fair share, as pure arithmetic over what it saw.

Why pure: the rules that spread shards over replicas decide who works on what, and a mistake either leaves a shard
without a holder or makes replicas hand shards back and forth. As arithmetic over one observation (how many shards,
which this replica holds, which are free to claim, how many replicas are alive) they are tested for every case
without a server or a clock. ``manager.shards`` calls ``next_moves`` once per retry period and carries the moves out
with ``runtime.leases.lease.Lease``.

The rules (docs/scaling.md):

- **Fair share** is ``ceil(shards / live replicas)``: with consistent views every shard has room at some replica,
  and no replica holds more than one shard beyond another.
- **Below the share**, claim free shards (missing, released or expired Leases) up to it, all in one round; a claim
  lost to another replica (its write came first) is made up from the next free shards in the same round.
- **Above the share** (a replica joined), hand back one shard per round, after draining it: load moves in small steps
  and the joining replica takes each released Lease within about one retry period.
- **Which shard**: each replica ranks shards by a rendezvous hash of (its identity, the shard), claims its highest
  ranked free shards and hands back its lowest ranked. Replicas claiming at the same moment therefore mostly want
  different shards (fewer lost write races), and which shard moves is stable from one round to the next.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Moves", "ShardView", "fair_share", "next_moves"]


def fair_share(shards: int, replicas: int) -> int:
    """The most shards one of ``replicas`` live replicas should hold: ``ceil(shards / replicas)``."""
    if shards < 1:
        raise ValueError(f"the number of shards must be at least 1, got {shards}")
    return math.ceil(shards / max(1, replicas))


@dataclass(frozen=True)
class ShardView:
    """What one replica saw this round.

    ``held``: shards whose Lease it holds now; ``claimable``: shards whose Lease is missing, released or expired on
    its own clock; ``replicas``: live replicas counted from the membership Leases, itself included.
    """

    identity: str
    shards: int
    held: frozenset[int]
    claimable: frozenset[int]
    replicas: int


@dataclass(frozen=True)
class Moves:
    """Shards to claim now, and at most one shard to drain and hand back.

    ``spare``: the other free shards, in the order this replica wants them, to claim instead of one in ``claim`` that
    another replica wrote first this round (its 409), so a lost race does not leave the share short for a round.
    """

    claim: tuple[int, ...] = ()
    release: int | None = None
    spare: tuple[int, ...] = ()


def _rank(identity: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{identity}/{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _by_rank(identity: str, shards: Iterable[int]) -> list[int]:
    """``shards`` from the one ``identity`` wants most to the one it wants least."""
    return sorted(shards, key=lambda shard: (_rank(identity, shard), shard), reverse=True)


def next_moves(view: ShardView) -> Moves:
    """The moves, this round, of the replica that saw ``view``; ``Moves()`` when it holds its fair share."""
    share = fair_share(view.shards, view.replicas)
    if len(view.held) > share:
        return Moves(release=_by_rank(view.identity, view.held)[-1])
    wanted = share - len(view.held)
    if wanted <= 0:
        return Moves()
    free = [shard for shard in _by_rank(view.identity, view.claimable - view.held) if 0 <= shard < view.shards]
    return Moves(claim=tuple(free[:wanted]), spare=tuple(free[wanted:]))
